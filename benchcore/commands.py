"""The `compare`, `plot` and `merge` commands both suites share: `<suite> compare BASE NEW` ….

A thin CLI layer over compare.py, plot.py and merge.py, and the only module of those that
prints. Exit status: 0 fine; 1 a comparison found a regression beyond --fail-above; 2 a usage
error (bad flag, missing or malformed file, a report of another suite), as one line on stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

from .cli import ArgumentParser, non_negative_float, run_main
from .errors import UsageError
from .report import Report, write_text_atomic

if TYPE_CHECKING:
    from .merge import Finisher

COMMANDS = ("compare", "plot", "merge")
DEFAULT_CHART_DIR = "reports/charts"


def main(suite: str, argv: List[str], finish_merge: Optional[Finisher] = None) -> int:
    """Run one of COMMANDS for `suite`; argv starts with the command name. `finish_merge` is
    the suite's merge finisher (see benchcore.merge)."""
    return run_main(lambda args: _dispatch(suite, args, finish_merge), argv, prog=suite)


def build_parser(suite: str) -> ArgumentParser:
    parser = ArgumentParser(prog=suite, description=f"{suite}: compare, chart and merge JSON reports")
    sub = parser.add_subparsers(dest="command", metavar="{compare,plot,merge}")
    sub.required = True

    p = sub.add_parser("compare", help="compare two reports case by case (NEW against BASE)",
                       description="Per case: ratio of medians, Mann-Whitney U test, effect threshold → "
                                   "faster / slower / same / noisy; geometric means per category.")
    p.add_argument("base", metavar="BASE", help="JSON report of the baseline run")
    p.add_argument("new", metavar="NEW", help="JSON report of the run to judge")
    p.add_argument("--threshold", type=float, default=0.05,
                   help="smallest relative change that counts, as a fraction (default 0.05 = 5%%)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level of the U test (default 0.05)")
    p.add_argument("--fail-above", type=non_negative_float, default=None, metavar="PCT",
                   help="CI gate: exit 1 when any case is judged slower by more than PCT percent")
    p.add_argument("--allow-env-mismatch", action="store_true",
                   help="compare reports from different environments (versions, CPU/GPU, threads) anyway")
    p.add_argument("-f", "--format", choices=("md", "json"), default="md", help="output format (default md)")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write here instead of stdout")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--plot", default=None, metavar="DIR", help="also write the comparison chart (PNG) into DIR")

    p = sub.add_parser("plot", help="write PNG charts of one report")
    p.add_argument("report", metavar="REPORT", help="JSON report")
    p.add_argument("-o", "--output-dir", default=DEFAULT_CHART_DIR, metavar="DIR",
                   help=f"folder for the PNG files (default {DEFAULT_CHART_DIR}; created if missing)")

    p = sub.add_parser("merge", help="join the reports of a sharded sweep (--shard K/N) into one")
    p.add_argument("shards", metavar="SHARD.json", nargs="+", help="the shards' JSON reports")
    p.add_argument("-o", "--output", default=None, metavar="ALL.json", help="merged report (default: stdout)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--allow-partial", action="store_true",
                   help="merge even when some shards are missing (recorded in the merged report)")
    return parser


def _dispatch(suite: str, argv: List[str], finish_merge: Optional[Finisher]) -> int:
    try:
        args = build_parser(suite).parse_args(argv)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    if args.command == "merge":
        return _merge(suite, args, finish_merge)
    return {"compare": _compare, "plot": _plot}[args.command](suite, args)


def load_report(path: str, suite: str) -> Report:
    """Report.load plus the suite check: an rnnbench report is not for `opbench compare`."""
    report = Report.load(path)
    if report.suite != suite:
        raise UsageError(f"{path} holds a {report.suite} report, not an {suite} one; use `{report.suite}` instead of "
                         f"`{suite}` for it")
    return report


def _emit(text: str, output: Optional[str], overwrite: bool) -> None:
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    else:
        path = write_text_atomic(output, text if text.endswith("\n") else text + "\n", overwrite=overwrite)
        print(f"wrote {path}", file=sys.stderr)


def _compare(suite: str, args) -> int:
    from .compare import compare

    if args.output and Path(args.output).exists() and not args.overwrite:
        raise UsageError(f"output file {args.output} already exists; choose another path or pass --overwrite")
    base, new = load_report(args.base, suite), load_report(args.new, suite)
    result = compare(base, new, threshold=args.threshold, alpha=args.alpha,
                     allow_env_mismatch=args.allow_env_mismatch)
    result.base_source, result.new_source = args.base, args.new
    if args.fail_above is not None:
        if not result.cases:  # a gate that compared nothing must not pass
            raise UsageError("no case was measured in both reports, so --fail-above has nothing to gate; "
                             "compare reports of the same cases (same selection, dtype and sizes)")
        result.gate = result.gate_verdict(args.fail_above)
    if result.env_differences:
        keys = ", ".join(d["key"] for d in result.env_differences)
        print(f"{suite}: note: environments differ ({keys}); compared because of --allow-env-mismatch", file=sys.stderr)

    charts = []
    if args.plot:
        from .plot import write_comparison_chart

        chart = write_comparison_chart(result, args.plot)
        charts = [chart] if chart else []
    if args.format == "json":
        data = result.to_dict()
        data["charts"] = [str(c) for c in charts]
        text = json.dumps(data, indent=2, allow_nan=False)
    else:
        from .plot import chart_links_markdown

        where = Path(args.output).expanduser().parent if args.output else Path.cwd()
        text = result.to_markdown(chart_links_markdown(charts, where))
    _emit(text, args.output, args.overwrite)

    return _report_gate(suite, result.gate) if result.gate is not None else 0


def _report_gate(suite: str, gate: dict) -> int:
    """The gate's stderr lines and exit status: 1 when a case got slower or broke."""
    if gate["only_in_base"]:
        print(f"{suite}: note: {gate['only_in_base']} case(s) of the base are not in the new report", file=sys.stderr)
    for key, what, text in (("slower", f"slower by more than {gate['fail_above_pct']:g}%",
                             lambda x: f"{x['label']} ({x['slowdown_pct']:+.1f}%)"),
                            ("broken", "measured in the base but not in the new report",
                             lambda x: f"{x['label']} ({x['new_status']})")):
        items = gate[key]
        if items:
            listed = ", ".join(text(x) for x in items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")
            print(f"{suite}: {len(items)} case(s) {what}: {listed}", file=sys.stderr)
    return 0 if gate["passed"] else 1


def _plot(suite: str, args) -> int:
    from .plot import write_report_charts

    report = load_report(args.report, suite)
    paths = write_report_charts(report, args.output_dir)
    if not paths:
        print(f"{suite}: note: {args.report} has no measured case; no chart written", file=sys.stderr)
    for path in paths:
        print(path)
    return 0


def _merge(suite: str, args, finish: Optional[Finisher]) -> int:
    from .merge import merge

    if args.output and Path(args.output).exists() and not args.overwrite:
        raise UsageError(f"output file {args.output} already exists; choose another path or pass --overwrite")
    reports = [load_report(path, suite) for path in args.shards]
    merged = merge(reports, sources=args.shards, allow_partial=args.allow_partial, finish=finish)
    _emit(merged.to_json(), args.output, args.overwrite)
    return 0
