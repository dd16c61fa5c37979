"""`<suite> history add|regressions|dashboard|serve`: the history store's command line.

A thin layer over store.py, detect.py, views.py and dashboard.py, and the only module of them
that prints. Exit status: 0 fine; 1 `regressions --fail-on-regression` found a slower step that
still holds; 2 a usage error (bad flag or date, a report that is not one of ours or is filed
already, a database that is not a history store, is corrupt or of a newer schema, a PostgreSQL
server that cannot be reached), as one line on stderr, with the store unchanged.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from benchcore.cli.options import add_format_arguments, percent
from benchcore.errors import UsageError
from benchcore.suite import Suite

#: the smallest step `regressions` and the dashboard report unless told (percent)
DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_DB = "benchmarks.db"
DEFAULT_SITE = "site"
DEFAULT_PORT = 8000
SUBCOMMANDS = ("add", "regressions", "dashboard", "serve")


def since_time(text: str) -> datetime.datetime:
    """--since: a date (YYYY-MM-DD, midnight UTC) or an ISO 8601 time (UTC unless it says)."""
    try:
        value = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date; write YYYY-MM-DD or an ISO 8601 time "
                                         "such as 2026-12-01T18:00") from None
    return (value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)).astimezone(datetime.timezone.utc)


def add_parser(sub) -> None:
    """The `history` command and its subcommands, under the shared commands' parser."""
    p = sub.add_parser("history", help="file reports into a history store; find steps; write a dashboard",  # = commands.COMMAND_HELP
                       description="A store of reports over time (SQLite file or PostgreSQL URL), step detection "
                                   "per case, metric and environment, and a static dashboard. Method: docs/HISTORY.md.")
    commands = p.add_subparsers(dest="history_command", metavar="{" + ",".join(SUBCOMMANDS) + "}")
    commands.required = True

    a = commands.add_parser("add", help="file one JSON report into the store",
                            description="File a report whole plus one row per case and metric. The same report "
                                        "(by content) is refused a second time; one from another machine type or "
                                        "build goes into series of its own (its environment fingerprint).")
    a.add_argument("report", metavar="REPORT.json", help="JSON report of a sweep of this suite")
    _db_argument(a, f"./{DEFAULT_DB}, created on first use")
    a.add_argument("--label", default=None, help="a name for this run in tables and hovers (e.g. nightly-2026-12-01)")
    a.add_argument("--commit", default=None, metavar="SHA",
                   help="the commit measured (default: the git commit the report recorded, i.e. of the suite's "
                        "checkout)")

    r = commands.add_parser("regressions", help="list the steps found in the history (exit 1 on one with "
                                                "--fail-on-regression)",
                            description="Per case, metric and environment, the points where the level changed beyond "
                                        "the noise the history shows: before → after, the first run at the new level, "
                                        "its label/commit.")
    _db_argument(r, f"./{DEFAULT_DB}")
    r.add_argument("--since", type=since_time, default=None, metavar="DATE",
                   help="only steps whose first run started at or after DATE (YYYY-MM-DD or ISO 8601 time, UTC)")
    _threshold_argument(r)
    add_format_arguments(r, ("md", "json"), "md")
    r.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    r.add_argument("--fail-on-regression", action="store_true",
                   help="nightly CI gate: exit 1 when a slower step (in the --since window) still holds")

    d = commands.add_parser("dashboard", help="write the static dashboard site",
                            description="An overview of the latest run per category with its changes, and a page "
                                        "per case with its series over time (plotly, works offline).")
    _db_argument(d, f"./{DEFAULT_DB}")
    d.add_argument("-o", "--output", "--site", "--output-dir", dest="site", default=DEFAULT_SITE, metavar="DIR",
                   help=f"folder of the site (default {DEFAULT_SITE})")
    d.add_argument("--overwrite", action="store_true", help="replace a dashboard written there before")
    _threshold_argument(d)

    s = commands.add_parser("serve", help="serve a dashboard folder over HTTP on this machine",
                            description="Serve the site `history dashboard` wrote (Ctrl-C stops).")
    s.add_argument("--site", "-d", "--directory", dest="site", default=DEFAULT_SITE, metavar="DIR",
                   help=f"the dashboard's folder (default {DEFAULT_SITE})")
    s.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"TCP port, 0 for any free one (default {DEFAULT_PORT})")
    s.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS",
                   help="address to listen on (default 127.0.0.1: this machine only)")


class _OneStore(argparse.Action):
    """--db once: two stores named at once would leave one silently unused."""

    def __call__(self, parser, namespace, value, option_string=None):
        given = getattr(namespace, self.dest)
        if given is not None and given != value:
            raise UsageError(f"two history stores at once ({given} and {value}); a history command reads or "
                             "writes one: give --db once")
        setattr(namespace, self.dest, value)


def _db_argument(p, default: str) -> None:
    p.add_argument("--db", default=None, metavar="PATH|URL", action=_OneStore,
                   help=f"SQLite file, or postgresql://USER@HOST[:PORT]/DATABASE (default: {default})")


def _threshold_argument(p) -> None:
    p.add_argument("--threshold", type=percent, default=DEFAULT_THRESHOLD_PCT, metavar="PCT",
                   help=f"smallest step reported, in percent (default {DEFAULT_THRESHOLD_PCT:g})")


def main(suite: Suite, args) -> int:
    return {"add": _add, "regressions": _regressions, "dashboard": _dashboard, "serve": _serve}[
        args.history_command](suite, args)


def _add(suite: Suite, args) -> int:
    from benchcore.cli.options import load_report
    from benchcore.history.store import HistoryStore

    report = load_report(args.report, suite.name)  # before the store is created: a bad report leaves nothing
    target = args.db or DEFAULT_DB
    with HistoryStore.open(target, create=True) as store:
        filed = store.add(report, suite, source=str(Path(args.report).expanduser().resolve()), label=args.label,
                          commit=args.commit)
        where = store.db.where
    env = filed.environment
    print(f"{suite.name}: filed {args.report} as run {filed.run.id} in {where}: {filed.cases} case(s), "
          f"{filed.measurements} figure(s); {'new ' if filed.new_environment else ''}environment {env.id} "
          f"({env.summary})", file=sys.stderr)
    return 0


def _load(suite: Suite, db):
    """The suite's history and its fitted series; a store without a run of the suite is an error."""
    from benchcore.history.detect import analyse
    from benchcore.history.store import HistoryStore

    with HistoryStore.open(db or DEFAULT_DB) as store:
        history = store.history(suite.name)
        where = store.db.where
    if not history.runs:
        raise UsageError(f"{where} holds no {suite.name} run; file reports with `{suite.name} history add REPORT.json`")
    return history, analyse(history)


def _regressions(suite: Suite, args) -> int:
    from benchcore.cli.options import emit
    from benchcore.history.detect import changes
    from benchcore.history.views import changes_json, changes_markdown

    if args.output and Path(args.output).exists() and not args.overwrite:
        raise UsageError(f"output file {args.output} already exists; choose another path or pass --overwrite")
    history, series = _load(suite, args.db)
    threshold = args.threshold / 100.0
    found = changes(history, series, threshold, args.since)
    text = (changes_json(found, history, threshold, args.since) if args.format == "json"
            else changes_markdown(found, history, threshold, args.since, len(series)))
    emit(text, args.output, args.overwrite)
    failing = [c for c in found if c.slower and c.holds]
    if args.fail_on_regression and failing:
        listed = ", ".join(f"{c.label} {c.metric} ({100 * c.change:+.1f}% from {c.run.name})" for c in failing[:5])
        more = f" and {len(failing) - 5} more" if len(failing) > 5 else ""
        print(f"{suite.name}: {len(failing)} regression(s) of at least {args.threshold:g}% that still hold: "
              f"{listed}{more}", file=sys.stderr)
        return 1
    return 0


def _dashboard(suite: Suite, args) -> int:
    from benchcore.history.dashboard import MARKER, write_site
    from benchcore.history.detect import changes

    site = Path(args.site).expanduser()
    if (site / MARKER).exists() and not args.overwrite:
        raise UsageError(f"{site} holds a dashboard already; pass --overwrite to replace it, or choose another --site")
    history, series = _load(suite, args.db)
    threshold = args.threshold / 100.0
    site = write_site(history, series, changes(history, series, threshold), site, threshold)
    print(f"{suite.name}: wrote the dashboard of {len(history.runs)} run(s) to {site}", file=sys.stderr)
    print(site / "index.html")
    return 0


def _serve(suite: Suite, args) -> int:
    import functools
    import http.server

    folder = Path(args.site).expanduser()
    if not (folder / "index.html").is_file():
        raise UsageError(f"{folder} holds no dashboard; write one with `{suite.name} history dashboard --site {folder}`")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    try:
        server = http.server.ThreadingHTTPServer((args.bind, args.port), handler)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.bind}:{args.port} ({exc.strerror}); choose another --port") from None
    host, port = server.server_address[:2]
    print(f"{suite.name}: serving {folder} at http://{host}:{port}/ (Ctrl-C stops)", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (run_main routes it here): a normal stop
        pass
    finally:
        server.server_close()
    return 0
