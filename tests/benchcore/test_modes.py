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


def test_short_rounds_are_judged_together_when_one_of_them_flips_between_two_speeds():
    # the quickstart's LeakyReLU gelu forward (-r 20 over 3 rounds: 7, 7, 6 calls), per-call ms:
    # round 1 alternated 16 and 0.8 ms; alone, no round is long enough, and across rounds the slow
    # round's own fast calls overlap the fast rounds (its round spread read 1,796%)
    gelu = [[15.69, 0.848, 15.879, 0.837, 16.447, 0.742, 16.372],
            [0.855, 0.799, 0.854, 0.774, 0.721, 0.802, 0.858],
            [0.828, 0.83, 0.814, 0.838, 0.815, 0.877]]
    found = of(Measurement.from_rounds(gelu))
    assert found.kind == WITHIN and found.rounds == (1,)
    assert found.fast_ms == pytest.approx(0.83, rel=0.02) and found.slow_ms == pytest.approx(16.1, rel=0.02)
    assert found.describe() == "bimodal within a round: 829 µs and 16.1 ms (round 1 with both speeds)"


def test_short_rounds_with_outliers_or_a_split_between_rounds_are_not_bimodal_within():
    rng = np.random.default_rng(3)
    steady = [list(1.0 + 0.02 * rng.standard_normal(7)) for _ in range(3)]
    assert of(Measurement.from_rounds(steady)) is None
    # two slow calls in 20 are outliers (under a fifth of the samples), wherever they fall
    outliers = [r[:] for r in steady]
    outliers[0][2], outliers[1][4] = 2.5, 2.6
    assert of(Measurement.from_rounds(outliers)) is None
    outliers[0][4] = 2.7  # two in one round, a third elsewhere: still 3 of 20
    assert of(Measurement.from_rounds(outliers)) is None
    # no round holds both speeds: a split between rounds is across_rounds' to judge (here its
    # quartile test refuses it: the slow round is as wide as the gap)
    between = [list(np.linspace(1.0, 1.1, 7)), list(np.linspace(1.0, 1.1, 7)), list(np.linspace(1.2, 3.0, 6))]
    found = of(Measurement.from_rounds(between))
    assert found is None or found.kind == ACROSS
    # too few samples in all to judge (the default sweep's 2, 2, 1 calls a round)
    assert of(Measurement.from_rounds([[1.0, 16.0], [1.0, 16.0], [1.0]])) is None


def test_beyond_both_speeds():
    base = rounds([1.0, 1.0, 2.6, 1.0, 2.6])
    assert beyond_both_speeds(base, rounds([1.0, 2.6, 2.6, 2.6, 2.6]), 0.05) == 0
    assert beyond_both_speeds(base, rounds([3.0, 3.0, 7.8, 3.0, 7.8]), 0.05) == 1
    assert beyond_both_speeds(base, rounds([0.3, 0.3, 0.8, 0.3, 0.3]), 0.05) == -1


def test_a_side_that_drew_the_slow_speed_more_often_is_no_regression():
    base = rounds_result("broadcast_add", [1.0, 1.0, 1.0, 2.6, 1.0, 1.0], noise=0.01, seed=1)
    new = rounds_result("broadcast_add", [2.6, 2.6, 1.0, 2.6, 2.6, 2.6], noise=0.01, seed=2)
    m = compare(make_report([base]), make_report([new])).cases[0].metrics[0]
    assert m.verdict == "undecided"
    assert m.bimodal.startswith("base bimodal across processes") and "new bimodal across processes" in m.bimodal
    assert "the sides' speeds overlap, so slower is not called" in m.reason


def test_a_change_beyond_both_speeds_is_still_called():
    base = rounds_result("broadcast_add", [1.0, 1.0, 2.6, 1.0, 2.6], noise=0.01, seed=1)
    new = rounds_result("broadcast_add", [3.0, 3.0, 7.8, 3.0, 7.8], noise=0.01, seed=2)
    m = compare(make_report([base]), make_report([new])).cases[0].metrics[0]
    assert m.verdict == "slower" and m.reason.startswith("base bimodal across processes")


def test_the_modes_figures_script_runs_every_model_and_plan():
    """lab/figures/modes_figures prints a share per model and round plan (figures, not asserted)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "lab" / "figures" / "modes_figures"
    done = subprocess.run([sys.executable, str(script), "--draws", "20", "--sweeps", "2"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("3 rounds: 2, 2, 1") == 5 and "two speeds 2x apart, per process" in done.stdout
    assert done.stdout.count("no labels: ") == 3  # compare with the rules and without, at three spreads


def ab_pair(base_levels, new_levels, noise=0.01):
    """The base and new reports of one interleaved A/B run of broadcast_add at these round levels."""
    from tests.benchcore.test_compare import ENV

    base = rounds_result("broadcast_add", base_levels, noise=noise, seed=1)
    new = rounds_result("broadcast_add", new_levels, noise=noise, seed=2)
    return (make_report([base], env=dict(ENV, ab_side="base")), make_report([new], env=dict(ENV, ab_side="new")))


def test_a_rare_slow_round_on_each_side_holds_no_verdict_back_once_the_paired_test_trims_it():
    """25 rounds a side of an A/B run, one at the slow speed on each side: the paired test cuts
    two ratios from each end, so a +25% change is called (before: held back as overlapping
    speeds, p = 1e-7), and an A/A pair is placed within the margin."""
    rng = np.random.default_rng(3)
    levels = list(1.0 + 0.03 * rng.standard_normal(25))
    base = [2.6 if i == 17 else level for i, level in enumerate(levels)]
    changed = [1.25 * level * (2.1 if i == 5 else 1.0) for i, level in enumerate(levels)]
    m = compare(*ab_pair(base, changed)).cases[0].metrics[0]
    assert m.verdict == "slower" and m.test_method == "paired-trimmed-t-log"
    assert "its odd rounds (1 base, 1 new, of 25) are trimmed from the paired test (it cuts 2 from each end)" in m.reason
    same = [level * (2.6 if i == 5 else 1.0) for i, level in enumerate(levels)]
    assert compare(*ab_pair(base, same)).cases[0].metrics[0].verdict == "same"


def test_odd_rounds_beyond_what_the_paired_test_trims_still_hold_a_change_back():
    """Ten rounds a side (the paired test cuts one ratio from each end), the slow speed drawn in
    one base round and six new ones: the side that drew it more often is still no regression."""
    base = [2.6 if i == 3 else 1.0 for i in range(10)]
    new = [2.6 if i in (0, 1, 4, 6, 8, 9) else 1.0 for i in range(10)]
    m = compare(*ab_pair(base, new)).cases[0].metrics[0]
    assert m.verdict == "undecided" and "the sides' speeds overlap, so slower is not called" in m.reason
    assert "trimmed" not in m.reason
