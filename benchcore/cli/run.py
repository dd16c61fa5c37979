"""One sweep from its request to its report: the path every sweep command and every Python API
takes (opbench, opbench crossframe, rnnbench bench, and both tools' `ab`).

    request ─► check ─► plan: SweepJobs ─► measure (benchcore.execute.sweep) ─► report
            ─► outputs (benchcore.cli.options.write_outputs) ─► summary ─► exit status

A suite hands the path its request (benchcore.cli.request) and its hooks (SweepHooks): what is
the suite's own, its checks, cases, report settings and console lines. The steps, their order
and the report's core settings (run_record: threads, rounds, timing settings, audit, valgrind
probes) are written here once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from benchcore.cli.options import audit_options, run_plan_from, sweep_checkpoint, write_outputs
from benchcore.cli.request import SweepRequest
from benchcore.execute import sweep as execute
from benchcore.execute.sweep import SweepJob
from benchcore.report.model import CaseResult, Report
from benchcore.suite import Suite

#: job name → (environment, results) of one side
Measured = Dict[str, Tuple[dict, List[CaseResult]]]


@dataclass
class Planned:
    """A suite's plan of one sweep: its jobs (one per framework for crossframe, else one,
    named "") and what the suite's report needs of the planning (`detail`)."""

    jobs: Dict[str, SweepJob]
    detail: object = None

    @property
    def job(self) -> SweepJob:
        """The first job: the one of a one-framework sweep, whose settings every job shares."""
        return next(iter(self.jobs.values()))


@dataclass
class ReportParts:
    """What a suite puts in its report; the path adds the finishing time and builds it."""

    environment: dict
    settings: dict
    results: List[CaseResult]
    extra: dict = field(default_factory=dict)


class SweepHooks(Protocol):
    """What a suite hands the path besides its request."""

    prog: str
    suite: Suite

    def check(self, request) -> str:
        """Refuse what the user got wrong, before anything runs; the device the cases run on."""

    def outputs(self, request) -> Dict[str, Path]:
        """{format: path} to write, checked; empty: nothing written (stdout, or the API)."""

    def plan(self, request, device: str, checkpoint: Optional[Path], pythons: Dict[str, str]) -> Planned: ...

    def environment_extra(self, request, device: str) -> dict: ...

    def collector(self, request, device: str, argv: Sequence[str]) -> Optional[Callable[[], dict]]:
        """How this interpreter's environment is collected (None: benchcore's collect)."""

    def report(self, request, planned: Planned, measured: Measured, paths: Dict[str, Path],
               record: dict) -> ReportParts: ...

    def to_markdown(self, report: Report) -> str: ...

    def announce(self, request, report: Report) -> None:
        """Console lines once the report is built, before it is written."""

    def summarize(self, request, report: Report, written: List[Path], started: float) -> None:
        """Console lines (and stdout) once the outputs are written."""

    def announce_sides(self, request, reports: Dict[str, Report]) -> None:
        """`ab`'s console lines of each side's report, before the comparison."""

    def counting(self, request):
        """The request that counts the instructions of the cases `request` times (`ab
        --count-undecided`; benchcore.cli.ab.counting_request)."""


def run_record(request: SweepRequest, job: SweepJob, results: List[CaseResult], side: str = "") -> dict:
    """The report settings every sweep records the same way; a suite names those it keeps."""
    from benchcore.views import count_report

    record = {"threads": request.threads, "seed": request.seed, "shard": request.shard,
              "timeout_s": request.timeout, "isolation": not request.no_isolation, "resume": request.resume,
              "run_settings": job.settings.to_dict(), "rounds": job.settings_record(), **audit_options(request)}
    if job.worker_options.get("valgrind"):
        # the probes run under the side's own python (an A/B side's), as its workers did
        record["valgrind"] = count_report.probed_settings(job.worker_options["valgrind"], results,
                                                          job.suite.code_path_probes, job.pythons.get(side))
    return record


def report_of(request: SweepRequest, hooks: SweepHooks, planned: Planned, measured: Measured,
              paths: Dict[str, Path], side: str = "") -> Report:
    """The report of one side: the suite's parts, the core's record, the finishing time."""
    from benchcore.execute.environment import now_iso

    record = run_record(request, planned.job, planned_results(measured), side)
    parts = hooks.report(request, planned, measured, paths, record)
    return Report(suite=hooks.prog, environment=dict(parts.environment, finished_at=now_iso()),
                  settings=parts.settings, results=parts.results, extra=parts.extra)


def planned_results(measured: Measured) -> List[CaseResult]:
    return [result for _environment, results in measured.values() for result in results]


def measure_jobs(request: SweepRequest, hooks: SweepHooks, planned: Planned, device: str,
                 argv: Sequence[str]) -> Measured:
    """Every job of a one-side sweep, one after the other (benchcore.execute.sweep.measure)."""
    plan = run_plan_from(request)
    extra = hooks.environment_extra(request, device)
    return {name: execute.measure(job, plan, hooks.prog, argv, extra,
                                  collect_local=hooks.collector(request, device, argv))[""]
            for name, job in planned.jobs.items()}


def measure(request: SweepRequest, hooks: SweepHooks, argv: Sequence[str] = ()) -> Report:
    """The Python APIs' sweep: the report of `request`, no file written, headlines annotated."""
    from benchcore.views.headline import annotate

    device = hooks.check(request)
    planned = hooks.plan(request, device, None, {})
    return annotate(report_of(request, hooks, planned, measure_jobs(request, hooks, planned, device, argv), {}),
                    hooks.suite)


def sweep(request: SweepRequest, hooks: SweepHooks, argv: Sequence[str]) -> int:
    """A sweep command: check, plan, measure, report, write, summarize; the exit status."""
    device = hooks.check(request)
    paths = hooks.outputs(request)
    if request.plot:
        from benchcore.views.charts import prepare_chart_folder

        prepare_chart_folder(request.plot, hooks.prog, request.overwrite)
    checkpoint = sweep_checkpoint(paths) if paths else None
    planned = hooks.plan(request, device, checkpoint, {})
    started = time.perf_counter()
    report = report_of(request, hooks, planned, measure_jobs(request, hooks, planned, device, argv), paths)
    hooks.announce(request, report)
    kept = planned.job.checkpoint if len(planned.jobs) == 1 else None
    written = write_outputs(report, paths, request.overwrite, hooks.to_markdown, kept, plot_dir=request.plot,
                            suite=hooks.suite)
    for job in planned.jobs.values():
        execute.remove_checkpoint(job.checkpoint)
    hooks.summarize(request, report, written, started)
    return 1 if report.failures else 0


def ab(request: SweepRequest, hooks: SweepHooks, argv: Sequence[str]) -> int:
    """`ab`: the same cases under --base-python and --new-python, interleaved, then compared."""
    from benchcore.cli import ab as sides

    device = hooks.check(request)
    pythons = sides.plan(request, hooks.suite)
    planned = hooks.plan(request, device, sides.checkpoint_path(request), pythons)
    job = planned.job

    def reports_of(measured: Measured) -> Dict[str, Report]:
        return {side: report_of(request, hooks, planned, {"": one}, {}, side) for side, one in measured.items()}

    reports = sides.measure(hooks.suite, job, run_plan_from(request, ab=True), request, argv,
                            hooks.environment_extra(request, device), reports_of)
    if request.ab.count_undecided:
        reports = sides.confirm_by_counting(hooks.suite, request, reports,
                                            lambda keys: count_cases(request, hooks, device, pythons, keys, argv))
    sides.warn_code_paths(hooks.prog, reports)
    hooks.announce_sides(request, reports)
    status = sides.finish(hooks.suite, reports, request)
    execute.remove_checkpoint(job.checkpoint)
    return status


def count_cases(request: SweepRequest, hooks: SweepHooks, device: str, pythons: Dict[str, str], keys: set,
                argv: Sequence[str]) -> Dict[str, Report]:
    """Both sides' counted reports of the cases `keys` of an A/B run (`ab --count-undecided`)."""
    counting = hooks.counting(request)
    planned = hooks.plan(counting, device, None, pythons)
    job = planned.job
    job.specs = [spec for spec in job.specs if spec.key in keys]
    measured = execute.measure(job, run_plan_from(counting, ab=True), hooks.prog, argv,
                               hooks.environment_extra(counting, device))
    return {side: report_of(counting, hooks, planned, {"": one}, {}, side) for side, one in measured.items()}
