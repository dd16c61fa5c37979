"""Views of runner results in fastrnns' shapes: the console table, `--print-json oss|pep` lines,
the Markdown report, and the run order a merged report is put back in. These functions return
strings; only the CLI prints.
"""

from __future__ import annotations

import json
from typing import Dict, List, Optional

from benchcore.measure import audit, steady
from benchcore.measure.measurement import Measurement
from benchcore.suite import declared
from benchcore.views import headroom, trust
from benchcore.views.settings_table import settings_table

from .cases import GROUP_LSTM, GROUP_RESNET, GROUP_TITLES, GROUP_VL_LSTM

# --------------------------------------------------------------------------------------------
# Rendering (parent side). Each function returns text; the CLI prints it.


def _stat(result, which: str, key: str) -> Optional[float]:
    data = (result.metrics or {}).get(which) if result.ok else None
    return None if not data else data.get(key)


def group_of(result) -> str:
    return result.spec.params.get("group") or GROUP_LSTM


def run_order(specs) -> Dict[str, List[str]]:
    """{group: runner names} in the order a run takes them (recorded in the report's settings,
    before sharding, so every shard holds the whole sweep's order)."""
    order: Dict[str, List[str]] = {}
    for spec in specs:
        order.setdefault(spec.params["group"], []).append(spec.name)
    return order


def finish_merged(report):
    """A merged report's results in the order the unsharded run lists them (benchcore.report.merge's
    finisher for rnnbench; shards hold their cases sorted by key): the recorded run order,
    else fastrnns' group order and runner registration order."""
    from .runners import runner_names

    order = report.settings.get("runners") or {
        group: runner_names() for group in (GROUP_VL_LSTM, GROUP_LSTM, GROUP_RESNET)}
    groups = list(order)

    def position(result):
        group = group_of(result)
        names = order.get(group, [])
        return (groups.index(group) if group in groups else len(groups),
                names.index(result.spec.name) if result.spec.name in names else len(names), result.spec.key)

    report.results = sorted(report.results, key=position)
    return report


def grouped(results) -> Dict[str, list]:
    """Results by group, groups in first-seen order (fastrnns' order when built by build_specs)."""
    groups: Dict[str, list] = {}
    for result in results:
        groups.setdefault(group_of(result), []).append(result)
    return groups


TABLE_COLUMNS = ("name", "fwd_mean_ms", "fwd_std_ms", "fwd_median_ms", "bwd_mean_ms", "bwd_std_ms", "bwd_median_ms")


def _cell(value, width: int) -> str:
    text = value if isinstance(value, str) else ("-" if value is None else f"{value:.4g}")
    return text.rjust(width)  # a longer name widens its cell rather than losing its end


def table_row(result) -> List[object]:
    """Runner, then mean, std and median of forward and backward; with rounds the median is the
    median of the round medians (the figure `compare` judges)."""
    row: List[object] = [result.spec.name]
    for which in ("forward", "backward"):
        row += [_stat(result, which, "mean_ms"), _stat(result, which, "std_ms"), _center(result, which)]
    return row


def _center(result, which: str) -> Optional[float]:
    rounds = _stat(result, which, "rounds")
    return rounds["median_ms"] if isinstance(rounds, dict) else _stat(result, which, "median_ms")


def _round_spread(result, which: str) -> Optional[str]:
    """The rounds' spread, or "bimodal" where the rounds sit at two speeds (benchcore.measure.modes)."""
    rounds, modes = _stat(result, which, "rounds"), _stat(result, which, "modes")
    if isinstance(modes, dict):
        return "bimodal"
    return None if not isinstance(rounds, dict) or rounds.get("spread") is None else f"{rounds['spread'] * 100:.1f}%"


def _bimodal_texts(result) -> dict:
    return {which: (_stat(result, which, "modes") or {}).get("text") for which in ("forward", "backward")}


def console_table(results, sep: str = " ", colwidth: int = 16) -> str:
    """fastrnns' fixed-width table (fields joined by --sep), one block per group, in ms.

    A runner that did not run shows its status and error on its own row instead of numbers.
    """
    lines = []
    for group, members in grouped(results).items():
        lines.append(f"Benchmarking {GROUP_TITLES.get(group, group)}s...")
        lines.append(sep.join(_cell(c, colwidth) for c in TABLE_COLUMNS))
        for result in members:
            if result.ok:
                lines.append(sep.join(_cell(v, colwidth) for v in table_row(result)))
            else:
                lines.append(sep.join([_cell(result.spec.name, colwidth), f"{result.status.upper()}: {result.error or ''}"]))
        lines.append("")
    return "\n".join(lines)


def oss_json(results) -> str:
    """fastrnns' `--print-json oss` line: {group: {runner: mean fwd}, group-backward: {...}} (ms).

    A runner that failed appears with null (fastrnns dropped it silently).
    """
    out: Dict[str, dict] = {}
    for group, members in grouped(results).items():
        out[group] = {r.spec.name: _stat(r, "forward", "mean_ms") for r in members}
        out[group + "-backward"] = {r.spec.name: _stat(r, "backward", "mean_ms") for r in members}
    return json.dumps(out)


def pep_lines(results) -> List[str]:
    """fastrnns' `--print-json pep` lines, one per measured iteration, values in ms.

    The metric is `<group>-<runner>` for forward and `<group>-backward-<runner>` for backward
    (fastrnns joins the group key, which for backward is `<group>-backward`, to the runner
    name). Runners that did not run have no samples, so no lines; the CLI reports them on
    stderr.
    """
    lines = []
    for group, members in grouped(results).items():
        for key, which in ((group, "forward"), (group + "-backward", "backward")):
            for result in members:
                samples = _stat(result, which, "samples_ms") or []
                for value in samples:
                    record = {"type": "NET", "metric": f"{key}-{result.spec.name}", "unit": "ms", "value": str(value)}
                    lines.append("Caffe2Observer " + json.dumps(record))
    return lines


def _status_text(result) -> str:
    """ok, ok but capped (adaptive mode ran out of --max-time before its precision), or why not."""
    if not result.ok:
        return f"{result.status}: {result.error or ''}"
    if (result.metrics or {}).get("capped"):
        return "ok, capped: --max-time ran out before --target-precision was reached"
    return "ok"


def markdown_report(report) -> str:
    """A Markdown view of a Report: environment summary, then one table per group."""
    from tabulate import tabulate

    env = report.environment or {}
    torch_env = env.get("torch") or {}
    lines = ["# rnnbench results", ""]
    facts = [
        ("torch", torch_env.get("version")),
        ("device", ", ".join(sorted({r.spec.params.get("device", "?") for r in report.results})) or None),
        ("threads", torch_env.get("threads")),
        ("cpu", env.get("cpu_model")),
        ("git commit", env.get("git_commit")),
        ("started", env.get("started_at")),
    ]
    lines += [f"- {name}: {value}" for name, value in facts if value is not None]
    lines.append("")
    ok = [r for r in report.results if r.ok]
    measured = [Measurement.from_dict(r.metrics[which]) for r in ok for which in ("forward", "backward")
                if isinstance(r.metrics.get(which), dict) and r.metrics[which].get("samples_ms")]
    lines += trust.section(measured, [r.metrics or {} for r in ok], report.settings or {}, env)
    lines += ["## Settings", "", settings_table(report.settings or {}), ""]
    rounds = ((report.settings or {}).get("rounds") or {}).get("rounds", 1) > 1
    lines += ["Times: wall time per call in ms (the JSON's `metrics.headline.<phase>`, figure `call_ms`). "
              "*Timed calls*: the forward calls timed over all rounds; --nloops N is split over the rounds as "
              "evenly as it goes (10 over 3: 4, 3, 3), so the count is N (more only where N is below the rounds)."
              + (" With rounds, a median is the median of the rounds' medians, and *round spread* is (largest - "
                 "smallest round median) / that median." if rounds else ""), ""]
    efficiency = headroom.headers(report.results)
    headers = ["Runner", "Fwd mean (ms)", "Fwd std (ms)", "Fwd median (ms)", "Bwd mean (ms)", "Bwd std (ms)",
               "Bwd median (ms)"] + (["Fwd round spread", "Bwd round spread"] if rounds else []) + efficiency + [
               "Compile (ms)", "Timed calls", "Status"]
    for group, members in grouped(report.results).items():
        lines += [f"## {GROUP_TITLES.get(group, group)} ({group})", ""]
        rows = []
        for result in members:
            metrics = result.metrics or {}
            spreads = [_round_spread(result, "forward"), _round_spread(result, "backward")] if rounds else []
            rows.append(table_row(result) + spreads + (headroom.cells(result) if efficiency else [])
                        + [metrics.get("compile_ms"), _stat(result, "forward", "n"), _status_text(result)])
        lines.append(tabulate(rows, headers=headers, tablefmt="github", floatfmt=".4g", missingval="---"))
        lines.append("")
    lines += steady.markdown_section([(r.spec.name, r.metrics or {}, _bimodal_texts(r)) for r in report.results if r.ok])
    if (report.settings or {}).get("valgrind"):
        from benchcore.views.count_report import markdown_section

        lines += markdown_section(report.results, lambda r: r.spec.name, report.settings["valgrind"])
    lines += audit.markdown_section([(r.spec.name, r.metrics or {}) for r in report.results if r.ok],
                                    audited=(report.settings or {}).get("audit") is not False)
    return "\n".join(lines + headroom.markdown(report, declared(report.suite)))  # rnnbench.suite imports this module
