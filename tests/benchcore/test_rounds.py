"""Rounds: how runs split, each round's order and fresh workers, ABBA order, combining a case's
rounds, the rounds' statistics, and resuming in the middle of a round."""

import math

import pytest

from benchcore.errors import UsageError
from benchcore.execute.checkpoint import Checkpoint, Slot
from benchcore.execute.rounds import RoundPlan, combine_case, combine_results
from benchcore.execute.sweep import SweepJob
from benchcore.execute.worker import run_slots
from benchcore.measure.case import CaseSpec
from benchcore.measure.combine import combine_metrics, median
from benchcore.measure.measurement import Measurement
from benchcore.measure.runner import RunSettings
from benchcore.report.model import CaseResult
from benchcore.suite import Suite

EXECUTOR = "tests.benchcore.rounds_executor:execute"
SUITE = Suite("roundstest", executor=EXECUTOR)


def specs(n=6):
    return [CaseSpec("test", f"case{i}", {"level": 1.0 + i}) for i in range(n)]


# --------------------------------------------------------------------------- the plan


@pytest.mark.parametrize("runs,rounds,per_round", [(100, 3, [34, 33, 33]), (100, 1, [100]), (5, 3, [2, 2, 1]),
                                                    (10, 3, [4, 3, 3]), (6, 3, [2, 2, 2]), (1, 4, [1, 1, 1, 1])])
def test_runs_are_split_over_the_rounds_exactly_where_they_can_be(runs, rounds, per_round):
    assert RoundPlan(rounds).runs_per_round(runs) == per_round


@pytest.mark.parametrize("warmup,rounds", [(25, 3), (3, 5), (1, 3), (0, 3), (10, 1)])
def test_warmup_is_not_split_every_fresh_process_warms_up_in_full(warmup, rounds):
    assert RoundPlan(rounds).warmup_per_round(warmup) == warmup


def test_zero_rounds_are_refused():
    with pytest.raises(UsageError, match="--rounds must be at least 1"):
        RoundPlan(0)


def test_each_round_has_its_own_seeded_order_and_one_round_keeps_the_given_order():
    cases = specs(8)
    plan = RoundPlan(3, order_seed=41)
    orders = [[s.name for s in plan.order(cases, r)] for r in (1, 2, 3)]
    assert all(sorted(o) == sorted(s.name for s in cases) for o in orders)
    assert len({tuple(o) for o in orders}) == 3  # three different shuffles
    assert orders == [[s.name for s in RoundPlan(3, order_seed=41).order(cases, r)] for r in (1, 2, 3)]
    assert [s.name for s in RoundPlan(3, order_seed=7).order(cases, 1)] != orders[0]
    assert RoundPlan(1, order_seed=41).order(cases, 1) == cases


def test_two_sides_alternate_abba_across_cases_and_rounds():
    slots = RoundPlan(2, order_seed=1).slots(specs(3), ("base", "new"))
    assert len(slots) == 12
    pairs = [(slots[i].side, slots[i + 1].side) for i in range(0, 12, 2)]
    assert pairs == [("base", "new"), ("new", "base")] * 3
    for i in range(0, 12, 2):  # each pair is one case in one round
        assert slots[i].spec == slots[i + 1].spec and slots[i].round == slots[i + 1].round
    assert [s.round for s in slots] == [1] * 6 + [2] * 6


# --------------------------------------------------------------------------- running rounds


def test_every_round_runs_in_fresh_workers_and_combines_per_case(tmp_path):
    cases = specs(3)
    plan = RoundPlan(3, order_seed=5)
    done = run_slots(plan.slots(cases), EXECUTOR, {"settings": {"warmup": 0, "runs": 4}}, timeout_s=60)
    pids_by_round = {}
    for slot, result in done:
        pids_by_round.setdefault(slot.round, set()).add(result.metrics["pid"])
    assert all(len(p) == 1 for p in pids_by_round.values())  # one worker per round…
    assert len(set.union(*pids_by_round.values())) == 3      # …and a new one each round
    results = combine_results(done, cases, combine_metrics)
    assert [r.spec for r in results] == cases
    for result in results:
        forward = Measurement.from_dict(result.metrics["forward"])
        assert forward.round_sizes == (4, 4, 4) and forward.n == 12
        assert [r["round"] for r in result.rounds] == [1, 2, 3]
        assert [r["position"] for r in result.rounds] == [plan.order(cases, n).index(result.spec) for n in (1, 2, 3)]
        assert result.metrics["timed_total_ms"] == pytest.approx(3 * sum(forward.rounds[0]))
        assert "pid" in result.metrics["round_values"]  # per-round values that differ are kept


def test_a_sweep_times_exactly_the_runs_asked_each_round_its_share():
    """5 runs over 3 rounds: 2, 2 and 1 timed in the rounds' workers (not 2 each: 6)."""
    cases = specs(2)
    job = SweepJob(suite=SUITE, specs=cases, settings=RunSettings(warmup=0, runs=5), rounds=RoundPlan(3))
    assert job.settings_record()["runs_per_round"] == [2, 2, 1]
    done = run_slots(job.rounds.slots(cases), EXECUTOR, job.options(), timeout_s=60)
    assert sorted((slot.round, len(result.metrics["forward"]["samples_ms"])) for slot, result in done
                  if slot.spec == cases[0]) == [(1, 2), (2, 2), (3, 1)]
    for result in combine_results(done, cases, combine_metrics):
        assert Measurement.from_dict(result.metrics["forward"]).round_sizes == (2, 2, 1)


def test_two_sides_run_under_their_own_interpreters(tmp_path):
    import sys

    cases = specs(2)
    slots = RoundPlan(2).slots(cases, ("base", "new"))
    done = run_slots(slots, EXECUTOR, {"settings": {"runs": 2}}, timeout_s=60,
                     pythons={"base": sys.executable, "new": sys.executable})
    pids = {(slot.side, slot.round): result.metrics["pid"] for slot, result in done}
    assert len(set(pids.values())) == 4  # one worker per side per round
    assert {side for side, _ in pids} == {"base", "new"}


def test_resume_in_the_middle_of_a_round_runs_only_what_is_missing(tmp_path):
    checkpoint = tmp_path / "run.checkpoint.jsonl"
    cases = specs(4)
    plan = RoundPlan(2, order_seed=3)
    slots = plan.slots(cases)
    options = {"settings": {"runs": 3}, "rounds": plan.to_dict()}
    run_slots(slots[:5], EXECUTOR, options, checkpoint=checkpoint, timeout_s=60)  # round 1, then one of round 2
    assert set(Checkpoint(checkpoint).load()) == {s.key for s in slots[:5]}
    started = []
    done = run_slots(slots, EXECUTOR, options, checkpoint=checkpoint, resume=True, timeout_s=60,
                     on_start=lambda spec, i, n: started.append(i))
    assert started == [5, 6, 7]
    assert [slot for slot, _ in done] == slots
    with pytest.raises(UsageError, match="rounds.rounds: 2 then, 3 now"):
        run_slots(slots, EXECUTOR, {**options, "rounds": RoundPlan(3, 3).to_dict()}, checkpoint=checkpoint,
                  resume=True)


# --------------------------------------------------------------------------- combining


def result(status, metrics=None, error=None, wall=1.0):
    return CaseResult(CaseSpec("test", "c", {}), status, metrics or {}, error=error, wall_s=wall)


def test_a_case_that_failed_in_one_round_is_failed_and_keeps_the_other_rounds_figures():
    spec = CaseSpec("test", "c", {})
    ok = {"forward": Measurement([1.0, 1.1]).to_dict()}
    rounds = [(Slot(spec, 1), result("ok", ok), 0), (Slot(spec, 2), result("crashed", error="worker killed by SIGSEGV"), 3),
              (Slot(spec, 3), result("ok", ok), 1)]
    combined = combine_case(spec, rounds, combine_metrics)
    assert combined.status == "crashed" and combined.error == "worker killed by SIGSEGV (round 2 of 3)"
    assert Measurement.from_dict(combined.metrics["forward"]).round_sizes == (2, 2)
    assert [r["status"] for r in combined.rounds] == ["ok", "crashed", "ok"] and combined.wall_s == 3.0


def test_an_error_every_round_ended_with_reads_once():
    spec = CaseSpec("test", "c", {})
    rounds = [(Slot(spec, n), result("failed", error="RuntimeError: broken"), 0) for n in (1, 2, 3)]
    assert combine_case(spec, rounds, combine_metrics).error == "RuntimeError: broken"


def test_a_single_round_is_returned_as_it_ran():
    spec = CaseSpec("test", "c", {})
    only = result("ok", {"forward": Measurement([1.0]).to_dict()})
    assert combine_case(spec, [(Slot(spec), only, 0)], combine_metrics) is only


def test_combining_metrics_follows_rules_and_keeps_differing_values():
    per_round = [{"timed_total_ms": 2.0, "capped": False, "mem": 5, "same": "x",
                  "profiler": {"per_call_ms": [1.0, 2.0], "Count": 2}},
                 {"timed_total_ms": 3.0, "capped": True, "mem": 7, "same": "x",
                  "profiler": {"per_call_ms": [3.0], "Count": 1}}]
    combined = combine_metrics(per_round, {"Count": sum}, sample_lists=("per_call_ms",))
    assert combined["timed_total_ms"] == 5.0 and combined["capped"] is True and combined["same"] == "x"
    assert combined["profiler"] == {"per_call_ms": [1.0, 2.0, 3.0], "round_sizes": [2, 1], "Count": 3}
    assert combined["mem"] == 5 and combined["round_values"] == {"mem": [5, 7]}


def test_a_rule_leaves_the_reason_under_missing_of_the_same_key_alone():
    """rnnbench's median rule for compile_ms met `missing.compile_ms`, a reason: with an even
    number of rounds the median of two strings divided a string."""
    reason = "not a torch.compile runner"
    per_round = [{"compile_ms": None, "missing": {"compile_ms": reason}}] * 2
    combined = combine_metrics(per_round, {"compile_ms": median})
    assert combined == {"compile_ms": None, "missing": {"compile_ms": reason}}


# --------------------------------------------------------------------------- the rounds' statistics


def test_a_rule_applies_to_numbers_only_never_to_a_reason_under_the_same_key():
    rules = {"compile_ms": max}
    per_round = [{"compile_ms": 3.0, "missing": {"compile_ms": "not compiled"}},
                 {"compile_ms": 5.0, "missing": {"compile_ms": "not compiled"}}]
    combined = combine_metrics(per_round, rules)
    assert combined["compile_ms"] == 5.0 and combined["missing"] == {"compile_ms": "not compiled"}


def test_round_statistics_by_hand():
    m = Measurement.from_rounds([[1.0, 1.2], [2.0, 2.2], [3.0, 3.2]])
    assert m.round_medians == (1.1, 2.1, 3.1)
    assert m.center == 2.1
    assert m.round_spread == pytest.approx(2.0 / 2.1)
    # one-way ANOVA: MSB = 2 * ((1.1-2.1)^2 + 0 + 1^2) / 2 = 2; MSW = 6 * 0.01 / 3 = 0.02; n0 = 2
    # between = (2 - 0.02) / 2 = 0.99; fraction = 0.99 / (0.99 + 0.02)
    assert m.between_round_fraction == pytest.approx(0.99 / 1.01)
    rounds = m.to_dict()["rounds"]
    assert rounds == {"count": 3, "sizes": [2, 2, 2], "medians_ms": [1.1, 2.1, 3.1], "median_ms": 2.1,
                      "spread": pytest.approx(2.0 / 2.1), "between_fraction": pytest.approx(0.99 / 1.01)}
    assert Measurement.from_dict(m.to_dict()).round_sizes == (2, 2, 2)


def test_rounds_that_agree_put_no_variance_between_rounds():
    m = Measurement.from_rounds([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    assert m.between_round_fraction == 0.0 and m.round_spread == 0.0


def test_one_round_has_no_round_statistics():
    m = Measurement([1.0, 2.0])
    assert m.round_count == 1 and m.center == m.median == 1.5
    assert m.round_spread is None and m.between_round_fraction is None and "rounds" not in m.to_dict()


def test_round_sizes_must_split_the_samples():
    with pytest.raises(ValueError, match="do not split"):
        Measurement([1.0, 2.0, 3.0], round_sizes=[1, 1])
    assert math.isclose(Measurement([1.0, 5.0], round_sizes=[1, 1]).center, 3.0)
