"""rnnbench's part of a `bench` or `ab` sweep (benchcore.cli.run's hooks): the checks of the
runner flags, the runners' cases and job, the report's settings, and the environment collected
on the benchmarked device. The steps and their order are benchcore.cli.run's."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence

from benchcore.cli import options as core_cli
from benchcore.cli.run import Measured, Planned, ReportParts
from benchcore.errors import UsageError
from benchcore.execute import valgrind
from benchcore.measure.instructions import ENGINE
from benchcore.report.model import Report
from benchcore.views import headroom
from frameworks import roofs

from . import cases, executor, views, work
from .request import RunnerRequest
from .suite import SUITE

PROG = "rnnbench"
#: Rounds `bench` runs by default (see docs/COMPARING.md for the measurement behind it).
DEFAULT_ROUNDS = 3


def resolve_device(device: Optional[str]) -> str:
    """--device, or cuda when torch sees one, else cpu; refused when unusable."""
    device = device or cases.default_device()
    cases.check_device(device)
    return device


def check_runner_lists(request: RunnerRequest) -> None:
    """--rnns and --cnns, when given: at least one name, each of the list's own group."""
    lists = cases.default_lists()
    cases.check_runner_list(request.rnns, "--rnns", ("rnns", "vl"), "LSTM runners",
                            " ".join(lists[cases.GROUP_LSTM]))
    cases.check_runner_list(request.cnns, "--cnns", ("cnns",), "CNN runners", " ".join(lists[cases.GROUP_RESNET]))


def check_stdout(request: RunnerRequest) -> None:
    """Without --output-file, --output-format prints the report to stdout; --print-json
    prints there too, and one stream cannot carry both, so ask for a file instead of
    dropping the report."""
    if request.output_file or not request.output_format:
        return
    if request.print_json:
        raise UsageError("--output-format without --output-file prints the report to stdout, which --print-json "
                         "already uses; add --output-file PATH, or drop --output-format")
    if len(core_cli.parse_formats(request.output_format)) > 1:
        raise UsageError(f"--output-format {request.output_format} without --output-file would print both reports to "
                         "stdout, one after the other; add --output-file PATH (one stem for both) or choose one format")


def environment_extra(request: RunnerRequest, device: str) -> dict:
    return {"threads": request.threads, "seed": request.seed,
            "timer": "cuda_event" if device.startswith("cuda") else "perf_counter",
            "flush_denormal": request.flush_denormal}


def bench_environment(request: RunnerRequest, device: str, argv: Sequence[str]) -> dict:
    """The report's environment, collected with the benchmarked device current, so its `gpu`
    entry describes the GPU the figures came from (cuda:1 on a two-GPU host, not GPU 0)."""
    from benchcore.execute.environment import collect

    with executor.device_context(device):
        return collect(cases.SUITE, [PROG, *argv], collectors=SUITE.collectors,
                       extra=environment_extra(request, device))


class RunnerSweep:
    """The hooks of a runner sweep (benchcore.cli.run.SweepHooks)."""

    prog = PROG
    suite = SUITE

    def check(self, request: RunnerRequest) -> str:
        """What `bench` and `ab` check before anything runs; the resolved device."""
        core_cli.apply_threads(request.threads)
        cases.check_fuser(request.fuser, request.executor)
        device = resolve_device(request.device)
        check_runner_lists(request)
        return device

    def outputs(self, request: RunnerRequest) -> Dict[str, Path]:
        """{format: path} to write, checked before anything runs; empty without --output-file
        (the report then goes to stdout)."""
        if request.resume and not request.output_file:
            raise UsageError("--resume needs --output-file (the checkpoint lives next to it)")
        check_stdout(request)
        if not request.output_file:
            return {}
        targets = core_cli.output_paths(request.output_file, core_cli.formats_for(request), default_stem=None)
        core_cli.check_output_paths(targets, request.overwrite)
        return targets

    def plan(self, request: RunnerRequest, device: str, checkpoint: Optional[Path], pythons) -> Planned:
        """The job `bench` and `ab` run; its detail: the device and every runner before sharding."""
        from benchcore.execute.rounds import shard_specs
        from benchcore.execute.sweep import SweepJob

        all_specs = cases.build_specs(request, device)
        specs = shard_specs(all_specs, core_cli.parse_shard(request.shard))
        if not specs:
            raise UsageError("nothing to run: no runner selected (--group/--rnns/--cnns/--shard); use --group rnns "
                             "and/or cnns, or --variable-lstms")
        cases.check_runners(sorted({s.name for s in specs}), device)
        settings = core_cli.run_settings_from(request, warmup=request.warmup, runs=request.nloops)
        options = {"threads": request.threads, "seed": request.seed, **core_cli.audit_options(request)}
        if request.engine == ENGINE:
            options["engine"] = ENGINE
        job = SweepJob(SUITE, specs, settings, core_cli.rounds_from(request, DEFAULT_ROUNDS), options, checkpoint,
                       pythons=pythons)
        if request.engine == ENGINE:
            valgrind.apply(job, valgrind.plan(request.cache_sim, dict(SUITE.count_environment), request.count_workers))
        return Planned({"": job}, (device, all_specs))

    def environment_extra(self, request: RunnerRequest, device: str) -> dict:
        return environment_extra(request, device)

    def collector(self, request: RunnerRequest, device: str, argv: Sequence[str]):
        return lambda: bench_environment(request, device, argv)

    def report(self, request: RunnerRequest, planned: Planned, measured: Measured, paths, record: dict) -> ReportParts:
        environment, results = measured[""]
        device, all_specs = planned.detail
        settings = {"settings": record["run_settings"], "threads": record["threads"], "seed": record["seed"],
                    "rounds": record["rounds"], "device": device, "fuser": request.fuser,
                    "executor": request.executor or "default",
                    "sizes": {**cases.sizes_from(request), "cnnBatch": request.cnnBatch}, "unit": "ms",
                    "shard": record["shard"], "runners": views.run_order(all_specs),
                    **{key: record[key] for key in ("audit", "audit_rounds", "flush_denormal")}, "engine": request.engine,
                    **({"valgrind": record["valgrind"]} if "valgrind" in record else {})}
        parts = ReportParts(environment, settings, results)
        if not planned.job.pythons:  # ab: a side's roofs would be this interpreter's, not its own
            block = roofs.for_sweep(request.roofs, "torch", environment, request.threads, device,
                                    request.engine == ENGINE)
            parts.extra[headroom.ROOFS] = {"torch": block}
            headroom.annotate(results, lambda result: work.work(result.spec), "float32", block, SUITE)
            headroom.chart_beside(PROG, results, parts.extra, SUITE, paths.get("md"))
        return parts

    def to_markdown(self, report: Report) -> str:
        return views.markdown_report(report)

    def announce(self, request, report) -> None:
        """Nothing from the library; the command line prints (rnnbench.cli.RunnerCommand)."""

    def summarize(self, request, report, written: List[Path], started: float) -> None:
        """Nothing from the library; the command line prints (rnnbench.cli.RunnerCommand)."""

    def announce_sides(self, request, reports) -> None:
        """Nothing from the library; the command line prints (rnnbench.cli.RunnerCommand)."""

    def counting(self, request: RunnerRequest) -> RunnerRequest:
        """The engine's run settings (--nloops is rnnbench's measured calls) over the same runners."""
        from benchcore.cli.ab import counting_request

        return counting_request(request, runs="nloops")
