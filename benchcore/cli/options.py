"""Pieces both command lines share: the flags every sweep understands and the typed plans they
become (RunPlan, RoundPlan, RunSettings, the audit's worker options), threads, output paths and
writing, report loading, and the one-line usage errors (run_main).

The suites' CLIs are thin layers: they parse flags into a request (benchcore.cli.request) and
hand it to the sweep path (benchcore.cli.run); the functions below that turn flags into plans
read requests, never the argparse namespace. Messages go to stderr; stdout carries only what a command was asked to print (emit).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import signal
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from benchcore.errors import UsageError
from benchcore.execute import idle
from benchcore.report.model import Report, write_text_atomic

#: adaptive mode's defaults for --min-time and --max-time (seconds of sampling per case)
MIN_TIME_S = 0.0
MAX_TIME_S = 10.0


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag is a UsageError: one line and exit 2, like every user error."""

    def error(self, message):
        raise UsageError(f"{message}; see {self.prog} --help")


def _int_at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be at least {minimum}")
        return value

    return parse


positive_int = _int_at_least(1)
non_negative_int = _int_at_least(0)


def _finite_float(accept: Callable[[float], bool], requirement: str) -> Callable[[str], float]:
    """An argparse type for a finite number meeting `requirement`: nan passes every `<=` test
    and then breaks comparisons, JSON and select(); inf overflows timers or disables a check."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or not accept(value):
            raise argparse.ArgumentTypeError(f"{text} must be a finite number {requirement}")
        return value

    return parse


positive_float = _finite_float(lambda value: value > 0, "greater than 0")
non_negative_float = _finite_float(lambda value: value >= 0, ">= 0")


def percent(text: str) -> float:
    """A threshold in percent ("5" or "5%"). Every threshold flag of both tools is in percent;
    a value between 0 and 1 without "%" is most likely a fraction meant as one (0.05 for 5%),
    and taking it as 0.05% would make every case count as changed, so it is refused, saying
    which it looks like."""
    explicit = text.strip().endswith("%")
    value = non_negative_float(text.strip().rstrip("%"))
    if 0 < value < 1 and not explicit:
        raise argparse.ArgumentTypeError(
            f"{text} looks like a fraction, but thresholds are in percent: write {value * 100:g} for "
            f"{value * 100:g}%, or {text}% if you mean {text} percent")
    return value


def add_run_arguments(parser: argparse.ArgumentParser, rounds: int, timeout_s: float = 600.0,
                      memory_limit_gb: float = 2.0, memory_why: str = "") -> None:
    """Flags every sweep understands: rounds, isolation, timeouts, resume, threads, adaptive
    timing. The defaults that differ between suites are parameters."""
    group = parser.add_argument_group("running")
    group.add_argument("--rounds", type=positive_int, default=rounds, metavar="N",
                       help=f"time the case list N times, each round in fresh worker processes and a shuffled order, "
                            f"the measured runs split over the rounds; comparisons rest on the rounds (default {rounds})")
    group.add_argument("--threads", type=positive_int, default=None,
                       help="CPU threads for the frameworks (sets OMP/MKL/OpenBLAS and torch threads before import); recorded in the report")
    group.add_argument("--cpu-idle", choices=idle.MODES, default=idle.DEFAULT_MODE,
                       help="auto: while timing, keep idle CPUs polling instead of sleeping (holds /dev/cpu_dma_latency "
                            "at 0, which needs root) where that can be held, and record why not where it cannot; poll: "
                            "require it; os: leave idle states to the OS. Recorded in the report (default auto)")
    group.add_argument("--timeout", type=positive_float, default=timeout_s,
                       help=f"seconds one case (one round of it) may take before its worker is killed and it is "
                            f"recorded as timeout (default {timeout_s:g})")
    group.add_argument("--resume", action="store_true",
                       help="continue an interrupted run from its checkpoint (<output>.checkpoint.jsonl)")
    group.add_argument("--no-isolation", action="store_true",
                       help="run cases in this process (for debugging); a crash then ends the sweep and --timeout is not enforced")
    group.add_argument("--memory-limit-gb", type=positive_float, default=memory_limit_gb,
                       help=f"replace the worker process after a case that leaves it above this resident memory; later "
                            f"rounds keep it for the cases an earlier one showed to fit (default {memory_limit_gb:g}{memory_why})")
    group.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    group.add_argument("--target-precision", type=percent, default=None, metavar="PCT",
                       help="adaptive mode: sample until IQR/median is below PCT percent (e.g. 5), between --min-time "
                            "and --max-time")
    group.add_argument("--min-time", type=non_negative_float, default=None,
                       help=f"adaptive mode: minimum seconds of sampling per case (default {MIN_TIME_S:g})")
    group.add_argument("--max-time", type=positive_float, default=None,
                       help=f"adaptive mode: cap on seconds of sampling per case, a capped case is flagged (default {MAX_TIME_S:g})")
    add_cluster_arguments(parser)


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """--ray and its companions (benchcore.execute.cluster.driver): one sweep over a Ray cluster's nodes."""
    from benchcore.execute.cluster.driver import DEFAULT_MAX_RETRIES

    group = parser.add_argument_group("running on a Ray cluster (needs the ray extra)")
    group.add_argument("--ray", default=None, metavar="ADDRESS",
                       help="run the sweep as shards on a Ray cluster: auto (the cluster this machine belongs to), "
                            "ray://HOST:10001, HOST:6379, or local (start one here to try it); one report at the end")
    group.add_argument("--shards", type=positive_int, default=None, metavar="N",
                       help="with --ray: parts to cut the cases into (default: one per eligible node, or per GPU for "
                            "GPU cases, or per bench_slot resource)")
    group.add_argument("--max-retries", type=non_negative_int, default=None, metavar="N",
                       help=f"with --ray: re-run a shard whose node or task was lost up to N times, keeping its finished "
                            f"cases; then its other cases are recorded as failed (default {DEFAULT_MAX_RETRIES})")
    group.add_argument("--allow-env-mismatch", action="store_true", default=None,
                       help="with --ray: run even when the nodes' environments differ (hardware, driver, framework "
                            "versions); each case's node is recorded and compare judges each environment apart")


def apply_threads(threads: Optional[int]) -> None:
    """Set the thread environment before any framework is imported (workers inherit it)."""
    if threads is None:
        return
    from benchcore.execute.environment import THREAD_VARIABLES

    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)


FORMATS = ("json", "md", "csv")


def parse_formats(text: str) -> Tuple[str, ...]:
    """"json", "md", "csv" or several ("json,md,csv") → a tuple of distinct formats, in the given order."""
    formats = tuple(dict.fromkeys(f.strip().lower() for f in text.split(",") if f.strip()))
    if not formats or any(f not in FORMATS for f in formats):
        raise UsageError(f"-f/--format {text!r} is not json, md, csv or a comma-separated list of them "
                         "(e.g. json,md); choose from those")
    return formats


def output_paths(output, formats: Sequence[str], default_stem: str) -> Dict[str, Path]:
    """{format: path}. One format: the path as given. Two: one stem, each format's suffix
    (`-o reports/cpu.json -f json,md` → reports/cpu.json and reports/cpu.md)."""
    if output is None:
        return {fmt: Path(f"{default_stem}.{fmt}") for fmt in formats}
    path = Path(output).expanduser()
    suffix = path.suffix.lower().lstrip(".")
    if len(formats) == 1:
        if suffix in FORMATS and suffix != formats[0]:  # Markdown in a .json file breaks every reader
            raise UsageError(f"-o {output} names a .{suffix} file but the format is {formats[0]}; "
                             f"name it {path.with_suffix('.' + formats[0]).name} or use -f {suffix}")
        return {formats[0]: path}
    stem = path.with_suffix("") if suffix in FORMATS else path
    return {fmt: stem.with_name(f"{stem.name}.{fmt}") for fmt in formats}


def check_output_paths(paths: Dict[str, Path], overwrite: bool) -> None:
    """Refuse, before any case runs, a path the report could not be written to."""
    from benchcore.report.model import check_writable

    for path in paths.values():
        if path.is_dir():
            raise UsageError(f"output {path} is a folder; pass a file path")
        check_writable(path, overwrite)


def add_output_arguments(parser, default_stem: Optional[str]) -> None:
    """-f/--format json|md|csv (several: json,md), -o/--output PATH and --plot DIR; the older
    spellings --output-format and --output-file stay as aliases."""
    where = f"default ./{default_stem}.<json|md|csv>" if default_stem else "default: stdout"
    parser.add_argument("-f", "--format", "--output-format", dest="output_format", default=None,
                        metavar="json|md|csv[,...]",
                        help="report format: json, md, csv (one row per case and phase); json,md writes both from "
                             "one stem (default: from the output file's suffix, else json)")
    parser.add_argument("-o", "--output", "--output-file", dest="output_file", default=None, metavar="PATH",
                        help=f"report path ({where})")
    parser.add_argument("--plot", default=None, metavar="DIR",
                        help="also draw PNG charts into DIR (needs the plot extra); the Markdown report links them")


def add_format_arguments(p, formats, default: str, note: str = "") -> None:
    """-f/--format and -o/--output, as every command spells them (the sweeps: benchcore.cli.options)."""
    p.add_argument("-f", "--format", "--output-format", dest="format", type=_format_of(formats), default=default,
                   metavar="|".join(formats),
                   help=f"output format (default {default}" + (f"; {note}" if note else "") + ")")
    p.add_argument("-o", "--output", "--output-file", dest="output", default=None, metavar="FILE",
                   help="write here instead of stdout")


def _format_of(formats):
    """An argparse type: one of `formats`, else one line naming them (csv where a view has no rows)."""
    def parse(text: str) -> str:
        if text.lower() not in formats:
            raise argparse.ArgumentTypeError(f"{text!r}: this command writes {', '.join(formats)}; choose one of those")
        return text.lower()

    return parse


def version_text(prog: str) -> str:
    """`opbench 0.1.0 (opbench-suite 0.1.0, Python 3.11.7)`: the installed distribution's
    version, else benchcore's own (a checkout run without installing)."""
    import platform
    from importlib import metadata

    from benchcore import __version__

    try:
        version = metadata.version("opbench-suite")
    except metadata.PackageNotFoundError:
        version = __version__
    return f"{prog} {version} (opbench-suite {version}, Python {platform.python_version()})"


def add_version_argument(parser, prog: str) -> None:
    parser.add_argument("--version", action="version", version=version_text(prog))


def commands_epilog(commands: Dict[str, str]) -> str:
    """The `commands:` block of a tool's --help: every subcommand with its line."""
    width = max(len(name) for name in commands) + 2
    return "commands:\n" + "\n".join(f"  {name.ljust(width)}{text}" for name, text in commands.items())


def formats_for(request) -> Tuple[str, ...]:
    """--output-format if given, else the output file's suffix, else json."""
    if request.output_format:
        return parse_formats(request.output_format)
    suffix = Path(request.output_file).suffix.lower() if request.output_file else ""
    return ("md",) if suffix in (".md", ".markdown") else ("csv",) if suffix == ".csv" else ("json",)


def write_outputs(report, paths: Dict[str, Path], overwrite: bool, to_markdown: Callable, checkpoint=None,
                  plot_dir=None, suite=None) -> List[Path]:
    """Write charts (if asked), then the JSON and Markdown views of one in-memory Report.

    A write that fails at the end names the checkpoint that still holds every measured case.
    """
    from benchcore.report.model import write_text_atomic

    written: List[Path] = []
    links = ""
    if plot_dir:
        from benchcore.views.charts import chart_links_markdown, write_report_charts

        charts = write_report_charts(report, plot_dir, suite)
        written += charts
        markdown_folder = paths["md"].parent if "md" in paths else None
        links = chart_links_markdown(charts, relative_to=markdown_folder) if charts else ""
    try:
        for fmt, path in paths.items():
            text = render_report(report, fmt, to_markdown, suite) + ("\n" + links if links and fmt == "md" else "")
            written.append(write_text_atomic(path, text + "\n", overwrite=overwrite))
    except UsageError as exc:
        if checkpoint is None:
            raise
        raise UsageError(f"{exc}; the measured cases are kept in {checkpoint} (rerun with the same output and --resume)") from None
    return written


def render_report(report, fmt: str, to_markdown: Callable, suite) -> str:
    """One view of a report: JSON (with each case's headline figures, benchcore.views.headline),
    Markdown, or CSV rows (benchcore.views.rows)."""
    if fmt == "md":
        return to_markdown(report)
    from benchcore.suite import declared
    from benchcore.views.headline import annotate

    annotate(report, suite or declared(report.suite))
    if fmt == "json":
        return report.to_json()
    from benchcore.views.rows import REPORT_COLUMNS, report_rows, to_csv

    return to_csv(report_rows(report), REPORT_COLUMNS).rstrip("\n")  # the writers end every view with one


def parse_shard(text: Optional[str]) -> Optional[Tuple[int, int]]:
    """"K/N" → (K, N) with 1 <= K <= N."""
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


def add_shard_argument(parser) -> None:
    parser.add_argument("--shard", default=None, metavar="K/N",
                        help="run only the K-th of N deterministic parts of the cases (round-robin over the cases "
                             "sorted by key); join the reports with `merge`")


def checkpoint_path_for(output: Path) -> Path:
    return output.with_name(output.name + ".checkpoint.jsonl")


def sweep_checkpoint(paths: Dict[str, Path]) -> Path:
    """The checkpoint of a sweep that writes `paths` ({format: path}), beside its first report in
    FORMATS' order: every format may be the only one asked for (`-f csv -o rows.csv` too), and a
    rerun with the same -f/-o finds the same checkpoint for --resume."""
    return checkpoint_path_for(next(paths[fmt] for fmt in FORMATS if fmt in paths))


def run_settings_from(request, warmup: int, runs: int, run_backward: bool = True):
    """RunSettings from the run flags (a SweepRequest); adaptive-only flags without
    --target-precision, or a minimum time above the cap, are refused rather than silently
    ignored or always capped."""
    from benchcore.measure.runner import RunSettings

    given = [flag for flag, value in (("--min-time", request.min_time), ("--max-time", request.max_time))
             if value is not None]
    if given and request.target_precision is None:
        raise UsageError(f"{' and '.join(given)} only appl{'y' if len(given) > 1 else 'ies'} in adaptive mode; "
                         "add --target-precision (e.g. 5, percent) "
                         "or drop them")
    if request.target_precision is not None and request.target_precision <= 0:
        raise UsageError(f"--target-precision {request.target_precision:g}: no spread is below 0%; give a percent "
                         "above 0 (e.g. 5)")
    min_time = MIN_TIME_S if request.min_time is None else request.min_time
    max_time = MAX_TIME_S if request.max_time is None else request.max_time
    if min_time > max_time:
        raise UsageError(f"--min-time {min_time:g} is above --max-time {max_time:g}: every case would be capped; "
                         "lower --min-time or raise --max-time")
    return RunSettings(
        warmup=warmup,
        runs=runs,
        run_backward=run_backward,
        target_precision=None if request.target_precision is None else request.target_precision / 100,
        min_time_s=min_time,
        max_time_s=max_time,
    )


def audit_options(request) -> dict:
    """What --no-audit and --flush-denormal tell a sweep's workers (and its checkpoint and settings
    record), with the rounds the audit runs in (audit_rounds: adaptive sampling audits every round)."""
    from benchcore.measure.audit import audit_rounds

    adaptive = request.target_precision is not None
    return {"audit": not request.no_audit, "audit_rounds": audit_rounds(adaptive),
            "flush_denormal": request.flush_denormal}


def add_audit_arguments(parser) -> None:
    """--no-audit and --flush-denormal, shared by the sweeps' command lines."""
    group = parser.add_argument_group("numbers")
    group.add_argument("--no-audit", action="store_true",
                       help="skip the untimed pass per case that counts NaN, Inf and subnormal values in every "
                            "input, output and gradient (on by default; recorded)")
    group.add_argument("--flush-denormal", action="store_true",
                       help="set FTZ/DAZ (flush subnormals to zero) in the worker before each case; the report "
                            "records whether the operator threads really flush")


def run_plan_from(request, ab: bool = False):
    """How the sweep runs (benchcore.execute.sweep.RunPlan) from the run and cluster flags of a
    SweepRequest; cluster flags that cannot work together are refused here, before anything runs
    (Ray not needed)."""
    from benchcore.execute.cluster.driver import DEFAULT_MAX_RETRIES, ClusterPlan, parse_address
    from benchcore.execute.sweep import RunPlan

    memory_gb = request.memory_limit_gb
    plan = RunPlan(isolate=not request.no_isolation, timeout_s=request.timeout, resume=bool(request.resume),
                   memory_limit_bytes=int(memory_gb * 2**30) if memory_gb else None, cpu_idle=request.cpu_idle)
    if request.ray is None:
        given = [flag for flag, value in (("--shards", request.shards), ("--max-retries", request.max_retries),
                                          ("--allow-env-mismatch", request.allow_env_mismatch))
                 if value is not None]
        if given:
            raise UsageError(f"{given[0]} only applies with --ray; add --ray ADDRESS or drop {given[0]}")
        return plan
    if request.cpu_idle == "poll":
        raise UsageError("--cpu-idle poll holds this machine's CPUs, not a Ray cluster's nodes; "
                         "drop --cpu-idle poll, or run without --ray")
    if request.shard:
        raise UsageError("--ray cuts the sweep into shards itself; drop --shard K/N (--shards N sets how many)")
    if not plan.isolate:
        raise UsageError("--ray runs every shard in isolated workers on its node; drop --no-isolation")
    if ab:
        raise UsageError("--ray does not go with ab, whose two interpreters alternate on one machine; "
                         "run ab on one node, or drop --ray")
    retries = request.max_retries
    cluster = ClusterPlan(parse_address(request.ray).text, request.shards,
                          DEFAULT_MAX_RETRIES if retries is None else retries, bool(request.allow_env_mismatch))
    return dataclasses.replace(plan, cluster=cluster)


def rounds_from(request, default: int):
    """--rounds (the suite's default when not given), with the cases' order seeded by --seed."""
    from benchcore.execute.rounds import RoundPlan

    rounds = default if request.rounds is None else request.rounds
    return RoundPlan(rounds=rounds, order_seed=0 if request.seed is None else int(request.seed))


def run_main(main: Callable[[List[str]], int], argv: Optional[Sequence[str]], prog: str) -> int:
    """Run a CLI main: a UsageError is one line on stderr and exit 2, never a traceback.

    SIGTERM (a CI job's timeout, `kill`) is handled like Ctrl-C: the sweep stops its worker at
    once and keeps its checkpoint, instead of dying and leaving the worker computing.
    """
    previous = _terminate_as_interrupt()
    try:
        return main(list(sys.argv[1:] if argv is None else argv))
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; finished cases are kept in the checkpoint, rerun with --resume", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _terminate_as_interrupt():
    """Route SIGTERM to KeyboardInterrupt (main thread only); the previous handler, or None."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: signals cannot be handled here
        return None


def load_report(path: str, suite: str) -> Report:
    """Report.load plus the suite check: an rnnbench report is not for `opbench compare`."""
    report = Report.load(path)
    if report.suite != suite:
        raise UsageError(f"{path} holds a {report.suite} report, not an {suite} one; use `{report.suite}` instead of "
                         f"`{suite}` for it")
    return report


def emit(text: str, output: Optional[str], overwrite: bool) -> None:
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    else:
        path = write_text_atomic(output, text if text.endswith("\n") else text + "\n", overwrite=overwrite)
        print(f"wrote {path}", file=sys.stderr)
