import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from benchcore.errors import UsageError
from benchcore.execute.checkpoint import Checkpoint, Slot
from benchcore.execute.worker import run_cases, run_slots
from benchcore.measure.case import CaseSpec

EXECUTOR = "tests.benchcore.executors:execute"
ROOT = Path(__file__).resolve().parents[2]


def case(name, **params):
    return CaseSpec("test", name, params)


def test_failures_of_every_kind_are_recorded_and_the_sweep_goes_on():
    specs = [
        case("first", action="ok", value=1),
        case("raises", action="raise"),
        case("aborts", action="abort"),
        case("after-abort", action="ok", value=2),
        case("killed", action="sigkill"),
        case("hangs", action="hang"),
        case("last", action="ok", value=3),
        case("skips", action="skip"),
    ]
    results = run_cases(specs, EXECUTOR, timeout_s=5)
    by_name = {r.spec.name: r for r in results}
    assert [r.spec.name for r in results] == [s.name for s in specs]
    assert by_name["first"].status == "ok" and by_name["first"].metrics["value"] == 1
    assert by_name["raises"].status == "failed"
    assert by_name["raises"].error == "ValueError: bad input for this case"
    assert "Traceback" in by_name["raises"].stderr_tail
    assert by_name["aborts"].status == "crashed"
    assert "SIGABRT" in by_name["aborts"].error
    assert "about to abort" in by_name["aborts"].stderr_tail
    assert by_name["killed"].status == "crashed" and "SIGKILL" in by_name["killed"].error
    assert by_name["hangs"].status == "timeout" and "5 s" in by_name["hangs"].error
    assert by_name["after-abort"].status == "ok" and by_name["last"].status == "ok"
    assert by_name["skips"].status == "skipped" and by_name["skips"].error == "needs a GPU"


def test_worker_is_reused_across_cases_and_replaced_after_a_crash():
    specs = [case("a", action="ok"), case("b", action="ok"), case("c", action="sigkill"), case("d", action="ok")]
    results = run_cases(specs, EXECUTOR, timeout_s=10)
    pids = [r.metrics.get("pid") for r in results]
    assert pids[0] == pids[1] != os.getpid()
    assert pids[3] not in (None, pids[0])


def test_a_worker_leaves_no_files_behind_even_when_killed(tmp_path):
    """The worker's scratch folder (where MXNet writes its exit-time trace) belongs to the
    parent: removed after a normal end and after a worker killed outright, where the worker's
    own clean-up at exit never runs."""
    told = tmp_path / "scratch-of-the-killed-worker"
    results = run_cases([case("dies", action="litter", then="sigkill", tell=str(told)),
                         case("lives", action="litter")], EXECUTOR, timeout_s=10)
    assert [r.status for r in results] == ["crashed", "ok"]
    killed, ended = Path(told.read_text()), Path(results[1].metrics["scratch"])
    assert killed != ended and killed.name.startswith("benchcore-worker-")
    assert not killed.exists() and not ended.exists()


def test_the_workers_of_every_round_share_one_folder_that_the_sweep_removes():
    """Round 2's fresh worker finds what round 1's left in the shared folder (opbench keeps its
    seeded draws there); the folder is in memory where /dev/shm is, and gone after the sweep."""
    from benchcore.execute.checkpoint import Slot
    from benchcore.execute.worker import run_slots

    done = run_slots([Slot(case("a", action="share"), round=1), Slot(case("a", action="share"), round=2)],
                     EXECUTOR, timeout_s=10)
    first, second = (result.metrics for _slot, result in done)
    assert first["pid"] != second["pid"] and (first["found"], second["found"]) == (False, True)
    assert first["shared"] == second["shared"] and not Path(first["shared"]).exists()
    if os.path.isdir("/dev/shm"):
        assert first["shared"].startswith("/dev/shm/benchcore-worker-")


def test_a_worker_freezes_what_its_imports_left_before_the_first_case():
    [result] = run_cases([case("a", action="gc")], EXECUTOR, timeout_s=10)
    assert result.metrics["frozen"] > 1000  # the interpreter's and benchcore's objects at least


def test_the_scratch_of_a_parent_that_no_longer_runs_is_removed_by_the_next_worker():
    """A parent killed outright cannot clean up: the next worker to start removes its folders,
    and leaves those of parents that still run."""
    import tempfile

    from benchcore.execute.worker import SCRATCH_PREFIX

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    orphan = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{dead}-"))
    (orphan / "mxnet-trace.json").write_text("{}")
    alive = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getppid()}-"))
    try:
        assert run_cases([case("a", action="ok")], EXECUTOR, timeout_s=10)[0].status == "ok"
        assert not orphan.exists() and alive.exists()
    finally:
        import shutil

        shutil.rmtree(orphan, ignore_errors=True)
        shutil.rmtree(alive, ignore_errors=True)


def test_mxnet_writes_its_trace_into_the_worker_scratch(tmp_path, monkeypatch):
    from benchcore.execute.worker import SCRATCH_ENV
    from opbench.backends.mxnet.profiler import _trace_path

    monkeypatch.setenv(SCRATCH_ENV, str(tmp_path))
    assert _trace_path() == str(tmp_path / "mxnet-trace.json")


def test_a_closed_worker_skips_exit_handlers_and_leaves_its_profile_when_asked(tmp_path):
    """MXNet's exit handler writes its whole profiler trace (over a second, read by nobody):
    a worker ends without running exit handlers. With selfprofile's variable, it leaves a
    cProfile dump of its cases first (scripts/speed_figures --breakdown)."""
    import pstats

    from benchcore.execute.selfprofile import PROFILE_ENV

    marker = tmp_path / "exit-handler-ran"
    env = {**os.environ, PROFILE_ENV: str(tmp_path)}
    [result] = run_cases([case("a", action="atexit", path=str(marker))], EXECUTOR, env=env)
    assert result.ok and not marker.exists()
    [dump] = tmp_path.glob("worker-*.prof")
    assert dump.name == f"worker-{result.metrics['pid']}.prof"
    assert any(name == "execute" and path.endswith("executors.py")
               for path, _line, name in pstats.Stats(str(dump)).stats)


def test_stray_stdout_does_not_break_the_protocol():
    results = run_cases([case("p", action="print"), case("q", action="ok")], EXECUTOR, timeout_s=10)
    assert [r.status for r in results] == ["ok", "ok"]


def test_memory_ceiling_restarts_the_worker():
    specs = [case("grow", action="grow"), case("next", action="ok")]
    results = run_cases(specs, EXECUTOR, timeout_s=10, memory_limit_bytes=32 * 2**20)
    assert results[0].metrics["pid"] != results[1].metrics["pid"]
    results = run_cases(specs, EXECUTOR, timeout_s=10, memory_limit_bytes=8 * 2**30)
    assert results[0].metrics["pid"] == results[1].metrics["pid"]


def _memory_slots(sides):
    cases = [case("bloat", action="memory", hold_mib=64), case("light", action="memory"),
             case("big", action="memory", peak_mib=128)]
    return [Slot(spec, round=r, side=side) for r in (1, 2) for spec in cases for side in sides]


def test_a_worker_over_the_memory_limit_keeps_the_cases_known_to_fit():
    """Above the limit (1 byte: every worker is), a case never seen gets a fresh worker; in the
    next round, one an earlier round showed to fit under the sweep's highest peak stays in the
    worker the heavy case left behind, and one that would raise that peak does not."""
    pairs = run_slots(_memory_slots([""]), EXECUTOR, timeout_s=20, memory_limit_bytes=1)
    pids = [[result.metrics["pid"] for slot, result in pairs if slot.round == r] for r in (1, 2)]
    assert len(set(pids[0])) == 3
    bloat, light, big = pids[1]
    assert bloat == light != big and not set(pids[1]) & set(pids[0])


def test_with_two_sides_a_worker_over_the_memory_limit_is_replaced_at_once():
    pairs = run_slots(_memory_slots(["base", "new"]), EXECUTOR, timeout_s=20, memory_limit_bytes=1)
    second = [(slot.spec.name, result.metrics["pid"]) for slot, result in pairs if slot.round == 2 and slot.side == "base"]
    assert len({pid for _name, pid in second}) == 3


def test_in_process_mode_runs_here():
    results = run_cases([case("a", action="ok"), case("b", action="raise")], EXECUTOR, isolate=False)
    assert results[0].metrics["pid"] == os.getpid()
    assert results[1].status == "failed"


def test_worker_start_up_counts_neither_against_the_timeout_nor_in_wall_time():
    """A 2 s framework import is the worker's, not the case's: a 1 s timeout still holds."""
    results = run_cases([case("a", action="ok"), case("b", action="ok")],
                        "tests.benchcore.slow_start_executor:execute", timeout_s=1)
    assert [r.status for r in results] == ["ok", "ok"]
    assert all(r.wall_s < 2 for r in results)  # the 2 s import is not in any case's wall time


def test_a_worker_stuck_starting_is_bounded_by_the_case_timeout(monkeypatch):
    import benchcore.execute.worker as isolation

    monkeypatch.setattr(isolation, "STARTUP_TIMEOUT_FLOOR_S", 0.5)  # the 60 s floor, scaled down
    results = run_cases([case("a", action="ok")], "tests.benchcore.slow_start_executor:execute", timeout_s=0.1)
    assert results[0].status == "timeout"
    assert results[0].error == "worker did not start within 0.5 s; killed"


def test_a_worker_that_dies_while_starting_is_a_crashed_case():
    results = run_cases([case("a", action="ok")], "tests.benchcore.no_such_module:execute", timeout_s=5)
    assert results[0].status == "crashed" and results[0].error.endswith("while starting")
    assert "No module named 'tests.benchcore.no_such_module'" in results[0].stderr_tail


def test_checkpoint_collects_results_and_resume_skips_them(tmp_path):
    checkpoint = tmp_path / "run.checkpoint.jsonl"
    first = [case("a", action="ok", value=1), case("b", action="raise")]
    run_cases(first, EXECUTOR, timeout_s=10, checkpoint=checkpoint)
    assert len(checkpoint.read_text().splitlines()) == 3  # the options header, then two results
    with pytest.raises(UsageError, match="--resume"):
        run_cases(first, EXECUTOR, checkpoint=checkpoint)
    started = []
    more = first + [case("c", action="ok", value=3)]
    results = run_cases(more, EXECUTOR, timeout_s=10, checkpoint=checkpoint, resume=True,
                        on_start=lambda spec, i, n: started.append(spec.name))
    assert started == ["c"]
    assert [r.status for r in results] == ["ok", "failed", "ok"]


def test_resume_refuses_cases_measured_under_other_options(tmp_path):
    """A report states one setting: samples taken with --runs 300 must not join a --runs 3 run."""
    checkpoint = tmp_path / "run.checkpoint.jsonl"
    specs = [case("a", action="ok", value=1), case("b", action="ok", value=2)]
    measured_with = {"settings": {"warmup": 1, "runs": 300}, "threads": None}
    run_cases(specs[:1], EXECUTOR, isolate=False, checkpoint=checkpoint, options=measured_with)
    assert Checkpoint(checkpoint).options() == measured_with
    with pytest.raises(UsageError) as info:
        run_cases(specs, EXECUTOR, isolate=False, checkpoint=checkpoint, resume=True,
                  options={"settings": {"warmup": 1, "runs": 3}, "threads": None})
    assert str(info.value) == (f"checkpoint {checkpoint} was measured with other settings "
                               "(settings.runs: 300 then, 3 now); resume with the flags of the "
                               "interrupted run, or delete the checkpoint to start over")
    results = run_cases(specs, EXECUTOR, isolate=False, checkpoint=checkpoint, resume=True,
                        options=dict(measured_with))
    assert [r.metrics["value"] for r in results] == [1, 2]


def test_checkpoint_lines_reach_the_file_at_once_and_the_disk_at_most_every_sync_period(tmp_path, monkeypatch):
    from benchcore.execute import checkpoint
    from benchcore.report.model import CaseResult

    synced = []
    monkeypatch.setattr(checkpoint.os, "fsync", synced.append)
    store = Checkpoint(tmp_path / "c.jsonl")
    store.start({"runs": 1})
    for name in "abc":
        store.append(CaseResult(case(name), "ok", {}))
    assert len(synced) == 1 and len(store.load()) == 3  # every line readable, one fsync
    monkeypatch.setattr(checkpoint, "CHECKPOINT_SYNC_S", 0.0)
    store.append(CaseResult(case("d"), "ok", {}))
    assert len(synced) == 2


def test_torn_checkpoint_line_is_ignored(tmp_path):
    path = tmp_path / "c.jsonl"
    run_cases([case("a", action="ok")], EXECUTOR, isolate=False, checkpoint=path)
    with open(path, "a") as handle:
        handle.write('{"spec": {"suite": "test", "na')
    assert list(Checkpoint(path).load()) == [("", 1, case("a", action="ok").key)]


def _children(pid):
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _gone(pid, within_s=10.0):
    """True once `pid` no longer runs (a zombie left for init to reap counts as gone)."""
    deadline = time.time() + within_s
    while time.time() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_busy_worker_dies_with_a_parent_killed_outright(tmp_path):
    """SIGKILL gives the parent no chance to clean up: the worker must not compute on."""
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from benchcore.measure.case import CaseSpec
        from benchcore.execute.worker import run_cases
        run_cases([CaseSpec("test", "h", {{"action": "hang"}})], "tests.benchcore.executors:execute", timeout_s=600)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], cwd=ROOT)
    deadline = time.time() + 60
    while time.time() < deadline and not _children(parent.pid):
        time.sleep(0.05)
    workers = _children(parent.pid)
    time.sleep(0.5)  # the worker is inside its hanging case now
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert workers and all(_gone(pid) for pid in workers)


def test_resume_after_kill_9_of_the_parent(tmp_path):
    checkpoint = tmp_path / "sweep.checkpoint.jsonl"
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from benchcore.measure.case import CaseSpec
        from benchcore.execute.worker import run_cases
        specs = [CaseSpec("test", f"c{{i}}", {{"action": "slow", "seconds": 0.3, "i": i}}) for i in range(8)]
        run_cases(specs, "tests.benchcore.executors:execute", timeout_s=30,
                  checkpoint={str(checkpoint)!r}, resume=True)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], cwd=ROOT)
    deadline = time.time() + 60
    while time.time() < deadline:
        if checkpoint.exists() and len(checkpoint.read_text().splitlines()) >= 3:  # header + 2
            break
        time.sleep(0.05)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    done_before = set(Checkpoint(checkpoint).load())
    assert 2 <= len(done_before) < 8

    started = []
    specs = [CaseSpec("test", f"c{i}", {"action": "slow", "seconds": 0.3, "i": i}) for i in range(8)]
    results = run_cases(specs, EXECUTOR, timeout_s=30, checkpoint=checkpoint, resume=True,
                        on_start=lambda spec, i, n: started.append(spec.key))
    assert all(r.status == "ok" for r in results)
    assert set(started).isdisjoint(done_before)
    assert len(started) + len(done_before) == 8
    lines = [json.loads(line) for line in checkpoint.read_text().splitlines() if line.strip()]
    assert "checkpoint_options" in lines[0]
    assert len({line["key"] for line in lines[1:]}) == 8


def test_interrupt_stops_a_busy_worker_at_once():
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(2)  # Ctrl-C arrives while the worker is busy with the hanging case
    started = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_cases([case("a", action="ok"), case("b", action="hang")], EXECUTOR, timeout_s=30)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert time.perf_counter() - started < 5  # no grace period spent on a worker that must go


def test_the_next_worker_starts_while_the_last_one_exits_and_runs_only_after_it(tmp_path):
    """A round's worker is let go and the next round's started at once (a worker's exit overlaps
    its replacement's import: benchcore.execute.worker.Leaving); the old one is waited for before
    the new one's first case. The launcher's old worker lingers until another has started, so
    without the overlap it would exit only after LINGER_S, after the new one's start."""
    from tests.benchcore import lingering_launcher

    log = tmp_path / "events"
    log.touch()
    env = {**os.environ, lingering_launcher.LOG_ENV: str(log)}
    slots = [Slot(case("first", action="ok"), round=1), Slot(case("second", action="launched", log=str(log)), round=2)]
    pairs = run_slots(slots, EXECUTOR, timeout_s=60, env=env,
                      launcher=[sys.executable, "-m", "tests.benchcore.lingering_launcher"])
    second = pairs[1][1].metrics
    old, new = second["events"][1], second["events"][3]
    assert second["events"] == ["start", old, "start", new, "exit", old]  # started before the old exited
    assert second["first_gone"]  # and the old one was waited for (reaped) before the case ran
    assert log.read_text().split()[-2:] == ["exit", new]


def test_lanes_run_that_many_workers_at_once_and_keep_the_slots_order(tmp_path):
    """The instruction engine's lanes: two workers at once (each case waits for its partner's
    mark, which only a worker running beside it can leave), results in the slots' order, every
    slot checkpointed once."""
    from benchcore.execute.checkpoint import Checkpoint, Slot

    def meeting(name, mine, theirs, wait_s=60):
        return case(name, action="meet", mark=str(tmp_path / mine), partner=str(tmp_path / theirs), wait_s=wait_s)

    slots = [Slot(meeting("a", "a", "b")), Slot(meeting("b", "b", "a")), Slot(meeting("c", "c", "d")),
             Slot(meeting("d", "d", "c"))]
    done = run_slots(slots, EXECUTOR, timeout_s=120, lanes=2, checkpoint=tmp_path / "run.jsonl")
    assert [slot.spec.name for slot, _result in done] == ["a", "b", "c", "d"]
    assert all(result.ok and result.metrics["met"] for _slot, result in done)
    pids = [result.metrics["pid"] for _slot, result in done]
    assert pids[0] == pids[2] != pids[1] == pids[3]  # lane k takes every second slot from k
    assert sorted(Checkpoint(tmp_path / "run.jsonl").load()) == sorted(slot.key for slot in slots)
    # one lane: the partner's mark never comes while a case waits for it
    alone = run_slots([Slot(meeting("e", "e", "f", wait_s=1)), Slot(meeting("f", "f", "e", wait_s=1))], EXECUTOR,
                      timeout_s=60)
    assert [result.metrics["met"] for _slot, result in alone] == [False, True]
