"""Efficiency before and after: each matched case-phase's share of the machine's roof and its
achieved rates in both reports (benchcore.report.efficiency), beside the time verdicts.

Why apart from the verdicts: a change of time says faster or slower; the same change read
against the roof says how much of what this machine can do the new build reaches, and whether a
case that got faster still has time to win.
"""

from __future__ import annotations

from typing import Dict, List

from benchcore.report.efficiency import NO_EFFICIENCY
from benchcore.report.model import CaseResult

#: the figures compared, per side
FIGURES = ("percent_of_roof", "gb_per_s", "gflop_per_s", "to_win_ms")


def _stored(result: CaseResult) -> Dict[str, dict]:
    return (result.metrics or {}).get("efficiency") or {}


def changes(pairs: List[tuple]) -> List[dict]:
    """[{key, label, phase, base_<figure>, new_<figure> …, reason}] over (base, new, label)
    pairs of measured cases where either side has an efficiency; a figure missing on a side is
    None and `reason` gives each side's why."""
    found = []
    for base, new, label in pairs:
        b, n = _stored(base), _stored(new)
        for phase in [p for p in ("forward", "backward") if p in b or p in n]:
            bp, np_ = b.get(phase) or {}, n.get(phase) or {}
            reasons = [f"{side}: {data.get('reason') or NO_EFFICIENCY}"
                       for side, data in (("base", bp), ("new", np_)) if not data or data.get("reason")]
            found.append({"key": base.spec.key, "label": label, "phase": phase,
                          **{f"base_{f}": bp.get(f) for f in FIGURES}, **{f"new_{f}": np_.get(f) for f in FIGURES},
                          "reason": "; ".join(reasons) or None})
    return found
