"""--cpu-idle: the sweep keeps the idle CPUs polling while its workers time (the PM QoS bound held
at 0 through /dev/cpu_dma_latency), says why not where it cannot, and records what it did."""

import json
import os
import struct
import subprocess
import sys

import pytest

from benchcore.cli.options import run_plan_from
from benchcore.cli.request import SweepRequest
from benchcore.errors import UsageError
from benchcore.execute import idle, sweep
from benchcore.execute.rounds import RoundPlan
from benchcore.execute.sweep import RunPlan, SweepJob
from benchcore.execute.system import IDLE_CHECK, SystemState
from benchcore.measure.case import CaseSpec
from benchcore.measure.runner import RunSettings
from benchcore.report.identity import environment_differences
from benchcore.report.model import Report
from benchcore.suite import Suite
from tests.benchcore.idle_executor import held_devices

SUITE = Suite("idletest", executor="tests.benchcore.idle_executor:execute")
CAN_HOLD = os.access(idle.DEVICE, os.W_OK)
NEEDS_ROOT = pytest.mark.skipif(not CAN_HOLD, reason=f"holding {idle.DEVICE} needs write access (root)")


def sweep_told(tmp_path, mode: str):
    """One case in a real worker under --cpu-idle `mode`: the environment, and what the worker saw."""
    tell = tmp_path / "seen.json"
    job = SweepJob(suite=SUITE, specs=[CaseSpec("idletest", "bound", {"tell": str(tell)})],
                   settings=RunSettings(warmup=0, runs=1), rounds=RoundPlan(1), reference=False)
    environment, _results = sweep.measure(job, RunPlan(timeout_s=120, cpu_idle=mode), "idletest", [], {})[""]
    return environment, json.loads(tell.read_text())


@NEEDS_ROOT
def test_auto_holds_the_bound_at_zero_while_the_workers_time_and_lets_go_after(tmp_path):
    environment, seen = sweep_told(tmp_path, "auto")
    assert seen == {"parent_holds": True, "bound_us": 0}
    assert environment["system"]["start"]["idle_bound_us"] == 0  # the machine read under the hold
    assert environment["cpu_idle"] == {"asked": "auto", "held": True, "reason": None}
    assert idle.DEVICE not in held_devices(os.getpid())


def test_os_leaves_the_idle_states_alone_and_says_so(tmp_path):
    environment, seen = sweep_told(tmp_path, "os")
    assert seen["parent_holds"] is False
    assert environment["cpu_idle"] == {"asked": "os", "held": False,
                                       "reason": "--cpu-idle os: the OS chose the idle states"}


def test_auto_where_the_bound_cannot_be_held_runs_and_records_why(tmp_path):
    missing = tmp_path / "no_such_device"
    with idle.held("auto", device=missing) as hold:
        assert hold == idle.IdleHold("auto", False, f"could not hold {missing} at 0 (No such file or directory)")


def test_poll_where_the_bound_cannot_be_held_is_one_line_naming_the_fix(tmp_path):
    missing = tmp_path / "no_such_device"
    with pytest.raises(UsageError) as raised:
        with idle.held("poll", device=missing):
            pytest.fail("the block must not run")
    assert str(raised.value) == (f"--cpu-idle poll: could not hold {missing} at 0 (No such file or directory); "
                                 f"run as root (or with write access to {missing}), or pass --cpu-idle auto or os")


def test_the_hold_writes_a_zero_bound_keeps_it_open_and_closes_it(tmp_path):
    """What the kernel reads from the holder: a 32-bit bound in µs, for as long as the file is open."""
    device = tmp_path / "device"
    device.write_bytes(b"")
    with idle.held("poll", device=device) as hold:
        assert hold.held and device in held_devices(os.getpid())
        assert struct.unpack("i", device.read_bytes()) == (0,)
    assert device not in held_devices(os.getpid())


@pytest.mark.parametrize("mode,counting,reason", [
    ("os", False, "--cpu-idle os: the OS chose the idle states"),
    ("auto", True, "instruction counts do not depend on idle states"),
    ("poll", True, "instruction counts do not depend on idle states"),
])
def test_os_and_counting_never_touch_the_device(tmp_path, mode, counting, reason):
    device = tmp_path / "device"
    device.write_bytes(b"")
    with idle.held(mode, counting=counting, device=device) as hold:
        assert hold == idle.IdleHold(mode, False, reason)
        assert device not in held_devices(os.getpid())
    assert device.read_bytes() == b""


@pytest.mark.parametrize("states,bound,said", [
    (["POLL", "haltpoll"], 2000000000, "2000000000 µs"),
    (["POLL", "haltpoll"], None, "unknown here"),  # not root: what auto could not hold
    (["POLL", "haltpoll"], 0, None),  # held: nothing to say
    (["POLL"], 2000000000, None),  # idle CPUs only ever poll
    ([], None, None),  # no cpuidle exposed
])
def test_system_advises_where_idle_cpus_may_sleep(states, bound, said):
    advice = [a for a in SystemState(idle_states=states, idle_bound_us=bound).advice() if a.check == IDLE_CHECK]
    if said is None:
        assert advice == []
        return
    (item,) = advice
    assert item.found == (f"idle CPUs may enter haltpoll (latency bound {said}): a call whose work another thread "
                          "does (MXNet's engine, an OpenMP team) also times that thread's CPU waking up")
    assert item.fix.startswith("run the sweep as root: it then keeps idle CPUs polling while it times")


def test_poll_is_refused_on_a_ray_cluster_whose_nodes_it_cannot_hold():
    with pytest.raises(UsageError, match=r"^--cpu-idle poll holds this machine's CPUs, not a Ray cluster's nodes"):
        run_plan_from(SweepRequest(ray="local", cpu_idle="poll"))
    assert run_plan_from(SweepRequest(cpu_idle="os")).cpu_idle == "os"


def test_only_whether_it_was_held_separates_two_reports():
    def report(asked, held, reason):
        return Report(suite="idletest", environment={"cpu_idle": {"asked": asked, "held": held, "reason": reason}})

    held, asked_poll = report("auto", True, None), report("poll", True, None)
    assert environment_differences(held, asked_poll) == []
    not_held = report("auto", False, "could not hold /dev/cpu_dma_latency at 0 (Permission denied)")
    assert environment_differences(held, not_held) == [{"key": "cpu_idle.held", "base": True, "new": False}]


@pytest.mark.parametrize("prog", ["opbench", "rnnbench"])
def test_an_unknown_mode_is_one_line_and_exit_2(prog):
    argv = [sys.executable, "-m", prog, *(["bench"] if prog == "rnnbench" else []), "--cpu-idle", "sleepy"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--cpu-idle" in lines[0] and "invalid choice: 'sleepy'" in lines[0], done.stderr
