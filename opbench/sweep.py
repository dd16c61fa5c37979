"""opbench's part of a sweep (benchcore.cli.run's hooks): the backend's checks and cases, the
job, the report's operator settings and extras, and the summary on stderr.

The steps and their order are benchcore.cli.run's; what is here is what only an operator sweep
knows: a framework backend (opbench.backends), the instruction engine's valgrind plan, the
operators without a benchmark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional

from benchcore.cli.options import (
    audit_options,
    check_output_paths,
    formats_for,
    output_paths,
    rounds_from,
    run_settings_from,
)
from benchcore.cli.run import Measured, Planned, ReportParts
from benchcore.errors import UsageError
from benchcore.execute import valgrind
from benchcore.measure.instructions import ENGINE
from benchcore.measure.work import Work
from benchcore.report.model import CaseResult
from benchcore.views import headroom
from frameworks import roofs

from .backends.base import split
from .extras import from_results, in_report_order
from .request import OperatorRequest
from .suite import PROG

#: Rounds a sweep runs by default (see docs/COMPARING.md for the measurement behind it).
DEFAULT_ROUNDS = 3


class OperatorSweep:
    """The hooks of one framework's operator sweep (benchcore.cli.run.SweepHooks)."""

    prog = PROG

    def __init__(self, backend):
        self.backend = backend
        self.suite = backend.suite

    def check(self, request: OperatorRequest) -> str:
        return self.backend.check(request)

    def outputs(self, request: OperatorRequest) -> Dict[str, Path]:
        paths = output_paths(request.output_file, formats_for(request), self.backend.default_output_stem)
        check_output_paths(paths, request.overwrite)
        return paths

    def plan(self, request: OperatorRequest, device: str, checkpoint: Optional[Path], pythons) -> Planned:
        """The job both `opbench` and `opbench ab` run, and the backend's plan behind it."""
        from benchcore.execute.sweep import SweepJob

        counting = (valgrind.plan(request.cache_sim, dict(self.suite.count_environment), request.count_workers)
                    if request.engine == ENGINE
                    else None)  # before planning: a missing tool
        settings = run_settings_from(request, request.warmup, request.runs)
        plan = self.backend.plan(request, device)
        if not plan.specs:
            raise UsageError("no case to run with these --ops/--category/--exclude/--dtype/--shard choices; "
                             "opbench --list with the same flags says why each operator has none")
        options = {"profiler": request.engine, "threads": request.threads, "seed": request.seed,
                   **audit_options(request), **plan.worker_options}
        job = SweepJob(self.suite, plan.specs, settings, rounds_from(request, DEFAULT_ROUNDS), options, checkpoint,
                       pythons=pythons)
        if counting is not None:
            valgrind.apply(job, counting)
        return Planned({"": job}, plan)

    def environment_extra(self, request: OperatorRequest, device: str) -> dict:
        return {**self.backend.environment_extra(request), "flush_denormal": request.flush_denormal}

    def collector(self, request, device, argv):
        return None

    def report(self, request: OperatorRequest, planned: Planned, measured: Measured, paths, record: dict) -> ReportParts:
        environment, results = measured[""]
        parts = ReportParts(environment, settings(request, planned.detail.settings, record, paths),
                            in_report_order(results), extra(planned.detail, results))
        if not planned.job.pythons:  # ab: a side's roofs would be this interpreter's, not its own
            device = request.device or request.ctx or "cpu"
            with_efficiency(request.roofs, request.framework, planned.job, environment, device, request.dtype,
                            parts.results, parts.extra, request.engine == ENGINE)
            headroom.chart_beside(PROG, parts.results, parts.extra, self.suite, paths.get("md"))
        return parts

    def to_markdown(self, report) -> str:
        return self.backend.to_markdown(report)

    def announce(self, request, report) -> None:
        """Nothing before the outputs: the summary (opbench.cli) follows them."""

    def summarize(self, request, report, written: List[Path], started: float) -> None:
        """Nothing from the library; the command line prints (opbench.cli.OperatorCommand)."""

    def announce_sides(self, request, reports) -> None:
        """Nothing per side: `ab` prints the comparison."""

    def counting(self, request: OperatorRequest) -> OperatorRequest:
        """The engine's run settings over the same cases: torch's size target, which the engine
        would choose smaller, stays the timed one."""
        from benchcore.cli.ab import counting_request

        if self.backend.name != "torch":
            return counting_request(request)
        from .backends.torch import size_target_of

        return counting_request(request, size_target=size_target_of(request))


def settings(request: OperatorRequest, backend_settings: dict, record: dict, paths) -> dict:
    """The report's settings: the operator flags, the backend's, and the core's record."""
    return {
        "framework": request.framework,
        "profiler": request.engine,
        "dtype": request.dtype,
        **backend_settings,
        "warmup": request.warmup,
        "runs": request.runs,
        "seed": request.seed,
        "categories": split(request.category),
        "ops": split(request.ops),
        "exclude": split(request.exclude),
        **{key: record[key] for key in ("shard", "threads", "timeout_s", "isolation")},
        "tiny": bool(request.tiny),
        **{key: record[key] for key in ("run_settings", "rounds")},
        "output_file": {fmt: str(path) for fmt, path in paths.items()},
        **{key: record[key] for key in ("resume", "audit", "audit_rounds", "flush_denormal", "valgrind") if key in record},
    }


def work_of(framework: str, options: dict) -> Callable[[CaseResult], Dict[str, Work]]:
    """A case's work per phase (opbench.backends.*.work); torch reads its manifest (`options`)."""
    if framework == "torch":
        from .backends.torch import work as torch_work

        return lambda result: torch_work.work(result.spec, options)
    from .backends.mxnet import work as mxnet_work

    return lambda result: mxnet_work.work(result.spec)


def with_efficiency(mode: str, framework: str, job, environment: dict, device: str, dtype: str,
                    results: List[CaseResult], extra: dict, counted: bool = False) -> None:
    """The framework's roofs (frameworks.roofs: cached, taken, or off) recorded under
    extra.roofs, and each measured case's efficiency against them (benchcore.views.headroom)."""
    block = roofs.for_sweep(mode, framework, environment, job.worker_options.get("threads"), device, counted)
    extra.setdefault(headroom.ROOFS, {})[framework] = block
    headroom.annotate(results, work_of(framework, job.worker_options), dtype, block, job.suite)


def extra(plan, results) -> dict:
    """The operators without a benchmark, those left out, and the backend's extras."""
    return {**from_results(plan.skipped, results), "excluded": plan.excluded, **plan.extra}
