"""The report commands both suites share: `<suite> compare BASE NEW`, `plot`, `merge`, `system`,
`history` (benchcore.cli.history).

A thin CLI layer over compare.py, plot.py, merge.py and system.py, and the only module of those
that prints. Exit status: 0 fine; 1 a comparison found a regression beyond --fail-above; 2 a usage
error (bad flag, missing or malformed file, a report of another suite), as one line on stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List

from benchcore.cli import history
from benchcore.cli.options import (
    ArgumentParser,
    add_format_arguments,
    add_version_argument,
    emit,
    load_report,
    percent,
    positive_int,
    render_report,
    run_main,
)
from benchcore.compare.count_verdicts import FUNCTIONS
from benchcore.errors import UsageError
from benchcore.report.model import Report
from benchcore.suite import Suite

#: the shared commands, each with the line `--help` shows for it (the suites list them too)
COMMAND_HELP = {
    "compare": "compare two reports case by case (NEW against BASE) and end with the answer",
    "plot": "write PNG charts of one report",
    "merge": "join the reports of a sharded sweep (--shard K/N) into one",
    "system": "print what about this machine makes timings noisy, with fixes",
    "history": "file reports into a history store; find steps; write a dashboard",
}
COMMANDS = tuple(COMMAND_HELP)
DEFAULT_CHART_DIR = "reports/charts"


def main(suite: Suite, argv: List[str]) -> int:
    """Run one of COMMANDS for `suite`; argv starts with the command name."""
    return run_main(lambda args: _dispatch(suite, args), argv, prog=suite.name)


def add_gate_arguments(p) -> None:
    """The verdict flags `compare` and `ab` share."""
    p.add_argument("--threshold", "--margin", dest="threshold", type=percent, default=5.0, metavar="PCT",
                   help="the margin, in percent (default 5; 0.5%% for half a percent): a confirmed change beyond "
                        "±PCT is slower or faster; `same` needs the evidence to place the change within ±PCT; "
                        "anything else is undecided")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level of the test behind a verdict (default 0.05)")
    p.add_argument("--fail-above", type=percent, default=None, metavar="PCT",
                   help="CI gate: exit 1 when any case is judged slower by more than PCT percent, or broke")
    p.add_argument("--functions", type=positive_int, default=FUNCTIONS, metavar="N",
                   help="counted comparisons: the functions the Markdown lists per changed quantity, those that "
                        f"explain most of its change (default {FUNCTIONS})")


def build_parser(suite: str) -> ArgumentParser:
    parser = ArgumentParser(prog=suite, description=f"{suite}: compare, chart and merge JSON reports; read the "
                                                    "machine's noise state")
    add_version_argument(parser, suite)
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    sub.required = True

    p = sub.add_parser("compare", help=COMMAND_HELP["compare"],
                       description="Per case: ratio of the figures, a test on the rounds (or, for reports without "
                                   "rounds, on one process's samples), margin → slower / faster / same "
                                   "within ±margin / undecided; geometric means per category. Method: docs/COMPARING.md.")
    p.add_argument("base", metavar="BASE", help="JSON report of the baseline run")
    p.add_argument("new", metavar="NEW", help="JSON report of the run to judge")
    add_gate_arguments(p)
    p.add_argument("--allow-env-mismatch", action="store_true",
                   help="compare reports from different environments (versions, CPU/GPU, threads) anyway")
    add_format_arguments(p, ("md", "json", "csv"), "md", "csv: one row per case and phase")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--plot", default=None, metavar="DIR", help="also write the comparison chart (PNG) into DIR")

    sub.add_parser("system", help=COMMAND_HELP["system"],
                   description="CPU governor and turbo, load, busy processes, threads vs cores, ASLR: what a sweep "
                               "records at its start and end, each warning with what to do; and how much the machine's "
                               "speed moves from one tenth of a second to the next (3 s of timing).")
    history.add_parser(sub)

    p = sub.add_parser("plot", help=COMMAND_HELP["plot"])
    p.add_argument("report", metavar="REPORT", help="JSON report")
    p.add_argument("-o", "--output", "--output-dir", dest="output_dir", default=DEFAULT_CHART_DIR, metavar="DIR",
                   help=f"folder for the PNG files (default {DEFAULT_CHART_DIR}; created if missing)")

    p = sub.add_parser("merge", help=COMMAND_HELP["merge"])
    p.add_argument("shards", metavar="SHARD.json", nargs="+", help="the shards' JSON reports")
    p.add_argument("-o", "--output", default=None, metavar="ALL.json", help="merged report (default: stdout)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--allow-partial", action="store_true",
                   help="merge even when some shards are missing (recorded in the merged report)")
    p.add_argument("--both", action="store_true",
                   help="instead: join a timing report and a counted one (--engine instructions) of the same cases "
                        "into one report of both kinds, which compare judges on time and on counts")
    return parser


def _dispatch(suite: Suite, argv: List[str]) -> int:
    try:
        args = build_parser(suite.name).parse_args(argv)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    return {"compare": _compare, "plot": _plot, "merge": _merge, "system": _system, "history": history.main}[
        args.command](suite, args)


def _compare(suite: Suite, args) -> int:
    if args.output and Path(args.output).exists() and not args.overwrite:
        raise UsageError(f"output file {args.output} already exists; choose another path or pass --overwrite")
    base, new = load_report(args.base, suite.name), load_report(args.new, suite.name)
    result = judge(suite, base, new, args, sources=(args.base, args.new))
    text = comparison_text(result, args.format, args.output, args.plot)
    emit(text, args.output, args.overwrite)
    if args.output or args.format != "md":  # the Markdown on stdout opens with the answer
        for line in result.answer.lines():
            print(f"{suite.name}: {line}", file=sys.stderr)
    return report_gate(suite.name, result.gate) if result.gate is not None else 0


def judge(suite: Suite, base: Report, new: Report, args, sources=(None, None), allow_env_mismatch=None):
    """compare() with the gate flags (`compare` and `ab`); environment differences noted on stderr."""
    from benchcore.compare import count_verdicts
    from benchcore.compare.verdicts import compare

    allowed = args.allow_env_mismatch if allow_env_mismatch is None else allow_env_mismatch
    from benchcore.compare.answer import answer, settings_differences

    if not 0 < args.threshold < 100:
        raise UsageError(f"--threshold/--margin {args.threshold:g}: the margin is a percent above 0 and below 100; "
                         "give e.g. --margin 5")
    result = compare(base, new, suite, threshold=args.threshold / 100, alpha=args.alpha, allow_env_mismatch=allowed)
    result.base_source, result.new_source = sources
    count_verdicts.attach(result, base, new, args.functions)
    if args.fail_above is not None:
        if not result.cases and not count_verdicts.judged(result):  # a gate that compared nothing must not pass
            raise UsageError("no case was measured in both reports, so --fail-above has nothing to gate; "
                             "compare reports of the same cases (same selection, dtype and sizes)")
        result.gate = count_verdicts.gate(result, result.gate_verdict(args.fail_above), args.fail_above)
    result.answer = answer(result, settings_differences(base, new))
    if result.env_differences:
        keys = ", ".join(d["key"] for d in result.env_differences)
        why = "an A/B run's two environments" if allow_env_mismatch else "--allow-env-mismatch"
        print(f"{suite.name}: note: environments differ ({keys}); compared because of {why}", file=sys.stderr)
    return result


def comparison_text(result, fmt: str, output, plot_dir) -> str:
    """The comparison as Markdown, JSON or CSV rows, with its chart written (and linked) when asked."""
    charts = []
    if plot_dir:
        from benchcore.views.charts import write_comparison_chart

        chart = write_comparison_chart(result, plot_dir)
        charts = [chart] if chart else []
    if fmt == "json":
        data = result.to_dict()
        data["charts"] = [str(c) for c in charts]
        return json.dumps(data, indent=2, allow_nan=False)
    if fmt == "csv":
        from benchcore.views.rows import COMPARISON_COLUMNS, comparison_rows, to_csv

        return to_csv(comparison_rows(result), COMPARISON_COLUMNS).rstrip("\n")  # emit ends it with one
    from benchcore.views.charts import chart_links_markdown
    from benchcore.views.markdown import comparison_markdown

    where = Path(output).expanduser().parent if output else Path.cwd()
    return comparison_markdown(result, chart_links_markdown(charts, where))


def report_gate(suite: str, gate: dict) -> int:
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
    if gate["slower"] and gate.get("sequential"):
        print(f"{suite}: confirm before believing it: time the slower cases again with more --rounds (10) and "
              "compare that report against the base; between two sequential sweeps a case with two speeds per "
              "process fails a gate of few rounds by chance (docs/COMPARING.md)", file=sys.stderr)
    if gate.get("build_wide_slowdown_pct") is not None:
        print(f"{suite}: the build's {gate.get('build_wide_group') or 'sweep'} as a whole is "
              f"{gate['build_wide_slowdown_pct']:+.1f}% slower than the machine reference explains", file=sys.stderr)
    return 0 if gate["passed"] else 1


def _plot(suite: Suite, args) -> int:
    from benchcore.views.charts import write_report_charts

    report = load_report(args.report, suite.name)
    paths = write_report_charts(report, args.output_dir, suite)
    if not paths:
        print(f"{suite.name}: note: {args.report} has no measured case; no chart written", file=sys.stderr)
    for path in paths:
        print(path)
    return 0


def _merge(suite: Suite, args) -> int:
    from benchcore.report.merge import merge

    if args.output and Path(args.output).exists() and not args.overwrite:
        raise UsageError(f"output file {args.output} already exists; choose another path or pass --overwrite")
    if args.both and args.allow_partial:
        raise UsageError("--allow-partial is for shards; merge --both joins two whole reports (merge their shards first)")
    reports = [load_report(path, suite.name) for path in args.shards]
    if args.both:
        from benchcore.report.merge import merge_kinds

        merged = merge_kinds(reports, lambda result: bool(suite.timings(result)), sources=args.shards)
    else:
        merged = merge(reports, sources=args.shards, allow_partial=args.allow_partial, finish=suite.finish_merge)
    emit(render_report(merged, "json", None, suite), args.output, args.overwrite)
    return 0


def _system(suite: Suite, args) -> int:
    from benchcore.execute.system import format_state, read_system

    print(format_state(read_system(speed=True)))
    return 0
