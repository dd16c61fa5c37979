"""The counted half of a comparison as Markdown: every quantity's verdict on instruction counts,
and per changed quantity the few functions that explain most of its change.

A count comparison stores, per changed quantity, the functions and objects whose counts moved
(benchcore.compare.count_verdicts); shown whole, with full C++ signatures and three lists per
quantity, a comparison of 23 cases ran to 300 KB of rows up to 480 characters wide. Here each
changed quantity gets one short table: its largest exclusive moves (they add up to the
quantity's change, so each row's share of it says how much it explains), a stripped object's
unnamed functions summed as one row (their addresses do not line up between builds), names
shortened (benchcore.views.symbols) with the object in a column of its own. The full names and
the inclusive lists stay in the JSON.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from benchcore.compare.count_verdicts import RESTS_ON, CountComparison, CountVerdict
from benchcore.measure import callgrind
from benchcore.views import prose, symbols

#: prose lines are wrapped here
PROSE_WIDTH = 110
#: the widest a table row may be (a function's name is cut to what the other columns leave)
ROW_WIDTH = 160
#: a function's name is never cut below this
NARROWEST = 24
#: an object's or source file's path is cut to this, its file name kept
OBJECT_WIDTH = 32
#: names are first shortened within this (symbols.distinct), then fitted to the row
FULL = 120
#: a function explains a change when it holds this much of it or more ...
MATTERS = 0.01
#: ... and two quantities' changes are alike when the same functions do, their shares this close
ALIKE = 0.05


def markdown(found: CountComparison) -> List[str]:
    """The comparison's section on counts: every quantity, then the functions behind each change."""
    out = ["## Instruction counts", ""] + _prose(
        f"Verdicts here rest on {RESTS_ON} (floor {found.floor * 100:g}%); any timing verdicts rest on time.")
    for d in found.settings_differences:
        out += _prose(f"Note: the counts were taken with different {d['key']} ({d['base']} → {d['new']}).")
    ordered = sorted(found.verdicts, key=lambda v: -abs(v.ratio - 1))
    rows = [[v.label, v.phase, f"{v.base:,.0f}", f"{v.new:,.0f}", f"{v.change_pct:+.2f}%", f"±{v.band * 100:.2f}%",
             v.verdict, "" if v.cycles_ratio is None else f"{(v.cycles_ratio - 1) * 100:+.2f}%",
             f"{v.repeats[0]}v{v.repeats[1]}" + (" †" if v.non_repeatable else "")] for v in ordered]
    out += [_table(rows, ["Case", "Phase", "Base Ir", "New Ir", "Change", "Band", "Verdict", "Est. cycles",
                          "Repeats"], squeeze=0) if rows else "No case counted in both reports.", ""]
    odd = [v for v in ordered if v.non_repeatable]
    if odd:
        out += ["† Non-repeatable, judged with its own spread:", ""]
        out += [line for v in odd for line in _bullet(f"{v.label} {v.phase}: {v.non_repeatable}")] + [""]
    changed = [v for v in ordered if v.functions]
    if changed:
        out += ["### Functions behind each change", ""] + _prose(
            f"Per changed quantity, the {found.shown} functions whose own (exclusive) instructions per call moved "
            "most; the exclusive moves add up to the quantity's, so *Share* is how much of its change each "
            "explains. From each report's stored profile of the last repeat (its top "
            f"{callgrind.TOP_FUNCTIONS} functions): one below that top on a side shows the bound and a range. "
            "Names are shortened (`<…>` template arguments, `(…)` parameters); the full names, the inclusive "
            "counts and more functions are in the JSON (`--functions N` lists more). Quantities whose change the "
            f"same functions explain (each holding {MATTERS:.0%} or more of it, shares within {ALIKE * 100:g} points) are "
            "listed under the first.")
        for leader, alike in alike_groups(changed, found.shown):
            out += _functions(leader, found.shown, alike)
    if found.uncounted:
        out += _prose(f"Counted on one side only ({len(found.uncounted)}): "
                      + ", ".join(u["label"] for u in found.uncounted))
    return out


def explaining(v: CountVerdict, limit: int) -> List[dict]:
    """The delta rows that explain most of a changed quantity's change, largest first: its
    exclusive moves, with a stripped object's unnamed functions as that object's summed row."""
    summed = {row["object"]: row for row in v.functions.get("objects", []) if row["part"] == "unnamed"}
    rows = [row for row in v.functions.get("self", [])
            if _unnamed_object(row["function"]) not in summed]
    rows += [dict(row, function=f"unnamed functions ({row['functions'][0]:,} → {row['functions'][1]:,})")
             for row in summed.values()]
    return sorted(rows, key=lambda r: (-callgrind.least_change(r), r["function"]))[:limit]


def alike_groups(changed: List[CountVerdict], limit: int) -> List[Tuple[CountVerdict, List[CountVerdict]]]:
    """The changed quantities as (shown, alike): a quantity whose change the same functions explain
    as an earlier one's, with shares within ALIKE, is listed under that one instead of repeating
    its table (one operator at three shapes, its forward and its backward)."""
    groups: List[Tuple[CountVerdict, List[CountVerdict]]] = []
    for v in changed:
        explained = _explanation(v, limit)
        leader = next((g for g in groups if explained and g[0].verdict == v.verdict
                       and _alike(_explanation(g[0], limit), explained)), None)
        if leader is None:
            groups.append((v, []))
        else:
            leader[1].append(v)
    return groups


def _explanation(v: CountVerdict, limit: int) -> List[Tuple[str, float]]:
    """(function, share) of the rows that hold MATTERS or more of a quantity's change (an object's
    unnamed functions by the object: how many ran differs from shape to shape)."""
    total = v.new - v.base
    rows = [(r.get("object") or r["function"], callgrind.least_change(r) * _sign(r) / total)
            for r in explaining(v, limit)] if total else []
    return [(name, share) for name, share in rows if abs(share) >= MATTERS]


def _sign(row: dict) -> int:
    change = row["change"] if row.get("change") is not None else sum(row["change_range"])
    return 1 if change >= 0 else -1


def _alike(first: List[Tuple[str, float]], second: List[Tuple[str, float]]) -> bool:
    return [name for name, _ in first] == [name for name, _ in second] and all(
        abs(a - b) <= ALIKE for (_, a), (_, b) in zip(first, second))


def _functions(v: CountVerdict, limit: int, alike: List[CountVerdict]) -> List[str]:
    total = v.new - v.base
    rows = explaining(v, limit)
    keys = [(r["function"], r["object"]) if "object" in r else symbols.split_key(r["function"]) for r in rows]
    names = symbols.distinct([name for r, (name, _where) in zip(rows, keys) if "object" not in r], FULL)
    table = [[names.get(name, name), _path(where), callgrind.shown_count(r, "base"), callgrind.shown_count(r, "new"),
              callgrind.shown_change(r), _share(r, total)] for r, (name, where) in zip(rows, keys)]
    out = [f"**{v.label}** {v.phase}: {v.verdict} {v.change_pct:+.2f}% ({v.base:,.0f} → {v.new:,.0f})"
           + _held(rows, total), ""]
    if not rows:
        return out + ["(no stored profile on one side)", ""]
    out += [_table(table, ["Function", "Object", "Base", "New", "Change", "Share"], squeeze=0), ""]
    if alike:
        out += _prose("Alike: " + ", ".join(f"{a.label} {a.phase} ({a.change_pct:+.2f}%)" for a in alike) + ".")
    paired = v.functions.get("paired") or []
    if paired:
        first = paired[0]
        out += _prose(f"Left out: {len(paired)} unnamed function(s) counted alike at another address in the other "
                      f"build (moved, not changed), e.g. {_address(first['base_function'])} → "
                      f"{_address(first['new_function'])} ({first['kind']} {first['count']:,}).")
    return out


def _held(rows: List[dict], total: float) -> str:
    """How much of the change the rows hold together (a range where a row's change is one)."""
    if not rows or not total:
        return ""
    low = sum(r["change"] if r.get("change") is not None else min(r["change_range"], key=lambda x: x / total)
              for r in rows)
    high = sum(r["change"] if r.get("change") is not None else max(r["change_range"], key=lambda x: x / total)
               for r in rows)
    shown = [_percent(part / total) for part in (low, high)]
    return f"; these {len(rows)} hold " + (shown[0] if shown[0] == shown[1] else f"{shown[0]} to {shown[1]}") + " of it"


def _percent(share: float) -> str:
    return f"{round(share * 100) + 0:.0f}%"


def _share(row: dict, total: float) -> str:
    if not total:
        return ""
    if row.get("change") is not None:
        return _percent(row["change"] / total)
    low, high = (_percent(part / total) for part in sorted(row["change_range"], key=lambda x: x / total))
    return low if low == high else f"{low[:-1]} to {high}"


def _address(function: str) -> str:
    name, where = symbols.split_key(function)
    return f"{symbols.short_name(name)} in {where}" if where else symbols.short_name(name)


def _unnamed_object(function: str) -> Optional[str]:
    name, where = symbols.split_key(function)
    return where if where and symbols.is_unnamed(name) else None


def _table(rows, headers, squeeze: Optional[int] = None) -> str:
    """A GitHub table whose rows stay within ROW_WIDTH: the `squeeze` column's cells are cut
    (symbols.fit) to what the other columns leave."""
    from tabulate import tabulate

    cells = [[str(cell).replace("|", "\\|") for cell in row] for row in rows]
    if squeeze is not None and cells:
        others = sum(max(len(h), *(len(row[k]) for row in cells)) for k, h in enumerate(headers) if k != squeeze)
        room = max(ROW_WIDTH - others - 3 * len(headers) - 1, len(headers[squeeze]), NARROWEST)
        for row in cells:
            row[squeeze] = symbols.fit(row[squeeze], room)
    return tabulate(cells, headers, tablefmt="github", disable_numparse=True)


def _path(where: str) -> str:
    """An object or a source path within OBJECT_WIDTH: its leading folders cut (`…/Objects/call.c`),
    the file's name kept."""
    if len(where) <= OBJECT_WIDTH:
        return where
    tail = where[-(OBJECT_WIDTH - 1):]
    folder = tail.find("/")
    return symbols.ELLIPSIS + (tail[folder:] if 0 <= folder < len(tail) - 1 else tail)


def _prose(text: str) -> List[str]:
    return prose.paragraph(text, PROSE_WIDTH)


def _bullet(text: str) -> List[str]:
    return prose.bullet(text, PROSE_WIDTH)
