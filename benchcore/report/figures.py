"""Timing: one timed quantity of one case as a report holds it, and the readers that find it.

A suite decides which fields of its metrics carry its headline figures (benchcore.suite.Suite.timings:
by default the Measurement of each call; opbench's native engine: the profiler's per-call kernel
times, read by opbench.suite); these readers turn the shapes a report may hold into a Timing: raw
samples (with their round boundaries), or only a summary where a report kept no samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

from benchcore.measure.measurement import Measurement, round_sizes_of

#: the two timed quantities of a case
METRICS = ("forward", "backward")


@dataclass(frozen=True)
class Timing:
    """Raw samples, or only a summary (median and/or mean); milliseconds."""

    samples_ms: Optional[Tuple[float, ...]]
    median_ms: Optional[float]
    mean_ms: Optional[float]
    source: str  # "samples", "summary", or what a suite's reader names (opbench: "profiler", "opperf")
    #: the clock's step (MXNet's profiler: whole microseconds); a change within it is not seen
    resolution_ms: float = 0.0
    round_sizes: Optional[Tuple[int, ...]] = None

    @property
    def has_samples(self) -> bool:
        return bool(self.samples_ms)

    @property
    def measurement(self) -> Optional[Measurement]:
        return Measurement(self.samples_ms, round_sizes=self.round_sizes) if self.samples_ms else None

    @property
    def center_ms(self) -> Optional[float]:
        """The figure a report shows: the median of round medians with samples, else the
        median, else the mean (robust to the 4-10x spikes seen in fastrnns)."""
        if self.samples_ms:
            return self.measurement.center
        return self.median_ms if self.median_ms is not None else self.mean_ms


def number(value) -> Optional[float]:
    """A finite float, or None for anything else (missing, bool, string, nan)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def sampled(samples, source: str, resolution_ms: float = 0.0, round_sizes=None) -> Optional[Timing]:
    """A Timing from a list of sample times, or None when it is not one (absent, empty, junk)."""
    if not (isinstance(samples, list) and samples and all(number(s) is not None for s in samples)):
        return None
    try:
        m = Measurement(samples, round_sizes=round_sizes)
    except ValueError:  # round sizes that do not fit the samples: read them as one round
        m = Measurement(samples)
    return Timing(m.samples_ms, m.median, m.mean, source, resolution_ms, m.round_sizes if m.round_count > 1 else None)


def from_measurement(data) -> Optional[Timing]:
    """A Measurement dict (`samples_ms`, or only `median_ms`/`mean_ms`)."""
    if not isinstance(data, dict):
        return None
    timing = sampled(data.get("samples_ms"), "samples", round_sizes=round_sizes_of(data))
    if timing is not None:
        return timing
    median, mean = number(data.get("median_ms")), number(data.get("mean_ms"))
    if median is None and mean is None:
        return None
    return Timing(None, median, mean, "summary")


def from_average(value, source: str) -> Optional[Timing]:
    """A bare average (opperf's `avg_time_<metric>_<op>`: opbench.suite.from_opperf)."""
    avg = number(value)
    return Timing(None, None, avg, source) if avg is not None else None
