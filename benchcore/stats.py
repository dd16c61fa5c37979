"""Measurement: the raw samples of one timed quantity and every statistic derived from them.

All times are milliseconds. Statistics are properties computed from the samples, so nothing
downstream can disagree with them or recompute them by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

#: IQR/median at or above this marks a measurement as noisy (torch.utils.benchmark's rule).
NOISE_THRESHOLD = 0.10


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


def within_step(delta: float, step: float) -> bool:
    """`delta` no larger than a clock's `step` (0: no step known): a change a clock that counts
    whole steps cannot see. A relative 1e-6 of slack absorbs float noise (0.004 - 0.003 > 0.001)."""
    return step > 0 and abs(delta) <= step * (1 + 1e-6)


@dataclass(frozen=True)
class Measurement:
    """Samples in milliseconds; statistics are derived, never stored separately."""

    samples_ms: Sequence[float]
    metadata: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "samples_ms", tuple(float(s) for s in self.samples_ms))
        if not self.samples_ms:
            raise ValueError("a Measurement needs at least one sample")

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

    @property
    def median(self) -> float:
        return float(np.median(self._array))

    @property
    def min(self) -> float:
        return float(self._array.min())

    @property
    def max(self) -> float:
        return float(self._array.max())

    def percentile(self, q: float) -> float:
        """Linear-interpolated percentile, q in [0, 100]."""
        return float(np.percentile(self._array, q))

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
        return {
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

    @classmethod
    def from_dict(cls, data: dict) -> "Measurement":
        """Rebuild from `to_dict` output; statistics are recomputed from the samples."""
        return cls(samples_ms=data["samples_ms"], metadata=dict(data.get("metadata") or {}))
