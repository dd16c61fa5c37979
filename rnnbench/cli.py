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
from benchcore.cli import run as sweep_path
from benchcore.cli.options import (
    ArgumentParser,
    non_negative_float,
    non_negative_int,
    positive_int,
)
from benchcore.cli.request import ab_from_namespace, from_namespace
from benchcore.execute import valgrind
from benchcore.measure import audit
from benchcore.measure.instructions import ENGINE, INSTRUCTION_DEFAULTS, engine_of
from benchcore.views import count_report, headroom, trust
from frameworks import roofs

from . import cases, views
from .request import BENCH_TIMEOUT_S, RunnerRequest
from .suite import SUITE
from .sweep import DEFAULT_ROUNDS, PROG, RunnerSweep, resolve_device

AB_COMMAND = "ab"
AB_DEFAULT_DIR = "rnnbench-ab"
DEFAULT_SEED = 17
#: torch seeds an int64 generator state, and the creators also seed one with seed + 1.
SEED_MAX = 2**63 - 2
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
    for name, default in cases.SIZE_DEFAULTS.items():
        sizes.add_argument(f"--{name}", type=positive_int, default=default, help=f"default {default}")
    sizes.add_argument("-r", "--nloops", "--runs", dest="nloops", type=positive_int, default=nloops_default,
                       help=f"measured (bench) or profiled (profile) iterations per runner (default {nloops_default})")
    if cnns:
        # fastrnns' ResNets always took 32 images, whatever --miniBatch said; so do ours unless asked.
        sizes.add_argument("--cnnBatch", type=positive_int, default=cases.CNN_BATCH_DEFAULT,
                           help=f"images per ResNet batch, 3x224x224 each (default {cases.CNN_BATCH_DEFAULT}, as fastrnns)")


def _add_model_options(parser, with_seed_default: Optional[int] = DEFAULT_SEED) -> None:
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when available, else cpu)")
    parser.add_argument("--fuser", default="te", help=f"TorchScript fuser: {', '.join(cases.FUSERS)} (default te)")
    parser.add_argument("--executor", default=None,
                        help=f"TorchScript executor: {', '.join(cases.EXECUTORS)} (default: the fuser's choice)")
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
    if not ab:  # an ab side's roofs would be this interpreter's (docs/HEADROOM.md)
        roofs.add_argument(p)
    p.add_argument("--engine", default="python", choices=cases.ENGINES,
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
    for name, default in cases.SIZE_DEFAULTS.items():
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
# bench and ab


def split_runners(names: Optional[Sequence[str]]) -> Optional[List[str]]:
    """`--rnns cudnn,jit` as `--rnns cudnn jit` (opbench's lists are comma-separated)."""
    if not names:
        return names
    return [part for item in names for part in item.split(",") if part]


def request_from(args) -> RunnerRequest:
    """The one place a parsed `bench` or `ab` command line becomes a request."""
    ab = args.command == AB_COMMAND
    return from_namespace(RunnerRequest, args, rnns=split_runners(args.rnns), cnns=split_runners(args.cnns),
                          ab=ab_from_namespace(args) if ab else None)


def _set_threads(threads: Optional[int]) -> None:
    """Environment first (workers inherit it), then this process's torch if already imported."""
    core_cli.apply_threads(threads)
    if threads:
        import torch

        torch.set_num_threads(threads)


def _render(report, fmt: str, charts: Sequence = ()) -> str:
    """A report for stdout; the Markdown links the charts relative to the working directory."""
    if fmt != "md":
        return core_cli.render_report(report, fmt, views.markdown_report, SUITE) + "\n"
    from benchcore.views.charts import chart_links_markdown

    links = chart_links_markdown(list(charts), relative_to=Path.cwd()) if charts else ""
    return views.markdown_report(report) + ("\n" + links + "\n" if links else "")


class RunnerCommand(RunnerSweep):
    """The command line's runner sweep: the library's hooks plus what it prints."""

    def announce(self, request: RunnerRequest, report) -> None:
        """fastrnns' console table, the problems, then --print-json's lines on stdout."""
        _err(views.console_table(report.results, sep=request.sep))
        _report_problems(report.results)
        note = count_report.warning(report.settings.get("valgrind"))
        if note:
            _err(f"{PROG}: warning: {note}")
        if request.print_json == "oss":
            print(views.oss_json(report.results))
        elif request.print_json == "pep":
            for line in views.pep_lines(report.results):
                print(line)

    def summarize(self, request: RunnerRequest, report, written: List[Path], started: float) -> None:
        """The files written; without -o the report on stdout (JSON unless -f says), except
        where --print-json already writes there."""
        for line in headroom.console_notes(report):
            _err(f"{PROG}: warning: {line}")
        for path in written:
            _err(f"{PROG}: wrote {path}")
        stdout_formats = () if request.output_file or request.print_json else core_cli.parse_formats(
            request.output_format or "json")
        for fmt in stdout_formats:  # one at most, never with --print-json (check_stdout)
            sys.stdout.write(_render(report, fmt, [path for path in written if path.suffix == ".png"]))

    def announce_sides(self, request: RunnerRequest, reports) -> None:
        for side, report in reports.items():
            _err(f"{side}:\n" + views.console_table(report.results, sep=request.sep))
            _report_problems(report.results)


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


# --------------------------------------------------------------------------------------------
# test


def _test(args) -> int:
    from . import correctness

    _set_threads(args.threads)
    device = resolve_device(args.device)
    rnns = split_runners(args.rnns)
    cases.check_runner_list(rnns, "--rnns", ("rnns", "vl"), "LSTM runners", "every LSTM runner")
    sizes = cases.sizes_from(args)
    names = list(rnns) if rnns else correctness.default_check_runners()
    cases.check_runners(names, device)
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
    cases.check_fuser(args.fuser, args.executor)
    device = resolve_device(args.device)
    rnns = split_runners(args.rnns)
    cases.check_runner_list(rnns, "--rnns", ("rnns", "vl"), "LSTM runners", " ".join(profiling.DEFAULT_PROFILE_RNNS))
    runners = list(rnns or profiling.DEFAULT_PROFILE_RNNS)
    cases.check_runners(runners, device)
    sizes = cases.sizes_from(args)
    specs = [cases.CaseSpec(cases.SUITE, name, cases.case_params(sizes, device, args.fuser, args.executor, args.seed,
                                                                 "profile"))
             for name in runners]

    try:
        return _run_profiler(args, device, specs, runners, sizes)
    except profiling.RunnerFailed as exc:
        _err(f"{PROG}: error: {exc}")
        return 1


def _run_profiler(args, device: str, specs, runners: List[str], sizes: dict) -> int:
    """The inner run under nsys/nvprof, torch mode, or the outer nsys/nvprof run."""
    from benchcore.execute.external import ExternalToolError

    from . import profiling

    if args.internal_run:
        for run in profiling.internal_run(specs, nloops=args.nloops, sleep_s=args.sleep_between_seconds, warmup=args.warmup):
            print(f"internal run: {run.name} {run.iterations} iterations after {run.warmup} warmup, "
                  f"nvtx {'on' if run.nvtx else 'off'}, {run.seconds:.3f} s", flush=True)
        return 0

    profiler = args.profiler or profiling.default_profiler(device)
    if profiler == "torch":
        done = profiling.torch_profile(specs, args.output_dir, sizes, nloops=args.nloops, warmup=args.warmup,
                                       overwrite=args.overwrite)
        _err(f"{PROG}: torch.profiler: {len(specs)} runner(s), {args.warmup} warmup and {args.nloops} profiled "
             "iterations each")
        for path in (done.trace, done.table_text, done.table_markdown, done.stats_json):
            print(path)
        return 0

    options = {"device": device, "fuser": args.fuser, "executor": args.executor, "seed": args.seed,
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


def _main(argv: List[str]) -> int:
    from benchcore.cli.commands import COMMANDS
    from benchcore.cli.commands import main as shared_main

    if argv and argv[0] in COMMANDS:
        return shared_main(SUITE, argv)
    try:
        args = build_parser(engine_of(argv)).parse_args(argv)
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    if args.command == "bench":
        return sweep_path.sweep(request_from(args), RunnerCommand(), argv)
    if args.command == AB_COMMAND:
        return sweep_path.ab(request_from(args), RunnerCommand(), argv)
    if args.command == "test":
        return _test(args)
    return _profile(args, argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return core_cli.run_main(_main, argv, prog=PROG)


if __name__ == "__main__":
    sys.exit(main())
