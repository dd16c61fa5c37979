"""`opbench`: opperf's command line, plus selection, isolation, resume and sharding, for MXNet
and PyTorch (`--framework mxnet|torch`, default mxnet; each a backend in opbench.backends).

    opbench [--framework F] [opperf flags] [--category C] [--ops NAME|GLOB] [--exclude NAME|GLOB] ...
    opbench [--framework F] --list [--all]
    opbench crossframe ...                (MXNet vs PyTorch on the same work, opbench.crossframe)
    opbench compare|plot|merge ...        (shared report commands, benchcore.cli.commands)

Reports: `-f json` (default), `-f md`, or `-f json,md` for both in one run; with both, `-o`
names one of them and the other is written next to it with the other suffix
(`-o reports/cpu.json` → reports/cpu.json and reports/cpu.md). The default output is
./mxnet_operator_benchmarks.<json|md>, as in opperf (torch: ./torch_operator_benchmarks.<json|md>). Existing files are never replaced
without --overwrite, and the paths are checked before anything runs.

Finished cases are appended to <output>.checkpoint.jsonl as they finish, so an interrupted
sweep continues with --resume; the checkpoint is removed once the report is written.

`--shard K/N` keeps the cases whose position in the case list sorted by case key is K-1
modulo N (round-robin), so every shard gets a similar mix of categories and sizes, and the N
shards of one command line partition its cases exactly; `opbench merge` joins their reports.

Tests ask for toy input sizes with the hidden `--tiny` flag or OPBENCH_TINY=1.

Exit status: 0 every case ran; 1 a case failed, crashed or timed out; 2 usage error (one line
on stderr: `opbench: error: <problem>; <fix>`); 130 interrupted (the checkpoint keeps what ran).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence

from benchcore.cli import run as sweep_path
from benchcore.cli.commands import COMMAND_HELP
from benchcore.cli.commands import COMMANDS as REPORT_COMMANDS
from benchcore.cli.options import (
    ArgumentParser,
    add_audit_arguments,
    add_output_arguments,
    add_run_arguments,
    add_shard_argument,
    add_version_argument,
    apply_threads,
    commands_epilog,
    non_negative_int,
    positive_int,
    run_main,
)
from benchcore.cli.request import ab_from_namespace, from_namespace
from benchcore.errors import UsageError
from benchcore.execute import valgrind
from benchcore.measure import audit
from benchcore.measure.instructions import ENGINE, INSTRUCTION_DEFAULTS, engine_of
from benchcore.views import count_report, headroom, trust
from frameworks import roofs

from .backends import FRAMEWORKS, backend_for, require_framework
from .backends.base import UnknownOperator
from .extras import label_of, operator_of
from .request import OperatorRequest
from .suite import PROG, SUITE
from .sweep import DEFAULT_ROUNDS, OperatorSweep

TINY_ENV = "OPBENCH_TINY"
AB_COMMAND = "ab"
CROSSFRAME_COMMAND = "crossframe"
AB_DEFAULT_DIR = "opbench-ab"
#: every command of `opbench`, with its line in --help
COMMAND_LINES = {
    AB_COMMAND: "time the same operators under two Python environments, interleaved, and compare them",
    CROSSFRAME_COMMAND: "MXNet against PyTorch on the same work, pair by pair",
    **COMMAND_HELP,
}


def build_parser(backend, ab: bool = False, engine: str = "") -> ArgumentParser:
    """The flags of one framework's sweep (defaults that differ between backends, and under the
    instruction engine, come from them)."""
    torch = backend.name == "torch"
    parser = ArgumentParser(
        prog=f"{PROG} {AB_COMMAND}" if ab else PROG,
        description=("Time the same operators under two Python environments (e.g. two framework builds), interleaved "
                     "case by case and round by round, and compare them." if ab else
                     "Benchmark MXNet (default) or PyTorch operators forward and backward (opperf's interface): "
                     "`opbench [flags]` runs the sweep; the commands below do the rest (`opbench COMMAND --help`)."),
        epilog=None if ab else commands_epilog(COMMAND_LINES), formatter_class=argparse.RawDescriptionHelpFormatter)
    if not ab:
        add_version_argument(parser, PROG)
    parser.add_argument("--framework", default="mxnet", choices=FRAMEWORKS,
                        help="mxnet: the operator registry (opperf's sweep); torch: every OpInfo entry (default mxnet)")
    opperf = parser.add_argument_group("opperf's flags")
    opperf.add_argument("--ctx", default=None, help="MXNet: cpu, cpu(N), gpu or gpu(N) (default cpu)")
    opperf.add_argument("--device", default=None, help="torch: cpu, cuda or cuda:N (default cpu)")
    if torch:
        opperf.add_argument("--flush-l2", action="store_true",
                            help="CUDA: evict the L2 cache before each timed call (cold-cache timing, as triton's "
                                 "do_bench; default: warm cache, as opperf)")
    opperf.add_argument("--dtype", default="float32", help=f"dtype of every tensor (default float32; "
                                                           f"{backend.name}: {', '.join(backend.dtypes)})")
    if not ab:
        add_output_arguments(opperf, backend.default_output_stem)
    opperf.add_argument("-p", "--profiler", "--engine", dest="engine", default="native", choices=backend.engines,
                        help=("native: torch.profiler (the operators' own time per call); " if torch else
                              "native: MXNet's profiler (kernel times, memory); ")
                        + "python: perf_counter per call; instructions: each call's instructions counted under "
                          "valgrind (docs/INSTRUCTIONS.md; then -w 20 -r 3 --rounds 1 --threads 1 and no audit by default) "
                          "(default native)")
    opperf.add_argument("--int64-tensor", default=None, type=str.lower, choices=("on", "off"),
                        help="MXNet: large-tensor inputs; needs an MXNet built with INT64_TENSOR_SIZE (default off)")
    opperf.add_argument("-w", "--warmup", type=non_negative_int, default=25, help="warmup iterations (default 25)")
    opperf.add_argument("-r", "--runs", type=positive_int, default=100, help="measured iterations (default 100)")

    pytorch = parser.add_argument_group("--framework torch")
    pytorch.add_argument("--size-target", type=positive_int, default=None, metavar="N",
                         help="elements of an entry's largest input or output after scaling (default 1048576)")
    pytorch.add_argument("--manifest", default=None, metavar="PATH",
                         help="the discovery manifest to use (built there if missing; default: a cached one per "
                              "torch version, dtype, device kind and size target)")

    select = parser.add_argument_group("choosing cases")
    select.add_argument("--category", action="append", default=None, metavar="NAME[,NAME]",
                        help="only these categories (repeatable or comma-separated); see --list")
    select.add_argument("--ops", action="append", default=None, metavar="NAME|GLOB[,...]",
                        help="only these operators, by name or glob (repeatable or comma-separated)")
    select.add_argument("--exclude", action="append", default=None, metavar="NAME|GLOB[,...]",
                        help="leave these operators out (names or globs)")
    add_shard_argument(select)
    select.add_argument("--seed", type=int, default=41, help="random seed for the inputs (default 41, recorded)")
    if not ab:
        select.add_argument("--list", action="store_true",
                            help="list the operators a run with these flags covers (category, backward timed, inputs) "
                                 "and exit")
        select.add_argument("--all", action="store_true",
                            help="with --list: also the operators left out, with the reason")
    select.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    add_run_arguments(parser, rounds=DEFAULT_ROUNDS, memory_limit_gb=backend.memory_limit_gb,
                      memory_why=f" for --framework {backend.name}")
    add_audit_arguments(parser)
    if not ab:  # an ab side's roofs would be this interpreter's (docs/HEADROOM.md)
        roofs.add_argument(parser)
    valgrind.add_arguments(parser)
    if engine == ENGINE:
        parser.set_defaults(**INSTRUCTION_DEFAULTS)
    if ab:
        from benchcore.cli.ab import add_ab_arguments

        add_ab_arguments(parser, AB_DEFAULT_DIR)
    return parser


def framework_of(argv: Sequence[str]) -> str:
    """--framework's value, read before the full parser (whose defaults depend on it)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--framework", default="mxnet")
    known, _rest = pre.parse_known_args(argv)
    if known.framework not in FRAMEWORKS:
        raise UsageError(f"--framework {known.framework}: opbench sweeps {' or '.join(FRAMEWORKS)}; choose one of those")
    return known.framework


def request_from(args, ab: bool) -> OperatorRequest:
    """The one place a parsed command line becomes a request (OPBENCH_TINY=1 is --tiny)."""
    return from_namespace(OperatorRequest, args, tiny=args.tiny or os.environ.get(TINY_ENV) == "1",
                          ab=ab_from_namespace(args) if ab else None)


class OperatorCommand(OperatorSweep):
    """The command line's operator sweep: the library's hooks plus the summary on stderr."""

    def summarize(self, request, report, written: List[Path], started: float) -> None:
        summarize(report, started, written)


def summarize(report, started: float, written: List[Path]) -> None:
    from .markdown import capped

    ok = [r for r in report.results if r.ok]
    failed = report.failures
    skipped_cases = [r for r in report.results if r.status == "skipped"]
    say = lambda text: print(f"{PROG}: {text}", file=sys.stderr)  # noqa: E731
    operators, cases = len({operator_of(r) for r in ok}), len(ok)
    say(f"benchmarked {operators} operator{'s' if operators != 1 else ''} ({cases} case{'s' if cases != 1 else ''}) "
        f"in {time.perf_counter() - started:.1f} s")
    if skipped_cases:
        say(f"skipped {len(skipped_cases)} case(s):")
        for r in skipped_cases:
            print(f"  {label_of(r)}: {r.error}", file=sys.stderr)
    capped_cases = [r for r in ok if capped(r)]
    if capped_cases:
        say(f"{len(capped_cases)} case(s) capped: --max-time ran out before IQR/median < --target-precision:")
        for r in capped_cases:
            print(f"  {label_of(r)}: {len(r.metrics['forward']['samples_ms'])} runs", file=sys.stderr)
    if failed:
        say(f"failed {len(failed)} case(s):")
        for r in failed:
            print(f"  {label_of(r)}: {r.status}: {r.error}", file=sys.stderr)
    note = count_report.warning(report.settings.get("valgrind"))
    if note:
        say(f"warning: {note}")
    for line in audit.sweep_lines([(label_of(r), r.metrics) for r in ok], PROG):
        print(line, file=sys.stderr)
    trust_line = trust.sweep_line(ok, SUITE, PROG)
    if trust_line:
        print(trust_line, file=sys.stderr)
    for line in headroom.console_notes(report):
        say(f"warning: {line}")
    uncovered = report.extra.get("no_benchmark") or []
    if uncovered:
        say(f"{len(uncovered)} {'OpInfo entries' if report.settings.get('framework') == 'torch' else 'registered operator(s)'}"
            " without a benchmark:")
        for item in uncovered:
            print(f"  {item['op']}: {item['reason']}", file=sys.stderr)
    if written:
        say("wrote " + ", ".join(str(p) for p in written))


def run(argv: List[str]) -> int:
    if argv and argv[0] in REPORT_COMMANDS:
        from benchcore.cli import commands

        # reports of either framework share the headline figures and merge rules: the default
        # framework's suite reads them all
        return commands.main(backend_for(FRAMEWORKS[0]).suite, argv)
    if argv and argv[0] == CROSSFRAME_COMMAND:
        from . import crossframe

        return crossframe.run(argv[1:])
    ab = bool(argv) and argv[0] == AB_COMMAND
    flags = argv[1:] if ab else argv
    require_framework(framework_of(flags))
    backend = backend_for(framework_of(flags))
    try:
        args = build_parser(backend, ab, engine_of(flags)).parse_args(flags)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    if not ab and args.all and not args.list:
        raise UsageError("--all only goes with --list; use opbench --list --all")
    apply_threads(args.threads)  # before a framework is imported, so this process and its workers use it
    request = request_from(args, ab)
    try:
        if ab:
            return sweep_path.ab(request, OperatorCommand(backend), argv)
        if args.list:
            return backend.list_operators(request, backend.check(request), args.all)
        return sweep_path.sweep(request, OperatorCommand(backend), argv)
    except UnknownOperator as exc:
        raise pointed_elsewhere(exc, framework_of(flags)) from None


def pointed_elsewhere(exc: UnknownOperator, framework: str) -> UsageError:
    """An operator name the chosen backend lacks: the line naming the framework that has it, if
    another backend knows it (the backends do not import each other), else the backend's own."""
    for other in FRAMEWORKS:
        if other != framework and exc.elsewhere and backend_for(other).knows(exc.name):
            return UsageError(exc.elsewhere(other))
    return exc


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_main(run, argv, PROG)


if __name__ == "__main__":
    sys.exit(main())
