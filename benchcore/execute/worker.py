"""Run cases in a reused worker subprocess so one crashing case never costs the sweep.

The parent sends one case at a time to a worker (`python -m benchcore.execute.worker EXECUTOR`)
over a pipe and waits for its answer with a timeout. The worker imports the suite's executor
once and is reused across cases, so the framework import and its warm caches are paid once.
An executor's module may name the modules to import before the first case in `WORKER_PRELOAD`
(e.g. the framework): the worker reports ready only after them, and a case's timeout and wall
time start when the worker is ready, so they never include a worker's start-up.

- An exception in the executor is answered as `failed`, with the traceback.
- A worker that dies (segfault, abort, SIGKILL) is recorded as `crashed`, with the signal and
  the tail of its stderr; a worker that does not answer within the timeout is killed and the
  case recorded as `timeout`. A fresh worker takes the next case.
- A case that failed with a CUDA error (sticky: benchcore.execute.device_errors) is recorded with
  it, and a fresh worker takes the next case.
- A worker whose resident memory passes the ceiling is replaced before the next case, which
  keeps a long sweep's memory bounded (MXNet keeps its largest workspace for the process's
  life), unless an earlier round showed that case to fit in what the worker carries (MemoryBook).
- Every finished result is appended (and flushed) to the checkpoint at once
  (benchcore.execute.checkpoint), so Ctrl-C or `kill -9` of the parent loses nothing; `resume`
  skips what is there. It is fsynced at most every CHECKPOINT_SYNC_S (a crash of the machine
  itself loses at most that much): an fsync per case cost 2-3% of a short sweep's wall.

isolate=False runs the executor in this process, for debugging with pdb or a profiler; then a
crash ends the sweep and no timeout is enforced.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from benchcore.errors import SkipCase, UsageError, error_summary
from benchcore.execute import selfprofile
from benchcore.execute.checkpoint import (
    Checkpoint,
    Slot,
    check_checkpoint,
    json_default,
)
from benchcore.execute.device_errors import leaves_worker_unusable
from benchcore.execute.rounds import round_options
from benchcore.measure import contention, reference
from benchcore.measure.audit import RoundAudits
from benchcore.measure.case import CaseSpec
from benchcore.measure.instructions import read_dumps
from benchcore.measure.memory import RSS_BEFORE, RSS_PEAK, resident_bytes
from benchcore.report.model import CaseResult

STDERR_TAIL_CHARS = 4000
#: How long a fresh worker may take to import its executor and WORKER_PRELOAD modules: the
#: case's timeout, but never less than the floor (a cold import of a framework can take tens of
#: seconds), and the default when cases have no timeout.
STARTUP_TIMEOUT_FLOOR_S = 60.0
STARTUP_TIMEOUT_S = 600.0
READY = {"ready": True}
#: the environment variable naming a worker's scratch folder (see Worker)
SCRATCH_ENV = "BENCHCORE_WORKER_SCRATCH"
#: a scratch folder's name: this prefix, the parent's process id, a dash, a random part
SCRATCH_PREFIX = "benchcore-worker-"
#: the environment variable naming the folder every worker of one run_slots call shares (all
#: rounds, both `ab` sides): what a worker computed that the next round's fresh process would
#: compute again, to the same bytes (opbench's seeded input draws), can be left there. In memory
#: (/dev/shm) where the machine has it, so nothing is written back to a disk during the timed
#: calls; removed when the sweep ends, like a worker's own scratch.
SHARED_SCRATCH_ENV = "BENCHCORE_SHARED_SCRATCH"
_MEMORY_FOLDER = "/dev/shm"


def load_executor(path: str, preload: bool = False) -> Callable[[CaseSpec, dict], dict]:
    """Import "package.module:function" (and, with preload, the module's WORKER_PRELOAD: module
    names to import, or "module:function" to call, e.g. a framework's own way to import itself)."""
    module_name, _, function_name = path.partition(":")
    if not function_name:
        raise UsageError(f"executor {path!r} must look like 'package.module:function'")
    module = importlib.import_module(module_name)
    for name in getattr(module, "WORKER_PRELOAD", ()) if preload else ():
        target, _, call = name.partition(":")
        loaded = importlib.import_module(target)
        if call:
            getattr(loaded, call)()
    return getattr(module, function_name)


def execute_one(executor: Callable, spec: CaseSpec, options: dict) -> dict:
    """Run one case and answer with a result message (never raises for case errors)."""
    started = time.perf_counter()
    run = reference.execute if reference.is_reference(spec) else executor
    try:
        before = contention.snapshot()
        metrics = run(spec, options) or {}
        # one record per round (benchcore.measure.combine.PER_ROUND_RECORDS): a bimodal
        # quantity's report says whether its slow rounds waited for a CPU (modes.cause)
        metrics["contention"] = [contention.between(before, contention.snapshot())]
        answer = {"status": "ok", "metrics": metrics}
    except SkipCase as exc:
        answer = {"status": "skipped", "error": str(exc) or "skipped"}
    except Exception as exc:  # the case failed, the worker lives on
        answer = {
            "status": "failed",
            "error": error_summary(exc),
            "traceback": traceback.format_exc()[-STDERR_TAIL_CHARS:],
        }
    answer["wall_s"] = time.perf_counter() - started
    return answer



def worker_main(executor_path: str) -> None:
    """The worker loop: one JSON request per stdin line, one JSON answer per line.

    The protocol uses a private duplicate of stdout; fd 1 is pointed at stderr so that stray
    prints from frameworks cannot corrupt the protocol.
    """
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    profile = selfprofile.start()
    executor = load_executor(executor_path, preload=True)
    _freeze_what_lives()
    protocol.write(json.dumps(READY) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        answer = execute_one(executor, CaseSpec.from_dict(request["spec"]), request.get("options") or {})
        answer["rss_bytes"] = resident_bytes()
        protocol.write(json.dumps(answer, default=json_default) + "\n")
    selfprofile.save(profile)
    _leave(protocol)


def _freeze_what_lives() -> None:
    """Move every object alive after the imports out of the cycle collector's reach (gc.freeze):
    a framework's import leaves ~175,000 tracked objects (torch), which every full collection
    would walk again — 0.24 s a case where the suite collects after each one. They still die by
    reference count; only a cycle among them would never be collected."""
    import gc

    gc.collect()
    gc.freeze()


def _leave(protocol) -> None:
    """End the worker once the parent closed its stdin, skipping the interpreter's teardown and
    the frameworks' exit handlers: MXNet writes its profiler's whole trace at exit (over a second
    after a round of cases; the parent removes it unread), and the parent waits for the exit
    before the next worker's first case (Leaving)."""
    protocol.flush()
    sys.stderr.flush()
    if _FFLUSH is not None:  # what C libraries left in their stdio buffers
        _FFLUSH(None)
    os._exit(0)


def _describe_exit(returncode: Optional[int]) -> str:
    if returncode is None:
        return "worker stopped answering"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"worker killed by {name}"
    return f"worker exited with status {returncode}"


def remove_orphaned_scratch() -> None:
    """Remove the scratch folders of parents that no longer run (killed outright, or a cluster
    node's actor that was stopped), so their workers' files do not pile up."""
    for root in {tempfile.gettempdir(), _MEMORY_FOLDER}:
        for folder in Path(root).glob(f"{SCRATCH_PREFIX}*-*"):
            owner = folder.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
            if owner.isdigit() and not _running(int(owner)):
                shutil.rmtree(folder, ignore_errors=True)


def make_shared_scratch() -> str:
    """A new folder for SHARED_SCRATCH_ENV, in memory where the machine has /dev/shm."""
    root = _MEMORY_FOLDER if os.path.isdir(_MEMORY_FOLDER) and os.access(_MEMORY_FOLDER, os.W_OK) else None
    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-shared-", dir=root)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # PermissionError (another user's process) means it runs too
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def die_with_parent() -> None:
    """In the forked worker, before exec: Linux sends it SIGKILL when the parent dies, so a
    parent killed outright (SIGKILL, OOM) never leaves a worker computing and skewing whatever
    runs next on the machine. Elsewhere a no-op."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _libc(name: str):
    """A C library function of this process (None where there is none by that name)."""
    try:
        import ctypes

        return getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None


_PR_SET_PDEATHSIG = 1
# looked up here: the forked child must not import or load libraries
_PRCTL = _libc("prctl") if sys.platform.startswith("linux") else None
_FFLUSH = _libc("fflush")


class Worker:
    """One worker subprocess plus the file its stderr goes to.

    `python` is the interpreter it runs under: this one by default; another environment's
    (an A/B run of two framework builds) imports this suite's code from `env`'s PYTHONPATH.
    """

    def __init__(self, executor: str, env: Optional[Dict[str, str]] = None, python: Optional[str] = None,
                 launcher: Sequence[str] = ()):
        self.stderr_file = tempfile.TemporaryFile(mode="w+b")
        # the worker's files (MXNet's exit-time trace) go here; the parent removes it, so a
        # worker killed for a timeout or a crash leaves nothing behind in the temporary folder,
        # and a parent that was killed itself has its folders removed by the next one to start
        remove_orphaned_scratch()
        self.scratch = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
        env = dict(os.environ if env is None else env, **{SCRATCH_ENV: self.scratch})
        self.process = subprocess.Popen(
            [*launcher, python or sys.executable, "-m", "benchcore.execute.worker", executor],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
            env=env,
            start_new_session=True,  # Ctrl-C reaches the parent, which then stops the worker
            preexec_fn=die_with_parent,
        )
        self.rss_bytes: Optional[int] = None
        self.ready = False

    def wait_ready(self, timeout_s: Optional[float] = None) -> Optional[dict]:
        """Wait for the worker's start-up; None when ready, else the crashed/timeout answer
        for the case that was to run."""
        if self.ready:
            return None
        started = time.perf_counter()
        limit = STARTUP_TIMEOUT_S if timeout_s is None else max(timeout_s, STARTUP_TIMEOUT_FLOOR_S)
        line = self._read_line(limit)
        wall_s = time.perf_counter() - started
        if line and line.strip() == json.dumps(READY).encode():
            self.ready = True
            return None
        if line is None:
            self.kill()
            return {"status": "timeout", "error": f"worker did not start within {limit:g} s; killed",
                    "stderr_tail": self.stderr_since(0), "wall_s": wall_s}
        if line:  # not the protocol's greeting: this worker cannot be trusted with a case
            self.kill()
            error = f"worker sent {line[:80]!r} instead of its ready greeting; killed"
        else:
            error = f"{_describe_exit(self.process.wait())} while starting"
        return {"status": "crashed", "error": error, "stderr_tail": self.stderr_since(0), "wall_s": wall_s}

    def stderr_since(self, offset: int) -> str:
        self.stderr_file.flush()
        self.stderr_file.seek(offset)
        data = self.stderr_file.read().decode("utf-8", "replace")
        return data[-STDERR_TAIL_CHARS:]

    def stderr_offset(self) -> int:
        self.stderr_file.seek(0, os.SEEK_END)
        return self.stderr_file.tell()

    def request(self, spec: CaseSpec, options: dict, timeout_s: Optional[float]) -> dict:
        """Send a case; return the worker's answer or a crashed/timeout answer."""
        failed_start = self.wait_ready(timeout_s)
        if failed_start:
            return failed_start
        offset = self.stderr_offset()
        started = time.perf_counter()
        try:
            self.process.stdin.write((json.dumps({"spec": spec.to_dict(), "options": options}) + "\n").encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # the read below sees the death
        line = self._read_line(timeout_s)
        wall_s = time.perf_counter() - started
        if line is None:
            self.kill()
            return {"status": "timeout", "error": f"case did not finish within {timeout_s:g} s; worker killed",
                    "stderr_tail": self.stderr_since(offset), "wall_s": wall_s}
        if not line:
            returncode = self.process.wait()
            return {"status": "crashed", "error": _describe_exit(returncode),
                    "stderr_tail": self.stderr_since(offset), "wall_s": wall_s}
        answer = json.loads(line)
        self.rss_bytes = answer.pop("rss_bytes", None)
        if answer["status"] == "failed":
            tail = self.stderr_since(offset)
            answer["stderr_tail"] = (answer.pop("traceback", "") + ("\n" + tail if tail else ""))[-STDERR_TAIL_CHARS:]
        return answer

    def _read_line(self, timeout_s: Optional[float]) -> Optional[bytes]:
        """A line, b'' at EOF (worker died), or None on timeout."""
        stream = self.process.stdout
        if timeout_s is not None:
            ready, _, _ = select.select([stream], [], [], timeout_s)
            if not ready:
                return None
        return stream.readline()

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
        self.process.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def let_go(self) -> None:
        """Tell the worker to end (EOF on its stdin) without waiting for it: close() waits."""
        if self.process.poll() is None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except (BrokenPipeError, OSError):
                self.kill()

    def close(self) -> None:
        self.let_go()
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.stderr_file.close()


class Leaving:
    """Workers told to end whose exit is not yet waited for. A worker's exit (the kernel taking
    back a framework's gigabytes) takes a fifth of a second or more; its replacement's start (the
    framework's import) takes a second. Letting the old one go and starting the new one at once
    overlaps the two; the old one is waited for before the new one's first case, so no case is
    timed while another worker still runs."""

    def __init__(self):
        self.workers: List[Worker] = []

    def add(self, worker: Worker) -> None:
        worker.let_go()
        self.workers.append(worker)

    def settle(self, kill: bool = False) -> None:
        for worker in self.workers:
            if kill:
                worker.kill()
            worker.close()
        self.workers = []


def _result(spec: CaseSpec, answer: dict) -> CaseResult:
    return CaseResult(
        spec=spec,
        status=answer["status"],
        metrics=answer.get("metrics") or {},
        error=answer.get("error"),
        stderr_tail=answer.get("stderr_tail"),
        wall_s=answer.get("wall_s"),
    )


def run_cases(specs: Iterable[CaseSpec], executor: str, options: Optional[dict] = None, **kwargs) -> List[CaseResult]:
    """Every spec once, in the order given, in one worker: one CaseResult per spec (see run_slots)."""
    return [result for _slot, result in run_slots([Slot(spec) for spec in specs], executor, options, **kwargs)]


def run_slots(
    slots: Sequence[Slot],
    executor: str,
    options: Optional[dict] = None,
    *,
    isolate: bool = True,
    timeout_s: Optional[float] = None,
    checkpoint=None,
    resume: bool = False,
    memory_limit_bytes: Optional[int] = None,
    env: Optional[Dict[str, str]] = None,
    pythons: Optional[Dict[str, str]] = None,
    on_start: Optional[Callable[[CaseSpec, int, int], None]] = None,
    on_result: Optional[Callable[[CaseResult], None]] = None,
    launcher: Sequence[str] = (),
    side_launchers: Optional[Dict[str, Sequence[str]]] = None,
    lanes: int = 1,
) -> List[Tuple[Slot, CaseResult]]:
    """Run every slot, in the order given; (slot, result) pairs in that order.

    Each side ("" or an A/B run's "base"/"new") has its own worker, under `pythons[side]` when
    given; all workers are replaced when the round changes, so each round is timed in fresh
    processes. With a checkpoint path, finished results are appended as they arrive; an existing
    checkpoint is refused unless resume is set (it holds an interrupted run's results), and with
    resume its slots are taken from it instead of being run again. A case is audited in one of
    its rounds where the options say so (benchcore.measure.audit.RoundAudits). `launcher` prefixes
    every worker's command line (benchcore.execute.valgrind's, for the instruction engine);
    `side_launchers` a side's, where it differs (benchcore.execute.sweep.count_sides).

    `lanes` > 1 runs that many workers at once, each on every lanes-th slot in order: only for
    what the machine's load cannot change (instruction counts); timings run one worker at a time.
    """
    slots = list(slots)
    options = options or {}
    store = Checkpoint(checkpoint) if checkpoint else None
    done: Dict[tuple, CaseResult] = {}
    if store and check_checkpoint(store.path, options, resume):
        done = store.load()
    elif store:
        store.start(options)
    shared = make_shared_scratch()
    env = dict(os.environ if env is None else env, **{SHARED_SCRATCH_ENV: shared})
    audits = RoundAudits(options)
    lock = threading.Lock()  # the checkpoint, the audits and the callbacks, between lanes
    found: Dict[int, Tuple[Slot, CaseResult]] = {}
    stopping = threading.Event()
    every_lane: List[_Runners] = []

    def lane(indexes: Sequence[int]) -> None:
        mine = [slots[i] for i in indexes]
        runners = _Runners(executor, isolate, env, memory_limit_bytes, pythons or {}, launcher,
                           one_side=len({slot.side for slot in mine}) == 1, side_launchers=side_launchers)
        every_lane.append(runners)
        try:
            for index in indexes:
                if stopping.is_set():
                    raise KeyboardInterrupt("another lane stopped")
                found[index] = _run_slot(slots[index], index, len(slots), done, runners, audits, options, timeout_s,
                                         store, lock, on_start, on_result)
        except BaseException:  # Ctrl-C or an error here: stop the workers now, not after a grace period
            runners.close(kill=True)
            raise
        else:
            runners.close()

    try:
        if lanes <= 1:
            lane(range(len(slots)))
        else:
            with ThreadPoolExecutor(lanes) as pool:
                futures = [pool.submit(lane, range(k, len(slots), lanes)) for k in range(lanes)]
                try:
                    for future in futures:
                        future.result()
                except BaseException:  # one lane failed, or Ctrl-C: the other lanes' workers go now
                    stopping.set()
                    for runners in list(every_lane):
                        runners.close(kill=True)
                    raise
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    return [found[i] for i in range(len(slots))]


def _run_slot(slot: Slot, index: int, total: int, done: Dict[tuple, CaseResult], runners: "_Runners",
              audits: RoundAudits, options: dict, timeout_s, store, lock, on_start, on_result) -> Tuple[Slot, CaseResult]:
    """One slot: its checkpointed result, or its run in the lane's worker; recorded under `lock`."""
    result = done.get(slot.key)
    if result is None:
        with lock:
            if on_start:
                on_start(slot.spec, index, total)
            slot_options = audits.options_for(slot, round_options(options, slot))
        result = _result(slot.spec, runners.run(slot, slot_options, timeout_s))
        if store:
            with lock:
                store.append(result, slot)
    with lock:
        audits.record(slot, result)
        if on_result:
            on_result(result)
    return slot, result


class MemoryBook:
    """What the sweep's earlier slots showed of each case's memory, so that a worker a heavy case
    left above --memory-limit-gb (MXNet keeps its largest temporary workspace for the process's
    life) need not be replaced before every case: a fresh worker costs a second or more (the
    framework's import), a round of the full MXNet sweep had two or three such replacements, and
    the light cases that follow do not need the memory back.

    A case fits a worker that carries `resident` bytes where an earlier slot of it (an earlier
    round, the other side) grew its worker by at most the headroom up to the highest peak any
    worker of the sweep has reached: so carrying the memory never makes the sweep's largest
    process larger than it already was. A case never seen does not fit (the first round
    replaces its workers as before). Growth is the executor's resident peak over its resident
    memory before the case (benchcore.measure.memory's figures)."""

    def __init__(self):
        self.growth: Dict[str, int] = {}
        self.highest_peak = 0

    def record(self, key: str, metrics: dict) -> None:
        before, peak = metrics.get(RSS_BEFORE), metrics.get(RSS_PEAK)
        if isinstance(before, int) and isinstance(peak, int):
            self.growth[key] = max(self.growth.get(key, 0), peak - before)
            self.highest_peak = max(self.highest_peak, peak)

    def fits(self, key: str, resident: Optional[int]) -> bool:
        grown = self.growth.get(key)
        return grown is not None and resident is not None and resident + grown <= self.highest_peak


class _Runners:
    """One runner per side, all replaced when a new round starts."""

    def __init__(self, executor: str, isolate: bool, env, memory_limit_bytes, pythons: Dict[str, str],
                 launcher: Sequence[str] = (), one_side: bool = True,
                 side_launchers: Optional[Dict[str, Sequence[str]]] = None):
        self.executor, self.isolate, self.env, self.launcher = executor, isolate, env, tuple(launcher)
        self.side_launchers = side_launchers or {}
        self.memory_limit_bytes, self.pythons = memory_limit_bytes, pythons
        self.by_side: Dict[str, object] = {}
        self.round: Optional[int] = None
        self.memory = MemoryBook()
        self.leaving = Leaving()
        #: with two sides, the other side's case runs while a worker waits for its next one, so a
        #: worker over the memory limit is not kept
        self.keep_over_limit = one_side

    def run(self, slot: Slot, options: dict, timeout_s):
        if slot.round != self.round:
            self._let_go()  # the next round's workers wait for these before their first case
            self.round = slot.round
        runner = self.by_side.get(slot.side)
        if runner is None:
            runner = (_Isolated(self.executor, self.env, self.memory_limit_bytes, self.memory, self.leaving,
                                self.pythons.get(slot.side), self.side_launchers.get(slot.side, self.launcher))
                      if self.isolate else _InProcess(self.executor))
            self.by_side[slot.side] = runner
        answer = runner.run(slot.spec, options, timeout_s, keep_over_limit=self.keep_over_limit)
        self.memory.record(slot.spec.key, answer.get("metrics") or {})
        return answer

    def _let_go(self, kill: bool = False):
        for runner in self.by_side.values():
            runner.close(kill=kill)
        self.by_side = {}

    def close(self, kill: bool = False):
        self._let_go(kill)
        self.leaving.settle(kill)


class _InProcess:
    def __init__(self, executor: str):
        self.executor = load_executor(executor)

    def run(self, spec, options, timeout_s, keep_over_limit: bool = False):
        return read_dumps(execute_one(self.executor, spec, options))

    def close(self, kill: bool = False):
        pass


class _Isolated:
    def __init__(self, executor: str, env, memory_limit_bytes, memory: MemoryBook, leaving: Leaving,
                 python: Optional[str] = None, launcher: Sequence[str] = ()):
        self.executor = executor
        self.launcher = launcher
        self.env = env
        self.memory_limit_bytes = memory_limit_bytes
        self.python = python
        self.memory = memory
        self.leaving = leaving
        self.worker: Optional[Worker] = None

    def run(self, spec, options, timeout_s, keep_over_limit: bool = False):
        """The case's answer from this side's worker. A worker a case left above the memory
        limit is replaced before the next case, unless `keep_over_limit` (no other side's worker
        runs meanwhile) and the MemoryBook knows that case fits in what it carries."""
        if self.worker is not None and self._over_limit() and not (
                keep_over_limit and self.memory.fits(spec.key, self.worker.rss_bytes)):
            self._replace_worker(start=False)
        if self.worker is None or not self.worker.alive():
            self._replace_worker()
        answer = read_dumps(self.worker.request(spec, options, timeout_s))  # before a new worker drops its scratch
        if answer["status"] in ("crashed", "timeout") or leaves_worker_unusable(answer) or (
                self._over_limit() and not keep_over_limit):
            self._replace_worker(start=False)
        return answer

    def _over_limit(self) -> bool:
        return (self.memory_limit_bytes is not None and self.worker.rss_bytes is not None
                and self.worker.rss_bytes > self.memory_limit_bytes)

    def _replace_worker(self, start: bool = True):
        """Let the worker go (Leaving); with `start`, start the next one, then wait for every
        worker let go, while the new one imports."""
        if self.worker is not None:
            self.leaving.add(self.worker)
            self.worker = None
        if start:
            self.worker = Worker(self.executor, self.env, self.python, self.launcher)
            self.leaving.settle()

    def close(self, kill: bool = False):
        if kill and self.worker is not None:
            self.worker.kill()
        self._replace_worker(start=False)


if __name__ == "__main__":
    worker_main(sys.argv[1])
