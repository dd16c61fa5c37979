"""The torch backend's declaration to benchcore (opbench.suite.declare): the torch executor and
its rounds' combiner (the same headline figures: profiler phases with per-call times for the
native engine, Measurements for the python engine; benchcore compares, charts and merges them
as it does MXNet's)."""

from __future__ import annotations

from typing import List

from benchcore.measure import audit
from benchcore.measure.combine import combine_metrics
from opbench.suite import PROFILER_RULES, declare, describe_modes, recompute_averages, without_derived

EXECUTOR = "opbench.backends.torch.executor:execute"
#: per-operator rows of a phase's profiler block add up over rounds
RULES = {**PROFILER_RULES, "self_ms": sum, "device_self_ms": sum, "peak_bytes": max}


def combine_rounds(per_round: List[dict]) -> dict:
    """A case's rounds as one metrics dict: samples and per-call times joined (round boundaries
    kept), counters summed, averages recomputed from the joined figures, the audit combined by
    its own rule (benchcore.measure.audit.combine: the rounds' counts agree)."""
    combined = audit.combine_with_audit(per_round, lambda rest: combine_metrics(
        [without_derived(m) for m in rest], RULES, sample_lists=("per_call_ms",)))
    recompute_averages(combined)
    describe_modes(combined)
    return combined


SUITE = declare(EXECUTOR, ("torch",), combine_rounds)
