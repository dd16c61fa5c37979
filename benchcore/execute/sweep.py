"""The sweep pipeline both command lines share: rounds, A/B sides, checkpoint, progress.

A suite's CLI parses its flags, plans its cases (a SweepJob) and says how to run them (a RunPlan,
benchcore.cli.options.run_plan_from); from there both suites take the same steps, here: split the
runs over the rounds, schedule the rounds (and, for `ab`, the two sides, alternated ABBA), run
them in isolated workers with one checkpoint, combine each case's rounds with the suite's
combiner, and read the machine's noise state before and after; or hand the whole sweep to a Ray
cluster (benchcore.execute.cluster.driver). The report's contents and outputs stay with the
command lines (benchcore.cli.options.write_outputs) and the suite.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from benchcore.errors import UsageError
from benchcore.execute import idle
from benchcore.execute.cluster.driver import ClusterPlan
from benchcore.execute.rounds import RUNS_PER_ROUND, RoundPlan, Short, combine_results
from benchcore.execute.system import IDLE_CHECK, read_system
from benchcore.measure import reference
from benchcore.measure.case import CaseSpec
from benchcore.measure.combine import combine_metrics
from benchcore.measure.runner import BUDGET_ENV, RunSettings, WarmupOverBudget
from benchcore.report.model import CaseResult
from benchcore.suite import Suite

#: warnings not worth repeating before every sweep (rounds already average over layouts)
QUIET_AT_SWEEP = ("ASLR",)


@dataclass
class SweepJob:
    """Everything a sweep needs, planned by a suite's CLI."""

    suite: Suite
    specs: List[CaseSpec]
    #: the timing settings as asked for: -w/-r over all rounds together
    settings: RunSettings
    rounds: RoundPlan
    #: what else the executor needs (engine, threads, seed …); recorded in the checkpoint
    worker_options: dict = field(default_factory=dict)
    checkpoint: Optional[Path] = None
    #: side → interpreter, for `ab`; empty: one side, this interpreter
    pythons: Dict[str, str] = field(default_factory=dict)
    env: Optional[Dict[str, str]] = None
    #: time benchcore.measure.reference once per round (and side), at a random place in the round
    reference: bool = True
    #: every worker's command-line prefix (the instruction engine's valgrind), and the factor
    #: its cases' --timeout is scaled by
    launcher: Tuple[str, ...] = ()
    #: side → the interpreter its workers start and the prefix before it, where these are not
    #: pythons[side] and launcher: a wrapper's real interpreter under valgrind, after the
    #: variables the wrapper sets (count_sides)
    worker_pythons: Dict[str, str] = field(default_factory=dict)
    side_launchers: Dict[str, Tuple[str, ...]] = field(default_factory=dict)
    timeout_scale: float = 1.0
    #: the factor --memory-limit-gb is scaled by (valgrind's own memory lives in the worker)
    memory_scale: float = 1.0
    #: workers running at once (only where the load cannot change the figures: the instruction
    #: engine, benchcore.execute.valgrind.apply)
    lanes: int = 1

    @property
    def sides(self) -> Sequence[str]:
        return tuple(self.pythons) or ("",)

    @property
    def reference_specs(self) -> List[CaseSpec]:
        """The machine reference's probes (benchcore.measure.reference), one per CASES_PER_PROBE cases."""
        return reference.specs(len(self.specs)) if self.reference else []

    @property
    def all_specs(self) -> List[CaseSpec]:
        return self.specs + self.reference_specs

    @property
    def round_settings(self) -> RunSettings:
        """A round's settings: the first round's share of the runs (the largest; each slot gets
        its own round's, rounds.round_options), the adaptive time limits' share, and the whole
        warmup (RoundPlan: every round is a fresh process)."""
        n, asked = self.rounds.rounds, self.settings
        return dataclasses.replace(asked, runs=self.rounds.runs_per_round(asked.runs)[0],
                                   warmup=self.rounds.warmup_per_round(asked.warmup),
                                   min_time_s=asked.min_time_s / n, max_time_s=asked.max_time_s / n)

    def options(self) -> dict:
        return {"settings": self.round_settings.to_dict(), **self.worker_options,
                "rounds": {**self.rounds.to_dict(), RUNS_PER_ROUND: self.rounds.runs_per_round(self.settings.runs)}}

    def settings_record(self) -> dict:
        """The report's record of how the runs were spread (settings.rounds)."""
        return {**self.rounds.to_dict(), RUNS_PER_ROUND: self.rounds.runs_per_round(self.settings.runs),
                "warmup_per_round": self.round_settings.warmup}


@dataclass(frozen=True)
class RunPlan:
    """How a sweep runs, as its command line asked (benchcore.cli.options.run_plan_from): the
    argparse namespace stops at the command line, and this is what crosses into the sweep."""

    isolate: bool = True
    timeout_s: Optional[float] = None
    #: continue the checkpoint of an interrupted sweep
    resume: bool = False
    #: the workers' restart ceiling (--memory-limit-gb); None: none
    memory_limit_bytes: Optional[int] = None
    #: --ray and its flags; None: on this machine
    cluster: Optional[ClusterPlan] = None
    #: --cpu-idle: whether idle CPUs poll while the sweep times (benchcore.execute.idle)
    cpu_idle: str = idle.DEFAULT_MODE


def measure(job: SweepJob, plan: RunPlan, prog: str, argv: Sequence[str], extra: dict,
            collect_local: Optional[Callable[[], dict]] = None,
            more_rounds: Optional[Callable[[Dict[str, Tuple[dict, List[CaseResult]]]], List[CaseSpec]]] = None,
            step: int = 2) -> Dict[str, Tuple[dict, List[CaseResult]]]:
    """The steps every sweep takes, `ab` or not: side → (environment, results in the specs' order).

    Refuse a checkpoint that cannot be resumed (before anything is printed); with a cluster plan,
    hand the sweep to benchcore.execute.cluster.driver. Else read the machine's
    noise state and warn; collect each side's environment (this interpreter's through
    `collect_local`, or an A/B side's in its own interpreter); run every slot (and, with
    `more_rounds`, the rounds it adds: it reads what is measured so far, as this returns it);
    read the machine again, recorded in each environment's `system` block. All of it with the idle
    CPUs polling as --cpu-idle asks (benchcore.execute.idle), recorded as `cpu_idle`.
    """
    from benchcore.execute.checkpoint import check_checkpoint

    if job.checkpoint is not None:
        check_checkpoint(job.checkpoint, job.options(), plan.resume)
    if plan.cluster is not None:
        return on_cluster(job, plan, prog, argv, extra)
    if job.pythons and job.env is None:
        job.env = side_env(os.environ)
    if job.pythons and job.launcher:
        count_sides(job)
    counting = bool(job.launcher)
    with idle.held(plan.cpu_idle, counting=counting) as hold:
        # idle states: said where --cpu-idle auto could not hold them (held, the advice has nothing to say)
        start = read_system_warned(prog, quiet=(IDLE_CHECK,) if hold.asked == "os" or counting else ())
        if job.pythons:
            environments = side_environments(job.pythons, job.suite, [prog, *argv], extra)
        else:
            environments = {"": collect_local() if collect_local
                            else collect(prog, [prog, *argv], job.suite.collectors, extra)}

        def measured(by_side: Dict[str, List[CaseResult]], end: Optional[dict]) -> Dict[str, Tuple[dict, List[CaseResult]]]:
            found = {}
            for side, results in by_side.items():
                cases = [r for r in results if not reference.is_reference(r.spec)]
                system = {"start": start.to_dict(), "end": end, "reference": _reference_block(results)}
                found[side] = (dict(environments[side], system=system, cpu_idle=hold.to_dict()), cases)
            return found

        asks = (lambda by_side: more_rounds(measured(by_side, None))) if more_rounds is not None else None
        by_side = run(job, plan, asks, step)
        return measured(by_side, read_system().to_dict())


def _reference_block(results: List[CaseResult]) -> Optional[dict]:
    """The machine reference's probes, as the environment's `system.reference` records them."""
    return reference.block([r for r in results if reference.is_reference(r.spec)])


def on_cluster(job: SweepJob, plan: RunPlan, prog: str, argv: Sequence[str], extra: dict):
    """The sweep as shards on a Ray cluster (benchcore.execute.cluster.driver), its progress on stderr: a line per
    shard started, finished or lost, with every node's running/finished count."""
    from benchcore.execute.cluster import driver

    bar = _progress(job.rounds.slots(job.specs, job.sides), prog)
    try:
        return driver.sweep_on_cluster(job, plan, prog, argv, extra, on_event=lambda line: bar.say(f"ray: {line}"),
                                       on_result=bar.finish)
    finally:
        bar.close()


def collect(prog: str, argv: Sequence[str], collectors: Sequence[str], extra: dict) -> dict:
    from benchcore.execute.environment import collect as collect_environment

    return collect_environment(prog, list(argv), collectors=tuple(collectors), extra=extra)


def side_environments(pythons: Dict[str, str], suite: Suite, argv: Sequence[str], extra: dict) -> Dict[str, dict]:
    """Each A/B side's environment, collected by its own interpreter (its framework versions)."""
    import json
    import subprocess

    code = ("import json, sys; from benchcore.execute.environment import collect; "
            "print(json.dumps(collect(sys.argv[1], json.loads(sys.argv[2]), tuple(json.loads(sys.argv[3])))))")
    found = {}
    for side, python in pythons.items():
        done = subprocess.run([python, "-c", code, suite.name, json.dumps(list(argv)), json.dumps(list(suite.collectors))],
                              capture_output=True, text=True, env=side_env(os.environ), timeout=600)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"--{side}-python {python} could not describe its environment ({tail}); "
                             "check that it runs this suite's dependencies")
        found[side] = {**json.loads(done.stdout), **extra, "ab_side": side, "python_executable": python}
        wrapper = side_interpreter(python, f"--{side}-python", suite)
        if wrapper.wrapped:  # what the given python really runs, and what it sets on the way
            found[side]["python_wrapper"] = wrapper.to_dict()
    return found


#: what an A/B run asks after each step of rounds: given each side's combined results so far, the
#: cases to add rounds to, each with its short round's calls or None (none: stop)
MoreRounds = Callable[[Dict[str, List[CaseResult]]], List[Tuple[CaseSpec, Optional[Short]]]]


def run(job: SweepJob, plan: RunPlan, more_rounds: Optional[MoreRounds] = None,
        step: int = 2) -> Dict[str, List[CaseResult]]:
    """Run every round of every case (on every side); side → results in the specs' order.

    With `more_rounds` (an A/B run that decides as it goes, benchcore.cli.ab), after the planned
    rounds and after every `step` rounds added, the cases it names get `step` more rounds a side,
    until it names none (each case's added rounds as long as it says: rounds.Short)."""
    done = run_slots_of(job, plan, job.rounds.slots(job.all_specs, job.sides))
    combined = combine(job, done)
    number = job.rounds.rounds
    asked = more_rounds(combined) if more_rounds is not None else []
    added = dataclasses.replace(plan, resume=True)  # the checkpoint holds this run's planned rounds
    while asked:
        done += run_slots_of(job, added, job.rounds.added_slots(asked, job.sides, number + 1, step))
        number += step
        combined = combine(job, done)
        asked = more_rounds(combined)
    return combined


def run_slots_of(job: SweepJob, plan: RunPlan, slots) -> list:
    """The slots run in isolated workers as the plan asks, with progress: [(slot, result)]."""
    from benchcore.execute.worker import run_slots

    bar = _progress(slots, job.suite.name)
    env = job.env
    if plan.isolate:  # the workers refuse a warmup their --timeout cannot hold
        env = {**(job.env or os.environ), BUDGET_ENV: f"{plan.timeout_s:g}"}

    def started(spec, index, total):
        bar.start(spec)

    try:
        done = run_slots(
            slots, job.suite.executor, job.options(),
            isolate=plan.isolate, timeout_s=plan.timeout_s and plan.timeout_s * job.timeout_scale,
            checkpoint=job.checkpoint, resume=plan.resume, launcher=job.launcher, side_launchers=job.side_launchers,
            memory_limit_bytes=plan.memory_limit_bytes and int(plan.memory_limit_bytes * job.memory_scale),
            env=env, pythons={**job.pythons, **job.worker_pythons} or None, on_start=started, on_result=bar.finish,
            lanes=job.lanes)
    finally:
        bar.close()
    refuse_over_budget(result for _slot, result in done)
    return done


def combine(job: SweepJob, done: list) -> Dict[str, List[CaseResult]]:
    """Each side's results, every case's rounds combined (the reference's by the core's rules)."""
    combined = {side: combine_results(done, job.specs, job.suite.combine_rounds, side) for side in job.sides}
    if job.reference:  # the reference's metrics are benchcore's own: combined by the core's rules
        for side in job.sides:
            combined[side] += combine_results(done, job.reference_specs, combine_metrics, side)
    return combined


def refuse_over_budget(results) -> None:
    """A case whose worker refused its warmup (benchcore.measure.runner.WarmupOverBudget) means the flags
    are wrong: one line and exit status 2, the measured cases kept in the checkpoint."""
    prefix = f"{WarmupOverBudget.__name__}: "
    for result in results:
        if not result.ok and (result.error or "").startswith(prefix):
            raise UsageError(f"{result.spec.name}: {result.error[len(prefix):]}")


def _progress(slots, prog: str):
    """Progress on stderr (benchcore.execute.progress), counting the cases' slots, not the reference's."""
    from benchcore.execute.progress import Progress

    def counted(spec) -> bool:
        return not reference.is_reference(spec)

    several = len({slot.round for slot in slots}) > 1 or len({slot.side for slot in slots}) > 1
    return Progress(sum(1 for slot in slots if counted(slot.spec)), prog, counted,
                    unit="case rounds" if several else "cases")


def read_system_warned(prog: str, quiet: Sequence[str] = ()):
    """The machine's noise state, its warnings printed on stderr (one line each) but those named
    in QUIET_AT_SWEEP and `quiet`."""
    state = read_system()
    for item in state.advice():
        if item.check not in (*QUIET_AT_SWEEP, *quiet):
            print(f"{prog}: warning: {item.check}: {item.found} (fix: {item.fix})", file=sys.stderr)  # noqa: T201  (the sweep's stderr, as its progress bar)
    return state


def remove_checkpoint(checkpoint: Optional[Path]) -> None:
    """Once the report holds every result, its checkpoint is redundant."""
    if checkpoint is not None:
        try:
            checkpoint.unlink()
        except OSError:
            pass


def check_side_python(python: str, flag: str, suite: Suite) -> str:
    """An A/B side's interpreter: it must exist, be a Python, and import this suite's executor
    and the frameworks (from this suite's source); else one line naming the fix. Probed once
    (benchcore.execute.interpreter), which also tells count_sides what it really runs."""
    import shutil

    path = shutil.which(python) or python
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise UsageError(f"{flag} {python}: no such executable; pass the python of a virtual environment "
                         "(e.g. venv/bin/python)")
    side_interpreter(path, flag, suite)
    return path


def side_interpreter(python: str, flag: str, suite: Suite):
    """What `python` runs, with the suite's executor and frameworks imported from this suite's source."""
    from benchcore.execute import interpreter

    imports = tuple(name for name in (*suite.frameworks, suite.executor.partition(":")[0]) if name)
    return interpreter.probe(python, flag, imports, side_env(os.environ), suite.name)


def count_sides(job: SweepJob) -> None:
    """Both sides' workers under the instruction engine's valgrind, checked before either side runs a case:
    a side's python that is a wrapper or a shim gets its real interpreter started under valgrind, with
    the variables the wrapper sets (valgrind would count the shell, and the interpreter it execs run
    natively); one that cannot be started so is refused in one line."""
    from benchcore.execute import interpreter

    for side, python in job.pythons.items():
        flag = f"--{side}-python"
        found = interpreter.for_counting(side_interpreter(python, flag, job.suite), flag)
        if found.wrapped:
            job.worker_pythons[side] = found.executable
            job.side_launchers[side] = found.launcher(job.launcher)


def suite_root() -> str:
    """The folder holding this suite's packages: put on an A/B side's path, so both sides time
    with the same benchmark code and differ only in their frameworks."""
    return str(Path(__file__).resolve().parent.parent)


def side_env(base: Dict[str, str]) -> Dict[str, str]:
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (suite_root(), base.get("PYTHONPATH", "")) if p)
    return env
