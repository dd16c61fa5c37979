"""The MXNet backend's declaration to benchcore: opbench's Suite with the MXNet executor and
a round combiner that keeps opperf's keys (avg_time_forward_<op> …) true to the joined rounds."""

from __future__ import annotations

from typing import List

from benchcore.measure import audit
from benchcore.measure.combine import combine_metrics
from opbench.suite import PROFILER_RULES, declare, describe_modes, recompute_averages, without_derived

from .executor import add_opperf_keys

EXECUTOR = "opbench.backends.mxnet.executor:execute"


def combine_rounds(per_round: List[dict]) -> dict:
    """A case's rounds as one metrics dict: samples and per-call times joined (round boundaries
    kept), counters summed, averages and opperf's keys recomputed from the joined figures, the
    audit combined by its own rule (benchcore.measure.audit.combine: the rounds' counts agree)."""
    combined = audit.combine_with_audit(per_round, lambda rest: combine_metrics(
        [without_derived(m) for m in rest], PROFILER_RULES, sample_lists=("per_call_ms",)))
    recompute_averages(combined)
    describe_modes(combined)
    op, engine = combined.get("op"), combined.get("engine")
    if op and engine:
        device = next((k[len("max_storage_mem_alloc_"):] for k in combined if k.startswith("max_storage_mem_alloc_")),
                      None) or (combined.get("profiler") or {}).get("device") or "cpu/0"
        backward_reason = (combined.get("missing") or {}).get("backward")
        add_opperf_keys(combined, op, engine, device, backward_reason)
    return combined


SUITE = declare(EXECUTOR, ("mxnet",), combine_rounds)
