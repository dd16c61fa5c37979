"""The sweep pipeline both command lines share: rounds, A/B sides, checkpoint, progress, outputs.

A suite's CLI parses its flags and plans its cases; from there both suites take the same steps,
here: split the runs over the rounds, schedule the rounds (and, for `ab`, the two sides,
alternated ABBA), run them in isolated workers with one checkpoint, combine each case's rounds
with the suite's combiner, read the machine's noise state before and after, and write the
report's outputs. Only the report's contents (settings, extras, views) stay with the suite.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import reference
from .case import CaseSpec
from .errors import UsageError
from .report import CaseResult
from .rounds import RoundPlan, combine_metrics, combine_results
from .runner import RunSettings
from .suite import Suite

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
    #: time benchcore.reference once per round (and side), at a random place in the round
    reference: bool = True
    #: every worker's command-line prefix (the instruction engine's valgrind), and the factor
    #: its cases' --timeout is scaled by
    launcher: Tuple[str, ...] = ()
    timeout_scale: float = 1.0
    #: the factor --memory-limit-gb is scaled by (valgrind's own memory lives in the worker)
    memory_scale: float = 1.0

    @property
    def sides(self) -> Sequence[str]:
        return tuple(self.pythons) or ("",)

    @property
    def reference_specs(self) -> List[CaseSpec]:
        """The machine reference's probes (benchcore.reference), one per CASES_PER_PROBE cases."""
        return reference.specs(len(self.specs)) if self.reference else []

    @property
    def all_specs(self) -> List[CaseSpec]:
        return self.specs + self.reference_specs

    @property
    def round_settings(self) -> RunSettings:
        """One round's share of the runs, the warmup and the adaptive time limits (RoundPlan)."""
        n, asked = self.rounds.rounds, self.settings
        return dataclasses.replace(asked, runs=self.rounds.runs_per_round(asked.runs),
                                   warmup=self.rounds.warmup_per_round(asked.warmup),
                                   min_time_s=asked.min_time_s / n, max_time_s=asked.max_time_s / n)

    def options(self) -> dict:
        return {"settings": self.round_settings.to_dict(), **self.worker_options, "rounds": self.rounds.to_dict()}

    def settings_record(self) -> dict:
        """The report's record of how the runs were spread (settings.rounds)."""
        per_round = self.round_settings
        return {**self.rounds.to_dict(), "runs_per_round": per_round.runs, "warmup_per_round": per_round.warmup}


def measure(job: SweepJob, args, prog: str, argv: Sequence[str], extra: dict,
            collect_local: Optional[Callable[[], dict]] = None) -> Dict[str, Tuple[dict, List[CaseResult]]]:
    """The steps every sweep takes, `ab` or not: side → (environment, results in the specs' order).

    Refuse cluster flags that do not go together and a checkpoint that cannot be resumed (before
    anything is printed); with --ray, hand the sweep to benchcore.cluster. Else read the machine's
    noise state and warn; collect each side's environment (this interpreter's through
    `collect_local`, or an A/B side's in its own interpreter); run every slot; read the machine
    again, recorded in each environment's `system` block.
    """
    from .cluster import check_flags
    from .isolation import check_checkpoint
    from .system import read_system

    check_flags(args, job)
    if job.checkpoint is not None:
        check_checkpoint(job.checkpoint, job.options(), args.resume)
    if getattr(args, "ray", None):
        return on_cluster(job, args, prog, argv, extra)
    if job.pythons and job.env is None:
        job.env = side_env(os.environ)
    start = read_system_warned(prog)
    if job.pythons:
        environments = side_environments(job.pythons, job.suite, [prog, *argv], extra)
    else:
        environments = {"": collect_local() if collect_local else collect(prog, [prog, *argv], job.suite.frameworks, extra)}
    by_side = run(job, args)
    end = read_system().to_dict()
    measured = {}
    for side, results in by_side.items():
        cases = [r for r in results if not reference.is_reference(r.spec)]
        system = {"start": start.to_dict(), "end": end, "reference": _reference_block(results)}
        measured[side] = (dict(environments[side], system=system), cases)
    return measured


def _reference_block(results: List[CaseResult]) -> Optional[dict]:
    """The machine reference's probes, as the environment's `system.reference` records them."""
    return reference.block([r for r in results if reference.is_reference(r.spec)])


def on_cluster(job: SweepJob, args, prog: str, argv: Sequence[str], extra: dict):
    """The sweep as shards on a Ray cluster (benchcore.cluster), its progress on stderr: a line per
    shard started, finished or lost, with every node's running/finished count."""
    from . import cluster

    bar = _progress(len(job.rounds.slots(job.specs, job.sides)))
    try:
        return cluster.measure(job, args, prog, argv, extra,
                               on_event=lambda line: bar.write(f"{prog}: ray: {line}", file=sys.stderr),
                               on_result=lambda result: bar.update(1))
    finally:
        bar.close()


def collect(prog: str, argv: Sequence[str], frameworks: Sequence[str], extra: dict) -> dict:
    from .environment import collect as collect_environment

    return collect_environment(prog, list(argv), frameworks=tuple(frameworks), extra=extra)


def side_environments(pythons: Dict[str, str], suite: Suite, argv: Sequence[str], extra: dict) -> Dict[str, dict]:
    """Each A/B side's environment, collected by its own interpreter (its framework versions)."""
    import json
    import subprocess

    code = ("import json, sys; from benchcore.environment import collect; "
            "print(json.dumps(collect(sys.argv[1], json.loads(sys.argv[2]), tuple(json.loads(sys.argv[3])))))")
    found = {}
    for side, python in pythons.items():
        done = subprocess.run([python, "-c", code, suite.name, json.dumps(list(argv)), json.dumps(list(suite.frameworks))],
                              capture_output=True, text=True, env=side_env(os.environ), timeout=600)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"--{side}-python {python} could not describe its environment ({tail}); "
                             "check that it runs this suite's dependencies")
        found[side] = {**json.loads(done.stdout), **extra, "ab_side": side, "python_executable": python}
    return found


def run(job: SweepJob, args) -> Dict[str, List[CaseResult]]:
    """Run every round of every case (on every side); side → results in the specs' order."""
    from .isolation import run_slots

    slots = job.rounds.slots(job.all_specs, job.sides)
    bar = _progress(len(slots))

    def started(spec, index, total):
        bar.set_postfix_str(spec.name, refresh=True)

    try:
        done = run_slots(
            slots, job.suite.executor, job.options(),
            isolate=not args.no_isolation, timeout_s=args.timeout and args.timeout * job.timeout_scale,
            checkpoint=job.checkpoint, resume=args.resume, launcher=job.launcher,
            memory_limit_bytes=memory_limit_bytes(args, job.memory_scale),
            env=job.env, pythons=job.pythons or None, on_start=started, on_result=lambda result: bar.update(1))
    finally:
        bar.close()
    combined = {side: combine_results(done, job.specs, job.suite.combine_rounds, side) for side in job.sides}
    if job.reference:  # the reference's metrics are benchcore's own: combined by the core's rules
        for side in job.sides:
            combined[side] += combine_results(done, job.reference_specs, combine_metrics, side)
    return combined


def memory_limit_bytes(args, scale: float = 1.0) -> Optional[int]:
    """--memory-limit-gb in bytes (the workers' restart ceiling), times `scale`; None without one."""
    return int(args.memory_limit_gb * 2**30 * scale) if args.memory_limit_gb else None


def _progress(total: int):
    """A progress bar on stderr (case, done/total, ETA) when stderr is a terminal."""
    from tqdm import tqdm

    shown = total > 0 and (sys.stderr.isatty() or os.environ.get("BENCH_PROGRESS") == "1")
    return tqdm(total=total, file=sys.stderr, unit="case", dynamic_ncols=True, disable=not shown)


def rounds_from(args, default: int) -> RoundPlan:
    """--rounds (the suite's default when not given), with the cases' order seeded by --seed."""
    rounds = default if getattr(args, "rounds", None) is None else args.rounds
    seed = getattr(args, "seed", None)
    return RoundPlan(rounds=rounds, order_seed=0 if seed is None else int(seed))


def read_system_warned(prog: str):
    """The machine's noise state, its warnings printed on stderr (one line each)."""
    from .system import read_system

    state = read_system()
    for item in state.advice():
        if item.check not in QUIET_AT_SWEEP:
            print(f"{prog}: warning: {item.check}: {item.found} (fix: {item.fix})", file=sys.stderr)
    return state


def remove_checkpoint(checkpoint: Optional[Path]) -> None:
    """Once the report holds every result, its checkpoint is redundant."""
    if checkpoint is not None:
        try:
            checkpoint.unlink()
        except OSError:
            pass


#: what an A/B side's interpreter must print after importing the suite: anything that exits 0
#: without it (/bin/true, a shell script) is not a Python that can run the suite
SIDE_PROBE_MARKER = "benchcore-side-ok"


def check_side_python(python: str, flag: str, suite: Suite) -> str:
    """An A/B side's interpreter: it must exist, be a Python, and import this suite's executor
    and the frameworks (from this suite's source); else one line naming the fix."""
    import shutil
    import subprocess

    path = shutil.which(python) or python
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise UsageError(f"{flag} {python}: no such executable; pass the python of a virtual environment "
                         "(e.g. venv/bin/python)")
    module = suite.executor.partition(":")[0]
    probe = "; ".join([f"import {name}" for name in (*suite.frameworks, module)] + [f"print({SIDE_PROBE_MARKER!r})"])
    try:
        done = subprocess.run([path, "-c", probe], capture_output=True, text=True, timeout=300,
                              env=side_env(os.environ))
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"{flag} {python} does not run ({exc}); pass a working Python interpreter") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {done.returncode}"
        raise UsageError(f"{flag} {python} cannot import what {suite.name} needs ({last}); install "
                         f"{', '.join(suite.frameworks) or 'the dependencies'} in that environment")
    if SIDE_PROBE_MARKER not in done.stdout:
        raise UsageError(f"{flag} {python} is not a Python interpreter; pass the python of a virtual environment "
                         "(e.g. venv/bin/python)")
    return path


def suite_root() -> str:
    """The folder holding this suite's packages: put on an A/B side's path, so both sides time
    with the same benchmark code and differ only in their frameworks."""
    return str(Path(__file__).resolve().parent.parent)


def side_env(base: Dict[str, str]) -> Dict[str, str]:
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (suite_root(), base.get("PYTHONPATH", "")) if p)
    return env
