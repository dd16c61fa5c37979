"""The steps found in a history, as Markdown (for people and CI logs) or JSON (for tools)."""

from __future__ import annotations

import json
from typing import Dict, List, Sequence

from benchcore.history.detect import Change
from benchcore.history.store import History


def change_dict(change: Change, history: History) -> dict:
    """A step for tools: `before`/`after`/`latest` in `unit` (a time's also as `*_ms`), what it rests on."""
    env = history.environments.get(change.environment_id)
    timed = {"before_ms": change.before_ms, "after_ms": change.after_ms, "latest_ms": change.latest_ms}
    return {
        "case": change.label,
        "case_key": change.case_key,
        "category": change.category,
        "metric": change.metric,
        "direction": "slower" if change.slower else "faster",
        "change_pct": 100.0 * change.change,
        "rests_on": change.rests_on,
        "unit": change.unit,
        "before": change.before_ms,
        "after": change.after_ms,
        "latest": change.latest_ms,
        **(timed if change.unit == "ms" else {}),
        "threshold_pct": 100.0 * change.threshold,
        "non_repeatable": change.non_repeatable,
        "runs_after": change.runs_after,
        "provisional": change.provisional,
        "holds": change.holds,
        "run": _run_dict(change.run),
        "previous_run": _run_dict(change.previous),
        "environment": {"id": change.environment_id, "summary": env.summary if env else None},
    }


def _run_dict(run) -> Dict[str, object]:
    return {"id": run.id, "name": run.name, "label": run.label, "commit": run.commit, "run_at": run.run_at}


def changes_json(changes: Sequence[Change], history: History, threshold: float, since) -> str:
    data = {
        "suite": history.suite,
        "threshold_pct": 100.0 * threshold,
        "since": since.isoformat() if since else None,
        "runs": len(history.runs),
        "steps": [change_dict(c, history) for c in changes],
    }
    return json.dumps(data, indent=2, allow_nan=False)


def changes_markdown(changes: Sequence[Change], history: History, threshold: float, since, series: int) -> str:
    where = f" since {since.date().isoformat()}" if since else ""
    lines: List[str] = [f"# Steps in the history ({history.suite})", ""]
    slower = sum(c.slower for c in changes)
    lines.append(f"{len(history.runs)} run(s), {series} series; steps{where}: {slower} slower, "
                 f"{len(changes) - slower} faster. Time series: steps of at least {100 * threshold:g}%; instruction "
                 "counts: beyond the count band (docs/INSTRUCTIONS.md).")
    if not changes:
        return "\n".join(lines)
    lines += ["", "| case | metric | change | before → after | rests on | first run | previous run | runs at new "
                  "level | now |", "|---|---|---|---|---|---|---|---|---|"]
    for c in changes:
        now = ("holds" if c.holds else "undone") + (", latest run only" if c.provisional else "")
        direction = "slower" if c.slower else "faster"
        lines.append(f"| {_cell(c.label)} | {c.metric} | {direction} {100 * c.change:+.1f}% | "
                     f"{c.span()} | {_cell(c.basis())} | {_cell(_run_text(c.run))} | "
                     f"{_cell(_run_text(c.previous))} | {c.runs_after} | {now} |")
    environments = sorted({c.environment_id for c in changes})
    if len(environments) > 1 or len(history.environments) > 1:
        lines += ["", "Environments:"] + [f"- `{e}`: {history.environments[e].summary}" for e in environments]
    return "\n".join(lines)




def _run_text(run) -> str:
    commit = f" ({run.commit[:12]})" if run.commit and run.label else ""
    return f"{run.name}{commit}, {run.run_at[:16].replace('T', ' ')}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
