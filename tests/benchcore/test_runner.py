import gc

import pytest

from benchcore.errors import UsageError
from benchcore.measure.case import Workload
from benchcore.measure.runner import RunSettings, run_workload
from benchcore.measure.timers import PerfCounterTimer


class FakeClock:
    """Time advances only when the workload says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make_workload(clock, forward_costs, backward_cost=None, events=None):
    events = events if events is not None else []
    costs = iter(forward_costs)

    def forward():
        events.append("forward")
        clock.now += next(costs)
        return "out"

    def backward_setup(output):
        events.append("setup")
        clock.now += 100.0  # untimed: must not show in any sample
        return output + "-grad"

    def backward(prepared):
        assert prepared == "out-grad"
        events.append("backward")
        clock.now += backward_cost

    def zero_grad():
        events.append("zero")
        clock.now += 100.0

    if backward_cost is None:
        return Workload(forward=forward), events
    return Workload(forward=forward, backward_setup=backward_setup, backward=backward, zero_grad=zero_grad), events


def test_warmup_is_discarded_and_counts_are_right():
    clock = FakeClock()
    costs = [1.0] * 3 + [0.002] * 5  # warmup iterations are slow, timed ones take 2 ms
    workload, events = make_workload(clock, costs, backward_cost=0.004)
    outcome = run_workload(workload, RunSettings(warmup=3, runs=5), PerfCounterTimer(lambda: None, clock), clock=clock)
    assert outcome.forward.n == 5 and outcome.backward.n == 5
    assert outcome.forward.median == pytest.approx(2.0)
    assert outcome.backward.median == pytest.approx(4.0)
    assert events.count("forward") == 8 and events.count("zero") == 8
    # setup and zeroing (100 s each) never leak into the timed samples
    assert outcome.forward.max == pytest.approx(2.0)
    assert outcome.timed_total_ms == pytest.approx(3 * (1000 + 4) + 5 * 6)
    assert not outcome.capped


def test_backward_can_be_turned_off():
    clock = FakeClock()
    workload, events = make_workload(clock, [0.001] * 4, backward_cost=0.001)
    outcome = run_workload(workload, RunSettings(warmup=1, runs=3, run_backward=False), PerfCounterTimer(lambda: None, clock), clock=clock)
    assert outcome.backward is None
    assert "backward" not in events


def test_adaptive_mode_stops_once_precise():
    clock = FakeClock()
    workload, _ = make_workload(clock, [0.010] * 1000)
    settings = RunSettings(warmup=0, runs=1, target_precision=0.05, min_runs=7, min_time_s=0.0, max_time_s=100)
    outcome = run_workload(workload, settings, PerfCounterTimer(lambda: None, clock), clock=clock)
    assert outcome.forward.n == 7  # identical samples: IQR 0 as soon as the minimum is reached
    assert not outcome.capped


def test_adaptive_mode_respects_min_time():
    clock = FakeClock()
    workload, _ = make_workload(clock, [0.010] * 1000)
    settings = RunSettings(warmup=0, runs=1, target_precision=0.05, min_runs=3, min_time_s=0.5, max_time_s=100)
    outcome = run_workload(workload, settings, PerfCounterTimer(lambda: None, clock), clock=clock)
    assert outcome.forward.n == 50  # 0.5 s of 10 ms samples


def test_adaptive_mode_caps_noisy_case_and_flags_it():
    clock = FakeClock()
    noisy = [0.001, 0.010] * 1000
    workload, _ = make_workload(clock, noisy)
    settings = RunSettings(warmup=0, runs=1, target_precision=0.05, min_runs=3, max_time_s=0.1)
    outcome = run_workload(workload, settings, PerfCounterTimer(lambda: None, clock), clock=clock)
    assert outcome.capped
    assert outcome.forward.noisy


def test_adaptive_mode_judges_the_reported_samples_when_the_suite_reports_others():
    """opbench native reports profiler kernel times: their precision decides, not the wall's."""
    settings = RunSettings(warmup=0, runs=1, target_precision=0.05, min_runs=3, max_time_s=0.1)

    def run(wall_costs, kernel_ms):
        clock = FakeClock()
        workload, events = make_workload(clock, wall_costs)
        per_call = lambda: (kernel_ms[:events.count("forward")], [])  # noqa: E731  one per call so far
        return run_workload(workload, settings, PerfCounterTimer(lambda: None, clock), clock=clock, reported=per_call)

    steady_kernel_noisy_wall = run([0.001, 0.010] * 1000, [0.5] * 2000)
    assert steady_kernel_noisy_wall.forward.n == 3 and not steady_kernel_noisy_wall.capped
    jumpy_kernel_steady_wall = run([0.010] * 1000, [0.1, 1.0] * 1000)
    assert jumpy_kernel_steady_wall.capped


def test_adaptive_mode_accepts_an_iqr_no_wider_than_the_clock_step():
    """4 µs calls on a 1 µs clock: IQR/median 25% forever, yet nothing finer can be measured."""
    settings = RunSettings(warmup=0, runs=1, target_precision=0.05, min_runs=5, max_time_s=0.1)

    def run(resolution_ms):
        clock = FakeClock()
        workload, events = make_workload(clock, [0.010] * 1000)
        ticks = [0.003, 0.004, 0.005, 0.004] * 250  # median 4 µs, IQR 1 µs
        per_call = lambda: (ticks[:events.count("forward")], [])  # noqa: E731
        return run_workload(workload, settings, PerfCounterTimer(lambda: None, clock), clock=clock,
                            reported=per_call, resolution_ms=resolution_ms)

    assert run(0.0).capped
    stepped = run(0.001)
    assert not stepped.capped and stepped.forward.n == 5


def test_gc_is_disabled_inside_the_timed_region_only():
    seen = []
    workload = Workload(forward=lambda: seen.append(gc.isenabled()))
    run_workload(workload, RunSettings(warmup=1, runs=2), PerfCounterTimer(lambda: None))
    assert seen == [False, False, False]
    assert gc.isenabled()


def test_sync_brackets_each_timed_call():
    calls = []
    workload = Workload(forward=lambda: calls.append("f"))
    timer = PerfCounterTimer(lambda: calls.append("sync"))
    run_workload(workload, RunSettings(warmup=0, runs=2), timer)
    assert calls == ["sync", "f", "sync"] * 2


@pytest.mark.parametrize("kwargs", [{"runs": 0}, {"warmup": -1}, {"target_precision": 2.0}])
def test_bad_settings_are_usage_errors(kwargs):
    with pytest.raises(UsageError):
        RunSettings(**kwargs)


def test_cuda_timer_without_cuda_is_a_clear_error(monkeypatch):
    import torch

    from benchcore.measure.timers import timer_for

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # also on a machine with CUDA
    with pytest.raises(UsageError, match="CUDA"):
        timer_for("cuda", lambda: None)
