"""Bimodal quantities: two speeds across processes (round medians at two levels) or within a
round (two clusters of samples), found on synthetic rounds and reported in the Measurement's
JSON; compare calls a bimodal quantity slower or faster only beyond both of its speeds."""

import numpy as np
import pytest

from benchcore.measure.measurement import Measurement
from benchcore.measure.modes import ACROSS, WITHIN, beyond_both_speeds, of, split
from tests.benchcore.test_compare import compare, make_report, rounds_result


def rounds(levels, n=20, noise=0.02, seed=0):
    rng = np.random.default_rng(seed)
    return Measurement.from_rounds([list(level * (1 + noise * rng.standard_normal(n))) for level in levels])


def test_split_finds_the_widest_gap_when_it_reaches_the_mode_ratio():
    assert split([0.62, 0.65, 2.93]) == 2
    assert split([1.0, 1.1, 1.2]) is None
    assert split([1.0, 1.0, 1.0, 5.0], smallest=2) is None  # one high value is not a cluster of two


def test_rounds_at_two_levels_are_bimodal_across_processes():
    # broadcast_add on (10000, 1): 4–6 µs in some fresh processes, 8–14 µs in others
    m = rounds([0.005, 0.012, 0.0045, 0.011, 0.005])
    found = of(m)
    assert found.kind == ACROSS and found.rounds == (2, 4)
    assert found.fast_ms == pytest.approx(0.005, rel=0.1) and found.slow_ms == pytest.approx(0.0115, rel=0.1)
    data = m.to_dict()["modes"]
    assert data["kind"] == ACROSS and data["text"].startswith("bimodal across processes: ")
    assert data["text"].endswith(" µs (rounds 2, 4 slow)")


def test_rounds_scattered_like_noise_are_not_bimodal():
    assert of(rounds([1.0, 1.1, 0.95, 1.05, 1.2])) is None
    # an outlier round whose own samples are as wide as the gap: noise, not a second speed
    wide = list(np.linspace(0.5, 1.5, 20))
    assert of(Measurement.from_rounds([wide, wide, list(np.linspace(0.8, 2.4, 20))])) is None
    # two rounds only say how far apart they are
    assert of(rounds([1.0, 3.0])) is None
    assert "modes" not in rounds([1.0, 1.1, 0.95]).to_dict()


def test_a_round_whose_calls_alternate_two_speeds_is_bimodal_within_the_round():
    # the LeakyReLU elu round: calls alternating 0.45 ms and 2–4 ms
    rng = np.random.default_rng(1)
    slow_round = [0.45 if i % 2 else float(rng.uniform(2, 4)) for i in range(20)]
    m = Measurement.from_rounds([list(0.62 + 0.01 * rng.standard_normal(20)), slow_round,
                                 list(0.65 + 0.01 * rng.standard_normal(20))])
    found = of(m)
    assert found.kind == WITHIN and found.rounds == (2,)
    assert found.fast_ms == pytest.approx(0.45) and 2 < found.slow_ms < 4
    # a few slow calls are outliers, not a second cluster
    assert of(Measurement([1.0] * 18 + [3.0, 3.1])) is None


def test_beyond_both_speeds():
    base = rounds([1.0, 1.0, 2.6, 1.0, 2.6])
    assert beyond_both_speeds(base, rounds([1.0, 2.6, 2.6, 2.6, 2.6]), 0.05) == 0
    assert beyond_both_speeds(base, rounds([3.0, 3.0, 7.8, 3.0, 7.8]), 0.05) == 1
    assert beyond_both_speeds(base, rounds([0.3, 0.3, 0.8, 0.3, 0.3]), 0.05) == -1


def test_a_side_that_drew_the_slow_speed_more_often_is_no_regression():
    base = rounds_result("broadcast_add", [1.0, 1.0, 1.0, 2.6, 1.0, 1.0], noise=0.01, seed=1)
    new = rounds_result("broadcast_add", [2.6, 2.6, 1.0, 2.6, 2.6, 2.6], noise=0.01, seed=2)
    m = compare(make_report([base]), make_report([new])).cases[0].metrics[0]
    assert m.verdict == "noisy"
    assert m.bimodal.startswith("base bimodal across processes") and "new bimodal across processes" in m.bimodal
    assert "the sides' speeds overlap, so slower is not called" in m.reason


def test_a_change_beyond_both_speeds_is_still_called():
    base = rounds_result("broadcast_add", [1.0, 1.0, 2.6, 1.0, 2.6], noise=0.01, seed=1)
    new = rounds_result("broadcast_add", [3.0, 3.0, 7.8, 3.0, 7.8], noise=0.01, seed=2)
    m = compare(make_report([base]), make_report([new])).cases[0].metrics[0]
    assert m.verdict == "slower" and m.reason.startswith("base bimodal across processes")
