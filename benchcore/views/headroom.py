"""The headroom answer: every timed case-phase's efficiency against the machine's roofs
(benchcore.report.efficiency), the cases with the most time to win, and the roofline chart.

Why here, beside headline: the efficiency reads a phase's headline figure (the per-call median
the suite's timings give), and what a report shows of it (the Markdown section, the chart, the
CSV cells) is a view. A suite supplies what only it knows: each case's Work and its roofs (a
`roofs` block per framework under the report's `extra`, frameworks.roofs.for_sweep).

The time to win is the phase's median minus its time at the roof, per call, weighted by
nothing: a case a user runs ten times as often is not weighted ten times here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from benchcore.measure.roofs import VERSION, Roofs, level_note
from benchcore.measure.work import Work
from benchcore.report.efficiency import ROOFS, Efficiency, of_phase
from benchcore.report.labels import case_labels
from benchcore.report.model import CaseResult, Report
from benchcore.suite import Suite
from benchcore.views.headline import headlines

#: the metrics key of a case's {phase: Efficiency dict}
METRIC = "efficiency"
#: lines of the headroom answer
TOP_N = 10
#: a phase above this share of its roof means a wrong formula or roof (issue 35)
ABOVE_ROOF = 110.0
#: the roofline chart's name beside the Markdown: <stem>.roofline.png
CHART_SUFFIX = ".roofline.png"
#: the extra key naming the chart written beside the Markdown (or why none was)
CHART = "roofline_chart"
LEVEL_STYLES = {"L1": ":", "L2": "-.", "LLC": "--", "DRAM": "-"}


@dataclass(frozen=True)
class Phase:
    """One case-phase of a report with its efficiency."""

    label: str
    category: str
    framework: Optional[str]
    efficiency: Efficiency


def roofs_of(block: Optional[dict]) -> Optional[Roofs]:
    """A recorded roofs block's Roofs (None: off, failed, or a block this version cannot read)."""
    body = (block or {}).get("roofs")
    try:
        return Roofs.from_dict(body) if body else None
    except (KeyError, TypeError, ValueError):
        return None


def work_or_reason(work_of: Callable[[CaseResult], Dict[str, Work]], result: CaseResult) -> Dict[str, Work]:
    """The case's work; where the suite's mapping raises, every phase says why instead."""
    try:
        return work_of(result)
    except Exception as error:  # a family's reading a case does not fit must not lose the report
        from benchcore.errors import error_summary

        why = f"work unknown: {error_summary(error, 300)}"
        return {phase: Work(phase, None, None, why) for phase in ("forward", "backward")}


def annotate(results: Sequence[CaseResult], work_of: Callable[[CaseResult], Dict[str, Work]], dtype: str,
             block: Optional[dict], suite: Suite) -> None:
    """Write each measured case's `metrics.efficiency` {phase: Efficiency dict}, in place: its
    timed phases' headline medians read against `block`'s roofs at the sweep's dtype."""
    roofs = roofs_of(block)
    no_roofs = (block or {}).get("reason") or "no roofs taken"
    for result in results:
        if not result.ok:
            continue
        timed = headlines(result, suite)
        works = work_or_reason(work_of, result)
        result.metrics[METRIC] = {
            phase: _efficiency(works.get(phase) or Work(phase, None, None, "no work stated for this phase"),
                               headline.median_ms, dtype, roofs, no_roofs)
            for phase, headline in timed.items()}


def _efficiency(work: Work, median_ms: Optional[float], dtype: str, roofs: Optional[Roofs], no_roofs: str) -> dict:
    """One phase's efficiency dict; where its work cannot be read against the roofs (a formula's
    bug), the phase says so instead of the sweep losing its report."""
    try:
        return of_phase(work, median_ms, dtype, roofs, no_roofs).to_dict()
    except Exception as error:  # noqa: BLE001 - one case's figure must not cost the sweep's report
        from benchcore.errors import error_summary

        return of_phase(Work(work.phase, None, None, f"work unreadable: {error_summary(error, 300)}"), median_ms,
                        dtype, roofs, no_roofs).to_dict()


def efficiencies(result: CaseResult) -> Dict[str, Efficiency]:
    return {phase: Efficiency.from_dict(data) for phase, data in ((result.metrics or {}).get(METRIC) or {}).items()}


def phases(report: Report, suite: Suite) -> List[Phase]:
    """Every case-phase of the report that has an efficiency, in report order."""
    ok = [r for r in report.results if r.ok]
    labels = case_labels(ok, max_len=50)
    return [Phase(labels[r.spec.key], suite.category(r), r.spec.params.get("framework"), e)
            for r in ok for e in efficiencies(r).values()]


def most_to_win(found: Sequence[Phase], n: int = TOP_N) -> List[Phase]:
    """The n case-phases with the most time to win, most first."""
    return sorted((p for p in found if p.efficiency.to_win_ms is not None),
                  key=lambda p: -p.efficiency.to_win_ms)[:n]


def above_roof(found: Sequence[Phase]) -> List[Phase]:
    return [p for p in found if (p.efficiency.percent_of_roof or 0) > ABOVE_ROOF]


# ---------------------------------------------------------------- text

def _g(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3g}"


def roofs_line(framework: str, block: dict) -> str:
    """One line of a roofs block: where it came from, the FLOP peaks, the plateaus and which
    cache sizes they were cut at came from sysfs or from the curve."""
    roofs = roofs_of(block)
    if roofs is None:
        return f"- {framework}: no roofs ({block.get('reason') or _unread(block)})"
    peaks = ", ".join(f"{dtype} {_g(rate / 1e9 if rate else None)}" for dtype, rate in roofs.flops_per_s.items())
    levels = ", ".join(f"{level} {_g(rate / 1e9 if rate else None)}" for level, rate in roofs.plateaus().items())
    note = f"; {block['note']}" if block.get("note") else ""
    return (f"- {framework}: {block.get('source')} ({block.get('obtain_s', 0):.2f} s in this sweep; taken "
            f"{roofs.taken_at} in {roofs.took_s:.1f} s, {roofs.threads or 'default'} threads); peak GFLOP/s: {peaks}; "
            f"bandwidth GB/s: {levels} ({level_note(roofs.bandwidth, roofs.cache_bytes)}){note}")


def _unread(block: dict) -> str:
    """Why a block without a reason has no roofs: none taken, or ones this version cannot read."""
    body = block.get("roofs")
    if not isinstance(body, dict):
        return "not taken"
    return (f"recorded by roof probes of version {body.get('version')!r}, which this version (probes {VERSION}) does "
            "not read; each case's efficiency is as that sweep recorded it")


def console_notes(report: Report) -> List[str]:
    """What a user must hear about the roofs once, on the console: a cache re-taken (corrupt,
    an older probe's or another machine's) and probes that failed."""
    blocks = (report.extra or {}).get(ROOFS) or {}
    return [f"roofs ({framework}): {block['note']}" for framework, block in blocks.items() if block.get("note")] + [
        f"roofs ({framework}) not taken, so no % of roof: {block['reason']}" for framework, block in blocks.items()
        if block.get("source") == "failed"]


def phase_line(rank: int, phase: Phase) -> str:
    e = phase.efficiency
    bound = f"{e.bound}-bound" if e.bound in ("memory", "compute") else "the bandwidth roof alone (no FLOP formula)"
    where = bound + (f" at {e.level}" if e.level else "")
    return (f"{rank}. `{phase.label}` {e.phase}: {e.median_ms:.4g} ms, {e.to_win_ms:.4g} ms to win "
            f"({e.percent_of_roof:.3g}% of the roof, {e.roof_ms:.3g} ms at it; {where}; {_g(e.gb_per_s)} GB/s, "
            f"{_g(e.gflop_per_s)} GFLOP/s)")


def markdown(report: Report, suite: Suite) -> List[str]:
    """The report's closing section: the roofs, the cases with the most time to win (one line
    each), those above their roof, and the roofline chart's link (`extra.roofline_chart`)."""
    blocks = (report.extra or {}).get(ROOFS)
    chart = (report.extra or {}).get(CHART) or {}
    if not blocks:
        return []
    found = phases(report, suite)
    lines = ["## Headroom", "", "Roofs (measured on this machine; benchcore.measure.roofs):", ""]
    lines += [roofs_line(framework, block) for framework, block in blocks.items()] + [""]
    top = most_to_win(found)
    with_roof = sum(p.efficiency.to_win_ms is not None for p in found)
    lines += [f"The case-phases with the most time to win (per-call median − time at the roof; {len(top)} of the "
              f"{with_roof} with a roof, of {len(found)} timed):", ""]
    lines += [phase_line(i, p) for i, p in enumerate(top, 1)] or ["(none has a roof: see each case's efficiency reason)"]
    over = above_roof(found)
    if over:
        lines += ["", f"Above {ABOVE_ROOF:.0f}% of the roof (a wrong FLOP or byte formula, or roofs taken while the "
                  "machine was busy: take them again on a quiet one with --roofs retake): "
                  + "; ".join(f"`{p.label}` {p.efficiency.phase} {p.efficiency.percent_of_roof:.0f}%" for p in over)]
    if chart.get("path"):
        lines += ["", f"![roofline]({chart['path']})"]
    elif chart.get("reason"):
        lines += ["", f"No roofline chart: {chart['reason']}."]
    return lines + [""]


def headers(results: Sequence[CaseResult]) -> List[str]:
    """A report table's efficiency columns, where any of its cases has an efficiency (else none)."""
    return list(COLUMNS) if any(efficiencies(r) for r in results if r.ok) else []


def cells(result: CaseResult) -> List[str]:
    """A table row's GB/s, GFLOP/s and % of the roof, each "forward / backward" where both were
    timed ("-": null, the JSON's efficiency.reason says why)."""
    found = list(efficiencies(result).values())
    pct = lambda v: "-" if v is None else f"{v:.3g}%"  # noqa: E731
    return [" / ".join(show(getattr(e, name)) for e in found) or "-"
            for name, show in (("gb_per_s", _g), ("gflop_per_s", _g), ("percent_of_roof", pct))]


#: the efficiency columns of a report table
COLUMNS = ("GB/s (fwd / bwd)", "GFLOP/s (fwd / bwd)", "% of Roof (fwd / bwd)")


# ---------------------------------------------------------------- chart

def chart_path(markdown_path: Path) -> Path:
    return markdown_path.with_name(markdown_path.stem + CHART_SUFFIX)


def write_chart(report: Report, suite: Suite, path: Path) -> Optional[Path]:
    """The roofline (intensity against GFLOP/s, log-log): each framework's measured roofs as
    lines, one point per case-phase with FLOPs, coloured by category. None where no roofs or no
    phase with FLOPs (nothing to draw)."""
    from benchcore.views.charts import _figure, _save

    found = [p for p in phases(report, suite) if p.efficiency.intensity and p.efficiency.gflop_per_s]
    roofs = {name: r for name, r in ((n, roofs_of(b)) for n, b in ((report.extra or {}).get(ROOFS) or {}).items()) if r}
    if not roofs or not found:
        return None
    fig = _figure(9, 6)
    ax = fig.add_subplot(1, 1, 1)
    xs = [p.efficiency.intensity for p in found]
    lo, hi = min(xs + [0.01]) / 2, max(xs + [100.0]) * 2
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    for framework, r in roofs.items():
        peak = max((v for v in r.flops_per_s.values() if v), default=None)
        for level, bandwidth in r.plateaus().items():
            if bandwidth:
                ys = [min(peak or math.inf, bandwidth * x) / 1e9 for x in grid]
                ax.plot(grid, ys, LEVEL_STYLES[level], color="#555555", linewidth=1,
                        label=f"{framework} {level} {bandwidth / 1e9:.3g} GB/s")
        for dtype, rate in r.flops_per_s.items():
            if rate:
                ax.axhline(rate / 1e9, color="#999999", linewidth=0.8)
                ax.annotate(f"{framework} {dtype} peak {rate / 1e9:.3g} GFLOP/s", (grid[0], rate / 1e9), fontsize=7,
                            va="bottom")
    categories = sorted({p.category for p in found})
    colours = {c: f"C{i % 10}" for i, c in enumerate(categories)}
    for category in categories:
        members = [p for p in found if p.category == category]
        ax.scatter([p.efficiency.intensity for p in members], [p.efficiency.gflop_per_s for p in members], s=14,
                   color=colours[category], label=category, alpha=0.8, marker="o" if len(categories) <= 10 else ".")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(f"{report.suite}: {len(found)} case-phases against the measured roofs")
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def chart_beside(prog: str, results: Sequence[CaseResult], extra: dict, suite: Suite,
                 markdown_path: Optional[Path]) -> None:
    """Draw the roofline beside the Markdown report (when one is written) and record its name
    in `extra` (`roofline_chart`), which the Markdown links; matplotlib missing: no chart, said."""
    if markdown_path is None or not extra.get(ROOFS):
        return
    from benchcore.errors import UsageError

    try:
        written = write_chart(Report(suite=prog, results=list(results), extra=extra), suite, chart_path(markdown_path))
    except UsageError as error:  # the plot extra is not installed
        extra[CHART] = {"path": None, "reason": str(error)}
        return
    extra[CHART] = {"path": written.name if written else None,
                    "reason": None if written else "no case-phase with FLOPs and a roof to draw"}
