"""`opbench`: opperf's command line, plus selection, isolation, resume and sharding.

    opbench [opperf flags] [--category C] [--ops NAME|GLOB] [--exclude NAME|GLOB] [--shard K/N] ...
    opbench --list [--all]
    opbench compare|plot|merge ...        (shared report commands, benchcore.commands)

Reports: `-f json` (default), `-f md`, or `-f json,md` for both in one run; with both, `-o`
names one of them and the other is written next to it with the other suffix
(`-o reports/cpu.json` → reports/cpu.json and reports/cpu.md). The default output is
./mxnet_operator_benchmarks.<json|md>, as in opperf. Existing files are never replaced
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
import fnmatch
import os
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from benchcore.cli import (ArgumentParser, add_run_arguments, apply_threads, checkpoint_path_for,
                           non_negative_int, positive_int, run_main, run_settings_from, sweep)
from benchcore.errors import UsageError

PROG = "opbench"
EXECUTOR = "opbench.mxnet_backend:execute"
DEFAULT_OUTPUT_STEM = "mxnet_operator_benchmarks"
FORMATS = ("json", "md")
REPORT_COMMANDS = ("compare", "plot", "merge")
TINY_ENV = "OPBENCH_TINY"


def build_parser() -> ArgumentParser:
    from .api import DTYPES

    parser = ArgumentParser(
        prog=PROG,
        description="Benchmark MXNet operators forward and backward (opperf's interface). "
                    "Also: opbench compare|plot|merge REPORTS (see opbench compare --help).")
    opperf = parser.add_argument_group("opperf's flags")
    opperf.add_argument("--ctx", default="cpu", help="cpu, cpu(N), gpu or gpu(N) (default cpu)")
    opperf.add_argument("--dtype", default="float32", choices=DTYPES, help="dtype of every tensor (default float32)")
    opperf.add_argument("-f", "--output-format", default="json", metavar="json|md|json,md",
                        help="report format; json,md writes both (default json)")
    opperf.add_argument("-o", "--output-file", default=None, metavar="PATH",
                        help=f"report path (default ./{DEFAULT_OUTPUT_STEM}.<json|md>)")
    opperf.add_argument("-p", "--profiler", default="native", choices=("native", "python"),
                        help="native: MXNet's profiler (kernel times, memory); python: perf_counter per call (default native)")
    opperf.add_argument("--int64-tensor", default="off", type=str.lower, choices=("on", "off"),
                        help="large-tensor inputs; needs an MXNet built with INT64_TENSOR_SIZE (default off)")
    opperf.add_argument("-w", "--warmup", type=non_negative_int, default=25, help="warmup iterations (default 25)")
    opperf.add_argument("-r", "--runs", type=positive_int, default=100, help="measured iterations (default 100)")

    select = parser.add_argument_group("choosing cases")
    select.add_argument("--category", action="append", default=None, metavar="NAME[,NAME]",
                        help="only these categories (repeatable or comma-separated); see --list")
    select.add_argument("--ops", action="append", default=None, metavar="NAME|GLOB[,...]",
                        help="only these operators, by name or glob (repeatable or comma-separated)")
    select.add_argument("--exclude", action="append", default=None, metavar="NAME|GLOB[,...]",
                        help="leave these operators out (names or globs)")
    select.add_argument("--shard", default=None, metavar="K/N",
                        help="run only the K-th of N deterministic parts of the cases (round-robin over cases sorted by key)")
    select.add_argument("--seed", type=int, default=41, help="random seed for the inputs (default 41, recorded)")
    select.add_argument("--list", action="store_true",
                        help="list the operators (category, has_backward, backward timed, input rule) and exit")
    select.add_argument("--all", action="store_true", help="with --list: also the filtered operators, with the reason")
    select.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    add_run_arguments(parser)
    _lower_worker_memory_limit(parser)
    return parser


#: A worker is restarted after a case that leaves it above this resident memory. MXNet keeps
#: the largest temporary workspace and MKLDNN caches for the life of the process: the 2-D
#: Convolution case at (32,3,256,256) leaves a worker at 0.74 GiB with its arrays freed (a
#: fresh worker holds 0.2), and none of that is reused by the next case. The largest case,
#: Deconvolution 2-D at (32,3,256,256), adds 1.9 GiB on top of whatever the worker holds
#: (2.07 GiB fresh, 2.62 after that Convolution case), and the parent holds about 0.35 GiB;
#: so the limit must stay below 3 - 1.9 - 0.35 GiB for the full sweep to stay under 3 GiB in
#: any case order. 0.7 GiB restarts the worker after the heavy cases only (metrics
#: rss_before/peak/after_bytes show it per case).
WORKER_MEMORY_LIMIT_GB = 0.7


def _lower_worker_memory_limit(parser) -> None:
    for action in parser._actions:
        if action.dest == "memory_limit_gb":
            action.default = WORKER_MEMORY_LIMIT_GB
            action.help = (f"restart the worker process after a case that leaves it above this resident "
                           f"memory (default {WORKER_MEMORY_LIMIT_GB:g} for opbench: MXNet keeps workspace "
                           f"between cases)")


# ---------------------------------------------------------------------------------------------
# Argument checks


def _split(values: Optional[Sequence[str]]) -> Optional[List[str]]:
    if values is None:
        return None
    items = [item.strip() for value in values for item in value.split(",") if item.strip()]
    return items


def parse_formats(text: str) -> Tuple[str, ...]:
    formats = tuple(dict.fromkeys(f.strip().lower() for f in text.split(",") if f.strip()))
    if not formats or any(f not in FORMATS for f in formats):
        raise UsageError(f"--output-format {text!r} is not json, md or json,md; choose one of those")
    return formats


def output_paths(output: Optional[str], formats: Tuple[str, ...]) -> dict:
    """{format: Path}: -o for one format; with two, -o's stem gets both suffixes."""
    if output is None:
        return {fmt: Path(f"{DEFAULT_OUTPUT_STEM}.{fmt}") for fmt in formats}
    path = Path(output).expanduser()
    if len(formats) == 1:
        return {formats[0]: path}
    base = path.with_suffix("") if path.suffix in (".json", ".md") else path
    return {fmt: base.with_name(f"{base.name}.{fmt}") for fmt in formats}


def check_writable(path: Path, overwrite: bool) -> None:
    """Refuse, before any case runs, a path the report could not be written to."""
    if path.exists() and not overwrite:
        raise UsageError(f"output file {path} already exists; choose another path with -o or pass --overwrite")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"cannot write {path}: folder {folder} does not exist; create it or choose another path")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"cannot write {path}: folder {folder} is not writable; choose another path with -o")
    if path.is_dir():
        raise UsageError(f"output {path} is a folder; pass a file path with -o")


def parse_shard(text: Optional[str]) -> Optional[Tuple[int, int]]:
    if text is None:
        return None
    try:
        left, right = text.split("/")
        index, count = int(left), int(right)
    except ValueError:
        raise UsageError(f"--shard {text!r} is not K/N; write e.g. --shard 2/4") from None
    if not 1 <= index <= count:
        raise UsageError(f"--shard {text}: K must be between 1 and N; write e.g. --shard 1/{max(count, 1)}")
    return index, count


def shard_specs(specs, shard: Optional[Tuple[int, int]]):
    """Round-robin over the cases sorted by key: the N shards partition the list exactly."""
    if shard is None:
        return list(specs)
    index, count = shard
    ordered = sorted(specs, key=lambda spec: spec.key)
    return [spec for position, spec in enumerate(ordered) if position % count == index - 1]


def exclude_specs(specs, patterns: Optional[List[str]]):
    if not patterns:
        return list(specs), []
    from . import registry

    for pattern in patterns:
        if not set("*?[") & set(pattern) and registry.get(pattern) is None:
            close = registry.suggest(pattern)
            hint = f"did you mean {', '.join(close)}?" if close else "see opbench --list --all"
            raise UsageError(f"--exclude: unknown operator {pattern!r}; {hint}")
    kept, dropped = [], set()
    for spec in specs:
        op = spec.params.get("op", spec.name)
        if any(fnmatch.fnmatchcase(op, pattern) for pattern in patterns):
            dropped.add(op)
        else:
            kept.append(spec)
    return kept, sorted(dropped)


# ---------------------------------------------------------------------------------------------
# --list


def list_operators(show_all: bool, categories_: Optional[List[str]]) -> int:
    from tabulate import tabulate

    from . import categories, registry
    from .cases import generate_cases

    specs, skipped = generate_cases(categories=categories_, tiny=True)
    planned: dict = {}
    for spec in specs:
        planned.setdefault(spec.params["op"], []).append(bool(spec.params["run_backward"]))
    no_rule = dict(skipped)
    rows = []
    counts = {"has_backward": 0, "differentiable": 0, "timed": 0}
    for info in registry.scan():
        if info.selected:
            if categories_ and categories.category_of(info.name) not in categories_:
                continue
            rule = "yes" if info.name in planned else f"no: {no_rule.get(info.name, 'no input rule')}"
            timed = _backward_cell(info, planned.get(info.name))
            counts["has_backward"] += info.has_backward
            counts["differentiable"] += bool(info.differentiable)
            counts["timed"] += any(planned.get(info.name) or ())
            rows.append([info.name, categories.category_of(info.name), _yes(info.has_backward), timed, rule, ""])
        elif show_all and not categories_:
            rows.append([info.name, "-", _yes(info.has_backward), "-", "-", info.reason])
    headers = ["operator", "category", "has_backward", "backward timed", "input rule"] + (
        ["filtered because"] if show_all else [])
    if not show_all:
        rows = [row[:5] for row in rows]
    print(tabulate(rows, headers=headers, tablefmt="simple"))
    selected = sum(1 for row in rows if row[1] != "-")
    print(f"\n{selected} selected operators" + (f", {len(rows) - selected} filtered" if show_all else "")
          + f"; has_backward (opperf: a _backward_<name> operator) {counts['has_backward']}, "
            f"differentiable {counts['differentiable']}, backward timed {counts['timed']}", file=sys.stderr)
    return 0


def _backward_cell(info, planned: Optional[List[bool]]) -> str:
    """The --list "backward timed" cell: yes, how many cases, or no and why (short)."""
    if planned and all(planned):
        return "yes"
    if planned and any(planned):
        return f"{sum(planned)} of {len(planned)} cases"
    if info.differentiable is False:
        return "no: not differentiable"
    if info.backward_off:
        return "no: off (opperf's list)"
    if not planned:
        return "-"
    return "no"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


# ---------------------------------------------------------------------------------------------
# The sweep


def _op(result) -> str:
    return result.spec.params.get("op", result.spec.name)


def _label(result) -> str:
    variant = result.spec.params.get("variant")
    return f"{_op(result)} [{variant}]" if variant else _op(result)


def no_benchmark(skipped, results) -> List[dict]:
    """Operators in scope without a measured case: no input rule, or every case failed/skipped."""
    items = [{"op": op, "reason": reason} for op, reason in skipped]
    by_op = {}
    for result in results:
        by_op.setdefault(_op(result), []).append(result)
    for op, group in by_op.items():
        if not any(r.ok for r in group):
            statuses = sorted({r.status for r in group})
            items.append({"op": op, "reason": f"all {len(group)} case(s) ended {'/'.join(statuses)}"})
    return sorted(items, key=lambda item: item["op"])


def build_report(args, argv, results, skipped, excluded, context, formats, paths):
    from benchcore.environment import collect
    from benchcore.report import Report

    results = sorted(results, key=lambda r: (_op(r), r.spec.key))
    settings = {
        "profiler": args.profiler,
        "dtype": args.dtype,
        "ctx": context,
        "warmup": args.warmup,
        "runs": args.runs,
        "int64_tensor": args.int64_tensor,
        "seed": args.seed,
        "categories": _split(args.category),
        "ops": _split(args.ops),
        "exclude": _split(args.exclude),
        "shard": args.shard,
        "threads": args.threads,
        "timeout_s": args.timeout,
        "isolation": not args.no_isolation,
        "tiny": bool(args.tiny),
        "run_settings": run_settings_from(args, args.warmup, args.runs).to_dict(),
        "output_file": {fmt: str(path) for fmt, path in paths.items()},
        "resume": args.resume,
    }
    extra = {
        "no_benchmark": no_benchmark(skipped, results),
        "skipped": [{"op": _op(r), "key": r.spec.key, "reason": r.error} for r in results if r.status == "skipped"],
        "excluded": excluded,
    }
    environment = collect(PROG, argv, frameworks=("mxnet",), extra={"threads": args.threads})
    return Report(suite=PROG, environment=environment, settings=settings, results=results, extra=extra)


def write_reports(report, paths: dict, overwrite: bool, checkpoint: Path) -> List[Path]:
    from benchcore.report import write_text_atomic

    from .views import to_markdown

    written = []
    try:
        for fmt, path in paths.items():
            text = report.to_json() + "\n" if fmt == "json" else to_markdown(report) + "\n"
            written.append(write_text_atomic(path, text, overwrite=overwrite))
    except UsageError as exc:
        raise UsageError(f"{exc}; the measured cases are kept in {checkpoint} (rerun with the same -o and --resume)") from None
    return written


def summarize(report, skipped, started: float, written: List[Path]) -> None:
    ok = [r for r in report.results if r.ok]
    failed = report.failures
    skipped_cases = [r for r in report.results if r.status == "skipped"]
    say = lambda text: print(f"{PROG}: {text}", file=sys.stderr)  # noqa: E731
    say(f"benchmarked {len({_op(r) for r in ok})} operators ({len(ok)} cases) in {time.perf_counter() - started:.1f} s")
    if skipped_cases:
        say(f"skipped {len(skipped_cases)} case(s):")
        for r in skipped_cases:
            print(f"  {_label(r)}: {r.error}", file=sys.stderr)
    if failed:
        say(f"failed {len(failed)} case(s):")
        for r in failed:
            print(f"  {_label(r)}: {r.status}: {r.error}", file=sys.stderr)
    uncovered = report.extra.get("no_benchmark") or []
    if uncovered:
        say(f"{len(uncovered)} registered operator(s) without a benchmark:")
        for item in uncovered:
            print(f"  {item['op']}: {item['reason']}", file=sys.stderr)
    if written:
        say("wrote " + ", ".join(str(p) for p in written))


def run(argv: List[str]) -> int:
    if argv and argv[0] in REPORT_COMMANDS:
        try:
            from benchcore import commands
        except ImportError:
            raise UsageError(f"'{argv[0]}' needs benchcore.commands, which this installation lacks") from None
        return commands.main(PROG, argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    if args.all and not args.list:
        raise UsageError("--all only goes with --list; use opbench --list --all")
    args.tiny = args.tiny or os.environ.get(TINY_ENV) == "1"
    apply_threads(args.threads)  # before MXNet is imported, so this process and its workers use it
    categories_ = _split(args.category)
    if categories_:
        from .categories import CATEGORIES

        for name in categories_:
            if name not in CATEGORIES:
                raise UsageError(f"unknown category {name!r}; choose from {', '.join(CATEGORIES)}")
    if args.list:
        return list_operators(args.all, categories_)

    from .api import check_ctx, int64_tensor_flag
    from .cases import generate_cases

    formats = parse_formats(args.output_format)
    paths = output_paths(args.output_file, formats)
    for path in paths.values():
        check_writable(path, args.overwrite)
    shard = parse_shard(args.shard)
    context = check_ctx(args.ctx)
    large = int64_tensor_flag(args.int64_tensor)
    settings = run_settings_from(args, args.warmup, args.runs)

    specs, skipped = generate_cases(ops=_split(args.ops), categories=categories_, dtype=args.dtype, ctx=context,
                                    int64_tensor=large, run_backward=True, seed=args.seed, tiny=args.tiny)
    specs, excluded = exclude_specs(specs, _split(args.exclude))
    specs = shard_specs(specs, shard)
    if not specs:
        raise UsageError("no case to run with these --ops/--category/--exclude/--shard choices; see opbench --list")
    checkpoint = checkpoint_path_for(paths.get("json") or paths["md"])
    options = {"settings": settings.to_dict(), "profiler": args.profiler, "threads": args.threads, "seed": args.seed}
    started = time.perf_counter()
    results = sweep(specs, EXECUTOR, options, args, checkpoint)
    report = build_report(args, argv, results, skipped, excluded, context, formats, paths)
    written = write_reports(report, paths, args.overwrite, checkpoint)
    try:
        checkpoint.unlink()
    except OSError:
        pass
    summarize(report, skipped, started, written)
    return 1 if report.failures else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_main(run, argv, PROG)


if __name__ == "__main__":
    sys.exit(main())
