"""Sequential looks: an A/B run that adds rounds until its quantities are decided keeps the error
rates the report states, because each look spends only its share of alpha
(benchcore.compare.sequential). Simulated with the comparison's own verdict rule on rounds whose
truth is known; the same loop looking at full alpha each time breaks the rate, so the check can
fail."""

import math

import numpy as np
import pytest

from benchcore.compare.sequential import Level, Looks
from benchcore.compare.verdicts import Evidence, compare_timings
from benchcore.errors import UsageError
from benchcore.report.figures import sampled
from benchcore.report.model import Report

ALPHA = 0.05
LOOKS = Looks(planned=3, step=2, horizon=13)


def rounds_timing(medians):
    """A Timing of rounds with two equal samples each: its round medians are exactly `medians`."""
    return sampled([m for m in medians for _ in range(2)], "samples", 0.0, [2] * len(medians))


def run_until_decided(rng, ratio, spread, looks, spend=True, stop=None):
    """One quantity of an interleaved A/B run: round pairs whose log ratio scatters by `spread`
    around log(`ratio`); judged at each look of the schedule, stopped once decided or past
    `stop` rounds (a spent budget). `spend=False` looks at full alpha every time (what a naive
    loop would do)."""
    base = list(np.exp(spread * rng.standard_normal(looks.horizon)))
    new = [b * ratio * math.exp(spread * e) for b, e in zip(base, rng.standard_normal(looks.horizon))]
    verdict = "undecided"
    for n in (n for n in looks.schedule if stop is None or n <= stop):
        evidence = Evidence(0.05, ALPHA, paired=True, looks=looks if spend else None)
        verdict = compare_timings("forward", rounds_timing(base[:n]), rounds_timing(new[:n]), evidence).verdict
        if verdict != "undecided":
            return verdict, n
    return verdict, looks.horizon


def test_the_schedule_looks_after_the_planned_rounds_then_every_step_and_spends_alpha_once():
    assert LOOKS.schedule == [3, 5, 7, 9, 11, 13]
    shares = LOOKS.shares(ALPHA)
    assert [n for n, _ in shares] == LOOKS.schedule
    assert sum(share for _, share in shares) == pytest.approx(ALPHA)
    assert all(share > 0 for _, share in shares)
    assert Looks(3, 2, 8).schedule == [3, 5, 7, 8]  # the horizon is always a look
    # without added rounds: one look, spending all of alpha (a plain comparison)
    assert Looks(3).shares(ALPHA) == [(3, pytest.approx(ALPHA))]
    assert Looks(3).levels(ALPHA) == [Level(3, pytest.approx(ALPHA), pytest.approx(ALPHA))]
    assert LOOKS.at(7, ALPHA) == LOOKS.levels(ALPHA)[:3]
    assert Looks.from_dict(LOOKS.to_dict()) == LOOKS and Looks.from_dict(None) is None
    with pytest.raises(ValueError):
        Looks(3, 2, 2)


def correlated_looks(looks, paths, seed=1):
    """z statistics of `paths` null runs at every look: sums of unit increments over the first
    n rounds, scaled by sqrt(n), so the looks share rounds as a quantity's tests do."""
    sums = np.cumsum(np.random.default_rng(seed).standard_normal((paths, looks.horizon)), axis=1)
    return np.stack([sums[:, n - 1] / math.sqrt(n) for n in looks.schedule], axis=1)


def test_each_look_errs_first_with_its_share_given_the_looks_correlation():
    """The levels are the group-sequential design's: on correlated null looks, the chance that
    look k is the first to call a change is its share (two-sided, and one-sided for `same`);
    later looks test at several times the share a union bound would give them."""
    from scipy.stats import norm

    looks = Looks(3, 2, 33)
    z = correlated_looks(looks, 200_000)
    levels, shares = looks.levels(ALPHA), [share for _n, share in looks.shares(ALPHA)]
    two = np.abs(z) > norm.isf(np.array([level.two_sided for level in levels]) / 2)
    one = z > norm.isf(np.array([level.one_sided for level in levels]))
    for called in (two, one):
        first = np.argmax(called, axis=1)[called.any(axis=1)]
        firsts = np.bincount(first, minlength=len(levels)) / len(z)
        for observed, share in zip(firsts, shares):  # within four binomial deviations
            assert observed == pytest.approx(share, abs=4 * math.sqrt(share / len(z)))
        assert called.any(axis=1).mean() == pytest.approx(ALPHA, abs=4 * math.sqrt(ALPHA / len(z)))
    assert levels[-1].two_sided > 5 * shares[-1] and levels[0].two_sided == pytest.approx(shares[0])


def test_the_sequential_p_value_is_valid_on_correlated_looks():
    """The smallest level whose design calls one of the looks: P(p <= u) = u at every u the
    false-discovery adjustment reads; scaling each look's p by alpha over its level at alpha
    instead would be too small in the tail (the failure this guards against)."""
    from scipy.stats import norm

    looks = Looks(3, 2, 33)
    p = 2 * norm.sf(np.abs(correlated_looks(looks, 100_000, seed=2)))
    p_star = np.array([looks.p_value(list(zip(looks.schedule, row))) for row in p])
    scaled = np.min(p * ALPHA / np.array([level.two_sided for level in looks.levels(ALPHA)]), axis=1)
    for u in (ALPHA, 0.01, 0.001):
        binomial = 4 * math.sqrt(u / len(p))
        assert (p_star <= u).mean() == pytest.approx(u, abs=binomial + 0.02 * u)
    assert (scaled <= 0.01).mean() > 0.01 + 4 * math.sqrt(0.01 / len(p))
    # one look of a design alone is stricter than its place in the design
    assert looks.p_value([(33, 0.0119)]) == pytest.approx(ALPHA, rel=0.02)
    assert looks.p_value([(3, 0.0119)]) > ALPHA
    # it grows with p across the whole range, beyond the tabulated designs at both ends
    read = [looks.p_value([(33, p)]) for p in (1e-14, 1e-6, 0.001, 0.01, 0.1, 0.5, 0.9)]
    assert read == sorted(read) and 0 < read[0] < 1e-12 and read[-1] == 1.0


def test_optional_stopping_keeps_false_changes_below_alpha_and_naive_looks_do_not():
    """A/A quantities judged at every look until decided: with spending, the share called
    slower or faster stays below alpha; looking at full alpha every time exceeds it beyond the
    binomial bound over 400 runs (round pairs scattering by ~20%, so most runs reach many looks)."""
    runs = 400
    rng = np.random.default_rng(7)
    spent = [run_until_decided(rng, 1.0, 0.15, LOOKS)[0] for _ in range(runs)]
    rng = np.random.default_rng(7)
    naive = [run_until_decided(rng, 1.0, 0.15, LOOKS, spend=False)[0] for _ in range(runs)]
    false_spent = sum(v in ("slower", "faster") for v in spent) / runs
    false_naive = sum(v in ("slower", "faster") for v in naive) / runs
    bound = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / runs)
    assert false_spent <= ALPHA
    assert false_naive > bound


def test_the_looks_decide_what_the_planned_rounds_leave_open():
    """A/A quantities whose round pairs scatter by ~4%: three rounds decide few of them `same`
    within ±5%; the looks up to 13 rounds decide most, at the round each needed."""
    rng = np.random.default_rng(11)
    ended = [run_until_decided(rng, 1.0, 0.03, LOOKS) for _ in range(200)]
    assert sum(v == "same" for v, _n in ended) / len(ended) >= 0.8
    assert sum(n == 3 and v == "same" for v, n in ended) / len(ended) < 0.5
    assert sum(v in ("slower", "faster") for v, _n in ended) / len(ended) <= ALPHA


def test_the_default_horizon_lets_the_budget_end_the_run_and_decides_more():
    """ab's default horizon (--rounds + 30) against the one before short added rounds (+ 20),
    both stopped at 33 rounds, where a 2x budget of short rounds reaches: A/A quantities whose
    round pairs scatter by 6% are placed within ±5% more often, since the nearer horizon has
    spent all of alpha by 23 rounds (simulated: 97.5% against 82.5%); and where the budget stops
    a run at 23 rounds, the farther horizon costs little (81.7% against 82.5%)."""
    from benchcore.cli.ab import DEFAULT_EXTRA_ROUNDS

    def decided_same(horizon, stop, runs=120):
        rng = np.random.default_rng(1)
        ended = [run_until_decided(rng, 1.0, 0.06, Looks(3, 2, horizon), stop=stop)[0] for _ in range(runs)]
        return sum(v == "same" for v in ended) / runs

    assert decided_same(3 + DEFAULT_EXTRA_ROUNDS, 33) > decided_same(23, 33) + 0.1
    assert decided_same(3 + DEFAULT_EXTRA_ROUNDS, 23) > decided_same(23, 23) - 0.03


def test_optional_stopping_keeps_false_sames_below_alpha():
    """A true +8% change (beyond the 5% margin) is called `same` at some look less than alpha of
    the time; it is called slower most of the time by the horizon."""
    runs = 400
    rng = np.random.default_rng(3)
    verdicts = [run_until_decided(rng, 1.08, 0.06, LOOKS)[0] for _ in range(runs)]
    assert sum(v == "same" for v in verdicts) / runs <= ALPHA
    assert sum(v == "slower" for v in verdicts) / runs >= 0.6


def test_a_quantity_decided_at_a_later_look_says_so_and_tests_at_its_level():
    rng = np.random.default_rng(5)
    base = list(np.exp(0.04 * rng.standard_normal(7)))
    new = [b * 1.01 * math.exp(0.04 * e) for b, e in zip(base, rng.standard_normal(7))]
    m = compare_timings("forward", rounds_timing(base), rounds_timing(new), Evidence(0.05, ALPHA, paired=True, looks=LOOKS))
    assert "3 looks (at 3, 5, 7 rounds), p the sequential p-value over them" in m.reason
    levels = {level.rounds: level.two_sided for level in LOOKS.levels(ALPHA)}
    # the last look's claim is made at its own level, not at alpha
    one_look = compare_timings("forward", rounds_timing(base), rounds_timing(new), Evidence(0.05, ALPHA, paired=True))
    assert m.detectable_ratio > one_look.detectable_ratio and levels[7] < ALPHA


def test_two_reports_with_different_schedules_are_not_one_ab_run():
    from benchcore.compare.verdicts import looks_of

    a = Report("opbench", settings={"sequential": LOOKS.to_dict()})
    b = Report("opbench", settings={"sequential": Looks(3, 2, 9).to_dict()})
    assert looks_of(a, a) == LOOKS and looks_of(Report("opbench"), Report("opbench")) is None
    with pytest.raises(UsageError, match="different schedules of added rounds"):
        looks_of(a, b)


# --------------------------------------------------------------------------- the A/B run's added rounds

def _case(name, base_medians, new_medians, scale=1.0):
    from benchcore.measure.case import CaseSpec
    from benchcore.measure.measurement import Measurement
    from benchcore.report.model import CaseResult

    spec = CaseSpec("opbench", name, {"op": name, "category": "unary", "inputs": {}})
    return [CaseResult(spec, "ok", {"forward": Measurement.from_rounds([[m * scale, m * scale] for m in medians]).to_dict()})
            for medians in (base_medians, new_medians)]


def _reports(cases):
    env = {"python": "3.11", "cpu_model": "Test CPU", "cpu_count": 2}
    return {side: Report("opbench", dict(env, ab_side=side), {}, [pair[i] for pair in cases])
            for i, side in enumerate(("base", "new"))}


def _asker(cases, rounds=3, horizon=7, budget=("x", 2.0), planned_s=10.0):
    from types import SimpleNamespace

    from benchcore.cli.ab import AddedRounds
    from benchcore.suite import Suite

    said = []
    args = SimpleNamespace(threshold=5.0, alpha=ALPHA, budget=budget, added_round_ms=100.0)
    asker = AddedRounds(Suite("opbench"), args, Looks(3, 2, horizon), lambda measured: _reports(cases), len(cases),
                        said.append)
    asker.rounds, asker.started = rounds, asker.started - planned_s
    return asker, said


def test_only_the_cases_with_an_undecided_quantity_get_more_rounds():
    cases = [_case("slower", [1.0, 1.01, 0.99], [2.0, 2.03, 1.97]),     # decided: slower
             _case("same", [1.0, 1.001, 0.999], [1.0, 1.0015, 0.9995]),  # decided: same within 5%
             _case("open", [1.0, 1.3, 0.8], [1.05, 1.1, 1.0])]           # undecided
    asker, said = _asker(cases)
    assert [(spec.name, short) for spec, short in asker({})] == [("open", None)]  # 1 ms calls: a full round fits
    assert asker.rounds == 5 and said == ["1 of 3 quantities undecided after 3 rounds a side: adding 2 rounds a side "
                                          "to their 1 case(s)"]


def test_the_horizon_and_the_budget_stop_the_added_rounds():
    cases = [_case("open", [1.0, 1.3, 0.8], [1.05, 1.1, 1.0])]
    asker, said = _asker(cases, rounds=7, horizon=7)
    assert asker({}) == [] and said[-1].endswith("--max-rounds 7 reached")
    asker, said = _asker(cases, budget=("s", 1.0))  # a step of 1 case costs ~6.7 s at 10 s for 3 case-rounds
    assert asker({}) == [] and said[-1].endswith("--budget 1 s spent")
    asker, said = _asker([_case("same", [1.0, 1.001, 0.999], [1.0, 1.0015, 0.9995])])
    assert asker({}) == [] and said == []  # nothing left to decide: nothing said


def test_a_slow_case_gets_short_added_rounds_and_the_budget_counts_them_short():
    from benchcore.execute.rounds import Short, short_round

    assert short_round(40.0, 25, 33) == Short(3, 5)        # 100 ms holds 3 calls: the least a round has
    assert short_round(14.0, 25, 33) == Short(8, 8)        # as many as fit in 100 ms, warmup likewise
    assert short_round(1.0, 25, 33) is None                 # a planned round's calls fit: as planned
    assert short_round(40.0, 25, 33, round_ms=0) is None   # --added-round-ms 0: added rounds as planned ones
    assert short_round(40.0, 2, 4) is None                 # never more calls than a planned round
    slow = [_case("slow", [1.0, 1.3, 0.8], [1.05, 1.1, 1.0], scale=40.0)]  # 40-52 ms calls
    # full rounds of it (58 calls of ~45 ms a side) cost ~10 s a step; short ones (8 calls) ~1.6 s
    asker, said = _asker(slow, budget=("s", 6.0), planned_s=1.0)
    assert [(spec.name, short) for spec, short in asker({})] == [("slow", Short(3, 5))]
    assert said[-1].endswith("to their 1 case(s), 1 of them short")
    asker, said = _asker(slow, budget=("s", 6.0), planned_s=1.0)
    asker.sides.added_round_ms = 0.0  # as long as planned rounds: the same step no longer fits the budget
    assert asker({}) == [] and said[-1].endswith("--budget 6 s spent")


def test_the_budget_estimate_follows_what_the_last_step_really_took():
    cases = [_case("open", [1.0, 1.3, 0.8], [1.05, 1.1, 1.0])]
    asker, said = _asker(cases, budget=("s", 30.0))
    assert asker({})
    estimate = asker.last_step[1]  # ~6.9 s: 3.3 s of set-up a case-round (10 s for 3), twice
    assert 6.0 < estimate < 8.0
    # the step just added took 20 s: with 20 of 30 s spent, another step as estimated (6.9 s) would
    # fit, but one as long as the last did (20 s) would not
    asker.last_step = (asker.last_step[0] - 20.0, estimate)
    asker.started -= 20.0
    assert asker({}) == [] and said[-1].endswith("--budget 30 s spent")


def test_budget_and_max_rounds_are_read_or_refused_in_one_line():
    import argparse
    from types import SimpleNamespace

    from benchcore.cli.ab import budget, looks_for

    assert budget("2x") == ("x", 2.0) and budget("600") == ("s", 600.0) and budget("0") == ("s", 0.0)
    for bad in ("-1", "nan", "soon", "inf"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not a budget"):
            budget(bad)
    assert looks_for(3, SimpleNamespace(max_rounds=None, budget=("x", 2.0))) == Looks(3, 2, 33)
    assert looks_for(3, SimpleNamespace(max_rounds=9, budget=("s", 0.0))) is None  # today's ab
    assert looks_for(1, SimpleNamespace(max_rounds=None, budget=("x", 2.0))) is None  # counted ab: one round
    with pytest.raises(UsageError, match="--max-rounds 2 is below --rounds 3"):
        looks_for(3, SimpleNamespace(max_rounds=2, budget=("x", 2.0)))


def test_rare_slow_processes_neither_raise_false_calls_nor_keep_a_pair_from_being_placed():
    """A/A quantities whose processes run at 2.2x in one round of twenty on either side (the
    per-process speeds of small MXNet calls on this VM), round pairs otherwise scattering by 3%:
    over looks up to 33 rounds, at most alpha of them are called slower or faster, and most are
    placed within ±5% (93% simulated; 51% untrimmed): the paired test trims the odd rounds once
    it has ten a side."""
    runs, looks = 300, Looks(3, 2, 33)
    rng = np.random.default_rng(17)
    verdicts = []
    def side():
        speed = np.where(rng.uniform(size=looks.horizon) < 0.05, 2.2, 1.0)
        return speed * np.exp(0.02 * rng.standard_normal(looks.horizon))

    for _ in range(runs):
        machine = np.exp(0.03 * rng.standard_normal(looks.horizon))  # what a pair's rounds share
        base, new = machine * side(), machine * side()
        verdict = "undecided"
        for n in looks.schedule:
            verdict = compare_timings("forward", rounds_timing(base[:n]), rounds_timing(new[:n]),
                                      Evidence(0.05, ALPHA, paired=True, looks=looks)).verdict
            if verdict != "undecided":
                break
        verdicts.append(verdict)
    assert sum(v in ("slower", "faster") for v in verdicts) / runs <= ALPHA
    assert sum(v == "same" for v in verdicts) / runs >= 0.8
