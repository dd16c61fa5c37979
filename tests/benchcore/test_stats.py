import math

import pytest

from benchcore.stats import Measurement, median_confidence_ranks


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
