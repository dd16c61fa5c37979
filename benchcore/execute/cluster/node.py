"""What runs on a node of a Ray cluster: the probe, and one shard of a sweep in a subprocess.

The driver (benchcore.execute.cluster.driver) wraps these in a Ray task and a Ray actor; this module imports
no Ray. A shard is the ordinary sweep for its part: `python -m benchcore.execute.cluster.node shard TASK
CHECKPOINT` runs its slots through benchcore.execute.worker.run_slots, so isolated workers,
per-case timeouts, crash capture and the JSON Lines checkpoint behave exactly as on one
machine. The actor that started the subprocess reads the checkpoint's lines as they appear
and hands them to the driver each time it polls.

Why a subprocess rather than the Ray worker itself: a Ray worker carries Ray's threads and
sets OMP_NUM_THREADS to the CPUs it claimed; the subprocess gets the driver's thread settings
and the suite's code on its path, and dies with the actor (PR_SET_PDEATHSIG), so a lost actor
never leaves a shard computing beside the next one.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from benchcore.execute.checkpoint import Slot
from benchcore.execute.worker import STDERR_TAIL_CHARS, die_with_parent
from benchcore.measure.case import CaseSpec

#: how long one poll waits for a new result before answering with none
POLL_WAIT_S = 1.0
#: how long a probe's subprocess may take to import the frameworks and describe the node
PROBE_SUBPROCESS_TIMEOUT_S = 300.0
#: a shard's temporary folder (task, checkpoint, output) is named <prefix><actor pid>-<random>
SHARD_FOLDER_PREFIX = "benchcore-shard-"


@dataclass
class NodeSetup:
    """What every process the driver starts on a node needs, whatever it runs."""

    #: the driver's thread variables (benchcore.execute.environment.THREAD_VARIABLES); None: unset on the node too
    thread_env: Dict[str, Optional[str]] = field(default_factory=dict)
    #: top-level packages to put on the subprocess's path (benchcore, the suite's executor's)
    packages: Tuple[str, ...] = ("benchcore",)

    def environ(self) -> Dict[str, str]:
        """This Ray worker's environment with the driver's thread settings and the packages the
        driver shipped (runtime_env py_modules) first on PYTHONPATH.

        Ray sets OMP_NUM_THREADS to the CPUs a task claimed; a sweep on one machine runs with
        what the user set, so the node's shard must too, or its figures would differ."""
        env = dict(os.environ)
        for name, value in self.thread_env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        roots = [root for root in map(package_root, self.packages) if root]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*roots, *filter(None, [env.get("PYTHONPATH")])]))
        return env


def package_root(name: str) -> Optional[str]:
    """The folder holding package `name` as this process would import it (not imported)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(list(spec.submodule_search_locations)[0]).resolve().parent)


# --------------------------------------------------------------------------- the probe


@dataclass
class ProbeRequest:
    """A node's check before any shard: can it import the suite, and what is its environment."""

    suite: str
    executor: str
    frameworks: Tuple[str, ...]
    argv: List[str]
    extra: dict
    setup: NodeSetup
    #: the suite's environment collectors (benchcore.suite.Suite.collectors)
    collectors: Tuple[str, ...] = ()
    #: the instruction engine's --cache-sim (its shards' workers run under valgrind); None: timing
    counting: Optional[str] = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ProbeRequest":
        setup = data["setup"]
        return cls(data["suite"], data["executor"], tuple(data["frameworks"]), list(data["argv"]), dict(data["extra"]),
                   NodeSetup(dict(setup["thread_env"]), tuple(setup["packages"])), tuple(data.get("collectors", ())),
                   data.get("counting"))


def probe(request: dict) -> dict:
    """Run in a Ray task on the node: {"environment": …} or {"missing": "what, and why"}.

    The check runs in a subprocess with the shard's environment, so what it finds (an import
    that fails, the thread variables, the GPU Ray assigned) is what the shard will find."""
    setup = ProbeRequest.from_dict(request).setup
    try:
        done = subprocess.run([sys.executable, "-m", "benchcore.execute.cluster.node", "probe", json.dumps(request)],
                              capture_output=True, text=True, env=setup.environ(), timeout=PROBE_SUBPROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"missing": f"its probe did not finish within {PROBE_SUBPROCESS_TIMEOUT_S:g} s"}
    if done.returncode == 0:
        try:
            return json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            pass
    return {"missing": f"benchcore ({last_line(done.stderr) or f'exit status {done.returncode}'})"}


def probe_main(request: ProbeRequest) -> dict:
    """In the probe's subprocess: import what a shard imports, then describe the node."""
    modules = [*request.frameworks, request.executor.partition(":")[0]]
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # absent, or broken: either way no shard can run here
            return {"missing": f"{name} ({type(exc).__name__}: {exc})"}
    if request.counting is not None:
        missing = counting_missing(request.counting)
        if missing:
            return {"missing": missing}
    from benchcore.execute.environment import collect

    return {"environment": collect(request.suite, request.argv, collectors=request.collectors, extra=request.extra)}


def counting_missing(cache_sim: str) -> Optional[str]:
    """What this node lacks to count instructions (valgrind, its header, a C compiler), or None."""
    from benchcore.errors import UsageError
    from benchcore.execute import valgrind

    try:
        valgrind.plan(cache_sim)
    except UsageError as exc:
        return f"valgrind for --engine instructions ({exc})"
    return None


def last_line(text: Optional[str]) -> str:
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


# --------------------------------------------------------------------------- a shard


@dataclass
class ShardTask:
    """One shard's part of a sweep, as the driver sends it to a node."""

    label: str
    executor: str
    #: the sweep's options (benchcore.execute.sweep.SweepJob.options): the checkpoint header, the workers' options
    options: dict
    slots: List[Slot]
    timeout_s: Optional[float]
    memory_limit_bytes: Optional[int]
    setup: NodeSetup
    #: the instruction engine's --cache-sim: the shard's workers run under valgrind, with the
    #: launcher the node builds for itself (its valgrind, its client-request shim); None: timing
    counting: Optional[str] = None

    def to_dict(self) -> dict:
        return {"label": self.label, "executor": self.executor, "options": self.options,
                "slots": [{"spec": s.spec.to_dict(), "round": s.round, "side": s.side} for s in self.slots],
                "timeout_s": self.timeout_s, "memory_limit_bytes": self.memory_limit_bytes,
                "setup": asdict(self.setup), "counting": self.counting}

    @classmethod
    def from_dict(cls, data: dict) -> "ShardTask":
        slots = [Slot(CaseSpec.from_dict(s["spec"]), int(s["round"]), str(s["side"])) for s in data["slots"]]
        setup = data["setup"]
        return cls(data["label"], data["executor"], data["options"], slots, data["timeout_s"],
                   data["memory_limit_bytes"], NodeSetup(dict(setup["thread_env"]), tuple(setup["packages"])),
                   data.get("counting"))


def shard_main(task: ShardTask, checkpoint: Path) -> dict:
    """In the shard's subprocess: the ordinary sweep over its slots, with the node's noise state
    read before and after (it describes this node, not the driver's machine)."""
    from benchcore.execute.system import read_system
    from benchcore.execute.worker import run_slots

    start = read_system()
    launcher = ()
    if task.counting is not None:
        from benchcore.execute import valgrind

        launcher = valgrind.plan(task.counting, (task.options.get("valgrind") or {}).get("environment")).launcher
    run_slots(task.slots, task.executor, task.options, isolate=True, timeout_s=task.timeout_s,
              checkpoint=checkpoint, memory_limit_bytes=task.memory_limit_bytes, launcher=launcher)
    return {"system": {"start": start.to_dict(), "end": read_system().to_dict()}}


class ShardRunner:
    """A Ray actor (the driver wraps it with ray.remote): starts a shard's subprocess and, on
    each poll, answers with the result lines its checkpoint gained since the last one.

    The actor holds the claim (the node's CPUs, a GPU, a bench_slot) for as long as the
    shard runs; the driver kills it once the shard is done or lost."""

    def __init__(self, task: dict):
        remove_orphans()
        self.folder = Path(tempfile.mkdtemp(prefix=f"{SHARD_FOLDER_PREFIX}{os.getpid()}-"))
        shard = ShardTask.from_dict(task)
        (self.folder / "task.json").write_text(json.dumps(task))
        self.checkpoint = self.folder / "checkpoint.jsonl"
        self.stdout = open(self.folder / "stdout", "w+b")
        self.stderr = open(self.folder / "stderr", "w+b")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchcore.execute.cluster.node", "shard", str(self.folder / "task.json"), str(self.checkpoint)],
            stdin=subprocess.DEVNULL, stdout=self.stdout, stderr=self.stderr, env=shard.setup.environ(),
            preexec_fn=die_with_parent)
        self.offset = 0

    def poll(self, wait_s: float = POLL_WAIT_S) -> dict:
        """{"records": new checkpoint lines, "done": bool, and once done "returncode",
        "system" (the node's noise state) or "error"}. Waits up to wait_s for something new."""
        deadline = time.monotonic() + wait_s
        while True:
            exited = self.process.poll() is not None  # read after: lines written before the exit are seen
            records = self._new_records()
            if records or exited or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        answer: dict = {"records": records, "done": exited}
        if exited:
            answer.update(self._outcome())
        return answer

    def _new_records(self) -> List[dict]:
        """Complete lines past the last offset; a line still being written waits for the next poll."""
        try:
            with open(self.checkpoint, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        records = []
        for line in complete.decode("utf-8", "replace").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return records

    def _outcome(self) -> dict:
        returncode = self.process.returncode
        self.stdout.seek(0)
        self.stderr.seek(0)
        stdout = self.stdout.read().decode("utf-8", "replace")
        stderr = self.stderr.read().decode("utf-8", "replace")[-STDERR_TAIL_CHARS:]
        shutil.rmtree(self.folder, ignore_errors=True)
        if returncode == 0:
            try:
                return {"returncode": 0, **json.loads(last_line(stdout))}
            except json.JSONDecodeError:
                pass
        return {"returncode": returncode,
                "error": f"its shard process exited with status {returncode}: {last_line(stderr) or 'no output'}"}


def remove_orphans() -> None:
    """Remove the folders of shards whose actor was killed (a lost shard, a driver that died)
    before it could: their names carry the actor's pid, and that process is gone."""
    if not Path("/proc/self").exists():  # no way to tell a live pid here: keep them all
        return
    for folder in Path(tempfile.gettempdir()).glob(f"{SHARD_FOLDER_PREFIX}*-*"):
        owner = folder.name[len(SHARD_FOLDER_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: Sequence[str]) -> int:
    command = argv[0] if argv else ""
    if command == "probe":
        print(json.dumps(probe_main(ProbeRequest.from_dict(json.loads(argv[1])))))
        return 0
    if command == "shard":
        task = ShardTask.from_dict(json.loads(Path(argv[1]).read_text()))
        print(json.dumps(shard_main(task, Path(argv[2]))))
        return 0
    print("usage: python -m benchcore.execute.cluster.node probe REQUEST | shard TASK CHECKPOINT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
