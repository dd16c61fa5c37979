"""What opbench declares to benchcore for every framework: its headline figures, categories,
the rules its profiler counters combine by over rounds, and how merged shards are finished."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import frameworks.mxnet
import frameworks.torch
from benchcore.measure import modes
from benchcore.measure.measurement import Measurement, round_sizes_of
from benchcore.measure.memory import RSS_AFTER, RSS_BEFORE, RSS_PEAK
from benchcore.report.figures import METRICS, Timing, from_average, from_measurement, number, sampled
from benchcore.report.model import CaseResult
from benchcore.suite import Suite

from .extras import finish_merged

PROG = "opbench"
#: the framework adapters (environment block, summary keys) of each --framework
ADAPTERS = {"mxnet": frameworks.mxnet, "torch": frameworks.torch}

#: How a profiler block's counters combine over rounds (per-call samples are concatenated;
#: averages are recomputed from the combined totals below).
PROFILER_RULES = {
    "Count": sum, "Total_ms": sum, "calls": sum, "Min_ms": min, "Max_ms": max,
    "count": sum, "total_ms": sum, "min_ms": min, "max_ms": max,
    "peak_bytes": max, RSS_PEAK: max, RSS_AFTER: max, RSS_BEFORE: max,
}


def from_profiler_phase(data) -> Optional[Timing]:
    """A profiler phase summary (opbench's native engine, both backends): its per-call samples
    when it has them, else its average (MXNet's `Avg_ms`)."""
    if not isinstance(data, dict):
        return None
    timing = sampled(data.get("per_call_ms"), "profiler", number(data.get("resolution_ms")) or 0.0,
                     round_sizes_of(data))
    if timing is not None:
        return timing
    avg = number(data.get("Avg_ms"))
    return Timing(None, None, avg, "profiler") if avg is not None else None


def from_opperf(value) -> Optional[Timing]:
    """opperf's bare average, `avg_time_<metric>_<op>` (ms)."""
    return from_average(value, "opperf")


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
        timing = timing or from_opperf(metrics.get(f"avg_time_{metric}_{op}"))
        if timing is not None:
            found[metric] = timing
    return found


def category(result: CaseResult) -> str:
    return result.spec.params.get("category") or "all"


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


def describe_modes(metrics: dict) -> None:
    """Each profiler phase whose per-call times run at two speeds gets `modes`, with the likely
    cause from the rounds' contention records (benchcore.measure.modes.described). The wall-time
    Measurements beside it carry their own `modes`, but the report's figures are the profiler's."""
    profiler = metrics.get("profiler")
    for phase in (profiler.get(name) for name in METRICS) if isinstance(profiler, dict) else ():
        if isinstance(phase, dict) and phase.get("per_call_ms"):
            found = modes.described(Measurement(phase["per_call_ms"], round_sizes=round_sizes_of(phase)),
                                    metrics.get("contention"))
            if found is not None:
                phase["modes"] = found


def uses_gpu(spec) -> bool:
    """Whether a case runs on a GPU: an MXNet case's ctx ("gpu(N)") or a torch case's device ("cuda:N")."""
    params = spec.params
    return str(params.get("ctx", "cpu")).startswith("gpu") or str(params.get("device", "cpu")).startswith("cuda")


def declare(executor: str, frameworks: Tuple[str, ...], combine_rounds: Callable[[List[dict]], dict]) -> Suite:
    """A backend's Suite: its executor, the framework its workers import and how its rounds
    combine; the headline figures, categories and merge rules are opbench's, the same for all."""
    adapters = [ADAPTERS[name] for name in frameworks]
    return Suite(name=PROG, executor=executor, frameworks=frameworks,
                 collectors=("frameworks.mxnet:thread_settings", *(f"{adapter.__name__}:collect" for adapter in adapters)),
                 summary_keys=tuple(key for adapter in adapters for key in adapter.SUMMARY_KEYS), timings=timings,
                 code_path_probes=tuple(f"{adapter.__name__}:code_path" for adapter in adapters),
                 count_environment=tuple(pair for adapter in adapters for pair in adapter.COUNT_ENVIRONMENT),
                 category=category,
                 combine_rounds=combine_rounds, finish_merge=finish_merged, chart_style="slowest", uses_gpu=uses_gpu)


#: opbench's declaration for a reader of its reports (benchcore.suite.declared): the headline
#: figures, categories and merge rules every backend shares; each backend's own
#: (opbench.backends.*.suite) adds its executor, framework and round rules.
SUITE = Suite(name=PROG, timings=timings, category=category, finish_merge=finish_merged, uses_gpu=uses_gpu)
