"""Views of an MXNet opbench Report: opperf's JSON shape and the Markdown report, and the table
helpers the PyTorch report's view (opbench.backends.torch.views) shares.

The JSON Report (benchcore.report.model) is the source of truth; everything here is derived from a
loaded Report, so a report on disk can be re-rendered at any time (`opperf_view(Report.load(p))`).

Markdown columns beyond opperf's, median and IQR of the same quantities as the table's
averages: for the native engine the profiler's per-call forward and backward times, for the
python engine one whole iteration (forward plus backward when it ran), as opperf's python
average.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from benchcore.measure import audit, modes, steady
from benchcore.measure.measurement import NOISE_THRESHOLD, Measurement, round_sizes_of
from benchcore.report.model import CaseResult, Report
from benchcore.views import trust
from benchcore.views.rows import inputs_text
from benchcore.views.settings_table import settings_table

MISSING = "---"

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


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _inputs_text(result: CaseResult) -> str:
    """`lhs (1024,1024), rhs (1024,1), axis=1` (benchcore.views.rows.inputs_text, as in the CSV)."""
    inputs = (result.metrics or {}).get("inputs") or result.spec.params.get("inputs") or {}
    return inputs_text(inputs).replace("|", "\\|")


def _measurement(samples, round_sizes=None) -> Optional[Measurement]:
    return Measurement(samples, round_sizes=round_sizes) if samples else None


def _center(m: Optional[Measurement]) -> tuple:
    """(median, IQR) of a quantity; with rounds the median is the median of the round medians."""
    return (None, None) if m is None else (m.center, m.iqr)


def _round_spread(m: Optional[Measurement]) -> str:
    """The rounds' spread, or "bimodal" where the quantity has two speeds (benchcore.measure.modes)."""
    if m is not None and modes.of(m) is not None:
        return "bimodal"
    return MISSING if m is None or m.round_spread is None else f"{m.round_spread * 100:.1f}%"


def _noise(named) -> str:
    """The Noise cell: which phases' IQR/median reach NOISE_THRESHOLD (their medians are then
    worth less than their digits suggest)."""
    noisy = [name for name, m in named if m is not None and m.noisy]
    return "noisy " + "+".join(noisy) if noisy else ""


def _bimodal_texts(result: CaseResult, engine: str) -> Dict[str, Optional[str]]:
    """Each timed quantity's two speeds, in words (None: one speed), as the table shows it."""
    if engine == "python":
        return bimodal_texts(result, {"iteration": _python_whole(result)})
    return bimodal_texts(result, dict(zip(("forward", "backward"), _native_measurements(result))))


def bimodal_texts(result: CaseResult, quantities: Dict[str, Optional[Measurement]]) -> Dict[str, Optional[str]]:
    """{name: the two speeds of that Measurement of `result` and their likely cause, in words
    (None: one speed)}; both frameworks' Markdown lists them."""
    records = (result.metrics or {}).get("contention")
    found = {name: modes.described(m, records) if m is not None else None for name, m in quantities.items()}
    return {name: data["text"] if data else None for name, data in found.items()}


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


def _table(rows, headers) -> str:
    from tabulate import tabulate

    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


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


def capped(result: CaseResult) -> bool:
    """Adaptive sampling ran out of --max-time before reaching the target precision."""
    return bool((result.metrics or {}).get("capped"))


def _runs_cell(result: CaseResult) -> str:
    count = len(((result.metrics or {}).get("forward") or {}).get("samples_ms") or ())
    return f"{count} (capped)" if capped(result) else str(count)


def _sampling_text(settings: dict) -> str:
    """How many iterations ran: the fixed runs, or adaptive mode's stopping rule; and over how
    many rounds."""
    run = settings.get("run_settings") or {}
    rounds = settings.get("rounds") or {}
    if run.get("target_precision") is None:
        text = f"warmup {settings.get('warmup', '?')}; runs {settings.get('runs', '?')}"
    else:
        text = (f"warmup {settings.get('warmup', '?')}; adaptive sampling: runs until IQR/median < "
                f"{run['target_precision']:g} for every timed quantity, after at least {run['min_runs']} "
                f"runs and {run['min_time_s']:g} s, at most {run['max_time_s']:g} s per case "
                f"(Runs: the runs each case took; `capped`: the target was not reached)")
    if rounds.get("rounds", 1) > 1:
        per_round = rounds.get("runs_per_round")  # one number per round (a number in older reports)
        runs = ", ".join(map(str, per_round)) if isinstance(per_round, list) else per_round
        text += (f"; {rounds['rounds']} rounds, each in fresh worker processes and a shuffled case order "
                 f"(seed {rounds.get('order_seed')}), with {runs} runs and "
                 f"{rounds.get('warmup_per_round')} warmup each")
    return text


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
    headers = headers + ["Noise"] + (_SPREAD_HEADERS[engine] if rounds else []) + (["Runs"] if adaptive else [])
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
            rows = [row(r, rounds) + ([_runs_cell(r)] if adaptive else []) for r in members]
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
    return "\n".join(parts)
