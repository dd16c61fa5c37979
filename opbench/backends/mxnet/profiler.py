"""MXNet's built-in profiler: its aggregate dump parsed into per-operator statistics and memory.

What mxnet 1.9.1 actually returns (checked by running it, see tests/opbench/test_profiler_parser.py):

- `mx.profiler.dumps(format='json', reset=True)` gives
  `{"Time": {domain: {name: {Count, Total, Min, Max, Avg}}}, "Memory": {"Device Storage":
  {"Memory: cpu/0": {Count, Min, Max, Avg}}}, "Unit": {"Time": "ms", "Memory": "kB"}}`.
  Operator times are in the "operator" domain, under the operator's *registered* name, which is
  not always the name users call: `cast` is recorded as `Cast`, `split` as `SliceChannel`,
  `linalg_gemm2` as `_linalg_gemm2`, `_copyto` as `CopyCPU2CPU`. Names are matched exactly
  through an alias table (and MXNet's own registry when it is loaded), never by substring.
- Numbers in the JSON form carry only 4 significant digits (a 16 KiB array reads 16.38 kB,
  a counter at 49 MB cannot show a 384-byte output); the text table of `dumps()` carries 4
  decimals (exact to the byte, 0.1 us) and is also a little cheaper to produce. The engine
  therefore reads the text table; both forms parse into the same ProfileDump.
- Memory: "Memory: <dev>" is a counter of the bytes held by storage allocated *while the
  profiler runs*; Min/Max are the lowest/highest value it took during the dump period, in kB of
  1000 bytes (a 16x16 float32 array reads 1.024). "Avg" is not an average of that counter
  (it can be below Min), so it is never used: opperf reported it, labelled as bytes. Frees of
  storage allocated while the profiler was stopped are not counted, and storage allocated
  while running but freed while stopped stays on the counter for the rest of the process, so a
  per-case peak is `Max` minus the counter's value when the case started (see `baseline_bytes`).
- Backward work runs as `_backward_<op>` entries, but not only: batch_dot's gradient is two
  more `batch_dot` calls, and a tensor used twice adds an `add_n`. Forward and backward are
  therefore told apart by *when* they ran (one dump per timed call), not by name.

Aggregate stats cost a little time per operator call; `profile_all` (which opperf used) also
records every C API call, which costs more, so only imperative operators and memory are
profiled here.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

#: the profiler's memory unit: kB of 1000 bytes (checked against arrays of known size)
MEMORY_UNIT_BYTES = 1000

#: entries the engine records for its own bookkeeping, not work the operator asked for
ENGINE_ENTRIES = frozenset({"DeleteVariable", "ResourceParallelRandomSetSeed", "WaitForVar", "WaitForAll"})

#: public operator name → name(s) the profiler records it under (mxnet 1.9.1). Names not here
#: are looked up in MXNet's registry at run time (canonical_name), then used as they are.
PROFILER_NAMES: Dict[str, Tuple[str, ...]] = {
    "cast": ("Cast",),
    "concat": ("Concat",),
    "pad": ("Pad",),
    "split": ("SliceChannel",),
    "reshape": ("Reshape",),
    "flatten": ("Flatten",),
    "swapaxes": ("SwapAxis",),
    "flip": ("reverse",),
    "crop": ("slice",),
    "identity": ("_copy",),
    "stop_gradient": ("BlockGrad",),
    "ElementWiseSum": ("add_n",),
    "Softmax": ("SoftmaxOutput",),
    "choose_element_0index": ("pick",),
    "ctc_loss": ("CTCLoss",),
    "cumsum": ("_np_cumsum",),
    "broadcast_axes": ("broadcast_axis",),
    "broadcast_minus": ("broadcast_sub",),
    "broadcast_plus": ("broadcast_add",),
    "max_axis": ("max",),
    "min_axis": ("min",),
    "sum_axis": ("sum",),
    "normal": ("_random_normal",),
    "uniform": ("_random_uniform",),
    "shuffle": ("_shuffle",),
    "ravel_multi_index": ("_ravel_multi_index",),
    "unravel_index": ("_unravel_index",),
    "_copyto": ("CopyCPU2CPU", "CopyCPU2GPU", "CopyGPU2CPU", "CopyGPU2GPU"),
    **{f"linalg_{name}": (f"_linalg_{name}",) for name in (
        "det", "extractdiag", "extracttrian", "gelqf", "gemm", "gemm2", "inverse", "makediag",
        "maketrian", "potrf", "potri", "slogdet", "sumlogdiag", "syrk", "trmm", "trsm")},
    **{f"random_{name}": (f"_random_{name}",) for name in (
        "exponential", "gamma", "generalized_negative_binomial", "negative_binomial", "normal",
        "poisson", "randint", "uniform")},
    **{f"random_pdf_{name}": (f"_random_pdf_{name}",) for name in (
        "dirichlet", "exponential", "gamma", "generalized_negative_binomial", "negative_binomial",
        "normal", "poisson", "uniform")},
    **{f"sample_{name}": (f"_sample_{name}",) for name in (
        "exponential", "gamma", "generalized_negative_binomial", "multinomial", "negative_binomial",
        "normal", "poisson", "uniform")},
}


@dataclass(frozen=True)
class OpStats:
    """One operator's aggregate over a dump period (times in ms)."""

    count: int
    total_ms: float
    min_ms: float
    max_ms: float

    @property
    def avg_ms(self) -> float:
        return self.total_ms / self.count if self.count else 0.0

    def merged(self, other: "OpStats") -> "OpStats":
        return OpStats(self.count + other.count, self.total_ms + other.total_ms,
                       min(self.min_ms, other.min_ms), max(self.max_ms, other.max_ms))

    def to_dict(self) -> dict:
        return {"count": self.count, "total_ms": self.total_ms, "min_ms": self.min_ms,
                "max_ms": self.max_ms, "avg_ms": self.avg_ms}


@dataclass(frozen=True)
class MemoryStats:
    """The storage counter of one device over a dump period, in bytes."""

    device: str
    count: int
    min_bytes: int
    max_bytes: int

    def to_dict(self) -> dict:
        return {"device": self.device, "count": self.count, "min_bytes": self.min_bytes, "max_bytes": self.max_bytes}


@dataclass
class ProfileDump:
    """A parsed aggregate dump: operator entries by recorded name, memory by device ("cpu/0")."""

    operators: Dict[str, OpStats] = field(default_factory=dict)
    memory: Dict[str, MemoryStats] = field(default_factory=dict)
    source: str = "json"

    def per_call(self, records: int) -> "ProfileDump":
        """This dump for a profiler that records every operator call `records` times over the
        same interval (MXNet before 1.6: once on the device, once in the operator domain)."""
        if records == 1:
            return self
        operators = {name: OpStats(stats.count // records, stats.total_ms / records, stats.min_ms, stats.max_ms)
                     for name, stats in self.operators.items()}
        return ProfileDump(operators, dict(self.memory), self.source)

    def work(self) -> Dict[str, OpStats]:
        """Entries that are operator work, without the engine's bookkeeping."""
        return {name: stats for name, stats in self.operators.items() if name not in ENGINE_ENTRIES}

    def find(self, op: str) -> Optional[Tuple[str, OpStats]]:
        """The entry recorded for operator `op` (exact names via the alias table), or None."""
        for name in profiler_names(op):
            if name in self.operators:
                return name, self.operators[name]
        return None


def profiler_names(op: str) -> Tuple[str, ...]:
    """Every name the profiler may record `op` under, most specific first; exact, no substrings."""
    names: List[str] = list(PROFILER_NAMES.get(op, ()))
    canonical = canonical_name(op)
    for name in (canonical, op):
        if name and name not in names:
            names.append(name)
    return tuple(names)


_CANONICAL_CACHE: Dict[str, Optional[str]] = {}


def canonical_name(op: str) -> Optional[str]:
    """The registered name behind an alias, from MXNet's own registry (NNGetOpHandle).

    Only consulted when MXNet is already imported, so parsing a dump never imports it.
    """
    import sys

    if op in _CANONICAL_CACHE:
        return _CANONICAL_CACHE[op]
    if "mxnet" not in sys.modules:
        return None
    import ctypes

    from mxnet.base import _LIB, c_str, py_str

    handle = ctypes.c_void_p()
    name = None
    if _LIB.NNGetOpHandle(c_str(op), ctypes.byref(handle)) == 0 and handle.value:
        real, doc, key_var, ret = (ctypes.c_char_p() for _ in range(4))
        num = ctypes.c_uint()
        arg_names, arg_types, arg_docs = (ctypes.POINTER(ctypes.c_char_p)() for _ in range(3))
        status = _LIB.MXSymbolGetAtomicSymbolInfo(
            handle, ctypes.byref(real), ctypes.byref(doc), ctypes.byref(num), ctypes.byref(arg_names),
            ctypes.byref(arg_types), ctypes.byref(arg_docs), ctypes.byref(key_var), ctypes.byref(ret))
        if status == 0 and real.value:
            name = py_str(real.value)
    _CANONICAL_CACHE[op] = name
    return name


# ---------------------------------------------------------------------------------------------
# Parsing


def _memory_device(name: str) -> str:
    """"Memory: cpu/0" → "cpu/0"."""
    return name.split(":", 1)[1].strip() if ":" in name else name.strip()


def _memory_entry(name: str, count, min_kb, max_kb) -> MemoryStats:
    device = _memory_device(name)
    return MemoryStats(device, int(count), int(round(float(min_kb) * MEMORY_UNIT_BYTES)),
                       int(round(float(max_kb) * MEMORY_UNIT_BYTES)))


def parse_json(text: str) -> ProfileDump:
    """Parse `dumps(format='json')`."""
    data = json.loads(text) if text.strip() else {}
    unit = (data.get("Unit") or {})
    if unit.get("Time", "ms") != "ms" or unit.get("Memory", "kB") != "kB":
        raise ValueError(f"unexpected profiler units {unit}; expected Time ms and Memory kB")
    dump = ProfileDump(source="json")
    for name, entry in ((data.get("Time") or {}).get("operator") or {}).items():
        dump.operators[name] = OpStats(int(entry["Count"]), float(entry["Total"]),
                                       float(entry["Min"]), float(entry["Max"]))
    for group in (data.get("Memory") or {}).values():
        for name, entry in (group or {}).items():
            stats = _memory_entry(name, entry["Count"], entry["Min"], entry["Max"])
            dump.memory[stats.device] = stats
    return dump


_NUMBER = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


def _split_row(line: str) -> Optional[Tuple[str, List[str]]]:
    """A table row → (name, trailing numbers); names may contain spaces ("Memory: cpu/0")."""
    tokens = line.split()
    numbers: List[str] = []
    while tokens and _NUMBER.match(tokens[-1]):
        numbers.insert(0, tokens.pop())
    if not tokens or not numbers:
        return None
    return " ".join(tokens), numbers


def parse_text(text: str) -> ProfileDump:
    """Parse the text table of `dumps()` (the fallback when the JSON form is unavailable)."""
    dump = ProfileDump(source="text")
    section = None
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("====="):
            section = lines[index - 1].strip() if index else None
            continue
        if not line.strip() or line.startswith("Name") or line.startswith("----"):
            continue
        row = _split_row(line)
        if row is None:
            continue
        name, numbers = row
        if section == "operator" and len(numbers) == 5:
            count, total, low, high, _avg = numbers
            dump.operators[name] = OpStats(int(count), float(total), float(low), float(high))
        elif section == "Device Storage" and len(numbers) in (4, 5):
            # 4: count, min, max, avg; MXNet 1.4 adds the value after the count (time columns)
            count, low, high = numbers[0], numbers[-3], numbers[-2]
            stats = _memory_entry(name, count, low, high)
            dump.memory[stats.device] = stats
    return dump


# ---------------------------------------------------------------------------------------------
# Running


def device_key(ctx) -> str:
    """The profiler's device name for an MXNet context: cpu(0) → "cpu/0"."""
    return f"{ctx.device_type}/{ctx.device_id}"


def _trace_path() -> str:
    """In a worker, its scratch folder (the parent removes it, even after a kill); else a
    private folder removed at exit."""
    from benchcore.execute.worker import SCRATCH_ENV

    scratch = os.environ.get(SCRATCH_ENV)
    if scratch and os.path.isdir(scratch):
        return os.path.join(scratch, "mxnet-trace.json")
    folder = tempfile.mkdtemp(prefix="benchcore-mxnet-trace-")
    atexit.register(shutil.rmtree, folder, True)
    return os.path.join(folder, "trace.json")


class MXNetProfiler:
    """The process-wide MXNet profiler, configured for aggregate stats of imperative operators.

    The trace file MXNet insists on writing at exit goes to a private temporary folder that is
    removed at exit, so no stray profile.json lands in the working directory. Not os.devnull:
    MXNet replaces its trace file rather than writing into it, and as root that turns /dev/null
    into a regular file for the whole machine.
    """

    _configured = False

    def __init__(self, dump_format: str = "text", records_per_call: int = 1):
        from mxnet import profiler

        if dump_format not in ("text", "json"):
            raise ValueError(f"dump_format must be text or json, not {dump_format!r}")
        self._profiler = profiler
        self.dump_format = dump_format
        self.records_per_call = records_per_call
        if not MXNetProfiler._configured:
            profiler.set_config(profile_imperative=True, profile_memory=True, profile_api=False,
                                profile_symbolic=False, aggregate_stats=True, filename=_trace_path())
            MXNetProfiler._configured = True
        self.running = False

    def start(self) -> None:
        self._profiler.set_state("run")
        self.running = True
        self.dump()  # drop anything recorded before this start

    def stop(self) -> None:
        self._profiler.set_state("stop")
        self.running = False

    def dump(self) -> ProfileDump:
        """Aggregate stats since the last dump (and reset them); works while running."""
        if self.dump_format == "json":
            try:
                return parse_json(self._profiler.dumps(format="json", reset=True)).per_call(self.records_per_call)
            except TypeError:  # an MXNet without the format argument: use the table
                self.dump_format = "text"
        return parse_text(self._profiler.dumps(reset=True)).per_call(self.records_per_call)

    def baseline_bytes(self, ctx, sync) -> Optional[int]:
        """The storage counter's value now (profiler running): allocate and free a probe.

        The counter's minimum over a period holding just that alloc/free is the value before
        (and after) it; None if MXNet recorded nothing.
        """
        import mxnet as mx

        sync()
        self.dump()
        probe = mx.nd.zeros((1,), ctx=ctx)
        probe.wait_to_read()
        del probe
        sync()
        stats = self.dump().memory.get(device_key(ctx))
        return stats.min_bytes if stats else None


#: MXNet's profiler stamps whole microseconds: per-call times move in steps of this.
RESOLUTION_MS = 0.001


def window_total_ms(dump: ProfileDump) -> float:
    """Operator time of one timed call: every work entry in its dump, summed."""
    return sum(stats.total_ms for stats in dump.work().values())


@dataclass
class PhaseStats:
    """The dumps of one phase (forward or backward), one dump per timed call."""

    dumps: List[ProfileDump] = field(default_factory=list)
    _totals_ms: List[float] = field(default_factory=list, repr=False)

    def window_totals_ms(self) -> List[float]:
        """Operator time of each call: every work entry in its dump, summed (kept as dumps
        arrive, so adaptive sampling can ask after every call without re-summing them all).
        The list is the phase's own: read it, do not change it."""
        self._totals_ms += [window_total_ms(d) for d in self.dumps[len(self._totals_ms):]]
        return self._totals_ms

    def drop_first(self, calls: int) -> None:
        """Forget the first `calls` calls: the runner turned them into warmup (benchcore.measure.steady)."""
        del self.dumps[:calls], self._totals_ms[:calls]

    def entries(self) -> Dict[str, OpStats]:
        merged: Dict[str, OpStats] = {}
        for dump in self.dumps:
            for name, stats in dump.work().items():
                merged[name] = merged[name].merged(stats) if name in merged else stats
        return merged


def summarize_phase(phase: PhaseStats, op: Optional[str]) -> Tuple[Optional[dict], Optional[str]]:
    """Phase statistics in the report's shape, or (None, reason).

    With `op`, the operator's own entry is used when the profiler recorded it (exact name);
    otherwise (op None, e.g. backward, or no such entry) the whole call is the unit: its
    work entries summed per call, so a gradient made of several kernels counts in full.
    """
    if not phase.dumps:
        return None, "phase not run"
    entries = phase.entries()
    if not entries:
        return None, "the profiler recorded no operator during this phase"
    matched = None
    if op is not None:
        for name in profiler_names(op):
            if name in entries:
                matched = name
                break
    if matched:
        stats = entries[matched]
        summary = {"Count": stats.count, "Total_ms": stats.total_ms, "Min_ms": stats.min_ms,
                   "Max_ms": stats.max_ms, "Avg_ms": stats.avg_ms, "source": f"entry {matched}"}
    else:
        totals = phase.window_totals_ms()
        summary = {"Count": len(totals), "Total_ms": sum(totals), "Min_ms": min(totals),
                   "Max_ms": max(totals), "Avg_ms": sum(totals) / len(totals),
                   "source": "all operators of each call"}
    summary["calls"] = len(phase.dumps)
    summary["per_call_ms"] = list(phase.window_totals_ms())  # the report's own copy
    summary["resolution_ms"] = RESOLUTION_MS
    summary["entries"] = {name: stats.to_dict() for name, stats in sorted(entries.items())}
    return summary, None


def peak_bytes(dumps: Iterable[ProfileDump], device: str, baseline: Optional[int]) -> Tuple[Optional[int], Optional[str]]:
    """Highest storage counter over `dumps` above `baseline`, or (None, reason)."""
    highs = [d.memory[device].max_bytes for d in dumps if device in d.memory]
    if baseline is None:
        if not highs:
            return 0, None  # nothing was allocated, and nothing before either
        return None, f"no baseline for the {device} storage counter (probe allocation not recorded)"
    if not highs:
        return 0, None
    return max(0, max(highs) - baseline), None
