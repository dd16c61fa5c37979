"""The instruction engine: a case's calls counted under callgrind, and the counts as Measurements.

Timing on a shared machine cannot resolve a 1% change (docs/COMPARING.md); instruction counts
can: under callgrind the same call of the same build counts the same instructions to within a
few hundredths of a percent, whatever else the machine runs (docs/INSTRUCTIONS.md). The worker
runs under benchcore.execute.valgrind's launcher; here, inside it, `count_workload` runs a Workload's
warmup uncounted, then `runs` repeats, each forward and each backward counted alone (one call
per repeat: counts need no averaging, only the repeats that show whether they repeat).

Per counted call: `Ir` (instructions executed), and with cache simulation `L1_misses`,
`LL_misses` and `cycles_est` = L1 hits + 5·LL hits + 35·RAM accesses (the model iai and
CodSpeed use), each a Counts (samples plus unit; statistics derived). The last repeat's dump
also gives the case's compact per-function profile (benchcore.measure.callgrind), which `compare`
diffs to say which functions a change lies in.

The instructions of switching collection on and off (a ctypes call and the Python around the
call) are counted too, the same in every case and build: `count_overhead` records them, from
counting an empty call, so a reader can tell a case whose whole count they are.
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from benchcore.measure import callgrind
from benchcore.measure.case import Workload
from benchcore.measure.runner import RunSettings

ENGINE = "instructions"
#: quantity → unit; Ir always, the rest with cache simulation
UNITS = {"Ir": "instructions", "cycles_est": "cycles (estimated)", "L1_misses": "misses", "LL_misses": "misses"}
#: a sweep's defaults under the engine: counts repeat, so a few repeats in one process suffice;
#: the warmup keeps first-call set-up (primitive caches) out of them, and Python 3.11's
#: specialising interpreter, which rewrites a function's bytecode over its first calls: a
#: pure-Python case's repeats differed by 1.5% after 1 warmup call and by 0.19% after 20. No
#: audit: counts are the point, and the audit's Python would run ~100x slower under valgrind
INSTRUCTION_DEFAULTS = {"warmup": 20, "runs": 3, "rounds": 1, "threads": 1, "no_audit": True}
#: the report's record of why the engine's cases carry no audit (settings.valgrind.audit)
NO_AUDIT = "not run under the engine: counts are the point, and the audit would run ~100x slower under valgrind"
#: the flags that choose an engine
ENGINE_FLAGS = ("-p", "--profiler", "--engine")
#: the figure verdicts rest on
HEADLINE = "Ir"
#: the key of a worker's answer that names its dumps, until the parent reads them (read_dumps)
DUMPS = "callgrind_dumps"
PHASES = ("forward", "backward")
#: the estimated-cycles model's weights: an LL hit and a RAM access, in L1 hits
LL_HIT_CYCLES = 5
RAM_CYCLES = 35
#: the warmup ends once the last SETTLE_CALLS counted iterations agree within SETTLE_SPREAD
#: (largest - smallest, over their median) in every phase: repeats of a settled case agree to a
#: few hundredths of a percent (docs/INSTRUCTIONS.md), a specialising or caching first few calls
#: by far more
SETTLE_CALLS = 3
SETTLE_SPREAD = 0.001


@dataclass(frozen=True)
class Counts:
    """Counts of one quantity, one per counted call, with their unit; statistics derived."""

    samples: Tuple[int, ...]
    unit: str = "instructions"
    round_sizes: Optional[Tuple[int, ...]] = None

    def __post_init__(self):
        object.__setattr__(self, "samples", tuple(int(s) for s in self.samples))
        if not self.samples:
            raise ValueError("Counts need at least one sample")

    @property
    def median(self) -> float:
        return float(statistics.median(self.samples))

    @property
    def spread(self) -> float:
        """(largest − smallest) / median: 0 for counts that repeat exactly."""
        middle = self.median
        return (max(self.samples) - min(self.samples)) / middle if middle else 0.0

    def to_dict(self) -> dict:
        data = {"unit": self.unit, "samples": list(self.samples), "median": self.median,
                "min": min(self.samples), "max": max(self.samples), "spread": self.spread}
        if self.round_sizes and len(self.round_sizes) > 1:
            data["round_sizes"] = list(self.round_sizes)
        return data

    @classmethod
    def from_dict(cls, data) -> Optional["Counts"]:
        """Counts from a report's dict; None for anything that is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("samples"), list) or not data["samples"]:
            return None
        try:
            return cls(tuple(data["samples"]), str(data.get("unit") or "instructions"),
                       tuple(data["round_sizes"]) if data.get("round_sizes") else None)
        except (TypeError, ValueError):
            return None

    @classmethod
    def from_rounds(cls, rounds: Sequence["Counts"]) -> "Counts":
        return cls(tuple(s for r in rounds for s in r.samples), rounds[0].unit, tuple(len(r.samples) for r in rounds))


def quantities(totals: Dict[str, int]) -> Dict[str, int]:
    """A dump's event totals → the engine's quantities (see the module docstring)."""
    ir = totals.get("Ir", 0)
    found = {"Ir": ir}
    if "I1mr" in totals:
        accesses = ir + totals.get("Dr", 0) + totals.get("Dw", 0)
        l1 = totals.get("I1mr", 0) + totals.get("D1mr", 0) + totals.get("D1mw", 0)
        ram = totals.get("ILmr", 0) + totals.get("DLmr", 0) + totals.get("DLmw", 0)
        found.update(L1_misses=l1, LL_misses=ram,
                     cycles_est=(accesses - l1) + LL_HIT_CYCLES * (l1 - ram) + RAM_CYCLES * ram)
    return found


def _phase_calls(workload: Workload, with_backward: bool):
    """(forward, backward) callables for one iteration; backward consumes what forward left."""
    state: dict = {}

    def forward():
        state["output"] = workload.forward()
        workload.sync()

    def prepare():
        output = state.pop("output")
        state["prepared"] = workload.backward_setup(output) if workload.backward_setup else output

    def backward():
        workload.backward(state["prepared"])
        workload.sync()

    def finish():
        state.clear()
        if workload.zero_grad:
            workload.zero_grad()

    return forward, (prepare, backward, finish) if with_backward else None


def count_workload(workload: Workload, settings: RunSettings, collector) -> dict:
    """One case under the engine, in the worker: the warmup uncounted, then each repeat's
    forward and backward counted alone. The dumps are left where callgrind wrote them and only
    their paths answered (`DUMPS`): everything the worker does runs ~100x slower under valgrind,
    and parsing them there took 75-80% of a small case's time (docs/INSTRUCTIONS.md, Cost);
    the parent reads them natively (`read_dumps`)."""
    if not collector.on_valgrind:
        raise RuntimeError("the instruction engine's worker is not running under valgrind; "
                           "run it through benchcore.execute.valgrind.launcher()")
    with_backward = settings.run_backward and workload.has_backward
    forward, backward = _phase_calls(workload, with_backward)
    warmed = warm_up(forward, backward, collector, settings.warmup)
    dumps: Dict[str, object] = {"overhead": str(collector.count(lambda: None)[1]), "forward": [], "backward": []}
    for _ in range(settings.runs):
        for phase, path in _iterate(forward, backward, collector.count):
            dumps[phase].append(str(path))
    return {"engine": ENGINE, DUMPS: dumps, "code_path": code_path(), "repeats": settings.runs,
            "warmup": warmed, "warmup_asked": settings.warmup}


def warm_up(forward, backward, collector, most: int) -> int:
    """Warm a case up until its counts settle (the last SETTLE_CALLS iterations' counts agree
    within SETTLE_SPREAD in every phase), at most `most` iterations; how many ran. Each warmup
    call is counted for that, from its dump's header alone, and the dump removed: under valgrind
    a call costs ~100x its native time, and most cases settle in a few calls where the fixed
    warmup ran twenty."""
    seen: Dict[str, List[int]] = {}
    for done in range(1, most + 1):
        for phase, path in _iterate(forward, backward, collector.count):
            if path is not None:
                seen.setdefault(phase, []).append(callgrind.read(path, with_functions=False).totals.get("Ir", 0))
                Path(path).unlink(missing_ok=True)
        if seen and all(settled(counts) for counts in seen.values()):
            return done
    return most


def settled(counts: Sequence[int]) -> bool:
    """The last SETTLE_CALLS counts agree within SETTLE_SPREAD of their median; or, for a call
    whose counts move with its data (a sampler's rejections: the full default MXNet sweep's
    random operators never agreed, and ran all twenty warmup calls), they no longer fall: their
    median is not below the median of the SETTLE_CALLS before them by more than SETTLE_SPREAD.
    A warmup's extra work (caches filled, bytecode specialised) is done on the first calls, so
    while it lasts the counts fall."""
    last = sorted(counts[-SETTLE_CALLS:])
    if len(last) < SETTLE_CALLS:
        return False
    median = last[len(last) // 2]
    if last[-1] - last[0] <= SETTLE_SPREAD * median:
        return True
    before = sorted(counts[-2 * SETTLE_CALLS:-SETTLE_CALLS])
    return len(before) == SETTLE_CALLS and median >= (1 - SETTLE_SPREAD) * before[len(before) // 2]


def read_dumps(answer: dict) -> dict:
    """In the parent: a worker's answer whose metrics name callgrind dumps gets, from them, its
    counts per phase, the last repeat's per-function profile and `count_overhead`; the dumps are
    removed. A dump that cannot be read turns the answer into a failed case, with the reason."""
    metrics = answer.get("metrics") or {}
    dumps = metrics.pop(DUMPS, None)
    if dumps is None:
        return answer
    try:
        metrics.update(_from_dumps(dumps))
    except (OSError, ValueError) as exc:
        answer.update(status="failed", error=f"could not read the case's callgrind dumps: {exc}")
    finally:
        for path in [dumps["overhead"], *dumps["forward"], *dumps["backward"]]:
            Path(path).unlink(missing_ok=True)
    return answer


def _from_dumps(dumps: dict) -> dict:
    counts: Dict[str, Optional[dict]] = {}
    profiles: Dict[str, Optional[list]] = {}
    objects: Dict[str, Optional[list]] = {}
    for phase in PHASES:
        paths = dumps.get(phase) or []
        rows = [quantities(callgrind.read(path, with_functions=False).totals) for path in paths[:-1]]
        last = callgrind.read(paths[-1]) if paths else None
        rows += [quantities(last.totals)] if last else []
        counts[phase] = _counts(rows) if rows else None
        profiles[phase] = last.profile() if last else None
        objects[phase] = last.object_rows() if last else None
    overhead = callgrind.read(dumps["overhead"], with_functions=False)
    return {"counts": counts, "profile": profiles, "objects": objects, "count_overhead": quantities(overhead.totals)}


def _iterate(forward, backward, count) -> List[Tuple[str, object]]:
    """One iteration, each phase's call through `count`; [(phase, what count gave)]."""
    found = [("forward", count(forward)[1])]
    if backward is not None:
        prepare, call, finish = backward
        prepare()
        found.append(("backward", count(call)[1]))
        finish()
    return found


def _counts(rows: List[Dict[str, int]]) -> Dict[str, dict]:
    return {name: Counts(tuple(row[name] for row in rows), UNITS[name]).to_dict() for name in rows[0]}


def counts_of(metrics: dict, phase: str, quantity: str = HEADLINE) -> Optional[Counts]:
    """A phase's Counts of one quantity in a result's metrics; None where it has none."""
    block = ((metrics or {}).get("counts") or {}).get(phase) or {}
    return Counts.from_dict(block.get(quantity))


def has_counts(metrics: dict) -> bool:
    return any(counts_of(metrics, phase) is not None for phase in PHASES)


def any_counted(results) -> bool:
    """Whether any measured result (a CaseResult) holds counts: a counted report, or one of both kinds."""
    return any(r.ok and has_counts(r.metrics) for r in results)


#: a counted result's metrics that a report of both kinds adds to the timed result (`merge --both`)
COUNT_KEYS = ("counts", "profile", "objects", "count_overhead", "code_path")


def engine_of(argv: Sequence[str]) -> str:
    """The engine a command line asks for, read before the full parser (whose defaults depend on it)."""
    import argparse

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument(*ENGINE_FLAGS, dest="engine", default="")
    known, _rest = pre.parse_known_args(argv)
    return known.engine


# --------------------------------------------------------------------------- faithfulness

#: CPU features whose absence under valgrind (it emulates up to AVX2) changes libraries' kernels
ISA_FEATURES = ("AVX512F", "AVX512_SKX", "AVX512_CNL", "AVX512_ICL", "AVX512_SPR", "AVX2", "FMA3", "AVX")


def code_path() -> dict:
    """What decides which kernels the libraries in this process take, as far as the core sees
    it: the CPU features (numpy's dispatch table reads CPUID, which valgrind answers for its
    emulated CPU) and the thread variables. The frameworks' own choices (oneDNN's ISA, torch's
    CPU capability, the BLAS core) are their probes' (benchcore.execute.code_path). Natively
    and under valgrind, the two say where counts follow other code than the timed runs
    (docs/INSTRUCTIONS.md)."""
    found: dict = {"python": sys.executable,
                   "threads_env": {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}}
    try:
        from numpy.core._multiarray_umath import __cpu_features__ as features

        found["cpu_features"] = [name for name in ISA_FEATURES if features.get(name)]
    except ImportError:
        found["cpu_features"] = None
    return found


def faithfulness(probed: Dict[str, dict], counted: List[dict]) -> dict:
    """The report's record of the code paths natively and under valgrind, and where they differ.

    `probed`: what the probes saw in a native process and under valgrind
    (benchcore.execute.code_path.probe_both); `counted`: what each counted worker saw itself.
    Thread settings are recorded but not warned about: counts always run one thread (threading
    is what timing remains for)."""
    native = probed.get("native") or {}
    under = dict(next((c for c in counted if c), None) or {}, **(probed.get("valgrind") or {}))
    differences = [{"key": key, "native": native[key], "valgrind": under[key]} for key in sorted(set(native) & set(under))
                   if native[key] != under[key] and "thread" not in key and key != "error"]
    return {"native": native, "valgrind": under, "differences": differences,
            "warning": None if not differences else (
                "the libraries take other code paths under valgrind ("
                + "; ".join(f"{d['key']}: {_shown(d['native'])} natively, {_shown(d['valgrind'])} under valgrind"
                            for d in differences)
                + "): the counts judge those paths, not the ones timed natively (valgrind emulates the same CPU "
                  "for both sides of an A/B pair on one machine; each side's libraries are probed under its own "
                  "python)")}


def _shown(value) -> str:
    return value.get("core", str(value)) if isinstance(value, dict) else str(value)
