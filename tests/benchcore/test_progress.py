"""Progress without a terminal: a line every N seconds and one at the end, counting the cases
only (the machine reference is not one); BENCH_PROGRESS's values."""

import io

import pytest

from benchcore.errors import UsageError
from benchcore.execute.progress import Mode, Progress, mode_from
from benchcore.execute.system import LOAD_PER_CORE, SystemState, _load
from benchcore.measure import reference
from benchcore.measure.case import CaseSpec
from benchcore.report.model import CaseResult


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def result(name, suite="opbench"):
    return CaseResult(CaseSpec(suite, name, {}), "ok")


def test_modes():
    assert mode_from(None, terminal=True) == Mode("bar")
    assert mode_from(None, terminal=False) == Mode("lines", 30.0)
    assert mode_from("0", terminal=True) == Mode("off")
    assert mode_from("bar", terminal=False) == Mode("bar")
    assert mode_from("1", terminal=False) == Mode("bar")
    assert mode_from("5", terminal=True) == Mode("lines", 5.0)
    with pytest.raises(UsageError, match="BENCH_PROGRESS='soon' is not 0, bar or a number of seconds"):
        mode_from("soon", terminal=False)


def test_a_line_every_interval_and_at_the_end_counting_cases_only():
    stream, clock = io.StringIO(), Clock()
    ref = reference.specs(1)[0]
    progress = Progress(4, "opbench", lambda spec: not reference.is_reference(spec), stream=stream,
                        env={"BENCH_PROGRESS": "10"}, clock=clock)
    clock.now = 4.0
    progress.finish(result("a"))            # 4 s: too soon for a line
    progress.finish(CaseResult(ref, "ok"))  # the reference: not counted
    clock.now = 12.0
    progress.finish(result("b"))            # 12 s since the start: a line
    clock.now = 13.0
    progress.finish(result("c"))
    clock.now = 20.0
    progress.finish(result("d"))            # the last: always a line
    assert stream.getvalue().splitlines() == [
        "opbench: 2/4 cases (50%), 12s elapsed, about 12s left",
        "opbench: 4/4 cases (100%), 20s elapsed",
    ]


def test_off_prints_nothing():
    stream = io.StringIO()
    progress = Progress(1, "rnnbench", stream=stream, env={"BENCH_PROGRESS": "0"})
    progress.finish(result("a"))
    progress.close()
    assert stream.getvalue() == ""


def test_the_load_warning_waits_for_half_the_cores_busy():
    assert _load(SystemState(load_average=[0.40, 0.3, 0.2], usable_cores=2)) is None
    assert LOAD_PER_CORE == 0.5
    assert _load(SystemState(load_average=[1.4, 1.0, 0.5], usable_cores=2)).check == "load average"
