import math
import warnings

import numpy as np
import pytest
from scipy.stats import ttest_ind

from benchcore.compare import tests as hypothesis
from benchcore.compare.tests import mann_whitney, t_on_logs
from benchcore.measure.measurement import (
    Measurement,
    median_confidence_ranks,
    median_of,
    percent_change,
    round_sizes_of,
    within_step,
)


def test_statistics_match_hand_computed_values():
    m = Measurement([4.0, 1.0, 3.0, 2.0, 10.0])
    assert m.n == 5
    assert m.mean == pytest.approx(4.0)
    # sample std: deviations 0,-3,-1,-2,6 → squares 0,9,1,4,36 = 50; /4 → 12.5
    assert m.std == pytest.approx(math.sqrt(12.5))
    assert m.median == 3.0
    assert m.min == 1.0 and m.max == 10.0
    # numpy linear interpolation on sorted [1,2,3,4,10]: p25 = 2, p75 = 4
    assert m.iqr == pytest.approx(2.0)
    assert m.relative_iqr == pytest.approx(2.0 / 3.0)
    assert m.noisy
    # p90: rank 0.9*4 = 3.6 → 4 + 0.6*(10-4) = 7.6
    assert m.percentile(90) == pytest.approx(7.6)


def test_single_sample_has_zero_std_and_no_ci():
    m = Measurement([2.5])
    assert m.std == 0.0
    assert m.median_ci95 is None
    assert m.to_dict()["median_ci95_ms"] is None


def test_quiet_measurement_is_not_noisy():
    m = Measurement([10.0, 10.1, 10.2, 9.9, 10.0, 10.05])
    assert not m.noisy


def test_median_ci_ranks_follow_the_binomial():
    assert median_confidence_ranks(5) is None  # 2 * 0.5^5 = 0.0625 > 0.05
    assert median_confidence_ranks(6) == (0, 5)  # 2 * 0.5^6 = 0.03125 <= 0.05
    # n = 20: P(B <= 5) = 0.0207 <= 0.025, P(B <= 6) = 0.0577 > 0.025 → ranks 5..14
    assert median_confidence_ranks(20) == (5, 14)


def _exact_ranks(n: int, confidence: float = 0.95):
    """The same ranks from exact integer binomial sums (slow, fine for a test)."""
    from fractions import Fraction
    from math import comb

    tail, best, cumulative = Fraction(1 - confidence) / 2, None, 0
    for k in range(n // 2):
        cumulative += comb(n, k)
        if Fraction(cumulative, 2 ** n) > tail:
            break
        best = k
    return None if best is None else (best, n - 1 - best)


@pytest.mark.parametrize("n", [6, 7, 50, 101, 1023, 1024, 1500, 3000])
def test_median_ci_ranks_match_exact_arithmetic_past_float_range(n):
    """2**n overflows a float from n = 1024: ranks must still be right (adaptive runs get there)."""
    assert median_confidence_ranks(n) == _exact_ranks(n)


def test_a_measurement_of_a_million_samples_reports_its_ci():
    m = Measurement([float(i % 1000) for i in range(10**6)])
    lo, hi = m.median_ci95
    assert lo <= m.median <= hi
    assert m.to_dict()["n"] == 10**6


def test_ci_brackets_median():
    m = Measurement(list(range(1, 21)))
    lo, hi = m.median_ci95
    assert (lo, hi) == (6, 15)
    assert lo <= m.median <= hi


def test_round_trip_through_dict():
    m = Measurement([1.0, 2.0, 3.0], metadata={"timer": "perf_counter"})
    data = m.to_dict()
    assert data["unit"] == "ms"
    assert data["median_ms"] == 2.0
    again = Measurement.from_dict(data)
    assert again == m


def test_empty_measurement_is_refused():
    with pytest.raises(ValueError):
        Measurement([])


# --------------------------------------------------------------------------- pinned by mutation testing
# (scripts/mutation: each test below fails for an edit of measurement.py or compare/tests.py that the others let through)


def test_within_step_needs_a_known_step_and_includes_its_bound():
    assert not within_step(0.0, 0.0)  # 0: no step known, even for no change
    assert within_step(0.001 * (1 + 1e-6), 0.001)  # the bound itself, slack included
    assert not within_step(0.0011, 0.001)


def test_samples_are_kept_as_a_tuple_of_floats_and_one_is_needed():
    m = Measurement([1, 2])
    assert m.samples_ms == (1.0, 2.0) and all(type(s) is float for s in m.samples_ms)
    with pytest.raises(ValueError, match="^a Measurement needs at least one sample$"):
        Measurement([])


def test_to_dict_holds_every_statistic_under_its_name():
    assert Measurement([1, 2, 3, 4, 5, 6, 7, 8]).to_dict() == {
        "unit": "ms", "n": 8, "mean_ms": 4.5, "std_ms": pytest.approx(2.449489742783178), "median_ms": 4.5,
        "min_ms": 1.0, "max_ms": 8.0, "p50_ms": 4.5, "p90_ms": pytest.approx(7.3), "p99_ms": pytest.approx(7.93),
        "iqr_ms": 3.5, "relative_iqr": pytest.approx(3.5 / 4.5), "median_ci95_ms": [1.0, 8.0], "noisy": True,
        "samples_ms": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], "metadata": {}}


def test_one_recorded_round_reads_as_no_rounds():
    assert round_sizes_of({"round_sizes": [5]}) is None
    assert round_sizes_of({"rounds": {"sizes": [5]}}) is None
    assert round_sizes_of({"rounds": {"sizes": [2, 3]}}) == [2, 3]


def test_a_confidence_reached_exactly_counts():
    # n = 2: [x_(0), x_(1)] covers the median with probability 1 - 2 * 1/4 = 0.5 exactly
    assert median_confidence_ranks(2, confidence=0.5) == (0, 1)


def test_the_tests_name_themselves_and_give_their_interval():
    assert mann_whitney([1.0, 1.0], [1.0, 1.0]) == hypothesis.TestResult(1.0, "mann-whitney")
    assert mann_whitney([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).method == "mann-whitney"
    equal = t_on_logs([2.0, 2.0], [4.0, 4.0])
    assert equal == hypothesis.TestResult(0.0, "t-log", (pytest.approx(2.0), pytest.approx(2.0)),
                                          log_change=pytest.approx(math.log(2.0)))
    varied = t_on_logs([1.0, 1.1, 0.9], [2.0, 2.2, 1.8])
    assert varied.method == "t-log" and varied.ratio_ci95[0] < 2.0 < varied.ratio_ci95[1]
    moderated = t_on_logs([1.0, 1.1, 0.9], [2.0, 2.2, 1.8], hypothesis.VariancePrior(0.01, 10.0))
    assert moderated.method == "moderated-t-log"


def test_one_side_that_never_varies_is_an_ordinary_pooled_test():
    """Only both sides constant make the point answer; one constant side pools the other's variance."""
    base, new = [2.0, 2.0, 2.0], [1.0, 2.0, 8.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = t_on_logs(base, new)
    expected = ttest_ind(np.log(new), np.log(base), equal_var=True)
    assert result.p_value == pytest.approx(float(expected.pvalue)) and 0 < result.p_value < 1
    low, high = result.ratio_ci95
    assert low < math.exp(np.log(new).mean() - np.log(base).mean()) < high

def test_the_detectable_slowdown_follows_the_evidence():
    from scipy.stats import t as student_t

    noisy = t_on_logs([1.0, 1.2, 0.85], [1.0, 1.15, 0.9])
    quiet = t_on_logs([1.0, 1.01, 0.99], [1.0, 1.015, 0.99])
    expected = math.exp((student_t.ppf(0.975, noisy.df) + student_t.ppf(0.9, noisy.df)) * noisy.standard_error)
    assert noisy.df == 4 and noisy.detectable_ratio() == pytest.approx(expected)
    assert 1.0 < quiet.detectable_ratio() < 1.1 < noisy.detectable_ratio()
    assert quiet.detectable_ratio(alpha=0.01) > quiet.detectable_ratio(alpha=0.05)
    assert quiet.detectable_ratio(power=0.8) < quiet.detectable_ratio()
    # a change must also pass the effect threshold: where the test alone would see less, the
    # claim is the threshold plus the power's margin
    floor = math.log(1.05)
    assert quiet.detectable_ratio(floor=floor) == pytest.approx(
        math.exp(floor + student_t.ppf(0.9, quiet.df) * quiet.standard_error))
    assert mann_whitney([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).detectable_ratio() is None


# --------------------------------------------------------------------------- the tests of a change, against
# independent computations (scipy's t-tests on the logs; the moderated forms by hand)

from scipy.optimize import brentq  # noqa: E402
from scipy.special import digamma, polygamma  # noqa: E402
from scipy.stats import t as student_t  # noqa: E402
from scipy.stats import ttest_rel  # noqa: E402

from benchcore.compare.tests import TestResult as HypothesisResult  # noqa: E402
from benchcore.compare.tests import VariancePrior, paired_t_on_logs  # noqa: E402


def _hand_moderated(change, s2, df, n_factor, prior, confidence=0.95):
    """limma's moderated t by hand: s~² = (d0·s0² + df·s²) / (d0 + df) on d0 + df degrees of freedom,
    se = sqrt(s~² · n_factor); p two-sided; bounds exp(change ± t_q · se)."""
    s2_tilde = (prior.df * prior.variance + df * s2) / (prior.df + df)
    total_df = prior.df + df
    se = math.sqrt(s2_tilde * n_factor)
    q = student_t.ppf(0.5 + confidence / 2, total_df)
    return 2 * student_t.sf(abs(change) / se, total_df), (math.exp(change - q * se), math.exp(change + q * se)), se, total_df


@pytest.mark.parametrize("base,new", [([1.0, 1.5], [2.0, 3.1]),  # two pairs: one degree of freedom
                                      ([1.0, 1.2, 0.9, 1.1, 1.05], [1.1, 1.25, 1.0, 1.3, 1.1])])
@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_paired_t_on_logs_is_scipys_paired_t_on_the_logs(base, new, confidence):
    ours = paired_t_on_logs(base, new, confidence=confidence)
    theirs = ttest_rel(np.log(new), np.log(base))
    d = np.log(new) - np.log(base)
    assert ours.method == "paired-t-log"
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)
    low, high = theirs.confidence_interval(confidence)
    assert ours.ratio_ci95 == pytest.approx((math.exp(low), math.exp(high)), rel=1e-9)
    assert ours.standard_error == pytest.approx(d.std(ddof=1) / math.sqrt(len(d)), rel=1e-9)
    assert ours.df == len(d) - 1


def test_paired_t_on_logs_at_the_default_confidence_gives_95_percent_bounds():
    base, new = [1.0, 1.2, 0.9, 1.1], [1.1, 1.25, 1.0, 1.3]
    low, high = ttest_rel(np.log(new), np.log(base)).confidence_interval(0.95)
    assert paired_t_on_logs(base, new).ratio_ci95 == pytest.approx((math.exp(low), math.exp(high)), rel=1e-9)


def test_paired_t_on_logs_tests_against_an_offset_widened_by_its_variance():
    base, new = [1.0, 1.2, 0.9, 1.1], [1.1, 1.25, 1.0, 1.3]
    d = np.log(new) - np.log(base)
    ours = paired_t_on_logs(base, new, offset=0.05, offset_variance=0.01)
    se = math.sqrt(d.var(ddof=1) / len(d) + 0.01)
    assert ours.standard_error == pytest.approx(se, rel=1e-12)
    assert ours.p_value == pytest.approx(2 * student_t.sf(abs(d.mean() - 0.05) / se, len(d) - 1), rel=1e-9)


def test_a_moderated_paired_t_shrinks_the_variance_of_the_log_ratios_towards_the_prior():
    base, new = [1.0, 1.2, 0.9, 1.1], [1.1, 1.25, 1.0, 1.3]
    prior = VariancePrior(0.002, 6.0)
    d = np.log(new) - np.log(base)
    p, bounds, se, df = _hand_moderated(d.mean(), d.var(ddof=1), len(d) - 1, 1 / len(d), prior)
    ours = paired_t_on_logs(base, new, prior)
    assert ours.method == "moderated-paired-t-log" and ours.df == df == 9.0
    assert ours.p_value == pytest.approx(p, rel=1e-9) and ours.standard_error == pytest.approx(se, rel=1e-9)
    assert ours.ratio_ci95 == pytest.approx(bounds, rel=1e-9)


def test_one_pair_with_a_prior_is_judged_on_the_priors_variance_alone():
    prior = VariancePrior(0.01, 8.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0/0 for the pair's own (absent) spread
        ours = paired_t_on_logs([2.0], [2.4], prior)
    p, bounds, se, df = _hand_moderated(math.log(1.2), 0.0, 0, 1.0, prior)
    assert (ours.df, ours.standard_error) == (8.0, pytest.approx(math.sqrt(0.01)))
    assert ours.p_value == pytest.approx(p, rel=1e-9) and ours.ratio_ci95 == pytest.approx(bounds, rel=1e-9)


def test_a_prior_of_infinite_df_replaces_the_variance_and_the_t_becomes_normal():
    base, new = [1.0, 1.2, 0.9], [1.1, 1.25, 1.0]
    ours = paired_t_on_logs(base, new, VariancePrior(0.004, math.inf))
    d = np.log(new) - np.log(base)
    se = math.sqrt(0.004 / 3)
    assert ours.df == math.inf and ours.standard_error == pytest.approx(se)
    from scipy.stats import norm
    assert ours.p_value == pytest.approx(2 * norm.sf(abs(d.mean()) / se), rel=1e-9)
    assert ours.ratio_ci95 == pytest.approx((math.exp(d.mean() - norm.ppf(0.975) * se),
                                             math.exp(d.mean() + norm.ppf(0.975) * se)), rel=1e-9)


@pytest.mark.parametrize("test", [paired_t_on_logs, t_on_logs])
def test_rounds_without_any_variance_give_the_point_and_certainty(test):
    """Every pair the same ratio (paired) or every side constant: no spread to test with."""
    method = "paired-t-log" if test is paired_t_on_logs else "t-log"
    changed = test([2.0] * 4, [3.0] * 4)  # 4: the mean of equal logs is exact
    assert changed == HypothesisResult(0.0, method, (pytest.approx(1.5), pytest.approx(1.5)), None, None,
                                       pytest.approx(math.log(1.5)))
    unchanged = test([1.0, 2.0], [1.0, 2.0]) if test is paired_t_on_logs else test([2.0] * 3, [2.0] * 2)
    assert unchanged == HypothesisResult(1.0, method, (1.0, 1.0), None, None, 0.0)


def test_one_pair_without_a_prior_has_no_variance_and_gives_the_point():
    assert paired_t_on_logs([2.0], [3.0]) == HypothesisResult(0.0, "paired-t-log", (pytest.approx(1.5),) * 2,
                                                              log_change=pytest.approx(math.log(1.5)))
    assert paired_t_on_logs([2.0], [2.0]) == HypothesisResult(1.0, "paired-t-log", (1.0, 1.0), log_change=0.0)


@pytest.mark.parametrize("base,new", [([1.0, 1.4], [2.0]),  # one degree of freedom
                                      ([1.0, 1.03, 0.98, 1.01], [1.21, 1.18, 1.22])])
@pytest.mark.parametrize("offset", [0.0, math.log(1.1)])
def test_t_on_logs_is_scipys_pooled_t_on_the_logs_less_the_offset(base, new, offset):
    ours = t_on_logs(base, new, offset=offset)
    theirs = ttest_ind(np.log(new) - offset, np.log(base), equal_var=True)
    assert ours.method == "t-log" and ours.df == len(base) + len(new) - 2
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)
    low, high = theirs.confidence_interval(0.95)
    assert ours.ratio_ci95 == pytest.approx((math.exp(low), math.exp(high)), rel=1e-9)
    x, y = np.log(base), np.log(new)
    pooled = (((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum()) / (len(x) + len(y) - 2)
    assert ours.standard_error == pytest.approx(math.sqrt(pooled * (1 / len(x) + 1 / len(y))), rel=1e-9)


def test_t_on_logs_adds_the_offsets_variance_to_the_squared_standard_error():
    base, new = [1.0, 1.02, 0.99], [1.10, 1.12, 1.09]
    x, y = np.log(base), np.log(new)
    pooled = (((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum()) / 4
    se = math.sqrt(pooled * (2 / 3) + 0.0004)
    change = y.mean() - x.mean() - 0.05
    q = student_t.ppf(0.975, 4)
    ours = t_on_logs(base, new, offset=0.05, offset_variance=0.0004)
    assert ours.standard_error == pytest.approx(se, rel=1e-9) and ours.df == 4
    assert ours.p_value == pytest.approx(2 * student_t.sf(abs(change) / se, 4), rel=1e-9)
    assert ours.ratio_ci95 == pytest.approx((math.exp(change - q * se), math.exp(change + q * se)), rel=1e-9)


def test_a_moderated_t_on_logs_pools_the_sides_then_shrinks_towards_the_prior():
    base, new = [1.0, 1.1, 0.9], [1.2, 1.25, 1.1, 1.3]
    prior = VariancePrior(0.003, 5.0)
    x, y = np.log(base), np.log(new)
    pooled = (((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum()) / 5
    p, bounds, se, df = _hand_moderated(y.mean() - x.mean(), pooled, 5, 1 / 3 + 1 / 4, prior)
    ours = t_on_logs(base, new, prior)
    assert ours.method == "moderated-t-log" and ours.df == df == 10.0
    assert ours.p_value == pytest.approx(p, rel=1e-9) and ours.standard_error == pytest.approx(se, rel=1e-9)
    assert ours.ratio_ci95 == pytest.approx(bounds, rel=1e-9)


def test_one_round_a_side_with_a_prior_is_judged_on_the_priors_variance_alone():
    prior = VariancePrior(0.01, 8.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = t_on_logs([2.0], [2.4], prior)
    p, bounds, se, df = _hand_moderated(math.log(1.2), 0.0, 0, 2.0, prior)
    assert (ours.df, ours.standard_error) == (8.0, pytest.approx(math.sqrt(0.02)))
    assert ours.p_value == pytest.approx(p, rel=1e-9) and ours.ratio_ci95 == pytest.approx(bounds, rel=1e-9)


def test_the_equivalence_interval_is_the_tost_interval_at_its_level():
    """`same` at level a rests on the (1 - 2a) interval: exp(change ± t_{1-a} se); identical rounds
    give the point, and a test without a change of log time (the U test) gives none."""
    result = HypothesisResult(0.5, "t-log", (0.9, 1.1), 0.1, 4.0, math.log(1.02))
    half = student_t.ppf(0.95, 4.0) * 0.1
    assert result.interval(0.05) == pytest.approx((1.02 * math.exp(-half), 1.02 * math.exp(half)))
    assert result.interval(0.01)[1] > result.interval(0.05)[1]
    assert paired_t_on_logs([2.0] * 3, [3.0] * 3).interval(0.05) == pytest.approx((1.5, 1.5))
    assert mann_whitney([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).interval(0.05) is None


def test_without_degrees_of_freedom_an_offsets_variance_alone_gives_no_t_test():
    """One round a side, no prior: no t distribution to refer to, whatever the offset's variance."""
    assert t_on_logs([2.0], [3.0], offset_variance=0.01) == HypothesisResult(0.0, "t-log", (pytest.approx(1.5),) * 2,
                                                                              log_change=pytest.approx(math.log(1.5)))


def test_the_detectable_slowdown_needs_both_a_standard_error_and_degrees_of_freedom():
    assert HypothesisResult(0.5, "t-log", (0.9, 1.1), standard_error=0.1).detectable_ratio() is None
    assert HypothesisResult(0.5, "t-log", (0.9, 1.1), df=4.0).detectable_ratio() is None
    expected = math.exp((student_t.ppf(0.975, 4.0) + student_t.ppf(0.9, 4.0)) * 0.1)
    assert HypothesisResult(0.5, "t-log", (0.9, 1.1), 0.1, 4.0).detectable_ratio() == pytest.approx(expected)


# --------------------------------------------------------------------------- the variance prior


@pytest.mark.parametrize("x", [1e-12, 1e-9, 1e-6, 9e-7, 1.1e-6, 1e-3, 0.1, 0.5, 1.0, 2.0, 10.0, 1e3, 1e6, 1e7,
                               1.0000001e7, 9.9e6, 1e9, 1e12])
def test_trigamma_inverse_inverts_scipys_trigamma_to_machine_precision(x):
    y = hypothesis._trigamma_inverse(x)
    assert y > 0 and float(polygamma(1, y)) == pytest.approx(x, rel=1e-12, abs=0)


def _hand_prior(variances, dfs):
    """limma's fitFDist (Smyth 2004, section 6.2) by hand, for cases with variance > 0 and df > 0:
    e_i = log s_i² − ψ(d_i/2) + log(d_i/2); ē their mean; the prior's spread beyond sampling is
    var(e) (n−1 denominator) − mean ψ'(d_i/2); positive: d0 = 2·ψ'⁻¹(that) (found by bracketing, not
    Newton) and s0² = exp(ē + ψ(d0/2) − log(d0/2)); else d0 = ∞ and s0² = exp(ē)."""
    e = [math.log(v) - digamma(d / 2) + math.log(d / 2) for v, d in zip(variances, dfs)]
    mean = sum(e) / len(e)
    spread = sum((x - mean) ** 2 for x in e) / (len(e) - 1) - sum(polygamma(1, d / 2) for d in dfs) / len(dfs)
    if spread <= 0:
        return math.exp(mean), math.inf
    half = brentq(lambda y: polygamma(1, y) - spread, 1e-8, 1e8, xtol=1e-14, rtol=1e-14)
    d0 = 2 * half
    return math.exp(mean + digamma(d0 / 2) - math.log(d0 / 2)), d0


#: cases whose noise truly differs (log variances over four decades), one with a single df
SPREAD_VARIANCES = [1e-5, 4e-3, 2e-4, 3e-2, 9e-4, 1e-1, 5e-5, 2e-3, 6e-2, 3e-4, 8e-3, 1.5e-3]
SPREAD_DFS = [1, 2, 4, 4, 3, 6, 4, 4, 2, 5, 4, 8]


def test_the_prior_is_limmas_moment_fit_of_the_log_variances():
    fitted = VariancePrior.fit(SPREAD_VARIANCES, SPREAD_DFS)
    variance, df = _hand_prior(SPREAD_VARIANCES, SPREAD_DFS)
    assert math.isfinite(df)
    assert fitted.variance == pytest.approx(variance, rel=1e-9) and fitted.df == pytest.approx(df, rel=1e-9)


def test_exactly_the_minimum_number_of_cases_fits_a_prior():
    assert VariancePrior.MIN_CASES == 10
    fitted = VariancePrior.fit(SPREAD_VARIANCES[:10], SPREAD_DFS[:10])
    variance, df = _hand_prior(SPREAD_VARIANCES[:10], SPREAD_DFS[:10])
    assert fitted.variance == pytest.approx(variance, rel=1e-9) and fitted.df == pytest.approx(df, rel=1e-9)
    assert VariancePrior.fit(SPREAD_VARIANCES[:9], SPREAD_DFS[:9]) is None


def test_cases_without_variance_or_degrees_of_freedom_are_left_out_of_the_fit():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        padded = VariancePrior.fit(SPREAD_VARIANCES + [0.0, 0.002, 0.0], SPREAD_DFS + [4, 0, 0])
    assert padded == VariancePrior.fit(SPREAD_VARIANCES, SPREAD_DFS)
    # nine usable cases plus ones without variance or df: too few
    assert VariancePrior.fit(SPREAD_VARIANCES[:9] + [0.0, 0.002], SPREAD_DFS[:9] + [4, 0]) is None


def test_variances_that_scatter_no_more_than_sampling_give_an_infinite_df_prior():
    variances, dfs = [0.001] * 12, [4] * 12  # no scatter at all: var(e) = 0 < ψ'(2)
    fitted = VariancePrior.fit(variances, dfs)
    expected, df = _hand_prior(variances, dfs)
    assert df == math.inf and fitted.df == math.inf
    assert fitted.variance == pytest.approx(expected, rel=1e-12)  # exp(ē): 0.001 · exp(log 2 − ψ(2))


def test_the_prior_records_its_variance_and_a_finite_df_or_none():
    assert VariancePrior(0.02, 7.5).to_dict() == {"variance": 0.02, "df": 7.5}
    assert VariancePrior(0.02, math.inf).to_dict() == {"variance": 0.02, "df": None}


def test_a_ratio_reads_as_a_signed_percent_change_and_never_minus_zero():
    assert [percent_change(r) for r in (1.042, 0.9, 1.0, 0.99999, None)] == [
        "+4.2%", "-10.0%", "+0.0%", "+0.0%", "---"]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 12, 100, 1001])
def test_percentiles_are_numpys_to_the_last_bit(n):
    samples = np.random.default_rng(n).lognormal(0.0, 1.0, n) * 1e-3
    m = Measurement(list(samples))
    for q in (0, 1, 10, 25, 33.3, 50, 62.5, 75, 90, 95, 99, 99.9, 100):
        assert m.percentile(q) == float(np.percentile(samples, q)), (n, q)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 13, 100])
def test_medians_are_numpys_to_the_last_bit(n):
    rng = np.random.default_rng(n)
    samples = rng.lognormal(0.0, 1.0, n) * 1e-3
    assert median_of(list(samples)) == float(np.median(samples))
    rounds = [list(rng.lognormal(0.0, 1.0, k)) for k in (n, n + 1, max(1, n - 1))]
    m = Measurement.from_rounds(rounds)
    assert m.median == float(np.median(m.samples_ms))
    assert m.round_medians == tuple(float(np.median(r)) for r in rounds)
    assert m.center == float(np.median([float(np.median(r)) for r in rounds]))


def test_a_tiny_alpha_on_imprecise_evidence_gives_no_claim_and_bounded_intervals_not_an_overflow():
    """`ab --alpha 1e-6` on two rounds a side: t's quantile times the error passed exp()'s range
    and the comparison ended in an OverflowError; now the claim is none and the bounds stop at a
    factor of a million either way."""
    from benchcore.compare.tests import LOG_LIMIT, TestResult

    vague = TestResult(0.5, "t-test", standard_error=5.0, df=1.0, log_change=0.01)
    assert vague.detectable_ratio(alpha=1e-6) is None
    low, high = vague.interval(1e-6)
    assert (low, high) == pytest.approx((math.exp(-LOG_LIMIT), math.exp(LOG_LIMIT)))
    precise = TestResult(0.5, "t-test", standard_error=0.01, df=30.0, log_change=0.0)
    assert 1.0 < precise.detectable_ratio(alpha=1e-6) < 1.2 and 0.9 < precise.interval(1e-6)[0] < 1.0
