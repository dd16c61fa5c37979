"""drift: group shifts per phase × category, the reference's compute–memory bracket, and the
scatter between sweeps, on synthetic reports with known machine and build changes."""

import math

import numpy as np
import pytest

from benchcore.compare.tests import t_on_logs
from benchcore.measure.measurement import Measurement
from benchcore.views.markdown import comparison_markdown
from tests.benchcore.test_compare import ENV, compare, make_report, op_result

ROUNDS = 5


def reference_of(compute, memory, seed, rounds=ROUNDS):
    """A machine reference whose compute part ran `compute` times and memory part `memory`
    times as long as a base machine's."""
    rng = np.random.default_rng(seed)
    parts = {part: Measurement.from_rounds([list(scale * base * (1 + 0.002 * rng.standard_normal(8)))
                                            for _ in range(rounds)]).to_dict()
             for part, base, scale in (("compute", 0.8, compute), ("memory", 20.0, memory))}
    return {"status": "ok", "version": 1, **parts}


def phased(name, forward, backward, rng, spread=0.02, category="unary", rounds=ROUNDS):
    """A case whose forward and backward round medians scatter by `spread` around the levels given."""
    result = op_result(name, None, category=category)
    for metric, level in (("forward", forward), ("backward", backward)):
        if level is not None:
            medians = level * np.exp(spread * rng.standard_normal(rounds))
            result.metrics[metric] = Measurement.from_rounds([list(m * (1 + 0.002 * rng.standard_normal(6)))
                                                              for m in medians]).to_dict()
    return result


def sweep(cases, seed, reference=None, side=None):
    """cases: [(name, forward level, backward level, category)] → a report."""
    rng = np.random.default_rng(seed)
    env = dict(ENV)
    if reference is not None:
        env["system"] = {"reference": reference_of(*reference, seed=seed)}
    if side:
        env["ab_side"] = side
    return make_report([phased(n, f, b, rng, category=c) for n, f, b, c in cases], env=env)


def alarms(comparison):
    return [c.name for c in comparison.cases if c.verdict in ("faster", "slower")]


def groups(comparison):
    return {g.name: g for g in comparison.drift.groups}


def test_a_machine_that_sped_forwards_and_backwards_unequally_raises_no_alarm():
    """What two sequential 10-round sweeps showed: the machine 19% faster, memory-bound forwards
    sped up by a fifth and backwards by 8%, its reference's compute part by 9% and memory part by
    21%. One factor for every quantity turned that into dozens of verdicts; a shift per phase,
    each within the reference's bracket, is the machine's."""
    base = [(f"op{i}", 1.0 + i % 7, 2.0 + i % 5, "unary") for i in range(40)]
    new = [(n, f * 0.80, b * 0.92, c) for n, f, b, c in base]
    result = compare(sweep(base, 1, (1.0, 1.0)), sweep(new, 2, (0.91, 0.79)))
    g = groups(result)
    assert set(g) == {"forward · unary", "backward · unary"}
    assert g["forward · unary"].removed_ratio == pytest.approx(0.80, rel=0.02)
    assert g["backward · unary"].removed_ratio == pytest.approx(0.92, rel=0.02)
    assert all(x.basis == "machine" for x in g.values()) and result.drift.basis == "machine"
    assert alarms(result) == []
    assert result.gate_verdict(10)["passed"]
    reasons = [m.reason for c in result.cases for m in c.metrics]
    assert all("(forward · unary) divided out" in r for r in reasons[::2])
    assert all("(backward · unary) divided out" in r for r in reasons[1::2])


def test_categories_of_one_phase_that_moved_unequally_get_a_shift_each():
    """Forwards of one category 20% faster, of another 10%: one factor for both (their median)
    would sit more than the threshold away from each, and call them all changed."""
    base = [(f"op{i}", 1.0 + i % 7, None, "unary" if i < 30 else "binary_broadcast") for i in range(60)]
    new = [(n, f * (0.80 if c == "unary" else 0.90), b, c) for n, f, b, c in base]
    result = compare(sweep(base, 3, (1.0, 1.0)), sweep(new, 4, (0.91, 0.79)))
    g = groups(result)
    assert g["forward · unary"].removed_ratio == pytest.approx(0.80, rel=0.02)
    assert g["forward · binary_broadcast"].removed_ratio == pytest.approx(0.90, rel=0.02)
    assert alarms(result) == []
    one_factor = result.drift.cases_ratio
    assert abs(0.80 / one_factor - 1) > 0.05 or abs(0.90 / one_factor - 1) > 0.05


def test_a_small_category_borrows_its_phases_shift_and_too_few_in_all_borrow_nothing():
    base = [(f"op{i}", 1.0, 2.0, "unary") for i in range(12)] + [(f"s{i}", 0.01, None, "shape") for i in range(4)]
    new = [(n, f * 1.06, None if b is None else b * 1.06, c) for n, f, b, c in base]
    result = compare(sweep(base, 5, (1.0, 1.0)), sweep(new, 6, (1.06, 1.06)))
    assert result.drift.assignment == {"forward · unary": "forward · unary", "forward · shape": "forward",
                                       "backward · unary": "backward · unary"}
    assert groups(result)["forward"].quantities == 16
    assert "A category with fewer than 10 quantities of a phase is judged by that phase's shift" in \
        comparison_markdown(result)
    assert result.drift.group_of("forward", "shape").name == "forward"
    assert alarms(result) == []
    few = [(f"op{i}", 1.0, None, "unary") for i in range(6)]
    small = compare(sweep(few, 7, (1.0, 1.0)), sweep([(n, 1.06, b, c) for n, _f, b, c in few], 8, (1.06, 1.06)))
    assert small.drift.groups == [] and small.drift.basis == "reference"
    assert small.drift.removed_ratio == pytest.approx(1.06, rel=0.01)


def test_a_phase_the_build_slowed_beyond_the_machine_is_the_builds_and_fails_the_gate():
    """Every backward 30% slower (an autograd change), the machine unchanged: only that group
    gets a build verdict, the forwards stay quiet, and the gate names the group."""
    base = [(f"op{i}", 1.0 + i % 3, 2.0 + i % 4, "unary") for i in range(30)]
    new = [(n, f, b * 1.30, c) for n, f, b, c in base]
    result = compare(sweep(base, 9, (1.0, 1.0)), sweep(new, 10, (1.0, 1.01)))
    g = groups(result)
    assert g["forward · unary"].basis == "machine" and g["forward · unary"].verdict in ("same", "undecided")
    back = g["backward · unary"]
    assert back.basis == "reference" and back.verdict == "slower" and back.build_ratio == pytest.approx(1.286, rel=0.03)
    assert back.removed_ratio == pytest.approx(1.01, rel=0.005)  # the bracket's nearest end only
    assert result.drift.basis == "reference" and "backward · unary +28.6%" in result.drift.reason
    assert {m.metric: m.verdict for m in result.cases[0].metrics} == {"forward": "same", "backward": "slower"}
    gate = result.gate_verdict(10)
    assert not gate["passed"] and gate["build_wide_group"] == "backward · unary"
    text = comparison_markdown(result)
    assert "fewer than 10 quantities" not in text  # every group is a phase × category
    assert "| backward · unary | 30 " in text and "| reference | +28.6%" in text
    assert "Machine reference: compute +0.0%, memory +1.0%" in text


def test_a_reference_that_moved_while_the_cases_did_not_makes_no_build_verdict():
    """An A/A pair measured here: numpy's reference 19% and 22% slower in the second sweep, the
    framework's cases unchanged. The reference stands for the cases only so well
    (REFERENCE_TRANSFER_SD): no build-wide verdict, nothing divided out but the cases' own shift."""
    base = [(f"op{i}", 1.0 + i % 7, 2.0 + i % 5, "unary") for i in range(40)]
    result = compare(sweep(base, 21, (1.0, 1.0)), sweep(base, 22, (1.19, 1.22)))
    assert all(g.basis == "machine" and g.verdict == "undecided" for g in result.drift.groups)
    assert all(g.removed_ratio == pytest.approx(1.0, abs=0.02) for g in result.drift.groups)
    assert alarms(result) == [] and result.gate_verdict(10)["passed"]


def test_a_shift_just_outside_the_bracket_but_within_the_threshold_is_the_machines():
    base = [(f"op{i}", 1.0, None, "unary") for i in range(20)]
    result = compare(sweep(base, 11, (1.0, 1.0)), sweep([(n, 1.13, b, c) for n, _f, b, c in base], 12, (1.02, 1.10)))
    (g,) = result.drift.groups
    assert g.basis == "machine" and g.removed_ratio == pytest.approx(1.13, rel=0.02)
    assert g.build_ratio == pytest.approx(1.13 / 1.10, rel=0.02) and alarms(result) == []


# --------------------------------------------------------------------------- scatter between sweeps


def scattered(n, seed, tau, slow=()):
    """n cases whose level in this sweep is off by a per-case factor exp(tau·N(0,1)) that its
    rounds do not see (they scatter by 2% around it); the cases in `slow` 40% slower."""
    rng = np.random.default_rng(seed)
    return [(f"op{i}", math.exp(tau * rng.standard_normal()) * (1.4 if i in slow else 1.0), None, "unary")
            for i in range(n)]


def test_scatter_between_sweeps_that_the_rounds_do_not_see_is_measured_and_added():
    """Each case 6% apart between the two sweeps, its rounds 2% apart: judged on the rounds
    alone, a third of an A/A pair would be "changed"; with the scatter the comparison's own
    cases measure, none is."""
    base, new = sweep(scattered(200, 13, 0.06), 13, (1.0, 1.0)), sweep(scattered(200, 14, 0.06), 14, (1.0, 1.0))
    result = compare(base, new)
    assert result.drift.between_sweeps == pytest.approx(0.06 * math.sqrt(2), rel=0.25)
    assert len(alarms(result)) <= 2
    assert "scatter between the sweeps added" in result.cases[0].metrics[0].reason
    assert "Scatter between the sweeps beyond the rounds' errors: ±" in comparison_markdown(result)
    on_rounds_alone = [t_on_logs(Measurement.from_dict(b.metrics["forward"]).round_medians,
                                 Measurement.from_dict(n.metrics["forward"]).round_medians)
                       for b, n in zip(base.results, new.results)]
    assert sum(t.p_value < 0.05 and abs(math.log(t.ratio_ci95[0] * t.ratio_ci95[1]) / 2) > math.log(1.05)
               for t in on_rounds_alone) >= 40


def test_cases_that_did_change_do_not_count_as_scatter():
    """20% of the cases 40% slower: set aside as changed, they leave the scatter where the
    unchanged ones put it, and are found."""
    slow = set(range(0, 200, 5))
    base = sweep(scattered(200, 15, 0.03), 15, (1.0, 1.0))
    plain = compare(base, sweep(scattered(200, 16, 0.03), 16, (1.0, 1.0)))
    changed = compare(base, sweep(scattered(200, 16, 0.03, slow), 16, (1.0, 1.0)))
    assert changed.drift.between_sweeps == pytest.approx(plain.drift.between_sweeps, rel=0.15)
    found = {c.name for c in changed.cases if c.verdict == "slower"}
    assert len(found & {f"op{i}" for i in slow}) >= 36 and len(found - {f"op{i}" for i in slow}) <= 2


def test_residuals_that_fit_their_rounds_add_no_scatter():
    cases = [(f"op{i}", 1.0 + i % 9, None, "unary") for i in range(100)]
    result = compare(sweep(cases, 17, (1.0, 1.0)), sweep(cases, 18, (1.0, 1.0)))
    assert result.drift.between_sweeps < 0.005
    assert alarms(result) == []


def test_an_interleaved_run_adds_no_scatter_and_keeps_its_shifts():
    base = sweep(scattered(100, 19, 0.06), 19, side="base")
    new = sweep([(n, f * 1.08, b, c) for n, f, b, c in scattered(100, 20, 0.06)], 20, side="new")
    result = compare(base, new)
    (g,) = result.drift.groups
    assert result.drift.between_sweeps == 0.0 and not result.drift.removes_anything
    assert g.basis == "interleaved" and g.verdict == "slower" and g.build_ratio == pytest.approx(1.08, rel=0.03)
    assert "scatter" not in result.drift.reason
