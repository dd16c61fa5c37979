"""Charts (PNG) built from a loaded Report or Comparison — views of the JSON, nothing more.

matplotlib is an optional extra, so it is imported only when a chart is drawn, and through
its object API (Figure + Agg canvas) rather than pyplot: no global figure registry to leak
memory across charts, no display backend needed on a headless CI machine.

Chart files are derived views that can be regenerated from the JSON at any time, so they are
replaced when they already exist (written atomically, like reports).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from benchcore.compare.verdicts import VERDICTS, Comparison
from benchcore.errors import UsageError
from benchcore.report.labels import case_labels
from benchcore.report.model import CaseResult, Report, ensure_folder, write_bytes_atomic
from benchcore.suite import Suite

#: operators shown in the "slowest" chart
TOP_N = 25
#: a comparison chart with more cases shows the most changed ones at each end
MAX_COMPARISON_CASES = 80

VERDICT_COLORS = {"slower": "#d62728", "faster": "#2ca02c", "same": "#1f77b4", "undecided": "#bbbbbb"}


def require_matplotlib() -> None:
    """Fail with the fix (the plot extra) before a run that promises charts starts measuring."""
    try:
        import matplotlib  # noqa: F401  (only its presence matters here)
    except ImportError:
        raise UsageError("charts need matplotlib, which is not installed; install the plot extra: pip install -e .[plot]") from None


def prepare_chart_folder(out_dir, suite: str, overwrite: bool) -> Path:
    """Create the chart folder now, so an unusable --plot DIR is refused before measuring; and
    refuse, like a report, to replace the suite's charts there without --overwrite (another
    report's Markdown may link them)."""
    require_matplotlib()
    folder = _out_dir(out_dir)
    existing = sorted(folder.glob(f"{suite}_*.png"))
    if existing and not overwrite:
        raise UsageError(f"--plot {out_dir} already holds {suite} charts ({existing[0].name}"
                         f"{', …' if len(existing) > 1 else ''}) that another report may link; "
                         "choose another folder or pass --overwrite")
    return folder


def _figure(width: float, height: float):
    """A matplotlib Figure on the Agg canvas; a UsageError naming the extra when it is missing."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: Path) -> Path:
    """Charts are views that can be redrawn from the JSON, so an old chart is replaced."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return write_bytes_atomic(path, buffer.getvalue(), overwrite=True)


def _out_dir(out_dir) -> Path:
    return ensure_folder(out_dir, "chart folder", "choose a writable folder")


def _labels(results: Sequence[CaseResult]) -> Dict[str, str]:
    """Case name alone when unique in the report, else name plus its distinguishing params."""
    return case_labels(results, max_len=40)


def _timed(report: Report, suite: Suite) -> List[tuple]:
    """(result, forward ms, backward ms or 0) for every ok case with a forward time."""
    rows = []
    for r in report.results:
        if not r.ok:
            continue
        t = suite.timings(r)
        fwd = t["forward"].center_ms if "forward" in t else None
        if fwd is None:
            continue
        bwd = t["backward"].center_ms if "backward" in t and t["backward"].center_ms is not None else 0.0
        rows.append((r, fwd, bwd))
    return rows


# --------------------------------------------------------------------------- report charts


def write_report_charts(report: Report, out_dir, suite: Optional[Suite] = None) -> List[Path]:
    """All charts for one report, in the suite's chart style; the file names start with the
    suite. Empty list: nothing timed."""
    suite = suite or Suite(report.suite)
    folder = _out_dir(out_dir)
    rows = _timed(report, suite)
    if not rows:
        return []
    return STYLES[suite.chart_style](report, suite, rows, folder)


def _slowest_charts(report: Report, suite: Suite, rows: List[tuple], folder: Path) -> List[Path]:
    paths = [_slowest_cases(report, rows, folder)]
    if any(suite.category(r) != "all" for r, _, _ in rows):
        paths.append(_per_category(report, suite, rows, folder))
    return paths


def _every_case_chart(report: Report, suite: Suite, rows: List[tuple], folder: Path) -> List[Path]:
    return [_case_bars(report, suite, folder)]


def _slowest_cases(report: Report, rows: List[tuple], folder: Path) -> Path:
    """Top N by forward + backward: where a sweep spends its time, at a glance."""
    top = sorted(rows, key=lambda row: row[1] + row[2], reverse=True)[:TOP_N]
    top.reverse()  # barh draws bottom-up; the slowest ends on top
    labels = _labels([r for r, _, _ in rows])
    fig = _figure(9, 1.2 + 0.32 * len(top))
    ax = fig.add_subplot()
    y = range(len(top))
    fwd = [f for _, f, _ in top]
    bwd = [b for _, _, b in top]
    ax.barh(y, fwd, color="#1f77b4", label="forward")
    ax.barh(y, bwd, left=fwd, color="#ff7f0e", label="backward")
    ax.set_yticks(list(y))
    ax.set_yticklabels([labels[r.spec.key] for r, _, _ in top], fontsize=8)
    ax.set_xlabel("median time (ms; average where only opperf averages exist)")
    ax.set_title(f"{report.suite}: slowest {len(top)} of {len(rows)} cases (forward + backward)")
    ax.legend(loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, folder / f"{report.suite}_slowest.png")


def _per_category(report: Report, suite: Suite, rows: List[tuple], folder: Path) -> Path:
    """Summed forward and backward time per category: which family dominates a sweep."""
    totals: Dict[str, List[float]] = {}
    for r, f, b in rows:
        entry = totals.setdefault(suite.category(r), [0.0, 0.0, 0])
        entry[0] += f
        entry[1] += b
        entry[2] += 1
    names = sorted(totals, key=lambda c: totals[c][0] + totals[c][1])
    fig = _figure(9, 1.2 + 0.35 * len(names))
    ax = fig.add_subplot()
    y = range(len(names))
    fwd = [totals[c][0] for c in names]
    ax.barh(y, fwd, color="#1f77b4", label="forward")
    ax.barh(y, [totals[c][1] for c in names], left=fwd, color="#ff7f0e", label="backward")
    ax.set_yticks(list(y))
    ax.set_yticklabels([f"{c} ({totals[c][2]})" for c in names], fontsize=8)
    ax.set_xlabel("summed median time of the category's cases (ms)")
    ax.set_title(f"{report.suite}: time per category (cases in brackets)")
    ax.legend(loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, folder / f"{report.suite}_categories.png")


def _spread(timing) -> Optional[tuple]:
    """(below, above) the shown figure: the range of the round medians with rounds, else the
    interquartile range (the spread that ignores spikes)."""
    m = timing.measurement if timing is not None else None
    if m is None or m.n < 2:
        return None
    if m.round_count > 1:
        return (m.center - min(m.round_medians), max(m.round_medians) - m.center)
    return (m.median - m.percentile(25), m.percentile(75) - m.median)


def _case_bars(report: Report, suite: Suite, folder: Path) -> Path:
    """Forward and backward figure per case, whiskers spanning the rounds (or the IQR)."""
    results = [r for r in report.results if r.ok and "forward" in suite.timings(r)]
    labels = _labels(results)
    fig = _figure(max(6.0, 1.0 + 0.9 * len(results)), 5)
    ax = fig.add_subplot()
    width = 0.4
    for offset, metric, color in ((-width / 2, "forward", "#1f77b4"), (width / 2, "backward", "#ff7f0e")):
        xs, heights, errs = [], [], [[], []]
        for i, r in enumerate(results):
            t = suite.timings(r).get(metric)
            if t is None or t.center_ms is None:
                continue
            xs.append(i + offset)
            heights.append(t.center_ms)
            lo_hi = _spread(t) or (0.0, 0.0)
            errs[0].append(lo_hi[0])
            errs[1].append(lo_hi[1])
        if xs:
            ax.bar(xs, heights, width, color=color, label=metric, yerr=errs, capsize=3, ecolor="black")
    ax.set_xticks(list(range(len(results))))
    ax.set_xticklabels([labels[r.spec.key] for r in results], rotation=30, ha="right", fontsize=8)
    # a label longer than the axes is cut at the figure's edge: the whiskers are said in the title
    ax.set_ylabel("median time (ms)")
    ax.set_title(f"{report.suite}: forward and backward per {suite.case_noun}\n"
                 "whiskers: the round medians' range (one round: the IQR)", fontsize=10)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, folder / f"{report.suite}_{suite.case_noun}s.png")


#: a suite's chart_style → its report charts
STYLES = {"slowest": _slowest_charts, "every_case": _every_case_chart}


# --------------------------------------------------------------------------- comparison chart


def write_comparison_chart(comparison: Comparison, out_dir) -> Optional[Path]:
    """Ratio new/base per case, sorted, coloured by verdict; undecided cases grey and hatched.

    Whiskers span the 95% bounds of the ratio (from the rounds, or the medians' CIs) where the
    evidence gives them. None when no case was measured on both sides.
    """
    folder = _out_dir(out_dir)
    cases = sorted((c for c in comparison.cases if c.ratio is not None), key=lambda c: c.ratio)
    if not cases:
        return None
    total = len(cases)
    if total > MAX_COMPARISON_CASES:
        half = MAX_COMPARISON_CASES // 2
        cases = cases[:half] + cases[-half:]
    fig = _figure(9, 1.5 + 0.28 * len(cases))
    ax = fig.add_subplot()
    y = list(range(len(cases)))
    ratios = [c.ratio for c in cases]
    bars = ax.barh(y, [r - 1.0 for r in ratios], left=1.0,
                   color=[VERDICT_COLORS.get(c.verdict, "#bbbbbb") for c in cases])
    for bar, case in zip(bars, cases):
        if case.verdict == "undecided":
            bar.set_hatch("//")
            bar.set_edgecolor("#777777")
    lows, highs = [], []
    for case, ratio in zip(cases, ratios):
        bounds = _case_bounds(case)
        lows.append(ratio - bounds[0] if bounds else 0.0)
        highs.append(bounds[1] - ratio if bounds else 0.0)
    if any(lows) or any(highs):
        ax.errorbar(ratios, y, xerr=[lows, highs], fmt="none", ecolor="black", capsize=2, linewidth=0.8)
    ax.set_xscale("log")  # 2x slower and 2x faster look equally far from 1
    _plain_ticks(ax.xaxis)
    ax.axvline(1.0, color="black", linewidth=0.8)
    t = comparison.threshold
    ax.axvspan(1.0 / (1.0 + t), 1.0 + t, color="#dddddd", alpha=0.5, zorder=0)
    ax.set_yticks(y)
    ax.set_yticklabels([f"{c.label} [{c.verdict}]" for c in cases], fontsize=7)
    ax.set_xlabel(f"new / base (< 1 faster); shaded: ±{t * 100:g}% threshold; whiskers: 95% bounds")
    shown = f"{len(cases)} most changed of {total}" if total > len(cases) else f"{total}"
    geo = comparison.overall_geomean
    ax.set_title(f"{comparison.suite}: ratio per case ({shown} cases)" + (f", geomean {geo:.3f}" if geo else ""))
    handles = [_legend_patch(v) for v in VERDICTS]
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, folder / f"{comparison.suite}_comparison.png")


def _plain_ticks(axis) -> None:
    """Log-axis ticks as 0.9, 1.1 rather than 9x10^-1."""
    from matplotlib.ticker import FuncFormatter

    formatter = FuncFormatter(lambda value, _: f"{value:g}")
    axis.set_major_formatter(formatter)
    axis.set_minor_formatter(formatter)


def _case_bounds(case) -> Optional[tuple]:
    """Bounds of the case ratio when every compared metric has them (single metric: exact)."""
    metrics = case.metrics
    if len(metrics) == 1 and metrics[0].ratio_low is not None:
        return (metrics[0].ratio_low, metrics[0].ratio_high)
    if metrics and all(m.ratio_low is not None for m in metrics):
        return (min(m.ratio_low for m in metrics), max(m.ratio_high for m in metrics))
    return None


def _legend_patch(verdict: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=VERDICT_COLORS[verdict], hatch="//" if verdict == "undecided" else None,
                 edgecolor="#777777", label=verdict)


# --------------------------------------------------------------------------- Markdown links


def chart_links_markdown(paths: Sequence, relative_to=None, title: str = "Charts") -> str:
    """A Markdown section of image links, relative to the folder the Markdown file lives in."""
    if not paths:
        return ""
    base = Path(relative_to).expanduser().resolve() if relative_to is not None else Path.cwd().resolve()
    lines = [f"## {title}", ""]
    for path in paths:
        target = Path(path).expanduser().resolve()
        link = Path(os.path.relpath(target, base)).as_posix()
        lines.append(f"![{target.stem}]({link})")
        lines.append("")
    return "\n".join(lines)
