"""Efficiency: one timed phase's achieved bandwidth and FLOP rate against the machine's roofs.

Why: a time says how long; a kernel developer's next question is how far that is from what
this machine can do, and how much time is there to win. From the phase's Work (the compulsory
bytes and the FLOPs, benchcore.measure.work), its per-call median time and the measured Roofs
(benchcore.measure.roofs) this reads: GB/s and GFLOP/s achieved, the arithmetic intensity, the
attainable rate at that intensity (the roofline: min(peak FLOP rate of the dtype, bandwidth
plateau of the level the working set fits in x intensity)), the time the phase would take at
that roof, its share of the roof and the time to win (time − time at the roof).

The time at the roof is max(bytes / bandwidth, FLOPs / peak): equal to FLOPs / attainable rate
where both are known. A phase without a FLOP formula is read against the bandwidth alone (a
lower bound still); a phase with FLOPs but no peak for its dtype has no roof (it could be
compute-bound), said in `reason`. Every None says why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

from benchcore.measure.roofs import Roofs
from benchcore.measure.work import Work

GIGA = 1e9
#: the report's extra key of the roofs blocks, one per framework (frameworks.roofs.for_sweep)
ROOFS = "roofs"
#: why a measured case-phase has no efficiency at all (with --roofs off it has one, with a reason)
NO_EFFICIENCY = "no efficiency in this report (an ab side's, or a report from before efficiency was recorded)"


@dataclass(frozen=True)
class Efficiency:
    phase: str
    #: the per-call median the rates are read from (the headline figure), ms
    median_ms: Optional[float]
    bytes: Optional[int]
    flops: Optional[int]
    gb_per_s: Optional[float]
    gflop_per_s: Optional[float]
    #: FLOPs per byte
    intensity: Optional[float]
    #: the cache level the phase's working set (its bytes) fits in, and that level's plateau
    level: Optional[str]
    bandwidth_gb_per_s: Optional[float]
    peak_gflop_per_s: Optional[float]
    #: min(peak, bandwidth x intensity); None without FLOPs
    attainable_gflop_per_s: Optional[float]
    #: "memory", "compute", or "memory (no FLOP formula)"
    bound: Optional[str]
    roof_ms: Optional[float]
    percent_of_roof: Optional[float]
    #: median_ms − roof_ms: what this phase has to win
    to_win_ms: Optional[float]
    reason: Optional[str] = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Efficiency":
        return cls(**data)


def _rate(amount: Optional[int], median_ms: Optional[float]) -> Optional[float]:
    return amount / (median_ms / 1e3) / GIGA if amount is not None and median_ms else None


def of_phase(work: Work, median_ms: Optional[float], dtype: str, roofs: Optional[Roofs],
             no_roofs: str = "no roofs taken") -> Efficiency:
    """The phase's efficiency; `no_roofs` says why where `roofs` is None."""
    reasons = [work.reason] if work.reason else []
    if not median_ms:
        reasons.append("no per-call median time")
    gb, gflop = _rate(work.bytes, median_ms), _rate(work.flops, median_ms)
    level = bandwidth = peak = None
    if roofs is None:
        reasons.append(no_roofs)
    elif work.bytes is not None:
        bandwidth, level = roofs.bandwidth_for(work.bytes)
        if bandwidth is None:
            reasons.append(f"no bandwidth measured at the {level} level")
        peak, why = roofs.peak(dtype)
        if peak is None and work.flops is not None:
            reasons.append(why)
    roof_s = bound = None
    if bandwidth and work.bytes is not None:
        memory_s = work.bytes / bandwidth
        if work.flops is None:
            roof_s, bound = memory_s, "memory (no FLOP formula)"
        elif peak:
            compute_s = work.flops / peak
            roof_s, bound = max(memory_s, compute_s), "compute" if compute_s > memory_s else "memory"
    intensity = work.intensity
    attainable = min(peak, bandwidth * intensity) / GIGA if peak and bandwidth and intensity is not None else None
    roof_ms = roof_s * 1e3 if roof_s is not None else None
    known = roof_ms is not None and bool(median_ms)
    return Efficiency(
        phase=work.phase, median_ms=median_ms, bytes=work.bytes, flops=work.flops, gb_per_s=gb, gflop_per_s=gflop,
        intensity=intensity, level=level, bandwidth_gb_per_s=bandwidth / GIGA if bandwidth else None,
        peak_gflop_per_s=peak / GIGA if peak else None, attainable_gflop_per_s=attainable, bound=bound,
        roof_ms=roof_ms, percent_of_roof=100 * roof_ms / median_ms if known else None,
        to_win_ms=median_ms - roof_ms if known else None, reason="; ".join(dict.fromkeys(reasons)) or None)
