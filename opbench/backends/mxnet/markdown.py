"""Views of an MXNet opbench Report: opperf's JSON shape and the Markdown report (the pieces the
PyTorch report's Markdown shares are opbench.markdown).

The JSON Report (benchcore.report.model) is the source of truth; everything here is derived from a
loaded Report, so a report on disk can be re-rendered at any time (`opperf_view(Report.load(p))`).

Markdown columns beyond opperf's, median and IQR of the same quantities as the table's
averages: for the native engine the profiler's per-call forward and backward times, for the
python engine one whole iteration (forward plus backward when it ran), as opperf's python
average.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from benchcore.measure import audit, steady
from benchcore.measure.measurement import NOISE_THRESHOLD, Measurement, round_sizes_of
from benchcore.report.model import CaseResult, Report
from benchcore.views import headroom, trust
from benchcore.views.settings_table import settings_table
from opbench.backends.mxnet.suite import SUITE
from opbench.markdown import (
    MISSING,
    _fmt,
    _inputs_text,
    _measurement,
    _noise,
    _round_spread,
    _sampling_text,
    _table,
    bimodal_texts,
    capped,
)

NATIVE_HEADERS = ["Operator", "Inputs", "Max Mem Usage (Storage) (Bytes)", "Avg Forward Time (ms)",
                  "Avg. Backward Time (ms)", "Fwd Median (ms)", "Fwd IQR (ms)", "Bwd Median (ms)", "Bwd IQR (ms)"]
PYTHON_HEADERS = ["Operator", "Avg Time (ms)", "P50 Time (ms)", "P90 Time (ms)", "P99 Time (ms)", "Inputs",
                  "Median (ms)", "IQR (ms)"]


def _op(result: CaseResult) -> str:
    return result.spec.params.get("op", result.spec.name)


def _sorted(results: List[CaseResult]) -> List[CaseResult]:
    return sorted(results, key=lambda r: (_op(r), r.spec.key))


def opperf_entry(result: CaseResult) -> dict:
    """One case as opperf's entry: `inputs` plus the engine's keys (ms / bytes).

    A key whose value is null (e.g. no backward for this operator, or the profiler did not
    see it) is explained under `missing`, an addition to opperf's shape, so an API caller
    learns why without opening the full report.
    """
    metrics = result.metrics or {}
    keys = metrics.get("opperf_keys") or ["inputs"]
    entry = {key: metrics.get(key) for key in keys}
    if entry.get("inputs") is None:
        entry["inputs"] = result.spec.params.get("inputs")
    reasons = metrics.get("missing") or {}
    missing = {key: reasons.get(key, "not measured") for key in keys if entry[key] is None}
    if missing:
        entry["missing"] = missing
    return entry


def opperf_view(report: Report, include_failed: bool = False) -> Dict[str, List[dict]]:
    """{op: [one entry per input combination]} sorted by op, like opperf's JSON output.

    Unlike opperf, every input combination keeps its own entry (never merged by op name).
    Failed cases are left out unless include_failed, which adds them with status and error.
    """
    view: Dict[str, List[dict]] = {}
    for result in _sorted(report.results):
        if result.status == "ok":
            view.setdefault(_op(result), []).append(opperf_entry(result))
        elif include_failed:
            view.setdefault(_op(result), []).append(
                {"inputs": result.spec.params.get("inputs"), "status": result.status, "error": result.error})
    return dict(sorted(view.items()))


def _center(m: Optional[Measurement]) -> tuple:
    """(median, IQR) of a quantity; with rounds the median is the median of the round medians."""
    return (None, None) if m is None else (m.center, m.iqr)


def _bimodal_texts(result: CaseResult, engine: str) -> Dict[str, Optional[str]]:
    """Each timed quantity's two speeds, in words (None: one speed), as the table shows it."""
    if engine == "python":
        return bimodal_texts(result, {"iteration": _python_whole(result)})
    return bimodal_texts(result, dict(zip(("forward", "backward"), _native_measurements(result))))


def _native_measurements(result: CaseResult) -> tuple:
    profiler = (result.metrics or {}).get("profiler") or {}
    phases = [profiler.get(phase) or {} for phase in ("forward", "backward")]
    return tuple(_measurement(p.get("per_call_ms"), round_sizes_of(p)) for p in phases)


def _native_row(result: CaseResult, rounds: bool) -> list:
    metrics, op = result.metrics, _op(result)
    memory = next((v for k, v in metrics.items() if k.startswith("max_storage_mem_alloc_")), None)
    forward, backward = _native_measurements(result)
    return [op, _inputs_text(result), _fmt(memory), _fmt(metrics.get(f"avg_time_forward_{op}")),
            _fmt(metrics.get(f"avg_time_backward_{op}")), *map(_fmt, _center(forward)), *map(_fmt, _center(backward)),
            _noise((("fwd", forward), ("bwd", backward)))
            ] + ([_round_spread(forward), _round_spread(backward)] if rounds else [])


def _python_whole(result: CaseResult) -> Optional[Measurement]:
    """One whole iteration per call: forward plus backward when it ran (opperf's python average)."""
    metrics = result.metrics or {}
    forward = metrics.get("forward") or {}
    samples = list(forward.get("samples_ms") or [])
    backward = (metrics.get("backward") or {}).get("samples_ms")
    if samples and backward:
        samples = [f + b for f, b in zip(samples, backward)]
    return _measurement(samples, round_sizes_of(forward))


def _python_row(result: CaseResult, rounds: bool) -> list:
    metrics, op = result.metrics, _op(result)
    whole = _python_whole(result)
    return [op, _fmt(metrics.get(f"avg_time_{op}")), _fmt(metrics.get(f"p50_time_{op}")),
            _fmt(metrics.get(f"p90_time_{op}")), _fmt(metrics.get(f"p99_time_{op}")), _inputs_text(result),
            *map(_fmt, _center(whole)), _noise((("", whole),)).strip()] + ([_round_spread(whole)] if rounds else [])


def _features(report: Report) -> str:
    mxnet = report.environment.get("mxnet") or {}
    features = mxnet.get("features")
    if features is None:
        return f"MXNet features unknown ({mxnet.get('reason', 'not recorded')})."
    rows = [[name, "✔"] for name in sorted(features)]
    lines = [f"MXNet {mxnet.get('version', '?')}; enabled build features:", "",
             _table(rows, ["Feature", "Enabled"]) if rows else "(none)"]
    return "\n".join(lines)


def _by_category(results: List[CaseResult], reported: Dict[str, str]) -> Dict[str, List[CaseResult]]:
    """{category: its cases} in category order; a case files under the category the user's
    --category selected it by (`reported`, the report's extra.reported_category), else its home."""
    groups: Dict[str, List[CaseResult]] = {}
    for result in results:
        name = reported.get(_op(result)) or result.spec.params.get("category") or "other"
        groups.setdefault(name, []).append(result)
    return dict(sorted(groups.items()))


def _runs_cell(result: CaseResult) -> str:
    count = len(((result.metrics or {}).get("forward") or {}).get("samples_ms") or ())
    return f"{count} (capped)" if capped(result) else str(count)


_SPREAD_HEADERS = {"native": ["Fwd Round Spread", "Bwd Round Spread"], "python": ["Round Spread"]}


#: What the times of each engine are, said in the Markdown header.
_QUANTITY = {
    "native": "Times: MXNet profiler's operator time per call (forward, backward), in ms; the medians are the "
              "JSON's `metrics.headline.<phase>.median_ms` (figure `profiler_ms`).",
    "python": "Times: one whole iteration per call, forward plus backward when it ran (opperf's python "
              "profiler), wall clock around a sync, in ms (per phase: the JSON's `metrics.headline`, figure "
              "`call_ms`).",
}


def _not_measured_section(ok: List[CaseResult]) -> List[str]:
    """Why each `---` of the results table is there: the report's `missing` reasons, one row
    per reason, with the cases it applies to (a forward-only operator, a profiler blind spot)."""
    cases_by_reason: Dict[str, List[str]] = {}
    for result in ok:
        metrics = result.metrics or {}
        for key in metrics.get("opperf_keys") or ():
            if metrics.get(key) is None:
                reason = (metrics.get("missing") or {}).get(key, "not measured")
                cases_by_reason.setdefault(f"{_column(key)}: {reason}", []).append(_label(result))
    if not cases_by_reason:
        return []
    rows = [[reason.replace("|", "\\|"), ", ".join(dict.fromkeys(labels))]
            for reason, labels in sorted(cases_by_reason.items())]
    return ["## Not measured", "", _table(rows, ["Value: reason", "Cases"]), ""]


def _label(result: CaseResult) -> str:
    return f"{_op(result)} {result.spec.params.get('variant') or ''}".strip()


def _column(key: str) -> str:
    """The results-table column an opperf key fills."""
    for prefix, column in (("avg_time_forward_", "forward"), ("avg_time_backward_", "backward"),
                           ("max_storage_mem_alloc_", "memory")):
        if key.startswith(prefix):
            return column
    return key


def to_markdown(report: Report) -> str:
    """The whole Markdown report: features, results, failures, skips, uncovered operators."""
    settings = report.settings
    engine = settings.get("profiler", "native")
    adaptive = (settings.get("run_settings") or {}).get("target_precision") is not None
    ok = [r for r in _sorted(report.results) if r.status == "ok"]
    rounds = (settings.get("rounds") or {}).get("rounds", 1) > 1
    row, headers = (_python_row, PYTHON_HEADERS) if engine == "python" else (_native_row, NATIVE_HEADERS)
    efficiency = headroom.headers(ok)
    headers = (headers + ["Noise"] + (_SPREAD_HEADERS[engine] if rounds else []) + efficiency
               + (["Runs"] if adaptive else []))
    parts = ["# Runtime Features", "", _features(report), "", "# Benchmark Results", ""]
    parts.append(f"Engine: {engine}; dtype {settings.get('dtype', '?')}; ctx {settings.get('ctx', '?')}; "
                 f"{_sampling_text(settings)}. "
                 f"{_QUANTITY[engine if engine in _QUANTITY else 'native']} Medians and IQRs are of the same "
                 f"per-call times as the averages" + ("; with rounds a median is the median of the rounds' "
                 "medians, and *Round Spread* is (largest - smallest round median) / that median" if rounds else "")
                 + f". *Noise*: IQR/median of the phase at or above {NOISE_THRESHOLD:.0%}. "
                 f"`{MISSING}`: not measured (why: *Not measured* below).")
    if engine == "instructions":
        from benchcore.views.count_report import markdown_section

        parts[-1] = f"Engine: instructions; dtype {settings.get('dtype', '?')}; {_sampling_text(settings)}."
        parts += [""] + markdown_section(ok, lambda r: f"{_op(r)} {_inputs_text(r)}", settings.get("valgrind"))
    else:
        measured = [m for r in ok for m in (_native_measurements(r) if engine != "python" else (_python_whole(r),))
                    if m]
        parts += ["", *trust.section(measured, [r.metrics or {} for r in ok], settings, report.environment)]
        for name, members in _by_category(ok, report.extra.get("reported_category") or {}).items():
            rows = [row(r, rounds) + (headroom.cells(r) if efficiency else []) + ([_runs_cell(r)] if adaptive else [])
                    for r in members]
            parts += [f"## {name} ({len(members)})", "", _table(rows, headers), ""]
        if not ok:
            parts += ["(no case was measured)", ""]
    parts += ["## Settings", "", settings_table(settings), ""]
    parts += _not_measured_section(ok)
    parts += steady.markdown_section([(_label(r), r.metrics or {}, _bimodal_texts(r, engine)) for r in ok])
    parts += audit.markdown_section([(_label(r), r.metrics or {}) for r in ok], audited=settings.get("audit") is not False)
    failures = [r for r in _sorted(report.results) if r.status in ("failed", "crashed", "timeout")]
    if failures:
        parts += ["## Failures", "",
                  _table([[_op(r), _inputs_text(r), r.status, (r.error or "").replace("|", "\\|")[:300]]
                          for r in failures], ["Operator", "Inputs", "Status", "Error"]), ""]
    skipped = [r for r in _sorted(report.results) if r.status == "skipped"]
    if skipped:
        parts += ["## Skipped cases", "",
                  _table([[_op(r), _inputs_text(r), r.error or ""] for r in skipped],
                         ["Operator", "Inputs", "Reason"]), ""]
    uncovered = report.extra.get("no_benchmark") or []
    if uncovered:
        parts += ["## Operators without a benchmark", "",
                  _table([[item.get("op"), item.get("reason", "")] for item in uncovered], ["Operator", "Reason"]),
                  ""]
    return "\n".join(parts + headroom.markdown(report, SUITE))
