"""Steady state: the detector on synthetic series (a cold start, a slow drift, a settled series),
the runner turning a cold head into warmup, and the whole warmup run by every round's process
(each side of `ab` too), counted on a real runner's forward calls."""

import sys

import pytest

from benchcore.execute.rounds import RoundPlan, combine_results
from benchcore.execute.sweep import SweepJob
from benchcore.execute.worker import run_slots
from benchcore.measure.case import CaseSpec
from benchcore.measure.combine import combine_metrics
from benchcore.measure.runner import RunSettings, run_workload
from benchcore.measure.steady import Steadiness, cold_head, drift, judge, judge_phases, summary
from benchcore.measure.timers import PerfCounterTimer
from rnnbench.suite import SUITE
from tests.benchcore.test_runner import FakeClock, make_workload

SETTLED = [10.0, 10.3, 9.8, 10.1, 9.9, 10.4, 10.0, 9.7, 10.2, 10.1, 9.9, 10.0]
TINY = {"seqLength": 3, "numLayers": 1, "inputSize": 4, "hiddenSize": 4, "miniBatch": 2, "device": "cpu",
        "fuser": "te", "executor": "default", "seed": 0, "group": "lstm"}


# --------------------------------------------------------------------------- the detector


def test_a_settled_series_is_steady():
    assert judge(SETTLED) == Steadiness(0) and judge(SETTLED).steady


def test_a_cold_start_is_the_leading_run_of_samples_standing_apart():
    # the jit forward: 82.9 and 32.3 ms, then 12.9–13.7 ms
    series = [82.9, 32.3] + [13.0, 13.4, 12.9, 13.7, 13.1, 13.2]
    assert cold_head(series) == 2
    state = judge(series)
    assert not state.steady and state.reason(0).startswith("the first 2 timed sample(s) still stand apart")


def test_compilation_after_a_fast_first_call_is_a_cold_start():
    # TorchScript's profiling executor: an interpreted first call, then compilation (jit_premul)
    series = [62.5, 329.7, 245.4, 105.4, 50.4, 68.0, 55.0, 57.1, 58.0, 54.2, 56.3, 59.9]
    assert cold_head(series) == 4


def test_a_late_spike_is_not_a_cold_start_and_scatter_is_not_cold():
    assert cold_head(SETTLED + [10.0, 10.1, 30.0]) == 0  # in the second half
    noisy = [14.0, 6.0, 13.0, 7.0, 12.0, 6.5, 14.5, 7.5, 13.5, 6.2]  # two speeds alternating
    assert cold_head(noisy) == 0


def test_a_slow_drift_is_flagged_not_warmed_away():
    series = [10.0 * (1 + 0.05 * i) for i in range(18)]  # +5% a call: +170% over the series
    assert cold_head(series) == 0
    change = drift(series)
    assert change is not None and change > 0.2
    state = judge(series)
    assert not state.steady and "drift by +" in state.reason(0)
    assert drift(SETTLED + SETTLED) is None
    assert drift(series[:12]) is None  # thirds of four samples: too few to call a trend


def test_too_few_samples_say_nothing():
    assert judge([50.0, 10.0, 10.0]).steady


def test_phases_are_judged_together():
    forward = SETTLED
    backward = [90.0, 280.0, 30.0, 28.0, 31.0, 29.0, 30.5, 29.5, 30.0, 28.5, 29.0, 30.0]
    assert judge_phases([forward, backward]).cold == 2
    assert judge_phases([forward, []]).steady


# --------------------------------------------------------------------------- the runner


def test_the_runner_turns_a_cold_head_into_warmup_and_times_as_many_more():
    clock = FakeClock()
    costs = [0.050, 0.040] + [0.010] * 20  # no warmup asked: the first two timed calls are cold
    workload, events = make_workload(clock, costs)
    outcome = run_workload(workload, RunSettings(warmup=0, runs=8, run_backward=False),
                           PerfCounterTimer(lambda: None, clock), clock=clock)
    assert outcome.forward.n == 8 and outcome.forward.max == pytest.approx(10.0)
    assert events.count("forward") == 10
    assert outcome.to_dict()["steady"] == [{"warmup_calls": 2, "extra_warmup": 2, "reached": True, "reason": None}]
    assert outcome.timed_total_ms == pytest.approx(50 + 40 + 8 * 10)


def test_the_samples_a_suite_reports_are_judged_when_it_reports_its_own():
    """opbench's native engine reports the profiler's per-call times; a wall time around a
    profiler dump can be flat while the operator inside starts cold."""
    clock = FakeClock()
    workload, events = make_workload(clock, [0.010] * 30)
    profiled = iter([5.0, 4.0] + [1.0] * 30)
    kept = []

    def forward():
        kept.append(next(profiled))

    real = workload.forward
    workload.forward = lambda: (forward(), real())[1]
    outcome = run_workload(workload, RunSettings(warmup=0, runs=8, run_backward=False),
                           PerfCounterTimer(lambda: None, clock), clock=clock, reported=lambda: (kept, []))
    assert outcome.extra_warmup == 2 and kept[2:] == [1.0] * 8
    assert outcome.to_dict()["steady"][0]["reached"] is True


def test_a_series_that_does_not_settle_within_the_limit_is_marked_with_the_reason():
    clock = FakeClock()
    costs = [0.050] * 4 + [0.010] * 20
    workload, _ = make_workload(clock, costs)
    outcome = run_workload(workload, RunSettings(warmup=0, runs=8, run_backward=False, max_extra_warmup=2),
                           PerfCounterTimer(lambda: None, clock), clock=clock)
    (record,) = outcome.to_dict()["steady"]
    assert record["reached"] is False and record["extra_warmup"] == 0
    assert "the first 4 timed sample(s) still stand apart" in record["reason"]


def test_rounds_keep_one_steady_record_each_and_views_summarise_them():
    rounds = [{"steady": [{"warmup_calls": 3, "extra_warmup": e, "reached": ok, "reason": None if ok else "why"}]}
              for e, ok in ((0, True), (2, True), (0, False))]
    combined = combine_metrics(rounds)
    assert [r["extra_warmup"] for r in combined["steady"]] == [0, 2, 0]
    assert "round_values" not in combined
    assert summary(combined) == "extra warmup per round [0, 2, 0]; not steady in round(s) 3: why"
    assert summary(combine_metrics(rounds[:1] * 2)) is None


# --------------------------------------------------------------------------- per process, counted


def test_every_round_and_side_runs_the_whole_warmup_counted_on_a_real_runner():
    spec = CaseSpec("rnnbench", "py", TINY)
    job = SweepJob(suite=SUITE, specs=[spec], settings=RunSettings(warmup=5, runs=6), rounds=RoundPlan(3))
    assert job.round_settings.warmup == 5 and job.round_settings.runs == 2
    sides = {"base": sys.executable, "new": sys.executable}
    done = run_slots(job.rounds.slots([spec], tuple(sides)), "tests.benchcore.counting_executor:execute",
                     job.options(), timeout_s=300, pythons=sides)
    assert len(done) == 6 and all(result.ok for _slot, result in done)
    for _slot, result in done:
        (record,) = result.metrics["steady"]
        assert record["warmup_calls"] == 5 + record["extra_warmup"]
        assert result.metrics["forward_calls"] == 5 + 2 + record["extra_warmup"]
    for side in sides:
        (combined,) = combine_results(done, [spec], combine_metrics, side)
        assert len(combined.metrics["steady"]) == 3
        assert combined.metrics["forward"]["rounds"]["sizes"] == [2, 2, 2]


def test_a_torchscript_runner_at_tiny_sizes_is_brought_to_steady_state():
    """rnnbench's `jit` with no warmup: its first timed calls are the profiling executor's
    compilation, which the runner must turn into warmup rather than time."""
    from rnnbench import executor

    metrics = executor.execute(CaseSpec("rnnbench", "jit", TINY), {"settings": {"warmup": 0, "runs": 10}, "audit": False})
    (record,) = metrics["steady"]
    assert record["extra_warmup"] >= 1
    assert record["warmup_calls"] == record["extra_warmup"]
    assert len(metrics["forward"]["samples_ms"]) == 10
    if record["reached"]:
        assert cold_head(metrics["forward"]["samples_ms"]) == 0 and cold_head(metrics["backward"]["samples_ms"]) == 0


# --------------------------------------------------------------------------- a warmup too long


def test_a_warmup_the_case_timeout_cannot_hold_is_one_line_and_exit_2(tmp_path):
    import subprocess

    argv = [sys.executable, "-m", "rnnbench", "bench", "--rnns", "py", "--group", "rnns", "--device", "cpu",
            "--seqLength", "3", "--numLayers", "1", "--inputSize", "4", "--hiddenSize", "4", "--miniBatch", "2",
            "--warmup", "10000000", "--nloops", "2", "--rounds", "1", "--timeout", "30", "--output-file", "r.json"]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if "--warmup" in line]
    assert line.startswith("rnnbench: error: py: --warmup 10000000 needs at least ")
    assert "more than the 30 s a case may take (--timeout); lower --warmup (e.g. " in line
    assert "Traceback" not in proc.stderr and not (tmp_path / "r.json").exists()


def test_the_budget_check_passes_a_warmup_that_fits():
    from benchcore.measure.runner import WarmupOverBudget, check_warmup_budget

    check_warmup_budget(100, 1.0, budget_s=1.0)  # 0.1 s of warmup in a 1 s budget
    check_warmup_budget(10**9, 1.0)  # no budget outside a sweep's workers
    with pytest.raises(WarmupOverBudget, match=r"--warmup 2000 needs at least 2 s .* lower --warmup \(e.g. 500\)"):
        check_warmup_budget(2000, 1.0, budget_s=1.0)
