"""The Markdown view of a PyTorch opbench report (the JSON report is the source of truth)."""

from __future__ import annotations

from typing import Dict, List, Optional

from benchcore.measure import audit, steady
from benchcore.measure.measurement import NOISE_THRESHOLD, Measurement
from benchcore.report.figures import Timing
from benchcore.report.model import CaseResult, Report
from benchcore.views import headroom, trust
from benchcore.views.settings_table import settings_table
from opbench.backends.torch.suite import SUITE
from opbench.markdown import MISSING, _fmt, _inputs_text, _noise, _round_spread, _sampling_text, _table, bimodal_texts

HEADERS = ["Operator", "Category", "Inputs", "Fwd Median (ms)", "Fwd IQR (ms)", "Bwd Median (ms)", "Bwd IQR (ms)",
           "Noise"]
PHASES = ("forward", "backward")
_QUANTITY = {
    "native": "Times: torch.profiler's time of the operators inside each call (CPU: their inclusive CPU time; "
              "CUDA: their kernels' device time), in ms.",
    "python": "Times: wall clock around each call, bracketed by a device sync (CUDA events on a CUDA device), in ms.",
}


def _timings(result: CaseResult) -> Dict[str, Optional[Timing]]:
    """Each phase's headline figures (opbench.suite.timings); None where it has none."""
    from opbench.suite import timings

    found = timings(result)
    return {phase: found.get(phase) for phase in PHASES}


def _measurements(found: Dict[str, Optional[Timing]]) -> Dict[str, Optional[Measurement]]:
    return {phase: t.measurement if t else None for phase, t in found.items()}


def _row(result: CaseResult, found: Dict[str, Optional[Timing]], rounds: bool) -> list:
    """Median and IQR per phase of `found` (the result's _timings), the noisy phases, and with
    rounds each phase's round spread (or *bimodal*)."""
    measurements = _measurements(found)
    row = [result.spec.name, result.spec.params.get("category") or "-", _inputs_text(result)]
    for phase, m in measurements.items():
        row += [_fmt(found[phase].center_ms) if found[phase] else MISSING, _fmt(m.iqr) if m else MISSING]
    row.append(_noise((("fwd", measurements["forward"]), ("bwd", measurements["backward"]))))
    return row + ([_round_spread(m) for m in measurements.values()] if rounds else [])


def _ordered(results: List[CaseResult]) -> List[CaseResult]:
    return sorted(results, key=lambda r: (r.spec.name, r.spec.key))


def to_markdown(report: Report) -> str:
    """Environment, results, failures, skipped cases, entries without a benchmark."""
    settings = report.settings
    engine = settings.get("profiler", "native")
    torch = report.environment.get("torch") or {}
    manifest = settings.get("manifest") or {}
    rounds = (settings.get("rounds") or {}).get("rounds", 1) > 1
    ok = [r for r in _ordered(report.results) if r.ok]
    found = [_timings(r) for r in ok]
    parts = ["# PyTorch operators", "",
             f"torch {torch.get('version', '?')}, {torch.get('threads', '?')} threads; engine {engine}; dtype "
             f"{settings.get('dtype', '?')}; device {settings.get('device', '?')}; {_sampling_text(settings)}. "
             f"{_QUANTITY.get(engine, '')} Inputs: OpInfo's samples scaled to about {manifest.get('size_target', '?')} "
             f"elements (manifest {manifest.get('path', '?')}, sha256 {str(manifest.get('sha256', '?'))[:12]}). "
             f"*Noise*: IQR/median of the phase at or above {NOISE_THRESHOLD:.0%}. "
             + ("With rounds a median is the median of the rounds' medians, and *Round Spread* is (largest - "
                "smallest round median) / that median. " if rounds else "")
             + f"`{MISSING}`: not measured (the JSON report says why under `missing`).", ""]
    measured = [m for phases in found for m in _measurements(phases).values() if m is not None]
    parts += trust.section(measured, [r.metrics or {} for r in ok], settings, report.environment)
    efficiency = headroom.headers(ok)
    headers = HEADERS + (["Fwd Round Spread", "Bwd Round Spread"] if rounds else []) + efficiency
    parts += [_table([_row(r, phases, rounds) + (headroom.cells(r) if efficiency else []) for r, phases in zip(ok, found)],
                     headers) if ok else "(no case was measured)", ""]
    parts += ["## Settings", "", settings_table(settings), ""]
    parts += steady.markdown_section([(r.spec.name, r.metrics or {}, bimodal_texts(r, _measurements(phases)))
                                      for r, phases in zip(ok, found)])
    parts += audit.markdown_section([(r.spec.name, r.metrics or {}) for r in ok],
                                    audited=settings.get("audit") is not False)
    failures = [r for r in _ordered(report.results) if r.status in ("failed", "crashed", "timeout")]
    if failures:
        parts += ["## Failures", "", _table([[r.spec.name, r.status, (r.error or "").replace("|", "\\|")[:300]]
                                             for r in failures], ["Operator", "Status", "Error"]), ""]
    skipped = [r for r in _ordered(report.results) if r.status == "skipped"]
    if skipped:
        parts += ["## Skipped cases", "", _table([[r.spec.name, r.error or ""] for r in skipped],
                                                 ["Operator", "Reason"]), ""]
    uncovered = report.extra.get("no_benchmark") or []
    if uncovered:
        parts += ["## OpInfo entries without a benchmark", "",
                  _table([[i.get("op"), (i.get("reason") or "").replace("|", "\\|")] for i in uncovered],
                         ["Operator", "Reason"]), ""]
    return "\n".join(parts + headroom.markdown(report, SUITE))
