"""Measurement: the raw samples of one timed quantity and every statistic derived from them.

All times are milliseconds. Statistics are properties computed from the samples, so nothing
downstream can disagree with them or recompute them by hand.

A Measurement may hold several rounds: the same case timed in separate worker processes (see
benchcore.rounds). Samples from one process are evidence about that process (its memory layout,
its caches, the machine's state at that minute), not independent evidence about the build: on a
2-core VM two processes timing the same kernel differ by more than 50 samples inside either one
do. So the samples keep their round boundaries, and the statistics that a comparison rests on
are the rounds' own medians: their median, their spread, and the share of the variance that lies
between rounds rather than within them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

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


def percent_change(ratio: Optional[float]) -> str:
    """A ratio new/base as a signed change, "+4.2%" ("---" for none; never "-0.0%")."""
    if ratio is None:
        return "---"
    value = round((ratio - 1) * 100, 1)
    return f"{value + 0.0:+.1f}%"  # + 0.0 turns -0.0 into 0.0


def within_step(delta: float, step: float) -> bool:
    """`delta` no larger than a clock's `step` (0: no step known): a change a clock that counts
    whole steps cannot see. A relative 1e-6 of slack absorbs float noise (0.004 - 0.003 > 0.001)."""
    return step > 0 and abs(delta) <= step * (1 + 1e-6)


@dataclass(frozen=True)
class Measurement:
    """Samples in milliseconds; statistics are derived, never stored separately."""

    samples_ms: Sequence[float]
    metadata: dict = field(default_factory=dict)
    #: how many of the samples, in order, each round contributed; None: one round
    round_sizes: Optional[Sequence[int]] = None

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

    # ------------------------------------------------------------------ rounds

    @property
    def rounds(self) -> Tuple[Tuple[float, ...], ...]:
        """The samples of each round, in the order the rounds ran."""
        bounds = np.cumsum((0,) + self.round_sizes)
        return tuple(self.samples_ms[a:b] for a, b in zip(bounds[:-1], bounds[1:]))

    @property
    def round_count(self) -> int:
        return len(self.round_sizes)

    @property
    def round_medians(self) -> Tuple[float, ...]:
        return tuple(float(np.median(r)) for r in self.rounds)

    @property
    def center(self) -> float:
        """The figure a comparison judges: the median of the round medians (each process
        weighs the same, whatever its sample count), or the median for one round."""
        return float(np.median(self.round_medians)) if self.round_count > 1 else self.median

    @property
    def round_spread(self) -> Optional[float]:
        """(largest - smallest round median) / center; None for one round or a zero center."""
        if self.round_count < 2 or self.center <= 0:
            return None
        medians = self.round_medians
        return (max(medians) - min(medians)) / self.center

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
        from .modes import of as modes_of  # modes reads Measurements: imported here, not above

        modes = modes_of(self)
        if modes is not None:
            data["modes"] = modes.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Measurement":
        """Rebuild from `to_dict` output; statistics are recomputed from the samples."""
        return cls(samples_ms=data["samples_ms"], metadata=dict(data.get("metadata") or {}),
                   round_sizes=round_sizes_of(data))


def round_sizes_of(data: dict) -> Optional[List[int]]:
    """The round sizes a report dict records (a Measurement's `rounds.sizes`, or a profiler
    phase's `round_sizes`); None when it records one round."""
    rounds = data.get("rounds")
    sizes = rounds.get("sizes") if isinstance(rounds, dict) else data.get("round_sizes")
    return list(sizes) if isinstance(sizes, list) and len(sizes) > 1 else None


# --------------------------------------------------------------------------- tests of a change


@dataclass(frozen=True)
class TestResult:
    """A two-sided test of "no change": its p-value and which test gave it."""

    p_value: float
    method: str
    #: for tests on log values: the 95% confidence bounds of new/base, else None
    ratio_ci95: Optional[Tuple[float, float]] = None
    #: for tests on log values: the standard error of log(new/base) and its degrees of freedom
    standard_error: Optional[float] = None
    df: Optional[float] = None

    def detectable_ratio(self, alpha: float = 0.05, power: float = 0.8) -> Optional[float]:
        """The smallest slowdown new/base that evidence this precise finds with probability
        `power` at level `alpha` (two-sided): exp((t_{1-alpha/2} + t_power) * se). What a
        comparison could have seen, so "same" is never read as "unchanged by less than 1%"."""
        if not self.standard_error or not self.df:
            return None
        from scipy.stats import t as student_t

        return math.exp((float(student_t.ppf(1 - alpha / 2, self.df)) + float(student_t.ppf(power, self.df)))
                        * self.standard_error)


def mann_whitney(base: Sequence[float], new: Sequence[float]) -> TestResult:
    """Two-sided Mann–Whitney U test on raw samples (scipy's automatic exact/asymptotic choice).

    Right for samples that are independent draws; samples of one process are not independent
    evidence about a build (see the module docstring), so compare uses it only for reports
    without rounds.
    """
    from scipy.stats import mannwhitneyu

    if len(set(base) | set(new)) == 1:  # every value equal: nothing to tell apart
        return TestResult(1.0, "mann-whitney")
    result = mannwhitneyu(new, base, alternative="two-sided", method="auto")
    return TestResult(float(result.pvalue), "mann-whitney")


def t_on_logs(base: Sequence[float], new: Sequence[float], prior: Optional["VariancePrior"] = None,
              offset: float = 0.0, offset_variance: float = 0.0, confidence: float = 0.95) -> TestResult:
    """A two-sample t-test on the logarithms of two sets of positive values (round medians):
    is log(new) - log(base) different from `offset`?

    Logs make the test about the ratio new/base, the quantity a user reads, and tame the right
    skew of times. The variance is pooled over both sides (the same machine times both), and,
    with a `prior`, moderated: shrunk towards the variance typical of all the comparison's cases
    (VariancePrior), which a test on three rounds a side badly needs (its own variance estimate
    has 4 degrees of freedom). `offset` (with its own variance, added to the test's) is a shift
    every case shares, e.g. a slower machine (benchcore.compare); the bounds returned are those
    of the ratio with the offset removed. Without a prior and offset this is Student's t-test.

    Rounds that agree exactly on both sides (a coarse clock) and no prior leave no variance:
    then the p-value is 0 for different levels and 1 for equal ones, and the bounds are the point.
    """
    x, y = np.log(base), np.log(new)
    df = len(x) + len(y) - 2
    # one value a side has no spread of its own (the sum is 0): then the prior's alone, if any
    variance = float(((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum()) / max(df, 1)
    if prior is not None:
        variance, df = prior.moderated(variance, df)
    se = math.sqrt(variance * (1 / len(x) + 1 / len(y)) + offset_variance)
    return _t_on_log_change(float(y.mean() - x.mean() - offset), se, df, "t-log", prior is not None, confidence)


def paired_t_on_logs(base: Sequence[float], new: Sequence[float], prior: Optional["VariancePrior"] = None,
                     offset: float = 0.0, offset_variance: float = 0.0, confidence: float = 0.95) -> TestResult:
    """A paired t-test on the log ratios new_k / base_k of rounds that ran side by side.

    In an interleaved A/B run round k of both sides ran at the same time, case next to case: the
    machine's speed of that moment, which swings by a fifth between seconds on a shared VM, is
    common to the pair and cancels in its ratio. `prior` moderates the variance of the log ratios
    as in t_on_logs (fitted to the paired variances of all the comparison's quantities);
    `offset` and `offset_variance` as there."""
    d = np.log(new) - np.log(base)
    df = len(d) - 1
    variance = float(((d - d.mean()) ** 2).sum()) / max(df, 1)  # one pair: 0, as in t_on_logs
    if prior is not None:
        variance, df = prior.moderated(variance, df)
    se = math.sqrt(variance / len(d) + offset_variance)
    return _t_on_log_change(float(d.mean() - offset), se, df, "paired-t-log", prior is not None, confidence)


def _t_on_log_change(change: float, se: float, df: float, method: str, moderated: bool,
                     confidence: float) -> TestResult:
    """The t-test of a change of log time with standard error `se` on `df` degrees of freedom:
    p, and the ratio's bounds at `confidence`. Without variance (identical rounds) the bounds are
    the point itself, and any change at all is certain."""
    from scipy.stats import t as student_t

    if se == 0 or df <= 0:
        point = math.exp(change)
        return TestResult(0.0 if change != 0 else 1.0, method, (point, point))
    quantile = float(student_t.ppf(0.5 + confidence / 2, df))
    p_value = float(2 * student_t.sf(abs(change) / se, df))
    bounds = (math.exp(change - quantile * se), math.exp(change + quantile * se))
    return TestResult(p_value, f"moderated-{method}" if moderated else method, bounds, se, df)


@dataclass(frozen=True)
class VariancePrior:
    """What the variance of a case's log round medians typically is, over all cases compared.

    With three rounds a side, a case's own variance estimate is nearly worthless (4 degrees of
    freedom): a case whose rounds happened to agree looks certain, one with an outlier round looks
    hopeless. Every case of a sweep ran on the same machine in the same processes, so their
    variances are related; an empirical-Bayes prior (Smyth 2004, limma's moderated t) fitted to
    all of them lets each case borrow strength from the rest: its variance is shrunk towards the
    prior's `variance` with the weight of `df` extra degrees of freedom. The fit estimates `df`
    from how much the cases' variances scatter beyond what sampling alone explains, so cases that
    truly differ in noise are shrunk less. `df` is infinite when sampling explains all the
    scatter (every case then gets the prior's variance).
    """

    variance: float
    df: float

    #: fewer cases than this cannot tell a prior's spread from sampling noise
    MIN_CASES = 10

    def to_dict(self) -> dict:
        return {"variance": self.variance, "df": None if math.isinf(self.df) else self.df}

    def moderated(self, variance: float, df: float) -> Tuple[float, float]:
        """(moderated variance, its degrees of freedom) for one case's (variance, df)."""
        if math.isinf(self.df):
            return self.variance, math.inf
        return (self.df * self.variance + df * variance) / (self.df + df), self.df + df

    @classmethod
    def fit(cls, variances: Sequence[float], dfs: Sequence[float]) -> Optional["VariancePrior"]:
        """The prior from cases' (variance, df) pairs (limma's fitFDist by moments of log
        variances); None when fewer than MIN_CASES have a positive variance."""
        from scipy.special import digamma, polygamma

        pairs = [(v, d) for v, d in zip(variances, dfs) if v > 0 and d > 0]
        if len(pairs) < cls.MIN_CASES:
            return None
        v, d = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
        e = np.log(v) - digamma(d / 2) + np.log(d / 2)
        mean = float(e.mean())
        excess = float(e.var(ddof=1) - polygamma(1, d / 2).mean())
        if excess <= 0:
            return cls(math.exp(mean), math.inf)
        df = 2 * _trigamma_inverse(excess)
        return cls(float(math.exp(mean + digamma(df / 2) - math.log(df / 2))), float(df))


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (Newton's method from limma's starting point)."""
    from scipy.special import polygamma

    # limma also returns 1/sqrt(x) above 1e7 and 1/x below 1e-6 (asymptotes good to 5e-7); the
    # iteration itself reaches machine precision there too, in under 30 steps up to x = 1e15
    y = 0.5 + 1 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        step = tri * (1 - tri / x) / float(polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y
