"""The hypothesis tests a comparison rests on: is new/base different from no change?

Separate from benchcore.measure.measurement because only benchcore.compare.verdicts asks these questions;
a Measurement describes one set of samples, these judge two of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

#: the widest log ratio a bound or a claim is given as: beyond a factor of a million either way the
#: evidence says nothing (and exp() of the t quantile at a tiny alpha and few degrees of freedom
#: would overflow)
LOG_LIMIT = math.log(1e6)
#: the share of paired log ratios a paired test cuts from each end: 10%, half of Wilcox's usual
#: 20%, which on the third take's runs cost degrees of freedom at 10-15 rounds and decided less
#: (lab/notes/answers.md, "Fourth take"); enough for a process or two at another speed
TRIM = 0.1


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

    #: for tests on log values: the change of log time the test judged (the offset removed)
    log_change: Optional[float] = None
    #: the part of standard_error² that more rounds do not shrink (the offset's variance)
    fixed_variance: float = 0.0

    def interval(self, one_sided_alpha: float) -> Optional[Tuple[float, float]]:
        """The ratio's bounds exp(change ± t_{1-a} se): the (1 - 2a) interval that two one-sided
        tests at level `a` rest on (TOST). "The same within ±M%" is established at level `a`
        when this interval lies inside ±M%; a change merely not significant never is."""
        if self.log_change is None:
            return None
        if not self.standard_error or not self.df:
            point = math.exp(self.log_change)
            return point, point
        from scipy.stats import t as student_t

        half = float(student_t.ppf(1 - one_sided_alpha, self.df)) * self.standard_error
        return _ratio(self.log_change - half), _ratio(self.log_change + half)

    def detectable_ratio(self, alpha: float = 0.05, power: float = 0.9, floor: float = 0.0) -> Optional[float]:
        """The smallest slowdown new/base that evidence this precise calls with probability
        `power` when the test runs at level `alpha` (two-sided) and a change must also exceed
        `floor` (the log of the effect threshold): exp(max(floor, t_{1-alpha/2} se) + t_power se).
        Both conditions hold with probability `power` at that ratio, so a claim made with it is
        calibrated: of true changes at or above it, at least that share is called. What a
        comparison could have seen, so `undecided` is never read as "unchanged". None without an
        error estimate, or where the claim passes a factor of exp(LOG_LIMIT): no claim at all."""
        if not self.standard_error or not self.df:
            return None
        from scipy.stats import t as student_t

        critical = float(student_t.ppf(1 - alpha / 2, self.df)) * self.standard_error
        claim = max(floor, critical) + float(student_t.ppf(power, self.df)) * self.standard_error
        return math.exp(claim) if claim <= LOG_LIMIT else None


def _ratio(log_ratio: float) -> float:
    """exp(log_ratio) within a factor of exp(LOG_LIMIT) either way."""
    return math.exp(min(max(log_ratio, -LOG_LIMIT), LOG_LIMIT))


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
    every case shares, e.g. a slower machine (benchcore.compare.verdicts); the bounds returned are those
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
    return _t_on_log_change(float(y.mean() - x.mean() - offset), se, df, "t-log", prior is not None, confidence,
                            offset_variance)


def paired_t_on_logs(base: Sequence[float], new: Sequence[float], prior: Optional["VariancePrior"] = None,
                     offset: float = 0.0, offset_variance: float = 0.0, confidence: float = 0.95) -> TestResult:
    """A paired test on the log ratios new_k / base_k of rounds that ran side by side: Yuen's
    trimmed t (the TRIM share of the ratios cut from each end, the variance winsorized).

    In an interleaved A/B run round k of both sides ran at the same time, case next to case: the
    machine's speed of that moment, which swings by a fifth between seconds on a shared VM, is
    common to the pair and cancels in its ratio. What does not cancel is a process that drew a
    slow speed: one such round in 25 moves a plain mean of log ratios by 3% and doubles its
    variance, which holds every verdict back; trimmed, the test reads the rounds that agree.
    With fewer than 1/TRIM rounds nothing is trimmed (Student's paired t). `prior` moderates the
    variance as in t_on_logs (fitted to the same trimmed variances of all the comparison's
    quantities: paired_log_spread); `offset` and `offset_variance` as there."""
    change, variance, df = paired_log_spread(base, new)
    if prior is not None:
        variance, df = prior.moderated(variance, df)
    se = math.sqrt(variance / len(base) + offset_variance)
    method = "paired-trimmed-t-log" if trimmed_count(len(base)) else "paired-t-log"
    return _t_on_log_change(change - offset, se, df, method, prior is not None, confidence, offset_variance)


def trimmed_count(rounds: int) -> int:
    """How many log ratios paired_t_on_logs cuts from each end of `rounds`."""
    return int(math.floor(TRIM * rounds))


def paired_log_spread(base: Sequence[float], new: Sequence[float]) -> Tuple[float, float, int]:
    """(trimmed mean of the log ratios, the variance of one round that makes variance/rounds its
    standard error squared, degrees of freedom): Yuen's (n - 1)·s_w² / (h(h - 1)) with s_w² the
    winsorized variance and h the ratios kept, on h - 1 degrees of freedom."""
    d = np.sort(np.log(np.asarray(new, float)) - np.log(np.asarray(base, float)))
    n, g = len(d), trimmed_count(len(d))
    kept = n - 2 * g
    winsorized = np.clip(d, d[g], d[n - 1 - g])
    spread = float(((winsorized - winsorized.mean()) ** 2).sum())  # (n - 1)·s_w²; one pair: 0
    return float(d[g:n - g].mean()), n * spread / max(kept * (kept - 1), 1), max(kept - 1, 0)


def _t_on_log_change(change: float, se: float, df: float, method: str, moderated: bool,
                     confidence: float, fixed_variance: float) -> TestResult:
    """The t-test of a change of log time with standard error `se` on `df` degrees of freedom:
    p, and the ratio's bounds at `confidence`. Without variance (identical rounds) the bounds are
    the point itself, and any change at all is certain."""
    from scipy.stats import t as student_t

    if se == 0 or df <= 0:
        point = math.exp(change)
        return TestResult(0.0 if change != 0 else 1.0, method, (point, point), log_change=change)
    quantile = float(student_t.ppf(0.5 + confidence / 2, df))
    p_value = float(2 * student_t.sf(abs(change) / se, df))
    bounds = (math.exp(change - quantile * se), math.exp(change + quantile * se))
    return TestResult(p_value, f"moderated-{method}" if moderated else method, bounds, se, df, change, fixed_variance)


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
