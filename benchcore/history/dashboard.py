"""Dashboard: a static site of a suite's history, drawn with plotly, usable offline.

    index.html        per environment, the latest run by category: each case's figures (times,
                      and instruction counts where the runs counted) and its latest step, and the
                      steps that the latest run shows, each saying whether it rests on time or
                      on counts
    cases/<case>.html the case's series over time, forward and backward: the figures, the
                      rounds' spread as a band, the fitted levels, the steps marked; hover shows
                      run, label/commit, time, rounds and environment
    plotly.min.js     plotly's JavaScript, once for the whole site (no network needed)

The site is built in a temporary folder beside the target and swapped in whole, so a reader
never sees half a site and pages of cases that left the history do not linger. A target that
holds anything else than a site written here is refused.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from benchcore.compare.count_verdicts import reason_of
from benchcore.errors import UsageError
from benchcore.history.detect import Change, Series
from benchcore.history.store import CaseRow, History, Point, Run, figure_text

MARKER = ".benchcore-history-site"
PLOTLY_JS = "plotly.min.js"
METRIC_ORDER = ("forward", "backward", "forward Ir", "backward Ir", "forward cycles_est", "backward cycles_est")
SLOWER_COLOR, FASTER_COLOR = "#c62828", "#2e7d32"
ENV_COLORS = ("#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f")
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; padding: 0 1rem; max-width: 72rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.slower { color: #c62828; font-weight: 600; } .faster { color: #2e7d32; font-weight: 600; }
.muted { color: #777; } nav { margin-bottom: 1rem; } code { font-size: 0.85rem; }
"""


def write_site(history: History, series: Sequence[Series], changes: Sequence[Change], out_dir,
               threshold: float) -> Path:
    """Write the site for `history` into `out_dir` (replacing a site written there before)."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise UsageError("the dashboard needs plotly; install the history extra (pip install "
                         "'opbench-suite[history]')") from None
    out = Path(out_dir).expanduser()
    _check_target(out)
    build = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        os.chmod(build, 0o777 & ~_umask())
        (build / "cases").mkdir()
        (build / PLOTLY_JS).write_text(get_plotlyjs(), encoding="utf-8")
        pages = _case_pages(history, series)
        cases = history.latest_cases()
        by_case: Dict[str, Tuple[list, list]] = {key: ([], []) for key in pages}
        for s in series:
            by_case[s.case_key][0].append(s)
        for c in changes:
            by_case[c.case_key][1].append(c)
        for key, page in pages.items():
            (build / page).write_text(case_html(history, cases[key], *by_case[key]), encoding="utf-8")
        (build / "index.html").write_text(overview_html(history, series, changes, pages, threshold), encoding="utf-8")
        (build / MARKER).write_text("written by `history dashboard`; replaced whole on each run\n")
        _swap(build, out)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    return out


def _check_target(out: Path) -> None:
    if not out.parent.is_dir():
        raise UsageError(f"cannot write the dashboard to {out}: folder {out.parent} does not exist; create it first")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).exists())):
        raise UsageError(f"{out} exists and is not a dashboard written here; choose an empty or new folder for -o")
    if not os.access(out.parent, os.W_OK):
        raise UsageError(f"cannot write the dashboard to {out}: folder {out.parent} is not writable")


def _swap(build: Path, out: Path) -> None:
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
        os.replace(out, old / "site")
    os.replace(build, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _case_pages(history: History, series: Sequence[Series]) -> Dict[str, str]:
    """Page path per case key: a readable name plus a hash of the key (names repeat, keys do not)."""
    names = {key: case.name for key, case in history.latest_cases().items()}
    keys = sorted({s.case_key for s in series})
    return {key: f"cases/{_slug(names[key])}-{hashlib.sha1(key.encode()).hexdigest()[:10]}.html" for key in keys}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:40] or "case"


# --------------------------------------------------------------------------- the overview


def overview_html(history: History, series: Sequence[Series], changes: Sequence[Change], pages: Dict[str, str],
                  threshold: float) -> str:
    body = [f"<h1>{_e(history.suite)} history</h1>",
            f"<p>{len(history.runs)} run(s) · {len(series)} series · steps of at least {100 * threshold:g}% are "
            "marked on time, and on instruction counts (Ir) every change beyond the count band (method: "
            "docs/HISTORY.md)</p>"]
    if not history.runs:
        body.append("<p>No run filed yet: <code>history add REPORT.json</code>.</p>")
    latest_by_env = {}
    for run in history.runs:
        latest_by_env[run.environment_id] = run
    for env_id, latest in sorted(latest_by_env.items(), key=lambda item: item[1].run_at, reverse=True):
        body += _environment_section(history, series, changes, pages, env_id, latest)
    return _page(f"{history.suite} history", "\n".join(body), script=None)


def _environment_section(history, series, changes, pages, env_id: str, latest: Run) -> List[str]:
    env = history.environments.get(env_id)
    count = sum(run.environment_id == env_id for run in history.runs)
    out = [f"<h2>{_e(env.summary if env else env_id)}</h2>",
           f"<p>Environment <code>{_e(env_id)}</code>, {count} run(s). Latest run: <b>{_e(latest.name)}</b>, "
           f"{_e(_when(latest))}{_commit_text(latest)}.</p>"]
    if env is not None:
        keys = "".join(f"<tr><td><code>{_e(k)}</code></td><td>{_e(v)}</td></tr>" for k, v in env.keys.items())
        out.append(f"<details><summary>timing-relevant environment</summary><table>{keys}</table></details>")
    now = [c for c in changes if c.environment_id == env_id and c.run.id == latest.id]
    out.append("<h3>Changes at the latest run</h3>")
    out.append(_changes_table(now, pages) if now else "<p class='muted'>none beyond the threshold</p>")
    cases = [c for c in history.cases if c.run_id == latest.id]
    figures = _latest_points(series, env_id, latest.id)
    last_change = _last_changes(changes, env_id)
    for category in sorted({c.category for c in cases}):
        members = sorted((c for c in cases if c.category == category), key=lambda c: c.label)
        slower = sum(1 for c in now if c.category == category and c.slower)
        faster = sum(1 for c in now if c.category == category and not c.slower)
        out.append(f"<h3>{_e(category)}</h3><p>{len(members)} case(s); at the latest run "
                   f"<span class='slower'>{slower} slower</span>, <span class='faster'>{faster} faster</span></p>")
        out.append(_category_table(members, figures, last_change, pages, latest, _metrics(figures)))
    return out


def _latest_points(series, env_id: str, run_id: int) -> Dict[Tuple[str, str], Point]:
    return {(s.case_key, s.metric): p for s in series if s.environment_id == env_id for p in s.points
            if p.run_id == run_id}


def _metrics(figures: Dict[Tuple[str, str], Point]) -> List[Tuple[str, str]]:
    """(metric, unit) of the columns: the ones the run measured, times first, then counts."""
    units = {metric: point.unit for (_key, metric), point in figures.items()}
    shown = [m for m in METRIC_ORDER if m in units] + sorted(set(units) - set(METRIC_ORDER))
    return [(m, units[m]) for m in shown] or [(m, "ms") for m in METRIC_ORDER[:2]]


def _last_changes(changes, env_id: str) -> Dict[str, Change]:
    """Each case's most recent step in this environment (either metric); changes are newest first."""
    found: Dict[str, Change] = {}
    for change in changes:
        if change.environment_id == env_id:
            found.setdefault(change.case_key, change)
    return found


def _category_table(cases: Sequence[CaseRow], figures, last_change, pages, latest: Run,
                    metrics: Sequence[Tuple[str, str]]) -> str:
    rows = []
    for case in cases:
        link = (f"<a class='case' href='{_e(pages[case.key])}'>{_e(case.label)}</a>" if case.key in pages
                else f"<span class='case'>{_e(case.label)}</span>")
        cells = [f"<td class='num'>{_figure(figures.get((case.key, m)))}</td>" for m, _unit in metrics]
        change = last_change.get(case.key)
        step = _step_cell(change, latest) if change else "<span class='muted'>—</span>"
        status = "" if case.status == "ok" else f" <span class='slower'>{_e(case.status)}</span>"
        rows.append(f"<tr><td>{link}{status}</td>{''.join(cells)}<td>{step}</td></tr>")
    heads = "".join(f"<th>{_e(m)} ({_e(unit)})</th>" for m, unit in metrics)
    return f"<table><tr><th>case</th>{heads}<th>latest step</th></tr>" + "".join(rows) + "</table>"


def _step_cell(change: Change, latest: Run) -> str:
    at_latest = " (latest run)" if change.run.id == latest.id else ""
    return (f"<span class='{'slower' if change.slower else 'faster'}'>{100 * change.change:+.1f}%</span> "
            f"{_e(change.metric)} at {_e(change.run.name)}{at_latest}, on {_e(change.rests_on)}")


def _changes_table(changes: Sequence[Change], pages) -> str:
    rows = []
    for c in changes:
        page = pages.get(c.case_key)
        name = f"<a href='{_e(page)}'>{_e(c.label)}</a>" if page else _e(c.label)
        rows.append(f"<tr><td>{name}</td><td>{_e(c.metric)}</td><td class='{'slower' if c.slower else 'faster'}'>"
                    f"{100 * c.change:+.2f}%</td><td class='num'>{_e(c.span())}</td><td>{_e(c.basis())}</td>"
                    f"<td>{_e(c.run.name)}{_commit_text(c.run)}</td><td>{c.runs_after}</td></tr>")
    return ("<table><tr><th>case</th><th>metric</th><th>change</th><th>before → after</th><th>rests on</th>"
            "<th>first run</th><th>runs at new level</th></tr>" + "".join(rows) + "</table>")




# --------------------------------------------------------------------------- a case's page


def case_html(history: History, case: CaseRow, series: Sequence[Series], changes: Sequence[Change]) -> str:
    figure = case_figure(history, series, changes)
    steps = _changes_table(changes, {}) if changes else "<p class='muted'>no step beyond the threshold</p>"
    body = (f"<nav><a href='../index.html'>← overview</a></nav><h1>{_e(case.label)}</h1>"
            f"<p>{_e(case.category)}</p><details><summary>case key</summary><code>{_e(case.key)}</code></details>"
            f"{figure}{_non_repeatable(series)}<h2>Steps</h2>{steps}")
    return _page(f"{case.label} · {history.suite} history", body, script=f"../{PLOTLY_JS}")


def _non_repeatable(series: Sequence[Series]) -> str:
    """The count series whose latest repeats disagree, named with the reason: they are judged
    with their own spread (docs/INSTRUCTIONS.md), so a reader must know their band is wide."""
    found = [(s.metric, reason_of(s.points[-1].counts)) for s in series if s.points[-1].counts is not None]
    items = "".join(f"<li>{_e(metric)}: {_e(why)}</li>" for metric, why in found if why)
    return f"<h2>Non-repeatable counts (judged with their own spread)</h2><ul>{items}</ul>" if items else ""


def case_figure(history: History, series: Sequence[Series], changes: Sequence[Change]) -> str:
    """The case's plotly figure as a <div> (plotly.js comes from the page's script tag)."""
    from plotly.subplots import make_subplots

    metrics = [m for m in METRIC_ORDER if any(s.metric == m for s in series)]
    metrics += sorted({s.metric for s in series} - set(metrics))
    units = {s.metric: s.unit for s in series}
    fig = make_subplots(rows=len(metrics), cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=[f"{m} ({units[m]})" for m in metrics])
    envs = sorted({s.environment_id for s in series})
    runs = history.runs_by_id
    for s in series:
        row = metrics.index(s.metric) + 1
        color = ENV_COLORS[envs.index(s.environment_id) % len(ENV_COLORS)]
        env = history.environments.get(s.environment_id)
        own = [c for c in changes if c.metric == s.metric and c.environment_id == s.environment_id]
        for trace in _series_traces(s, [runs[p.run_id] for p in s.points], own, color,
                                    env.summary if env else s.environment_id, len(envs) > 1):
            fig.add_trace(trace, row=row, col=1)
    fig.update_layout(height=320 * len(metrics) + 90, margin=dict(l=60, r=20, t=90, b=40), hovermode="closest",
                      legend=dict(orientation="h", yanchor="top", y=0.995, yref="container", x=0),
                      template="plotly_white")
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id="series",
                       config={"displaylogo": False, "responsive": True})


def _series_traces(s: Series, runs: List[Run], changes: Sequence[Change], color: str, env_summary: str,
                   name_env: bool) -> list:
    import plotly.graph_objects as go

    times = [run.run_at for run in runs]
    suffix = f" · {env_summary}" if name_env else ""
    group = f"{s.metric}{s.environment_id}"
    first = s.metric == METRIC_ORDER[0] or name_env
    traces = []
    counted = s.unit != "ms"
    if any(p.rounds > 1 or len(p.samples) > 1 for p in s.points):
        high = [p.high_ms if p.high_ms is not None else p.median_ms for p in s.points]
        low = [p.low_ms if p.low_ms is not None else p.median_ms for p in s.points]
        traces.append(go.Scatter(x=times + times[::-1], y=high + low[::-1], fill="toself", fillcolor=_alpha(color),
                                 line=dict(width=0), hoverinfo="skip",
                                 name=("repeats' spread" if counted else "rounds' spread") + suffix,
                                 legendgroup=group + "band", showlegend=first))
    traces.append(go.Scatter(x=times, y=[p.median_ms for p in s.points], mode="lines+markers", line=dict(color=color),
                             name=("median of repeats" if counted else "median of round medians") + suffix,
                             legendgroup=group, showlegend=first,
                             text=[_hover(p, run, s.metric, env_summary) for p, run in zip(s.points, runs)],
                             hovertemplate="%{text}<extra></extra>"))
    traces.append(go.Scatter(x=times, y=s.fit.levels_ms, mode="lines", line=dict(color=color, dash="dot", shape="hv"),
                             name="fitted level" + suffix, legendgroup=group + "level", showlegend=first,
                             hoverinfo="skip"))
    for slower in (True, False):
        marked = [c for c in changes if c.slower == slower]
        if marked:
            traces.append(go.Scatter(
                x=[c.run.run_at for c in marked], y=[c.after_ms for c in marked], mode="markers",
                marker=dict(symbol="triangle-up" if slower else "triangle-down", size=13,
                            color=SLOWER_COLOR if slower else FASTER_COLOR),
                name=("slower" if slower else "faster") + " step", legendgroup=group + str(slower), showlegend=first,
                text=[_step_hover(c) for c in marked], hovertemplate="%{text}<extra></extra>"))
    return traces


def _hover(p: Point, run: Run, metric: str, env_summary: str) -> str:
    if p.samples:
        rounds = f"{len(p.samples)} repeat(s), spread {100 * (p.spread or 0.0):.3f}%"
    else:
        rounds = (f"{p.rounds} rounds, spread {100 * p.spread:.1f}%" if p.rounds > 1 and p.spread is not None
                  else f"{p.rounds} round")
    lines = [f"<b>{_e(run.name)}</b> (run {run.id})", _e(_when(run))]
    if run.commit:
        lines.append(f"commit {_e(run.commit[:12])}")
    lines += [f"{metric}: {figure_text(p.median_ms, p.unit)} {_e(p.unit)}", rounds, _e(env_summary)]
    return "<br>".join(lines)


def _step_hover(c: Change) -> str:
    state = "latest run only" if c.provisional else f"{c.runs_after} runs"
    return (f"<b>{'slower' if c.slower else 'faster'} {100 * c.change:+.2f}%</b> on {_e(c.rests_on)}<br>{_e(c.span())}"
            f"<br>from {_e(c.run.name)} (after {_e(c.previous.name)})<br>{state}")


def _alpha(color: str, alpha: float = 0.18) -> str:
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


# --------------------------------------------------------------------------- shared pieces


def _page(title: str, body: str, script: Optional[str]) -> str:
    head = f"<script src='{_e(script)}'></script>" if script else ""
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><link rel='icon' href='data:,'>"
            f"<style>{STYLE}</style>{head}"
            f"</head><body>\n{body}\n</body></html>\n")


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _figure(point: Optional[Point]) -> str:
    return figure_text(point.median_ms, point.unit) if point is not None else "<span class='muted'>—</span>"


def _when(run: Run) -> str:
    return run.run_at[:16].replace("T", " ") + " UTC"


def _commit_text(run: Run) -> str:
    return f" (commit <code>{_e(run.commit[:12])}</code>)" if run.commit and run.label else ""
