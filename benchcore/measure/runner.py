"""The timing loop: warmup, then timed runs of forward and backward → Measurements.

Forward and backward are timed separately. backward_setup (e.g. drawing a random
grad_output) and gradient zeroing happen outside the timed regions. A workload's last_call
receives the last iteration's output, its gradients still in place (the audit counts them).
No garbage collection is forced between iterations (fastrnns' two gc.collect() per iteration
cost ~150 ms each); instead the timers disable the collector inside the timed regions only.

Adaptive mode (target_precision set) keeps sampling until IQR/median of every timed quantity
is under the target, after at least min_runs samples and min_time_s seconds, or until
max_time_s runs out, in which case the outcome is flagged `capped`.

After the timed runs, benchcore.measure.steady judges whether the first samples stand apart from the
rest (a cold start the fixed warmup did not cover): those iterations are reclassified as
warmup and as many more are timed in their place, up to max_extra_warmup; the outcome records
the warmup calls run and whether steady state was reached (`steady`).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Callable, List, Optional, Tuple

from benchcore.errors import UsageError
from benchcore.measure.case import Workload
from benchcore.measure.measurement import Measurement, within_step
from benchcore.measure.steady import Steadiness, judge_phases, round_record

#: The environment variable through which a sweep tells its isolated workers each case's time
#: budget in seconds (--timeout). Not a run setting: a resumed sweep may raise its timeout.
BUDGET_ENV = "BENCHCORE_CASE_BUDGET_S"
#: warmup calls timed before the whole warmup's cost is projected (the cheaper of them is the
#: estimate: a first call's compilation must not make a sane --warmup look too long)
BUDGET_PROBE_CALLS = 2


class WarmupOverBudget(UsageError):
    """The warmup asked for cannot finish within a case's time budget: the flags are wrong, not
    the case (the sweep turns this into one line and exit status 2)."""


@dataclass
class RunSettings:
    warmup: int = 10
    runs: int = 100
    run_backward: bool = True
    # Adaptive mode is on when target_precision is set.
    target_precision: Optional[float] = None
    min_runs: int = 5
    min_time_s: float = 0.0
    max_time_s: float = 10.0
    #: the most timed iterations benchcore.measure.steady may turn into warmup; None: as many as the runs
    max_extra_warmup: Optional[int] = None

    def __post_init__(self):
        if self.warmup < 0:
            raise UsageError(f"warmup must be >= 0, got {self.warmup}")
        if self.runs < 1:
            raise UsageError(f"runs must be >= 1, got {self.runs}")
        if self.target_precision is not None and not 0 < self.target_precision < 1:
            raise UsageError(f"target precision must be between 0 and 1 (e.g. 0.05), got {self.target_precision}")

    @property
    def adaptive(self) -> bool:
        return self.target_precision is not None

    @property
    def extra_warmup_limit(self) -> int:
        return self.runs if self.max_extra_warmup is None else self.max_extra_warmup

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunSettings":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class RunOutcome:
    forward: Measurement
    backward: Optional[Measurement]
    #: adaptive mode stopped at max_time_s before reaching the target precision
    capped: bool
    #: time inside timed calls, warmup included (ms): the denominator of overhead figures
    timed_total_ms: float
    warmup: int
    #: timed iterations turned into warmup because they had not reached steady state
    extra_warmup: int = 0
    steadiness: Steadiness = Steadiness(0)

    def to_dict(self) -> dict:
        return {
            "forward": self.forward.to_dict(),
            "backward": self.backward.to_dict() if self.backward else None,
            "capped": self.capped,
            "timed_total_ms": self.timed_total_ms,
            "warmup": self.warmup,
            "steady": [round_record(self.warmup, self.extra_warmup, self.steadiness)],
        }


class _LastCall:
    """The last iteration's output and gradients, held for Workload.last_call.

    Without last_call an iteration's output is dropped and its gradients zeroed as soon as it
    ends. With it, they are held until the next iteration starts (released before its forward
    is timed, so every timed call sees the memory it saw before) and, after the last
    iteration, handed to last_call and then released."""

    def __init__(self, workload: Workload):
        self.workload = workload
        self.output = None
        self.backward_ran = False
        self.held = False

    def keep(self, output, backward_ran: bool) -> None:
        self.output, self.backward_ran, self.held = output, backward_ran, True
        if self.workload.last_call is None:
            self.release()

    def release(self) -> None:
        if self.held and self.backward_ran and self.workload.zero_grad:
            self.workload.zero_grad()
        self.output, self.held = None, False

    def hand_over(self) -> None:
        if self.held and self.workload.last_call is not None:
            self.workload.last_call(self.output)
        self.release()


def _iteration(workload: Workload, timer, with_backward: bool, last: _LastCall):
    last.release()
    output, forward_ms = timer.time(workload.forward)
    if not with_backward:
        last.keep(output, False)
        return forward_ms, None
    prepared = workload.backward_setup(output) if workload.backward_setup else output
    _, backward_ms = timer.time(lambda: workload.backward(prepared))
    last.keep(output, True)
    return forward_ms, backward_ms


def _precise_enough(samples: List[float], target: float, resolution_ms: float = 0.0) -> bool:
    """IQR/median under the target, or an IQR no wider than the clock's step (finer precision
    cannot be had: a 4 µs call on a 1 µs clock would otherwise never stop before the cap)."""
    m = Measurement(samples)
    if within_step(m.iqr, resolution_ms):
        return True
    return m.relative_iqr is not None and m.relative_iqr < target


def run_workload(
    workload: Workload,
    settings: RunSettings,
    timer,
    clock: Callable[[], float] = time.perf_counter,
    reported: Optional[Callable[[], Tuple[List[float], List[float]]]] = None,
    resolution_ms: float = 0.0,
) -> RunOutcome:
    """Time `workload` with `timer` (see timers.py); `clock` paces adaptive mode only.

    `reported`, when given, returns the (forward, backward) samples so far that the suite will
    report instead of the timer's (opbench's native engine reports the profiler's per-call
    times); adaptive mode then judges precision on those, falling back to the timer's samples
    for a phase the reported source has nothing for. `resolution_ms` is that source's clock step.
    """
    with_backward = settings.run_backward and workload.has_backward
    last = _LastCall(workload)
    timed_total = 0.0
    warm_calls: List[float] = []
    for _ in range(settings.warmup):
        f, b = _iteration(workload, timer, with_backward, last)
        warm_calls.append(f + (b or 0.0))
        timed_total += warm_calls[-1]
        if len(warm_calls) == BUDGET_PROBE_CALLS:
            check_warmup_budget(settings.warmup, min(warm_calls))

    forward: List[float] = []
    backward: List[float] = []
    capped = False
    started = clock()
    while True:
        f, b = _iteration(workload, timer, with_backward, last)
        timed_total += f + (b or 0.0)
        forward.append(f)
        if b is not None:
            backward.append(b)
        if not settings.adaptive:
            if len(forward) >= settings.runs:
                break
            continue
        elapsed = clock() - started
        if len(forward) >= settings.min_runs and elapsed >= settings.min_time_s:
            judged_forward, judged_backward = reported() if reported else (forward, backward)
            target = settings.target_precision
            if _precise_enough(judged_forward or forward, target, resolution_ms) and (
                not backward or _precise_enough(judged_backward or backward, target, resolution_ms)
            ):
                break
        if elapsed >= settings.max_time_s:
            capped = True
            break
    extra, state, settling_ms = _settle(workload, timer, with_backward, forward, backward, settings.extra_warmup_limit,
                                        last, reported)
    timed_total += settling_ms
    last.hand_over()
    return RunOutcome(
        forward=Measurement(forward),
        backward=Measurement(backward) if backward else None,
        capped=capped,
        timed_total_ms=timed_total,
        warmup=settings.warmup,
        extra_warmup=extra,
        steadiness=state,
    )


def check_warmup_budget(warmup: int, call_ms: float, budget_s: Optional[float] = None) -> None:
    """Refuse a warmup whose projected time (warmup × the cheapest call so far) exceeds the case's
    time budget (`budget_s`, else the one the sweep set in BUDGET_ENV; none: no limit)."""
    if budget_s is None:
        budget_s = float(os.environ[BUDGET_ENV]) if os.environ.get(BUDGET_ENV) else None
    if budget_s is None or warmup * call_ms / 1e3 <= budget_s:
        return
    fits = max(1, int(budget_s * 1e3 / call_ms / 2))
    raise WarmupOverBudget(f"--warmup {warmup} needs at least {warmup * call_ms / 1e3:.0f} s per case at "
                           f"{call_ms:.3g} ms per call, more than the {budget_s:g} s a case may take (--timeout); "
                           f"lower --warmup (e.g. {fits}) or raise --timeout")


def _settle(workload: Workload, timer, with_backward: bool, forward: List[float], backward: List[float],
            limit: int, last: _LastCall, reported=None) -> Tuple[int, Steadiness, float]:
    """Turn a cold head of the timed iterations into warmup, timing as many more in its place,
    until the series is steady or `limit` iterations were turned (benchcore.measure.steady); the lists
    are edited in place. (number turned into warmup, the final series' steadiness, the time the
    extra iterations took in ms)

    With `reported` (the samples the suite reports, e.g. the profiler's per-call times), those
    are judged, less the iterations already turned (the suite drops them: RunOutcome.extra_warmup):
    a call's wall time around a profiler dump can hide the cold start of the operator inside."""
    extra, spent = 0, 0.0

    def judged() -> Steadiness:
        phases = [list(p)[extra:] for p in reported()] if reported else []
        return judge_phases([r or t for r, t in zip(phases, (forward, backward))] if phases else [forward, backward])

    state = judged()
    while state.cold and extra + state.cold <= limit:
        cold = state.cold
        del forward[:cold], backward[:cold]
        extra += cold
        for _ in range(cold):
            f, b = _iteration(workload, timer, with_backward, last)
            spent += f + (b or 0.0)
            forward.append(f)
            if b is not None:
                backward.append(b)
        state = judged()
    return extra, state, spent
