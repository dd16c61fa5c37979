"""`rnnbench` command line: bench, test, profile (+ compare, plot, merge from benchcore).

A thin layer: it parses fastrnns' flags, checks what a user can get wrong before anything
runs (unknown runner, bad fuser or sizes, CUDA requested without CUDA), hands CaseSpecs to
benchcore's sweep and prints what the library returns. stdout carries only machine-readable
output (`--print-json`, a report without --output-file); tables and progress go to stderr.

Exit status: 0 all cases ran; 1 a runner failed (bench), a correctness mismatch (test) or a
profiler failure; 2 a usage error, as one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from benchcore.cli import options as core_cli
from benchcore.cli.options import (
    ArgumentParser,
    non_negative_float,
    non_negative_int,
    positive_int,
)
from benchcore.errors import UsageError
from benchcore.execute import valgrind
from benchcore.measure import audit
from benchcore.measure.instructions import ENGINE, INSTRUCTION_DEFAULTS, engine_of
from benchcore.views import count_report, trust

from . import bench
from .suite import SUITE

PROG = "rnnbench"
AB_COMMAND = "ab"
AB_DEFAULT_DIR = "rnnbench-ab"
DEFAULT_SEED = 17
#: Rounds `bench` runs by default (see docs/COMPARING.md for the measurement behind it).
DEFAULT_ROUNDS = 3
#: torch seeds an int64 generator state, and the creators also seed one with seed + 1.
SEED_MAX = 2**63 - 2
BENCH_TIMEOUT_S = 3600
BENCH_HELP = "time runners' forward and backward (fastrnns bench.py)"
AB_HELP = "time the same runners under two Python environments, interleaved, and compare them"
TEST_HELP = "check runners against nn.LSTM (fastrnns test.py)"
PROFILE_HELP = "run runners under nsys, nvprof or torch.profiler (fastrnns profile.py)"


def _err(*lines: str) -> None:
    for line in lines:
        print(line, file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Parser


def seed_value(text: str) -> int:
    """--seed for every subcommand: refused here, since torch would raise only inside a worker
    (one failed runner each) or, in profile, as a traceback."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{value} is outside 0 to {SEED_MAX} (2**63 - 2); pick a seed in that range")
    return value


def _add_sizes(parser, nloops_default: int, cnns: bool = False) -> None:
    sizes = parser.add_argument_group("sizes (fastrnns' names and defaults)")
    for name, default in bench.SIZE_DEFAULTS.items():
        sizes.add_argument(f"--{name}", type=positive_int, default=default, help=f"default {default}")
    sizes.add_argument("-r", "--nloops", "--runs", dest="nloops", type=positive_int, default=nloops_default,
                       help=f"measured (bench) or profiled (profile) iterations per runner (default {nloops_default})")
    if cnns:
        # fastrnns' ResNets always took 32 images, whatever --miniBatch said; so do ours unless asked.
        sizes.add_argument("--cnnBatch", type=positive_int, default=bench.CNN_BATCH_DEFAULT,
                           help=f"images per ResNet batch, 3x224x224 each (default {bench.CNN_BATCH_DEFAULT}, as fastrnns)")


def _add_model_options(parser, with_seed_default: Optional[int] = DEFAULT_SEED) -> None:
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when available, else cpu)")
    parser.add_argument("--fuser", default="te", help=f"TorchScript fuser: {', '.join(bench.FUSERS)} (default te)")
    parser.add_argument("--executor", default=None,
                        help=f"TorchScript executor: {', '.join(bench.EXECUTORS)} (default: the fuser's choice)")
    parser.add_argument("--seed", type=seed_value, default=with_seed_default,
                        help=f"seed for inputs and parameters, 0 to 2**63 - 2, recorded in the report (default {with_seed_default})")


def _bench_parser(sub, ab: bool = False, engine: str = "") -> None:
    if ab:
        p = sub.add_parser(AB_COMMAND,
                           description="Time runners under --base-python and --new-python (e.g. two PyTorch builds), "
                                       "alternating them runner by runner and round by round, and compare them.")
    else:
        p = sub.add_parser("bench",
                           description="Time forward and backward of each runner, in milliseconds on every device.")
    _add_sizes(p, nloops_default=100, cnns=True)
    p.add_argument("-w", "--warmup", type=non_negative_int, default=10, help="untimed iterations first (default 10)")
    _add_model_options(p)
    p.add_argument("--variable-lstms", "--variable_lstms", dest="variable_lstms", action="store_true",
                   help="also run the variable-length LSTMs (vl_cudnn, vl_jit, vl_py); they ignore --seqLength")
    p.add_argument("--sep", default=" ", help="separator of the console table's columns (default ' ')")
    if not ab:
        p.add_argument("--print-json", nargs="?", const="oss", default=None, choices=("oss", "pep"),
                       help="print results to stdout in fastrnns' JSON shapes: oss (one line, default) or pep "
                            "(one line per iteration)")
    p.add_argument("--rnns", nargs="*", default=None,
                   help="LSTM runners, custom and vl_* ones included (default: the fastrnns LSTM group; "
                        "--variable-lstms adds the vl_* group)")
    p.add_argument("--cnns", nargs="*", default=None, help="CNN runners (default: resnet18 resnet18_jit resnet50 resnet50_jit)")
    p.add_argument("--group", nargs="*", default=None, choices=("cnns", "rnns"),
                   help="groups to run (default: the group --rnns or --cnns names when only one is given, else cnns rnns)")
    if not ab:  # without --output the report goes to stdout (JSON unless --format says), unless --print-json is there
        core_cli.add_output_arguments(p, default_stem=None)
    core_cli.add_shard_argument(p)
    # ResNet-50 at fastrnns' sizes takes seconds per iteration on a CPU: 110 of them pass
    # benchcore's 600 s default, so a default CPU sweep would time out.
    core_cli.add_run_arguments(p, rounds=DEFAULT_ROUNDS, timeout_s=BENCH_TIMEOUT_S)
    core_cli.add_audit_arguments(p)
    p.add_argument("--engine", default="python", choices=bench.ENGINES,
                   help="python: time each call (ms); instructions: count each call's instructions under valgrind "
                        "(docs/INSTRUCTIONS.md; defaults then --warmup 20 --nloops 3 --rounds 1 --threads 1 and no audit)")
    valgrind.add_arguments(p)
    if engine == ENGINE:
        p.set_defaults(warmup=INSTRUCTION_DEFAULTS["warmup"], nloops=INSTRUCTION_DEFAULTS["runs"],
                       rounds=INSTRUCTION_DEFAULTS["rounds"], threads=INSTRUCTION_DEFAULTS["threads"],
                       no_audit=INSTRUCTION_DEFAULTS["no_audit"])
    if ab:
        from benchcore.cli.ab import add_ab_arguments

        add_ab_arguments(p, AB_DEFAULT_DIR)


def _test_parser(sub) -> None:
    p = sub.add_parser("test",
                       description="Compare each runner's outputs and gradients with nn.LSTM built from the same seed.")
    for name, default in bench.SIZE_DEFAULTS.items():
        p.add_argument(f"--{name}", type=positive_int, default=default, help=f"default {default}")
    p.add_argument("--rnns", nargs="*", default=None, help="runners to check (default: all LSTM runners)")
    p.add_argument("--atol", type=non_negative_float, default=1e-3, help="absolute tolerance, finite and >= 0 (default 1e-3)")
    p.add_argument("--rtol", type=non_negative_float, default=0.0, help="relative tolerance, finite and >= 0 (default 0)")
    p.add_argument("--absolute-grads", action="store_true",
                   help="compare gradients at --atol as they are; by default each gradient pair is first divided by "
                        "max(1, largest reference gradient), since float32 alone differs by more than 1e-3 where "
                        "gradients reach 1e4 (layer-norm LSTMs at fastrnns' sizes)")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when available, else cpu)")
    p.add_argument("--seed", type=seed_value, default=DEFAULT_SEED, help=f"0 to 2**63 - 2 (default {DEFAULT_SEED})")
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads for torch")


def _profile_parser(sub) -> None:
    from .profiling import (
        DEFAULT_OUTPUT_DIR,
        DEFAULT_PROFILE_RNNS,
        DEFAULT_WARMUP,
        PROFILERS,
    )

    p = sub.add_parser("profile",
                       description="Profile runners: nsys/nvprof re-run this command under the tool; torch runs in-process.")
    _add_sizes(p, nloops_default=5)
    _add_model_options(p)
    p.add_argument("--rnns", nargs="*", default=None,
                   help=f"LSTM runners to profile, variable-length ones included (default: {' '.join(DEFAULT_PROFILE_RNNS)})")
    p.add_argument("--profiler", choices=PROFILERS, default=None,
                   help="nsys, nvprof or torch (default: nsys when it is on PATH and --device is CUDA, else torch)")
    p.add_argument("-o", "--output", "--output-dir", dest="output_dir", default=DEFAULT_OUTPUT_DIR, help=f"where reports go (default {DEFAULT_OUTPUT_DIR}, created)")
    p.add_argument("--sleep-between-seconds", "--sleep_between_seconds", dest="sleep_between_seconds",
                   type=non_negative_float, default=1.0,
                   help="pause between runners so they are apart on the timeline, >= 0 (default 1)")
    p.add_argument("-w", "--warmup", type=non_negative_int, default=DEFAULT_WARMUP,
                   help="unprofiled iterations before each runner's profiled ones, in every mode (outside the NVTX "
                        "ranges under nsys/nvprof); TorchScript's profiling executor optimises only after a few "
                        f"(default {DEFAULT_WARMUP})")
    p.add_argument("--overwrite", action="store_true", help="replace an existing profile of the same name")
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads for torch")
    p.add_argument("--internal-run", "--internal_run", dest="internal_run", action="store_true",
                   help=argparse.SUPPRESS)  # set by the outer run under nsys/nvprof


def build_parser(engine: str = "") -> ArgumentParser:
    from benchcore.cli.commands import COMMAND_HELP

    lines = {"bench": BENCH_HELP, AB_COMMAND: AB_HELP, "test": TEST_HELP, "profile": PROFILE_HELP, **COMMAND_HELP}
    parser = ArgumentParser(prog=PROG, description="fastrnns-style RNN and CNN benchmarks on benchcore "
                            "(`rnnbench COMMAND --help` for each command's flags).",
                            epilog=core_cli.commands_epilog(lines), formatter_class=argparse.RawDescriptionHelpFormatter)
    core_cli.add_version_argument(parser, PROG)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="one of the commands below")
    sub.required = True
    _bench_parser(sub, engine=engine)
    _bench_parser(sub, ab=True, engine=engine)
    _test_parser(sub)
    _profile_parser(sub)
    return parser


# --------------------------------------------------------------------------------------------
# Shared checks


def _resolve_device(device: Optional[str]) -> str:
    device = device or bench.default_device()
    bench.check_device(device)
    return device


def _set_threads(threads: Optional[int]) -> None:
    """Environment first (workers inherit it), then this process's torch if already imported."""
    core_cli.apply_threads(threads)
    if threads:
        import torch

        torch.set_num_threads(threads)


# --------------------------------------------------------------------------------------------
# bench


def _check_bench_lists(args) -> None:
    """--rnns and --cnns, when given: at least one name, each of the list's own group."""
    lists = bench.default_lists()
    bench.check_runner_list(args.rnns, "--rnns", ("rnns", "vl"), "LSTM runners",
                            " ".join(lists[bench.GROUP_LSTM]))
    bench.check_runner_list(args.cnns, "--cnns", ("cnns",), "CNN runners", " ".join(lists[bench.GROUP_RESNET]))


def _check_stdout(args) -> None:
    """Without --output-file, --output-format prints the report to stdout; --print-json
    prints there too, and one stream cannot carry both, so ask for a file instead of
    dropping the report."""
    if args.output_file or not args.output_format:
        return
    if args.print_json:
        raise UsageError("--output-format without --output-file prints the report to stdout, which --print-json "
                         "already uses; add --output-file PATH, or drop --output-format")
    if len(core_cli.parse_formats(args.output_format)) > 1:
        raise UsageError(f"--output-format {args.output_format} without --output-file would print both reports to "
                         "stdout, one after the other; add --output-file PATH (one stem for both) or choose one format")


def _output_targets(args) -> dict:
    """{format: path} to write, checked before anything runs; empty without --output-file."""
    if not args.output_file:
        return {}
    targets = core_cli.output_paths(args.output_file, core_cli.formats_for(args), default_stem=None)
    core_cli.check_output_paths(targets, args.overwrite)
    return targets


def _render(report, fmt: str, charts: Sequence = ()) -> str:
    """A report for stdout; the Markdown links the charts relative to the working directory."""
    if fmt != "md":
        return core_cli.render_report(report, fmt, bench.markdown_report, SUITE) + "\n"
    from benchcore.views.charts import chart_links_markdown

    links = chart_links_markdown(list(charts), relative_to=Path.cwd()) if charts else ""
    return bench.markdown_report(report) + ("\n" + links + "\n" if links else "")


def _environment_extra(args) -> dict:
    return {"threads": args.threads, "seed": args.seed,
            "timer": "cuda_event" if args.device.startswith("cuda") else "perf_counter",
            "flush_denormal": args.flush_denormal}


def bench_environment(args, argv: Sequence[str]) -> dict:
    """The report's environment, collected with the benchmarked device current, so its `gpu`
    entry describes the GPU the figures came from (cuda:1 on a two-GPU host, not GPU 0)."""
    from benchcore.execute.environment import collect

    with bench.device_context(args.device):
        return collect(bench.SUITE, [PROG, *argv], collectors=SUITE.collectors, extra=_environment_extra(args))


def _check_bench_args(args) -> None:
    """What `bench` and `ab` check before anything runs."""
    core_cli.apply_threads(args.threads)
    bench.check_fuser(args.fuser, args.executor)
    args.device = _resolve_device(args.device)
    _check_bench_lists(args)


def _job(args, checkpoint, pythons=None):
    """The sweep `bench` and `ab` run: (job, every runner before sharding)."""
    from benchcore.execute.rounds import shard_specs
    from benchcore.execute.sweep import SweepJob

    all_specs = bench.build_specs(args)
    specs = shard_specs(all_specs, core_cli.parse_shard(args.shard))
    if not specs:
        raise UsageError("nothing to run: no runner selected (--group/--rnns/--cnns/--shard); use --group rnns and/or cnns, or --variable-lstms")
    bench.check_runners(sorted({s.name for s in specs}), args.device)
    settings = core_cli.run_settings_from(args, warmup=args.warmup, runs=args.nloops)
    options = {"threads": args.threads, "seed": args.seed, **core_cli.audit_options(args)}
    if args.engine == ENGINE:
        options["engine"] = ENGINE
    job = SweepJob(SUITE, specs, settings, core_cli.rounds_from(args, DEFAULT_ROUNDS), options, checkpoint,
                   pythons=pythons or {})
    if args.engine == ENGINE:
        valgrind.apply(job, valgrind.plan(args.cache_sim, dict(SUITE.count_environment), args.count_workers))
    return job, all_specs


def _report(args, job, all_specs, environment, results, side: str = ""):
    from benchcore.execute.environment import now_iso
    from benchcore.report.model import Report

    return Report(
        suite=bench.SUITE,
        environment=dict(environment, finished_at=now_iso()),
        settings={"settings": job.settings.to_dict(), "threads": args.threads, "seed": args.seed,
                  "rounds": job.settings_record(), "device": args.device, "fuser": args.fuser,
                  "executor": args.executor or "default",
                  "sizes": {**bench.sizes_from(args), "cnnBatch": args.cnnBatch}, "unit": "ms", "shard": args.shard,
                  "runners": bench.run_order(all_specs), **core_cli.audit_options(args), "engine": args.engine,
                  **({"valgrind": count_report.probed_settings(job.worker_options["valgrind"], results,
                                                               job.suite.code_path_probes, job.pythons.get(side))}
                     if job.worker_options.get("valgrind") else {})},
        results=results,
    )


def _bench(args, argv: Sequence[str]) -> int:
    from benchcore.execute import sweep

    _check_bench_args(args)
    if args.resume and not args.output_file:
        raise UsageError("--resume needs --output-file (the checkpoint lives next to it)")
    _check_stdout(args)
    targets = _output_targets(args)
    # without -o the report goes to stdout (JSON unless -f says), except where --print-json already writes there
    stdout_formats = () if targets or args.print_json else core_cli.parse_formats(args.output_format or "json")
    if args.plot:
        from benchcore.views.charts import prepare_chart_folder

        prepare_chart_folder(args.plot, PROG, args.overwrite)
    checkpoint = core_cli.sweep_checkpoint(targets) if targets else None
    job, all_specs = _job(args, checkpoint)
    environment, results = sweep.measure(job, core_cli.run_plan_from(args), PROG, argv, _environment_extra(args),
                                         collect_local=lambda: bench_environment(args, argv))[""]
    report = _report(args, job, all_specs, environment, results)
    _err(bench.console_table(results, sep=args.sep))
    _report_problems(results)
    note = count_report.warning(report.settings.get("valgrind"))
    if note:
        _err(f"{PROG}: warning: {note}")

    if args.print_json == "oss":
        print(bench.oss_json(results))
    elif args.print_json == "pep":
        for line in bench.pep_lines(results):
            print(line)
    written = core_cli.write_outputs(report, targets, args.overwrite, bench.markdown_report, checkpoint,
                                     plot_dir=args.plot, suite=SUITE)
    for path in written:
        _err(f"{PROG}: wrote {path}")
    sweep.remove_checkpoint(checkpoint)
    for fmt in stdout_formats:  # one at most, never with --print-json (_check_stdout)
        sys.stdout.write(_render(report, fmt, [path for path in written if path.suffix == ".png"]))
    return 1 if report.failures else 0


def _report_problems(results) -> None:
    """Skipped and failed runners, then the audit's summary (benchcore.measure.audit)."""
    for result in results:
        if result.status == "skipped":
            _err(f"{PROG}: {result.spec.name} skipped: {result.error}")
        elif not result.ok:
            _err(f"{PROG}: {result.spec.name} {result.status}: {result.error}")
    _err(*audit.sweep_lines([(r.spec.name, r.metrics) for r in results if r.ok], PROG))
    trust_line = trust.sweep_line(results, SUITE, PROG)
    if trust_line:
        _err(trust_line)


def _ab(args, argv: Sequence[str]) -> int:
    """`rnnbench ab`: the same runners under --base-python and --new-python, interleaved."""
    from benchcore.cli import ab
    from benchcore.execute import sweep

    _check_bench_args(args)
    pythons = ab.plan(args, SUITE)
    job, all_specs = _job(args, ab.checkpoint_path(args), pythons)

    def reports_of(measured):
        return {side: _report(args, job, all_specs, environment, results, side)
                for side, (environment, results) in measured.items()}

    reports = ab.measure(SUITE, job, core_cli.run_plan_from(args, ab=True), args, argv, _environment_extra(args),
                         reports_of)
    ab.warn_code_paths(PROG, reports)
    for side, report in reports.items():
        _err(f"{side}:\n" + bench.console_table(report.results, sep=args.sep))
        _report_problems(report.results)
    status = ab.finish(SUITE, reports, args)
    sweep.remove_checkpoint(job.checkpoint)
    return status


# --------------------------------------------------------------------------------------------
# test


def _test(args) -> int:
    from . import correctness

    _set_threads(args.threads)
    device = _resolve_device(args.device)
    bench.check_runner_list(args.rnns, "--rnns", ("rnns", "vl"), "LSTM runners", "every LSTM runner")
    sizes = {name: getattr(args, name) for name in bench.SIZE_DEFAULTS}
    names = list(args.rnns) if args.rnns else correctness.default_check_runners()
    bench.check_runners(names, device)
    results = correctness.check_runners(names, device=device, seed=args.seed, atol=args.atol, rtol=args.rtol,
                                        scale_grads=not args.absolute_grads, **sizes)
    print(correctness.format_results(results))
    _err(*audit.summary_lines([(r.runner, r.audit) for r in results], PROG))
    failed = [r.runner for r in results if not r.passed]
    if failed:
        _err(f"{PROG}: {len(failed)} of {len(results)} runner(s) do not match the nn.LSTM reference: {', '.join(failed)}")
        return 1
    return 0


# --------------------------------------------------------------------------------------------
# profile


def _profile(args, argv: Sequence[str]) -> int:
    from . import profiling

    _set_threads(args.threads)
    bench.check_fuser(args.fuser, args.executor)
    args.device = _resolve_device(args.device)
    bench.check_runner_list(args.rnns, "--rnns", ("rnns", "vl"), "LSTM runners",
                            " ".join(profiling.DEFAULT_PROFILE_RNNS))
    runners = list(args.rnns or profiling.DEFAULT_PROFILE_RNNS)
    bench.check_runners(runners, args.device)
    sizes = {name: getattr(args, name) for name in bench.SIZE_DEFAULTS}
    specs = [bench.CaseSpec(bench.SUITE, name, bench.case_params(sizes, args.device, args.fuser, args.executor, args.seed, "profile"))
             for name in runners]

    try:
        return _run_profiler(args, specs, runners, sizes)
    except profiling.RunnerFailed as exc:
        _err(f"{PROG}: error: {exc}")
        return 1


def _run_profiler(args, specs, runners: List[str], sizes: dict) -> int:
    """The inner run under nsys/nvprof, torch mode, or the outer nsys/nvprof run."""
    from benchcore.execute.external import ExternalToolError

    from . import profiling

    if args.internal_run:
        for run in profiling.internal_run(specs, nloops=args.nloops, sleep_s=args.sleep_between_seconds, warmup=args.warmup):
            print(f"internal run: {run.name} {run.iterations} iterations after {run.warmup} warmup, "
                  f"nvtx {'on' if run.nvtx else 'off'}, {run.seconds:.3f} s", flush=True)
        return 0

    profiler = args.profiler or profiling.default_profiler(args.device)
    if profiler == "torch":
        done = profiling.torch_profile(specs, args.output_dir, sizes, nloops=args.nloops, warmup=args.warmup,
                                       overwrite=args.overwrite)
        _err(f"{PROG}: torch.profiler: {len(specs)} runner(s), {args.warmup} warmup and {args.nloops} profiled "
             "iterations each")
        for path in (done.trace, done.table_text, done.table_markdown, done.stats_json):
            print(path)
        return 0

    options = {"device": args.device, "fuser": args.fuser, "executor": args.executor, "seed": args.seed,
               "nloops": args.nloops, "sleep-between-seconds": args.sleep_between_seconds, "warmup": args.warmup,
               "threads": args.threads}
    try:
        done = profiling.external_profile(profiler, args.output_dir, runners, sizes, options, overwrite=args.overwrite)
    except ExternalToolError as exc:
        _err(f"{PROG}: error: {exc}" + (f"; its output ends with:\n{exc.stderr_tail}" if exc.stderr_tail else ""))
        return 1
    _err(f"{PROG}: {done.tool}: {' '.join(done.command)}")
    if done.stdout_tail:
        _err(done.stdout_tail)
    print(done.output)
    return 0


# --------------------------------------------------------------------------------------------
# Entry points


def _split_runner_lists(args) -> None:
    """`--rnns cudnn,jit` as `--rnns cudnn jit` (opbench's lists are comma-separated)."""
    for name in ("rnns", "cnns"):
        names = getattr(args, name, None)
        if names:
            setattr(args, name, [part for item in names for part in item.split(",") if part])


def _main(argv: List[str]) -> int:
    from benchcore.cli.commands import COMMANDS
    from benchcore.cli.commands import main as shared_main

    if argv and argv[0] in COMMANDS:
        return shared_main(SUITE, argv)
    try:
        args = build_parser(engine_of(argv)).parse_args(argv)
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    _split_runner_lists(args)
    if args.command == "bench":
        return _bench(args, argv)
    if args.command == AB_COMMAND:
        return _ab(args, argv)
    if args.command == "test":
        return _test(args)
    return _profile(args, argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return core_cli.run_main(_main, argv, prog=PROG)


if __name__ == "__main__":
    sys.exit(main())
