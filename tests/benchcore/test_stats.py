import math
import warnings

import numpy as np
import pytest
from scipy.stats import ttest_ind

from benchcore import stats
from benchcore.stats import Measurement, mann_whitney, median_confidence_ranks, round_sizes_of, t_on_logs, within_step


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
# (scripts/mutation: each test below fails for an edit of stats.py that the others let through)


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
    assert mann_whitney([1.0, 1.0], [1.0, 1.0]) == stats.TestResult(1.0, "mann-whitney")
    assert mann_whitney([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).method == "mann-whitney"
    equal = t_on_logs([2.0, 2.0], [4.0, 4.0])
    assert equal == stats.TestResult(0.0, "t-log", (pytest.approx(2.0), pytest.approx(2.0)))
    varied = t_on_logs([1.0, 1.1, 0.9], [2.0, 2.2, 1.8])
    assert varied.method == "t-log" and varied.ratio_ci95[0] < 2.0 < varied.ratio_ci95[1]
    moderated = t_on_logs([1.0, 1.1, 0.9], [2.0, 2.2, 1.8], stats.VariancePrior(0.01, 10.0))
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
    expected = math.exp((student_t.ppf(0.975, noisy.df) + student_t.ppf(0.8, noisy.df)) * noisy.standard_error)
    assert noisy.df == 4 and noisy.detectable_ratio() == pytest.approx(expected)
    assert 1.0 < quiet.detectable_ratio() < 1.1 < noisy.detectable_ratio()
    assert quiet.detectable_ratio(alpha=0.01) > quiet.detectable_ratio(alpha=0.05)
    assert mann_whitney([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).detectable_ratio() is None
