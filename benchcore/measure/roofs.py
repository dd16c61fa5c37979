"""Roofs: the machine's measured peak FLOP rate per dtype and its memory bandwidth over
working-set sizes, the ceilings a case's achieved rates (benchcore.measure.work) are read against.

Why measured and not the spec sheet: a VM's share of a socket, its clock and its memory
channels are not what the CPU model's datasheet says, and a framework's BLAS at the threads the
sweep uses is what its GEMM cases can reach. The peak is the best rate of a large GEMM in the
framework's own BLAS (frameworks.roofs supplies it); the bandwidth is the best rate of an add
over working sets from a few KiB to beyond the last-level cache, whose plateaus are the cache
levels' and DRAM's roofs.

The bandwidth probe adds a source row into an accumulator again and again in one numpy call
(np.add.reduce over a zero-stride view): one call moves the working set many times, so even a
16 KiB working set is timed without Python's per-call cost. Bytes counted: the first row is
copied into the accumulator (read and write), every further row reads the source and reads and
writes the accumulator.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from benchcore.measure.timers import PerfCounterTimer

#: bump when a probe changes: roofs of different versions are taken again
VERSION = 3
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
SMALLEST = 16 * KIB
LARGEST = 1 * GIB
#: each timed call of the bandwidth probe moves about this much, so a call lasts milliseconds
BYTES_PER_CALL = 128 * MIB
REPEATS = 3
LEVELS = ("L1", "L2", "LLC", "DRAM")
#: DRAM is read off working sets at least this many times the last-level cache
DRAM_FACTOR = 2
#: a working set is at DRAM's level when its rate is within this factor of the largest one's
DRAM_BAND = 1.25


@dataclass(frozen=True)
class Point:
    working_set_bytes: int
    bytes_per_s: float
    #: the probe that gave the rate (the better of the framework's add and numpy's)
    probe: str = ""


@dataclass
class Roofs:
    """What a report records of the machine's roofs (to_dict) and what a case is read against."""

    framework: str
    device: str
    threads: Optional[int]
    fingerprint: str
    #: FLOP/s per dtype; None with the reason in flops_reasons
    flops_per_s: Dict[str, Optional[float]]
    flops_reasons: Dict[str, str]
    #: the largest probe GEMM's n (the peak is the best rate of the sizes the probe takes)
    gemm_n: int
    bandwidth: List[Point]
    #: cache sizes as sysfs (or the device) says them (bytes), None where it does not; the
    #: plateaus are cut at `levels()`, these unless the curve shows less
    cache_bytes: Dict[str, Optional[int]]
    taken_at: str
    took_s: float
    #: a device's own figures from its attributes (CUDA), beside the measured ones
    spec: Optional[dict] = None
    version: int = VERSION
    notes: List[str] = field(default_factory=list)

    def peak(self, dtype: str) -> Tuple[Optional[float], Optional[str]]:
        """The dtype's FLOP roof, or None and why."""
        value = self.flops_per_s.get(dtype)
        return value, None if value else self.flops_reasons.get(dtype, f"no peak measured for {dtype}")

    def levels(self) -> Dict[str, Optional[int]]:
        return levels(self.bandwidth, self.cache_bytes)

    def plateaus(self) -> Dict[str, Optional[float]]:
        return plateaus(self.bandwidth, self.levels())

    def bandwidth_for(self, working_set_bytes: int) -> Tuple[Optional[float], str]:
        """The plateau of the smallest level the working set fits in, and that level's name."""
        level = level_of(working_set_bytes, self.levels())
        return self.plateaus()[level], level

    def to_dict(self) -> dict:
        found = asdict(self)
        found["levels"], found["plateaus"] = self.levels(), self.plateaus()
        return found

    @classmethod
    def from_dict(cls, data: dict) -> "Roofs":
        """A recorded roofs block; ValueError (or KeyError, TypeError) for one that is not."""
        if data.get("version") != VERSION:
            raise ValueError(f"roofs version {data.get('version')!r}, not {VERSION}")
        body = {k: v for k, v in data.items() if k not in ("levels", "plateaus")}
        body["bandwidth"] = [Point(int(p["working_set_bytes"]), float(p["bytes_per_s"]), p.get("probe", ""))
                             for p in data["bandwidth"]]
        return cls(**body)


# ---------------------------------------------------------------- the levels

def cache_sizes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> Dict[str, Optional[int]]:
    """L1 (data), L2 and the last level's sizes from Linux's sysfs; None where it does not say."""
    found: Dict[int, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _size((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified"):
            found[level] = size
    last = max(found) if found else None
    return {"L1": found.get(1), "L2": found.get(2), "LLC": found.get(last) if last and last > 2 else None}


def _size(text: str) -> int:
    units = {"K": KIB, "M": MIB, "G": GIB}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def level_of(working_set: int, caches: Dict[str, Optional[int]]) -> str:
    for level in ("L1", "L2", "LLC"):
        if caches.get(level) and working_set <= caches[level]:
            return level
    return "DRAM"


def dram_level_from(points: Sequence[Point], caches: Dict[str, Optional[int]]) -> Optional[int]:
    """The smallest working set from which every probed one is at DRAM's level (within
    DRAM_BAND of the largest working set's rate); None unless the largest is past every cache
    sysfs names (only then is its rate DRAM's: toy-sized curves stop inside the caches)."""
    ordered = sorted(points, key=lambda p: p.working_set_bytes)
    if not ordered or ordered[-1].working_set_bytes <= max((size or 0 for size in caches.values()), default=0):
        return None
    ceiling = DRAM_BAND * ordered[-1].bytes_per_s
    start = len(ordered) - 1
    while start > 0 and ordered[start - 1].bytes_per_s <= ceiling:
        start -= 1
    return ordered[start].working_set_bytes


def levels(points: Sequence[Point], caches: Dict[str, Optional[int]]) -> Dict[str, Optional[int]]:
    """The cache sizes the plateaus are cut at: sysfs's, each capped where the curve reaches
    DRAM's level (a working set there is read as a cache's only up to that size: past it, the
    curve says the data comes from DRAM whatever sysfs says)."""
    top = dram_level_from(points, caches)
    return {level: min(size, top) if size and top else size for level, size in caches.items()}


def level_note(points: Sequence[Point], caches: Dict[str, Optional[int]]) -> str:
    """Which cache sizes came from sysfs and which from the curve: a line for the roofs' notes."""
    cut = levels(points, caches)
    named = ", ".join(f"{level} {size_text(size)}" for level, size in caches.items() if size) or "none"
    changed = [f"{level} {size_text(cut[level])}" for level, size in caches.items() if size and cut[level] != size]
    if not changed:
        return f"cache levels from sysfs: {named}"
    return (f"cache levels: {', '.join(changed)} from the curve (past that it is within {DRAM_BAND:g}x of the largest "
            f"working set's rate, DRAM's level); sysfs says {named}")


def size_text(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB and size % MIB == 0 else f"{size // KIB} KiB"


def plateaus(points: Sequence[Point], caches: Dict[str, Optional[int]]) -> Dict[str, Optional[float]]:
    """Each level's roof: the best rate of the working sets that fit it and not the level below
    (DRAM: those DRAM_FACTOR times the last-level cache and more); None where no probe fell there."""
    llc = caches.get("LLC") or caches.get("L2") or 0
    best: Dict[str, Optional[float]] = {level: None for level in LEVELS}
    for point in points:
        level = level_of(point.working_set_bytes, caches)
        if level == "DRAM" and point.working_set_bytes < DRAM_FACTOR * llc:
            continue
        best[level] = max(best[level] or 0.0, point.bytes_per_s)
    return best


def working_sets(caches: Dict[str, Optional[int]], largest: int = LARGEST) -> List[int]:
    """Powers of two from SMALLEST to beyond DRAM_FACTOR x the last-level cache (at least `largest`)."""
    top = max(largest, DRAM_FACTOR * (caches.get("LLC") or 0))
    sizes, size = [], SMALLEST
    while size <= top:
        sizes.append(size)
        size *= 2
    if sizes[-1] < top:
        sizes.append(size)
    return sizes


# ---------------------------------------------------------------- the probes

def best_seconds(fn: Callable[[], object], sync: Callable[[], None] = lambda: None, repeats: int = REPEATS) -> float:
    """The fastest of `repeats` timed calls after one untimed: a roof is what the machine can
    do, so the best call is the measure and the slower ones are other work getting in."""
    timer = PerfCounterTimer(sync)
    fn()
    return min(timer.time(fn)[1] for _ in range(repeats)) / 1e3


def add_rate(working_set: int, repeats: int = REPEATS) -> float:
    """Bytes per second of numpy's add over `working_set` bytes (a source and an accumulator)."""
    import numpy as np

    n = max(1, working_set // 16)
    rows = max(2, BYTES_PER_CALL // working_set)
    source, accumulator = np.ones(n), np.zeros(n)
    view = np.broadcast_to(source, (rows, n))
    seconds = best_seconds(lambda: np.add.reduce(view, axis=0, out=accumulator), repeats=repeats)
    return (2 + 3 * (rows - 1)) * n * 8 / seconds


def bandwidth_curve(sizes: Sequence[int], probes: Dict[str, Callable[[int], float]]) -> List[Point]:
    """Each working set's best rate of the probes (name: rate of a working set), and which gave it."""
    return [max((Point(size, rate(size), name) for name, rate in probes.items()), key=lambda p: p.bytes_per_s)
            for size in sizes]


def gemm_rate(call: Callable[[], object], n: int, sync: Callable[[], None] = lambda: None) -> float:
    """FLOP/s of an n x n x n GEMM call (2 n^3 operations)."""
    return 2 * n ** 3 / best_seconds(call, sync)
