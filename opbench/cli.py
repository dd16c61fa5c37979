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
from typing import List, Optional, Sequence

from benchcore import audit
from benchcore.cli import (ArgumentParser, add_output_arguments, add_run_arguments, add_shard_argument,
                           apply_threads, check_output_paths, checkpoint_path_for, formats_for, non_negative_int,
                           output_paths, parse_shard, positive_int, run_main, run_settings_from, shard_specs,
                           write_outputs)
from benchcore.commands import COMMANDS as REPORT_COMMANDS
from benchcore.errors import UsageError

from .suite import PROG, SUITE

DEFAULT_OUTPUT_STEM = "mxnet_operator_benchmarks"
TINY_ENV = "OPBENCH_TINY"
AB_COMMAND = "ab"
AB_DEFAULT_DIR = "opbench-ab"
#: Rounds a sweep runs by default (see docs/COMPARING.md for the measurement behind it).
DEFAULT_ROUNDS = 3


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


def build_parser(ab: bool = False) -> ArgumentParser:
    from .api import DTYPES

    parser = ArgumentParser(
        prog=f"{PROG} {AB_COMMAND}" if ab else PROG,
        description=("Time the same operators under two Python environments (e.g. two MXNet builds), interleaved "
                     "case by case and round by round, and compare them." if ab else
                     "Benchmark MXNet operators forward and backward (opperf's interface). "
                     "Also: opbench ab|compare|plot|merge|system (see opbench compare --help)."))
    opperf = parser.add_argument_group("opperf's flags")
    opperf.add_argument("--ctx", default="cpu", help="cpu, cpu(N), gpu or gpu(N) (default cpu)")
    opperf.add_argument("--dtype", default="float32", choices=DTYPES, help="dtype of every tensor (default float32)")
    if not ab:
        add_output_arguments(opperf, DEFAULT_OUTPUT_STEM)
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
    add_shard_argument(select)
    select.add_argument("--seed", type=int, default=41, help="random seed for the inputs (default 41, recorded)")
    if not ab:
        select.add_argument("--list", action="store_true",
                            help="list the operators (category, has_backward, backward timed, input rule) and exit")
        select.add_argument("--all", action="store_true", help="with --list: also the filtered operators, with the reason")
    select.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    add_run_arguments(parser, rounds=DEFAULT_ROUNDS, memory_limit_gb=WORKER_MEMORY_LIMIT_GB,
                      memory_why=" for opbench: MXNet keeps workspace between cases")
    audit.add_audit_arguments(parser)
    if ab:
        from benchcore.ab import add_ab_arguments

        add_ab_arguments(parser, AB_DEFAULT_DIR)
    return parser




# ---------------------------------------------------------------------------------------------
# Argument checks


def _split(values: Optional[Sequence[str]]) -> Optional[List[str]]:
    if values is None:
        return None
    items = [item.strip() for value in values for item in value.split(",") if item.strip()]
    return items


def exclude_specs(specs, skipped, patterns: Optional[List[str]]):
    """Drop the operators matching `patterns` → (specs, skipped, excluded operator names).

    An excluded operator leaves both lists: one without cases is not reported as lacking a
    benchmark when the user asked to leave it out.
    """
    if not patterns:
        return list(specs), list(skipped), []
    from . import registry

    for pattern in patterns:
        if not set("*?[") & set(pattern) and registry.get(pattern) is None:
            close = registry.suggest(pattern)
            hint = f"did you mean {', '.join(close)}?" if close else "see opbench --list --all"
            raise UsageError(f"--exclude: unknown operator {pattern!r}; {hint}")
    dropped = lambda op: any(fnmatch.fnmatchcase(op, pattern) for pattern in patterns)  # noqa: E731
    kept = [spec for spec in specs if not dropped(spec.params.get("op", spec.name))]
    kept_skipped = [(op, reason) for op, reason in skipped if not dropped(op)]
    excluded = {spec.params.get("op", spec.name) for spec in specs} | {op for op, _ in skipped}
    return kept, kept_skipped, sorted(op for op in excluded if dropped(op))


def plan_cases(args, context: str, large: bool):
    """What a run with these flags measures: (cases, operators without a case and why, excluded).

    The one selection behind both the sweep and --list, so --list shows exactly what runs
    (`--category` takes opperf's membership, as the sweep does).
    """
    from .cases import generate_cases

    specs, skipped = generate_cases(ops=_split(args.ops), categories=_split(args.category), dtype=args.dtype,
                                    ctx=context, int64_tensor=large, run_backward=True, seed=args.seed,
                                    tiny=args.tiny)
    specs, skipped, excluded = exclude_specs(specs, skipped, _split(args.exclude))
    return shard_specs(specs, parse_shard(args.shard)), skipped, excluded


# ---------------------------------------------------------------------------------------------
# --list


def list_operators(args, context: str, large: bool) -> int:
    """The operators a run with the same flags covers (plus, with --all alone, the filtered ones)."""
    from tabulate import tabulate

    from . import categories, registry

    specs, skipped, _excluded = plan_cases(args, context, large)
    planned: dict = {}
    for spec in specs:
        planned.setdefault(spec.params["op"], []).append(spec)
    no_case = dict(skipped)
    rows = []
    counts = {"has_backward": 0, "differentiable": 0, "timed": 0}
    for name in set(planned) | set(no_case):
        info = registry.get(name)
        rule = "yes" if name in planned else f"no: {no_case[name]}"
        counts["has_backward"] += info.has_backward
        counts["differentiable"] += bool(info.differentiable)
        counts["timed"] += any(s.params["run_backward"] for s in planned.get(name, ()))
        rows.append([name, categories.category_of(name) or "-", _yes(info.has_backward),
                     _backward_cell(info, planned.get(name)), rule, info.reason or ""])
    selected = len(rows)
    if args.all and not (args.category or args.ops):
        rows += [[info.name, "-", _yes(info.has_backward), "-", "-", info.reason]
                 for info in registry.scan() if not info.selected]
    rows.sort(key=lambda row: row[0])
    headers = ["operator", "category", "has_backward", "backward timed", "input rule"] + (
        ["filtered because"] if args.all else [])
    if not args.all:
        rows = [row[:5] for row in rows]
    print(tabulate(rows, headers=headers, tablefmt="simple"))
    print(f"\n{selected} selected operators" + (f", {len(rows) - selected} filtered" if args.all else "")
          + f"; has_backward (opperf: a _backward_<name> operator) {counts['has_backward']}, "
            f"differentiable {counts['differentiable']}, backward timed {counts['timed']}", file=sys.stderr)
    return 0


def _backward_cell(info, specs) -> str:
    """The --list "backward timed" cell: yes, how many cases, or no and why (short)."""
    from .cases import integer_dtype_reason

    planned = [bool(spec.params["run_backward"]) for spec in specs or ()]
    if planned and all(planned):
        return "yes"
    if planned and any(planned):
        return f"{sum(planned)} of {len(planned)} cases"
    if info.differentiable is False:
        return "no: not differentiable"
    if info.zero_gradient:
        return "no: zero gradient"
    if info.backward_off:
        return "no: off (opperf's list)"
    if not planned:
        return "-"
    if integer_dtype_reason(specs[0].params["dtype"]):
        return "no: integer dtype"
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


def _in_report_order(results) -> list:
    return sorted(results, key=lambda r: (_op(r), r.spec.key))


def _from_results(skipped, results) -> dict:
    """The extras derived from the results (with the operators that got no case)."""
    return {
        "no_benchmark": no_benchmark(skipped, results),
        "skipped": [{"op": _op(r), "key": r.spec.key, "reason": r.error} for r in results if r.status == "skipped"],
    }


def finish_merged(report):
    """A merged report as the unsharded run writes it (benchcore.merge's finisher for opbench).

    Results in the run's order, and the extras derived from results rebuilt from all shards'
    results: a shard's "all cases failed" note is wrong once another shard measured the
    operator. Operators without any case (no input rule...) are the same in every shard.
    """
    from benchcore.report import Report

    results = _in_report_order(report.results)
    with_results = {_op(r) for r in results}
    extras = [report.extra] + [shard.get("extra", {}) for shard in report.extra.get("shards", [])]
    without_cases = sorted({(item["op"], item["reason"]) for extra in extras
                            for item in extra.get("no_benchmark", []) if item["op"] not in with_results})
    extra = {**_from_results(without_cases, results), **{k: v for k, v in report.extra.items()
                                                         if k not in ("no_benchmark", "skipped")}}
    return Report(suite=report.suite, environment=report.environment, settings=report.settings,
                  results=results, extra=extra, schema_version=report.schema_version)


def build_report(args, job, environment, results, skipped, excluded, context, paths):
    from benchcore.environment import now_iso
    from benchcore.report import Report

    results = _in_report_order(results)
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
        "run_settings": job.settings.to_dict(),
        "rounds": job.settings_record(),
        "output_file": {fmt: str(path) for fmt, path in paths.items()},
        "resume": args.resume,
        "audit": not args.no_audit,
        "flush_denormal": args.flush_denormal,
    }
    extra = {**_from_results(skipped, results), "excluded": excluded}
    environment = dict(environment, finished_at=now_iso())
    return Report(suite=PROG, environment=environment, settings=settings, results=results, extra=extra)


def summarize(report, skipped, started: float, written: List[Path]) -> None:
    from .views import capped

    ok = [r for r in report.results if r.ok]
    failed = report.failures
    skipped_cases = [r for r in report.results if r.status == "skipped"]
    say = lambda text: print(f"{PROG}: {text}", file=sys.stderr)  # noqa: E731
    operators, cases = len({_op(r) for r in ok}), len(ok)
    say(f"benchmarked {operators} operator{'s' if operators != 1 else ''} ({cases} case{'s' if cases != 1 else ''}) "
        f"in {time.perf_counter() - started:.1f} s")
    if skipped_cases:
        say(f"skipped {len(skipped_cases)} case(s):")
        for r in skipped_cases:
            print(f"  {_label(r)}: {r.error}", file=sys.stderr)
    capped_cases = [r for r in ok if capped(r)]
    if capped_cases:
        say(f"{len(capped_cases)} case(s) capped: --max-time ran out before IQR/median < --target-precision:")
        for r in capped_cases:
            print(f"  {_label(r)}: {len(r.metrics['forward']['samples_ms'])} runs", file=sys.stderr)
    if failed:
        say(f"failed {len(failed)} case(s):")
        for r in failed:
            print(f"  {_label(r)}: {r.status}: {r.error}", file=sys.stderr)
    for line in audit.sweep_lines([(_label(r), r.metrics) for r in ok], PROG):
        print(line, file=sys.stderr)
    uncovered = report.extra.get("no_benchmark") or []
    if uncovered:
        say(f"{len(uncovered)} registered operator(s) without a benchmark:")
        for item in uncovered:
            print(f"  {item['op']}: {item['reason']}", file=sys.stderr)
    if written:
        say("wrote " + ", ".join(str(p) for p in written))


def run(argv: List[str]) -> int:
    if argv and argv[0] in REPORT_COMMANDS:
        from benchcore import commands

        return commands.main(SUITE, argv)
    ab = bool(argv) and argv[0] == AB_COMMAND
    try:
        args = build_parser(ab).parse_args(argv[1:] if ab else argv)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    if not ab and args.all and not args.list:
        raise UsageError("--all only goes with --list; use opbench --list --all")
    args.tiny = args.tiny or os.environ.get(TINY_ENV) == "1"
    apply_threads(args.threads)  # before MXNet is imported, so this process and its workers use it
    from .api import check_ctx, int64_tensor_flag
    from .categories import CATEGORIES

    for name in _split(args.category) or ():
        if name not in CATEGORIES:
            raise UsageError(f"unknown category {name!r}; choose from {', '.join(CATEGORIES)}")
    context = check_ctx(args.ctx)
    large = int64_tensor_flag(args.int64_tensor)
    if ab:
        return run_ab(args, argv, context, large)
    if args.list:
        return list_operators(args, context, large)
    return run_sweep(args, argv, context, large)


def _job(args, context: str, large: bool, checkpoint, pythons=None):
    """The sweep both `opbench` and `opbench ab` run: (job, operators without a case, excluded)."""
    from benchcore.sweep import SweepJob, rounds_from

    settings = run_settings_from(args, args.warmup, args.runs)
    specs, skipped, excluded = plan_cases(args, context, large)
    if not specs:
        raise UsageError("no case to run with these --ops/--category/--exclude/--dtype/--shard choices; "
                         "opbench --list with the same flags says why each operator has none")
    options = {"profiler": args.profiler, "threads": args.threads, "seed": args.seed, "audit": not args.no_audit,
               "flush_denormal": args.flush_denormal}
    job = SweepJob(SUITE, specs, settings, rounds_from(args, DEFAULT_ROUNDS), options, checkpoint,
                   pythons=pythons or {})
    return job, skipped, excluded


def _environment_extra(args) -> dict:
    return {"threads": args.threads, "engine": args.profiler, "seed": args.seed,
            "timer": "mxnet-profiler" if args.profiler == "native" else "perf_counter",
            "flush_denormal": args.flush_denormal}


def run_sweep(args, argv: List[str], context: str, large: bool) -> int:
    from benchcore import sweep

    from .views import to_markdown

    paths = output_paths(args.output_file, formats_for(args), DEFAULT_OUTPUT_STEM)
    check_output_paths(paths, args.overwrite)
    if args.plot:
        from benchcore.plot import prepare_chart_folder

        prepare_chart_folder(args.plot, PROG, args.overwrite)
    checkpoint = checkpoint_path_for(paths.get("json") or paths["md"])
    job, skipped, excluded = _job(args, context, large, checkpoint)
    started = time.perf_counter()
    environment, results = sweep.measure(job, args, PROG, argv, _environment_extra(args))[""]
    report = build_report(args, job, environment, results, skipped, excluded, context, paths)
    written = write_outputs(report, paths, args.overwrite, to_markdown, checkpoint, plot_dir=args.plot, suite=SUITE)
    sweep.remove_checkpoint(checkpoint)
    summarize(report, skipped, started, written)
    return 1 if report.failures else 0


def run_ab(args, argv: List[str], context: str, large: bool) -> int:
    """`opbench ab`: the same cases under --base-python and --new-python, interleaved."""
    from benchcore import ab, sweep

    pythons = ab.plan(args, SUITE)
    job, skipped, excluded = _job(args, context, large, ab.checkpoint_path(args), pythons)
    measured = sweep.measure(job, args, PROG, argv, _environment_extra(args))
    reports = {side: build_report(args, job, environment, results, skipped, excluded, context, {})
               for side, (environment, results) in measured.items()}
    status = ab.finish(SUITE, reports, args)
    sweep.remove_checkpoint(job.checkpoint)
    return status


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_main(run, argv, PROG)


if __name__ == "__main__":
    sys.exit(main())
