"""Measurement: the raw samples of one timed quantity and every statistic derived from them.

All times are milliseconds. Statistics are properties computed from the samples, so nothing
downstream can disagree with them or recompute them by hand.

A Measurement may hold several rounds: the same case timed in separate worker processes (see
benchcore.execute.rounds). Samples from one process are evidence about that process (its memory layout,
its caches, the machine's state at that minute), not independent evidence about the build: on a
2-core VM two processes timing the same kernel differ by more than 50 samples inside either one
do. So the samples keep their round boundaries, and the statistics that a comparison rests on
are the rounds' own medians: their median, their spread, and the share of the variance that lies
between rounds rather than within them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import List, Optional, Sequence, Tuple

import numpy as np

#: IQR/median at or above this marks a measurement as noisy (torch.utils.benchmark's rule).
NOISE_THRESHOLD = 0.10
#: a quantity whose round medians lie within this many clock steps is judged on its rounds'
#: fenced means (Measurement.figure): there a median moves in whole steps of 2% and more
DITHER_STEPS = 50
#: Tukey's far fences: samples beyond 3 IQRs outside the quartiles are outliers
FENCE_IQRS = 3.0


def median_confidence_ranks(n: int, confidence: float = 0.95) -> Optional[tuple]:
    """0-based order-statistic ranks (lo, hi) bracketing the median with `confidence`.

    Distribution-free: the number of samples below the true median is Binomial(n, 1/2), so
    [x_(k), x_(n-1-k)] covers the median with probability 1 - 2*P(B <= k). None when n is too
    small for any pair of order statistics to reach the confidence (n < 6 at 95%).

    Binomial terms are computed in log space (comb(n, k) / 2**n overflows a float from n = 1024
    on), and the sum starts 10·√n (20 standard deviations) below n/2: by Hoeffding's bound the
    terms left out add up to less than e**-200, far below any confidence level's tail.
    """
    alpha = 1.0 - confidence
    log_total = n * math.log(2.0)
    start = max(0, int(n / 2 - 10 * math.sqrt(n)))
    best = None
    cumulative = 0.0
    for k in range(start, n // 2):
        log_comb = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
        cumulative += math.exp(log_comb - log_total)
        if cumulative > alpha / 2:
            break
        best = k
    return None if best is None else (best, n - 1 - best)


def median_of(values: Sequence[float]) -> float:
    """np.median's float for a few values, without its per-call cost (a report asks for tens of
    thousands of medians of two to twenty samples): the middle value, or the two middle values'
    sum halved, which is what numpy's mean of two computes."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return float((ordered[middle - 1] + ordered[middle]) / 2)


def percent_change(ratio: Optional[float]) -> str:
    """A ratio new/base as a signed change, "+4.2%" ("---" for none; never "-0.0%")."""
    if ratio is None:
        return "---"
    value = round((ratio - 1) * 100, 1)
    return f"{value + 0.0:+.1f}%"  # + 0.0 turns -0.0 into 0.0


def fenced_mean(values: Sequence[float], step: float) -> float:
    """The mean of the values inside Tukey's far fences, the IQR floored at the clock's `step`.

    Why a mean: a coarse clock reads a call's duration as whole steps, late or early by where the
    call began between two ticks; over many calls that phase is uniform, so the mean of the
    readings is the true duration, while their median is a whole step. Why the fences: a mean
    must not follow a preempted call. The floor keeps every reading of the bulk (a round of 3s and
    4s has an IQR of 0 or 1 step) inside them, so the fences cut outliers, never the dither."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    q1, q3 = np.percentile(ordered, (25, 75))
    reach = FENCE_IQRS * max(q3 - q1, step)
    inside = ordered[(ordered >= q1 - reach) & (ordered <= q3 + reach)]
    return float(inside.mean())


def within_step(delta: float, step: float) -> bool:
    """`delta` no larger than a clock's `step` (0: no step known): a change a clock that counts
    whole steps cannot see. A relative 1e-6 of slack absorbs float noise (0.004 - 0.003 > 0.001)."""
    return step > 0 and abs(delta) <= step * (1 + 1e-6)


@dataclass(frozen=True)
class Measurement:
    """Samples in milliseconds; statistics are derived, never stored separately (the costly
    ones are cached on the instance, which is frozen: the samples cannot change under them)."""

    samples_ms: Sequence[float]
    metadata: dict = field(default_factory=dict)
    #: how many of the samples, in order, each round contributed; None: one round
    round_sizes: Optional[Sequence[int]] = None
    #: what one round's figure is: "median", or "mean" (fenced_mean at the clock's step
    #: `step_ms`), which a comparison asks of calls within DITHER_STEPS of a coarse clock
    figure: str = "median"
    step_ms: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "samples_ms", tuple(float(s) for s in self.samples_ms))
        if not self.samples_ms:
            raise ValueError("a Measurement needs at least one sample")
        sizes = tuple(int(k) for k in (self.round_sizes or (len(self.samples_ms),)))
        if any(k < 1 for k in sizes) or sum(sizes) != len(self.samples_ms):
            raise ValueError(f"round sizes {list(sizes)} do not split {len(self.samples_ms)} samples")
        object.__setattr__(self, "round_sizes", sizes)

    @classmethod
    def from_rounds(cls, rounds: Sequence[Sequence[float]], metadata: Optional[dict] = None) -> "Measurement":
        """One Measurement from each round's samples (rounds without samples are left out)."""
        kept = [list(r) for r in rounds if len(r)]
        return cls([s for r in kept for s in r], dict(metadata or {}), [len(r) for r in kept])

    @property
    def n(self) -> int:
        return len(self.samples_ms)

    @property
    def _array(self) -> np.ndarray:
        return np.asarray(self.samples_ms, dtype=np.float64)

    @property
    def mean(self) -> float:
        return float(self._array.mean())

    @property
    def std(self) -> float:
        """Sample standard deviation (n-1); 0 for a single sample."""
        return float(self._array.std(ddof=1)) if self.n > 1 else 0.0

    @cached_property
    def median(self) -> float:
        return median_of(self._sorted)

    @property
    def min(self) -> float:
        return float(self._array.min())

    @property
    def max(self) -> float:
        return float(self._array.max())

    @cached_property
    def _sorted(self) -> Tuple[float, ...]:
        return tuple(sorted(self.samples_ms))

    def percentile(self, q: float) -> float:
        """Linear-interpolated percentile, q in [0, 100]: numpy's default method, step for step
        (the same float as np.percentile), on samples sorted once per Measurement; a report
        asks thousands of percentiles, and np.percentile's per-call cost was most of their time."""
        ordered = self._sorted
        position = (len(ordered) - 1) * (q / 100)
        below = math.floor(position)
        low, high = ordered[below], ordered[min(below + 1, len(ordered) - 1)]
        fraction, step = position - below, high - low
        return high - step * (1 - fraction) if fraction >= 0.5 else low + step * fraction

    @property
    def iqr(self) -> float:
        return self.percentile(75) - self.percentile(25)

    @property
    def relative_iqr(self) -> Optional[float]:
        return self.iqr / self.median if self.median > 0 else None

    @property
    def noisy(self) -> bool:
        rel = self.relative_iqr
        return rel is not None and rel >= NOISE_THRESHOLD

    # ------------------------------------------------------------------ rounds

    @cached_property
    def rounds(self) -> Tuple[Tuple[float, ...], ...]:
        """The samples of each round, in the order the rounds ran."""
        bounds = np.cumsum((0,) + self.round_sizes)
        return tuple(self.samples_ms[a:b] for a, b in zip(bounds[:-1], bounds[1:]))

    @property
    def round_count(self) -> int:
        return len(self.round_sizes)

    @cached_property
    def round_medians(self) -> Tuple[float, ...]:
        return tuple(median_of(r) for r in self.rounds)

    @cached_property
    def round_figures(self) -> Tuple[float, ...]:
        """Each round's figure: its median, or with figure "mean" its fenced mean."""
        if self.figure == "median":
            return self.round_medians
        return tuple(fenced_mean(r, self.step_ms) for r in self.rounds)

    @cached_property
    def center(self) -> float:
        """The figure a comparison judges: the median of the round figures (each process
        weighs the same, whatever its sample count), or the one round's figure."""
        if self.round_count > 1:
            return median_of(self.round_figures)
        return self.median if self.figure == "median" else self.round_figures[0]

    def dithered(self, step_ms: float) -> "Measurement":
        """The same samples judged on the rounds' fenced means at a clock of `step_ms`."""
        return Measurement(self.samples_ms, self.metadata, self.round_sizes, "mean", step_ms)

    @property
    def round_spread(self) -> Optional[float]:
        """(largest - smallest round figure) / center; None for one round or a zero center."""
        if self.round_count < 2 or self.center <= 0:
            return None
        figures = self.round_figures
        return (max(figures) - min(figures)) / self.center

    @property
    def between_round_fraction(self) -> Optional[float]:
        """Share of the samples' variance that lies between rounds (0 to 1), from a one-way
        random-effects analysis of variance: between-round variance component over the total.

        Near 0: rounds agree and the scatter is inside each process; near 1: each process sits
        at its own level, and only more rounds (not more runs) narrow down the build's figure.
        None for one round, or when no round has two samples or every sample is equal.
        """
        k, n = self.round_count, self.n
        if k < 2 or n <= k:
            return None
        data = [np.asarray(r, dtype=np.float64) for r in self.rounds]
        grand = self._array.mean()
        ss_between = sum(len(r) * (r.mean() - grand) ** 2 for r in data)
        ss_within = sum(((r - r.mean()) ** 2).sum() for r in data)
        ms_between, ms_within = ss_between / (k - 1), ss_within / (n - k)
        n0 = (n - sum(len(r) ** 2 for r in data) / n) / (k - 1)
        between = max(0.0, (ms_between - ms_within) / n0)
        total = between + ms_within
        return float(between / total) if total > 0 else None

    def rounds_dict(self) -> Optional[dict]:
        """The report's `rounds` block; None for a single round (old reports have none)."""
        if self.round_count < 2:
            return None
        return {
            "count": self.round_count,
            "sizes": list(self.round_sizes),
            "medians_ms": list(self.round_medians),
            "median_ms": self.center,
            "spread": self.round_spread,
            "between_fraction": self.between_round_fraction,
        }

    @property
    def median_ci95(self) -> Optional[tuple]:
        """95% confidence interval of the median; None with fewer than 6 samples."""
        ranks = median_confidence_ranks(self.n)
        if ranks is None:
            return None
        ordered = sorted(self.samples_ms)
        return (ordered[ranks[0]], ordered[ranks[1]])

    def to_dict(self) -> dict:
        ci = self.median_ci95
        data = {
            "unit": "ms",
            "n": self.n,
            "mean_ms": self.mean,
            "std_ms": self.std,
            "median_ms": self.median,
            "min_ms": self.min,
            "max_ms": self.max,
            "p50_ms": self.percentile(50),
            "p90_ms": self.percentile(90),
            "p99_ms": self.percentile(99),
            "iqr_ms": self.iqr,
            "relative_iqr": self.relative_iqr,
            "median_ci95_ms": list(ci) if ci else None,
            "noisy": self.noisy,
            "samples_ms": list(self.samples_ms),
            "metadata": dict(self.metadata),
        }
        rounds = self.rounds_dict()
        if rounds is not None:
            data["rounds"] = rounds
        from benchcore.measure.modes import of as modes_of  # modes reads Measurements: imported here, not above

        modes = modes_of(self)
        if modes is not None:
            data["modes"] = modes.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Measurement":
        """Rebuild from `to_dict` output; statistics are recomputed from the samples."""
        return cls(samples_ms=data["samples_ms"], metadata=dict(data.get("metadata") or {}),
                   round_sizes=round_sizes_of(data))


def judged_pair(base: "Measurement", new: "Measurement", step_ms: float) -> Tuple["Measurement", "Measurement"]:
    """The two sides of a quantity as a comparison judges them: on their round medians, or both
    on their rounds' fenced means where either side's round medians lie within DITHER_STEPS
    clock steps (a median of whole steps hides every change smaller than one) and every round's
    readings vary: a clock that reads every call alike shows no dither to average, and a mean of
    equal readings is no nearer the truth than one of them (compare then says the change is
    within the clock's steps)."""
    near = step_ms > 0 and min(min(base.round_medians), min(new.round_medians)) <= DITHER_STEPS * step_ms
    if not (near and all(len(set(r)) > 1 for m in (base, new) for r in m.rounds)):
        return base, new
    return base.dithered(step_ms), new.dithered(step_ms)


def round_sizes_of(data: dict) -> Optional[List[int]]:
    """The round sizes a report dict records (a Measurement's `rounds.sizes`, or a profiler
    phase's `round_sizes`); None when it records one round."""
    rounds = data.get("rounds")
    sizes = rounds.get("sizes") if isinstance(rounds, dict) else data.get("round_sizes")
    return list(sizes) if isinstance(sizes, list) and len(sizes) > 1 else None
