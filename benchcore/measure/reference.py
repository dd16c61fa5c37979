"""The machine reference: a fixed workload timed once in every round of every sweep.

Why: two sweeps of the same build run an hour apart differ as a whole by several percent on a
shared VM (docs/COMPARING.md), and nothing inside either sweep can say whether a sweep-wide
shift comes from the machine or from the build. A workload that no build change touches — numpy
arithmetic on an array that fits in cache (the CPU's speed) and a copy of an array far larger
than the caches (memory bandwidth) — timed in the same worker processes, at a random place in
each round's shuffled order, measures the machine alone. `compare` reads it to tell "this
machine was 6% slower today" from "this build is 6% slower".

The machine's speed moves fast: on this project's 2-core VM a memory-bound operator's
speed swings by a fifth between one half-second and the next. So the reference is timed not once
but every CASES_PER_PROBE cases of each round (probes at random places of the shuffled order),
and every probe of every round is one round of the reference's Measurements. The probes run as
more cases of the sweep (suite "benchcore"), so rounds, the checkpoint, resume and A/B sides treat
them like any other; the sweep moves their results out of the case list into the environment's
`system.reference` block.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from benchcore.measure.case import CaseSpec, Workload
from benchcore.measure.measurement import Measurement
from benchcore.measure.memory import RSS_BEFORE, RSS_PEAK, peak_rss, reset_peak_rss, resident_bytes
from benchcore.measure.runner import RunSettings, run_workload
from benchcore.measure.timers import PerfCounterTimer

SUITE = "benchcore"
NAME = "machine_reference"
#: bump when the workload changes: references of different versions do not compare
VERSION = 1
#: one probe of the machine per this many cases of a round (at least one a round)
CASES_PER_PROBE = 25
#: the parts of the reference, each a Measurement in the block
PARTS = ("compute", "memory")
#: per probe: enough samples that its median is exact to about a percent
SETTINGS = RunSettings(warmup=2, runs=8, run_backward=False)
#: float64 elements: 256 KiB per array, inside any L2 cache
COMPUTE_ELEMENTS = 32 * 1024
COMPUTE_REPEATS = 40
#: float64 elements: 32 MiB per array, beyond the last-level cache of the machines we run on
MEMORY_ELEMENTS = 4 * 1024 * 1024


def compute_workload() -> Workload:
    import numpy as np

    a = np.linspace(0.5, 1.5, COMPUTE_ELEMENTS)
    b = np.linspace(1.5, 0.5, COMPUTE_ELEMENTS)
    out = np.empty_like(a)

    def forward():
        for _ in range(COMPUTE_REPEATS):
            np.multiply(a, b, out=out)
            np.add(out, a, out=out)
        return out

    return Workload(forward=forward)


def memory_workload() -> Workload:
    import numpy as np

    source = np.ones(MEMORY_ELEMENTS)
    target = np.empty_like(source)
    return Workload(forward=lambda: np.copyto(target, source))


#: a worker's reference workloads, built at its first probe: allocating and first touching the
#: memory part's 64 MiB was a sixth of every probe's time, and the arrays hold the same values at
#: every probe (each probe still runs its own warmup)
_BUILT: dict = {}


def execute(spec: CaseSpec, options: dict) -> dict:
    """The reference's metrics: `compute` and `memory` Measurements (ms per call), and the
    worker's memory around the probe, as every executor reports it (a worker the previous case
    left above the memory limit may then take a probe: benchcore.execute.worker.MemoryBook)."""
    rss_before, peak_reset = resident_bytes(), reset_peak_rss()
    timer = PerfCounterTimer(sync=lambda: None)
    if not _BUILT:
        _BUILT.update(compute=compute_workload(), memory=memory_workload())
    metrics = {name: run_workload(_BUILT[name], SETTINGS, timer).forward.to_dict() for name in PARTS}
    return {**metrics, RSS_BEFORE: rss_before, RSS_PEAK: peak_rss() if peak_reset else None}


def specs(case_count: int) -> List[CaseSpec]:
    """The probes a round of `case_count` cases gets."""
    return [CaseSpec(SUITE, NAME, {"version": VERSION, "probe": k}) for k in range(max(1, case_count // CASES_PER_PROBE))]


def is_reference(spec: CaseSpec) -> bool:
    return spec.suite == SUITE and spec.name == NAME


def block(probes: Sequence) -> Optional[dict]:
    """The environment's `system.reference` from the probes' results (CaseResults, each with its
    rounds combined): every probe of every round is one round of each part's Measurement. None
    without probes; status `failed` (with the errors) when no probe measured."""
    if not probes:
        return None
    measured = [p for p in probes if p.ok and all(part in (p.metrics or {}) for part in PARTS)]
    errors = sorted({p.error for p in probes if not p.ok and p.error})
    found = {"status": "ok" if measured else "failed", "error": "; ".join(errors) or None, "version": VERSION,
             "probes": len(probes)}
    for part in PARTS:
        rounds = [r for p in measured for r in Measurement.from_dict(p.metrics[part]).rounds]
        found[part] = Measurement.from_rounds(rounds).to_dict() if rounds else None
    return found


def merged(blocks: Sequence[Optional[dict]]) -> Optional[dict]:
    """One reference block from the shards of a sweep: every shard's rounds are rounds of the
    machine. None unless every block is ok and of one version."""
    if not blocks or any(b is None or b.get("status") != "ok" for b in blocks):
        return None
    if len({b.get("version") for b in blocks}) != 1:
        return None
    joined = dict(blocks[0])
    for part in PARTS:
        rounds = [r for b in blocks for r in Measurement.from_dict(b[part]).rounds]
        joined[part] = Measurement.from_rounds(rounds).to_dict()
    return joined


def of_report(report) -> Optional[dict]:
    """The reference block a report's environment holds (None: a report without one)."""
    block = ((report.environment or {}).get("system") or {}).get("reference")
    return block if isinstance(block, dict) and block.get("status") == "ok" else None
