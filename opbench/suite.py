"""opbench's declaration to benchcore: its headline figures, categories, rounds and merge rules."""

from __future__ import annotations

from typing import Dict, List

from benchcore import audit
from benchcore.report import CaseResult
from benchcore.rounds import combine_metrics
from benchcore.suite import Suite
from benchcore.timing import METRICS, Timing, from_average, from_measurement, from_profiler_phase

PROG = "opbench"
EXECUTOR = "opbench.mxnet_backend:execute"

#: How a profiler block's counters combine over rounds (per-call samples are concatenated;
#: averages are recomputed from the combined totals below).
PROFILER_RULES = {
    "Count": sum, "Total_ms": sum, "calls": sum, "Min_ms": min, "Max_ms": max,
    "count": sum, "total_ms": sum, "min_ms": min, "max_ms": max,
    "peak_bytes": max, "rss_peak_bytes": max, "rss_after_bytes": max, "rss_before_bytes": max,
}


def timings(result: CaseResult) -> Dict[str, Timing]:
    """The figures opbench's reports present: with the native engine the profiler's per-call
    kernel times (never the wall time of the Python call around the profiler, mostly dispatch
    overhead at small sizes, which would hide a kernel regression); with the python engine the
    Measurement of each call; for a report with neither, opperf's average."""
    metrics = result.metrics or {}
    profiler = metrics.get("profiler")
    op = result.spec.params.get("op", result.spec.name)
    found = {}
    for metric in METRICS:
        if isinstance(profiler, dict):
            timing = from_profiler_phase(profiler.get(metric))
        else:
            timing = from_measurement(metrics.get(metric))
        timing = timing or from_average(metrics.get(f"avg_time_{metric}_{op}"))
        if timing is not None:
            found[metric] = timing
    return found


def category(result: CaseResult) -> str:
    return result.spec.params.get("category") or "all"


def combine_rounds(per_round: List[dict]) -> dict:
    """A case's rounds as one metrics dict: samples and per-call times joined (round boundaries
    kept), counters summed, averages and opperf's keys recomputed from the joined figures, the
    audit combined by its own rule (benchcore.audit.combine: the rounds' counts agree)."""
    from .mxnet_backend import add_opperf_keys

    combined = audit.combine_with_audit(per_round, lambda rest: combine_metrics(
        [without_derived(m) for m in rest], PROFILER_RULES, sample_lists=("per_call_ms",)))
    recompute_averages(combined)
    op, engine = combined.get("op"), combined.get("engine")
    if op and engine:
        device = next((k[len("max_storage_mem_alloc_"):] for k in combined if k.startswith("max_storage_mem_alloc_")),
                      None) or (combined.get("profiler") or {}).get("device") or "cpu/0"
        backward_reason = (combined.get("missing") or {}).get("backward")
        add_opperf_keys(combined, op, engine, device, backward_reason)
    return combined


#: opperf's keys, all derived from the profiler block or the samples (recomputed after combining)
OPPERF_PREFIXES = ("avg_time_", "p50_time_", "p90_time_", "p99_time_", "max_storage_mem_alloc_")


def without_derived(data, top: bool = True):
    """A metrics dict without what combining recomputes (averages, opperf's keys), so that
    per-round values of those are not listed as differing."""
    if not isinstance(data, dict):
        return data
    return {k: without_derived(v, False) for k, v in data.items()
            if k not in ("Avg_ms", "avg_ms") and not (top and k.startswith(OPPERF_PREFIXES))}


def recompute_averages(data) -> None:
    """Avg_ms = Total_ms / Count wherever a profiler summary or entry holds both."""
    if isinstance(data, dict):
        for total, count, avg in (("Total_ms", "Count", "Avg_ms"), ("total_ms", "count", "avg_ms")):
            if isinstance(data.get(total), (int, float)) and data.get(count):
                data[avg] = data[total] / data[count]
        for value in data.values():
            recompute_averages(value)


def uses_gpu(spec) -> bool:
    return str(spec.params.get("ctx", "cpu")).startswith("gpu")


def _finish_merge(report):
    from .cli import finish_merged

    return finish_merged(report)


SUITE = Suite(name=PROG, executor=EXECUTOR, frameworks=("mxnet",), timings=timings, category=category,
              combine_rounds=combine_rounds, finish_merge=_finish_merge, chart_style="cases",
              uses_gpu=uses_gpu)
