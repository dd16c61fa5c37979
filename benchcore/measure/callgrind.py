"""A callgrind dump: its event totals and a compact per-function profile, and the difference of two.

Each counted call of the instruction engine (benchcore.measure.instructions) ends in one dump
(`CALLGRIND_DUMP_STATS_AT`), which holds only that call's cost. The totals are the figures a
report judges; the per-function profile is what says *why* a figure moved between two builds.

The format (valgrind's docs, "Callgrind Format Specification"): `events:` names the columns,
`fn=`/`fl=`/`ob=` (with `(id)` name compression) open a function's block, cost lines hold a
function's own (exclusive) cost, and a `calls=` line makes the cost line after it the inclusive
cost of one call site. A function's inclusive cost is its own plus its call sites' (recursion is
counted once per level, as callgrind_annotate --inclusive does).

Function names are kept as the demangled names callgrind writes; their source file is cut to
its last PATH_PARTS components (`/build/a/mxnet/src/operator/x.cc` → `src/operator/x.cc`), so
two builds made in other folders name the same function alike; without a source file the
shared object's file name stands in.

A stripped shared object (the MXNet wheel's libmxnet.so) names only its exported functions;
callgrind names every other function of it by its address (`0x0000000001234567`), and those
addresses do not line up between two builds. So a profile also keeps, for every shared object,
its exclusive cost in all and in its unnamed functions (`Dump.object_rows`): two builds' objects line
up by file name, and a delta can say "inside libmxnet.so, unnamed functions: -45,000" where
its functions cannot be matched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Dict, Iterable, List, Optional, Tuple

#: source path components kept of a function's file (see the module docstring)
PATH_PARTS = 3
#: functions a report keeps per case and phase (by inclusive and by exclusive Ir)
TOP_FUNCTIONS = 25
_COMPRESSED = re.compile(r"^\((\d+)\)(?:\s+(.*))?$")
_RECURSION = re.compile(r"'\d+$")
#: how callgrind names a function it has no symbol for: its address
_UNNAMED = re.compile(r"^0x[0-9a-fA-F]+$")


@dataclass
class Dump:
    """One dump's event totals, its functions' (exclusive, inclusive) costs by name, and every
    shared object's exclusive cost (all its functions, its unnamed ones) with its number of
    unnamed functions, by the object's file name."""

    events: Tuple[str, ...]
    totals: Dict[str, int]
    functions: Dict[str, Tuple[Dict[str, int], Dict[str, int]]] = field(default_factory=dict)
    objects: Dict[str, Tuple[Dict[str, int], Dict[str, int], int]] = field(default_factory=dict)

    def profile(self, event: str = "Ir", top: int = TOP_FUNCTIONS) -> List[dict]:
        """The top functions by inclusive and by exclusive `event`: [{function, self, inclusive}]."""
        total = self.totals.get(event, 0)
        # frames that only enclose the whole call (main, the interpreter's entry) say nothing
        rows = {name: (own.get(event, 0), whole.get(event, 0)) for name, (own, whole) in self.functions.items()
                if own.get(event, 0) or whole.get(event, 0) < total}
        by_self = sorted(rows, key=lambda n: (-rows[n][0], n))[:top]
        by_inclusive = sorted(rows, key=lambda n: (-rows[n][1], n))[:top]
        kept = list(dict.fromkeys(by_inclusive + by_self))
        return [{"function": n, "self": rows[n][0], "inclusive": rows[n][1]} for n in kept if rows[n][1] or rows[n][0]]

    def object_rows(self, event: str = "Ir") -> List[dict]:
        """Every shared object with exclusive cost, most first: [{object, self, unnamed_self,
        unnamed_functions}] (unnamed: the functions callgrind names by address)."""
        rows = [{"object": name, "self": own.get(event, 0), "unnamed_self": unnamed.get(event, 0),
                 "unnamed_functions": count} for name, (own, unnamed, count) in self.objects.items()
                if own.get(event, 0)]
        return sorted(rows, key=lambda r: (-r["self"], r["object"]))


def short_path(path: str) -> str:
    """A source path without its build prefix (see the module docstring)."""
    parts = PurePosixPath(path).parts
    return "/".join(p for p in parts[-PATH_PARTS:] if p != "/")


class _Names:
    """callgrind's `(id) name` compression, one table per kind of name."""

    def __init__(self):
        self.tables: Dict[str, Dict[str, str]] = {}

    def read(self, kind: str, text: str) -> str:
        table = self.tables.setdefault(kind, {})
        match = _COMPRESSED.match(text.strip())
        if not match:
            return text.strip()
        key, name = match.groups()
        if name is not None:
            table[key] = name
        return table.get(key, f"({key})")


def _costs(tokens: List[str], events: Tuple[str, ...], positions: int) -> Dict[str, int]:
    values = tokens[positions:]
    return {event: int(value) for event, value in zip(events, values) if value not in ("", "0")}


def _add(into: Dict[str, int], costs: Dict[str, int]) -> None:
    for event, value in costs.items():
        into[event] = into.get(event, 0) + value


def _is_cost_line(line: str) -> bool:
    return bool(line) and (line[0].isdigit() or line[0] in "+-*")


def parse(lines: Iterable[str], with_functions: bool = True) -> Dump:
    """A dump from its lines; with_functions=False reads only the header's totals."""
    events: Tuple[str, ...] = ()
    positions = 1
    totals: Dict[str, int] = {}
    names = _Names()
    functions: Dict[str, Tuple[Dict[str, int], Dict[str, int]]] = {}
    objects: Dict[str, list] = {}
    unnamed_seen = set()
    obj = file = ""
    current: Optional[Tuple[Dict[str, int], Dict[str, int]]] = None
    where: Optional[list] = None  # the current function's object's [own, unnamed, count]
    unnamed_costs: Optional[Dict[str, int]] = None  # its unnamed cost, where the current function is unnamed
    call_next = False
    for raw in lines:
        line = raw.rstrip("\n")
        if _is_cost_line(line):
            if current is None or not events:
                continue
            costs = _costs(line.split(), events, positions)
            if call_next:
                _add(current[1], costs)
                call_next = False
            else:
                _add(current[0], costs)
                _add(current[1], costs)
                _add(where[0], costs)
                if unnamed_costs is not None:
                    _add(unnamed_costs, costs)
            continue
        key, _, value = line.partition("=")
        if key in ("ob", "fl", "fn", "cob", "cfi", "cfl", "cfn", "fi", "fe"):
            kind = {"cob": "ob", "cfi": "fl", "cfl": "fl", "fi": "fl", "fe": "fl", "cfn": "fn"}.get(key, key)
            name = names.read(kind, value)
            if key == "ob":
                obj = name
            elif key == "fl":
                file = name
            elif key == "fn" and with_functions:
                function = _function_key(name, file, obj)
                current = functions.setdefault(function, ({}, {}))
                where = objects.setdefault(PurePosixPath(obj).name or "???", [{}, {}, 0])
                unnamed_costs = None
                if _UNNAMED.match(_RECURSION.sub("", name)):
                    unnamed_costs = where[1]
                    if (function, obj) not in unnamed_seen:
                        unnamed_seen.add((function, obj))
                        where[2] += 1
            continue
        if key == "calls":
            call_next = True
            continue
        head, _, rest = line.partition(":")
        if head == "events":
            events = tuple(rest.split())
        elif head == "positions":
            positions = len(rest.split())
        elif head in ("summary", "totals") and not totals:
            totals = {event: int(v) for event, v in zip(events, rest.split())}
            if not with_functions:
                break
    return Dump(events, {event: totals.get(event, 0) for event in events}, functions,
                {name: (own, unnamed, count) for name, (own, unnamed, count) in objects.items()})


def _function_key(name: str, file: str, obj: str) -> str:
    name = _RECURSION.sub("", name)  # callgrind's `'N` recursion depth: one function at any depth
    where = short_path(file) if file and file != "???" else PurePosixPath(obj).name
    return f"{name} [{where}]" if where else name


def read(path, with_functions: bool = True) -> Dump:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return parse(handle, with_functions)


def profile_delta(base: List[dict], new: List[dict], top: int = 10, base_objects: Optional[List[dict]] = None,
                  new_objects: Optional[List[dict]] = None, stored: int = TOP_FUNCTIONS) -> Dict[str, List[dict]]:
    """The functions whose inclusive and exclusive counts moved most between two stored profiles
    (Dump.profile rows), and with both sides' object rows (Dump.object_rows) the objects' totals:
    {"inclusive": [...], "self": [...], "objects": [...]}, largest absolute change first.

    A profile keeps each side's top `stored` functions by each kind (TOP_FUNCTIONS), so a function
    in one profile only is not known to be 0 in the other: it is below that side's stored top, at
    most that side's smallest stored count of the kind (the `stored`-th largest). Its row then holds
    null for that side and for `change`, and `below_top` {side, top, at_most} and `change_range`
    [least, most] (the change if the other side counted at_most, and if it counted 0); it is ordered
    by the smallest change it may be (0 where the range holds 0), never as a move to or from 0.
    A side that stored fewer than `stored` functions kept them all: there a missing function
    counted 0 (so did one whose bound is 0), and the row is exact. A side with no profile
    gives no function rows (nothing to compare).

    `objects` compares the shared objects' exclusive
    cost, all of it (`part` "all") and that of their unnamed functions (`part` "unnamed", with
    how many there were on each side): where a stripped object's functions, named by address,
    cannot be matched, its totals still can. Reports made before objects were kept give none.

    An unnamed function found on one side only, with exactly the count of an unnamed function of
    the same object found on the other side only, is taken to be the same function at another
    address (the two builds' kernels at other offsets): the pair is left out of that kind's list,
    where it would stand as the largest change twice over (-N and +N), and listed under `paired`
    [{kind, base_function, new_function, count}].
    """
    before = {row["function"]: row for row in base or []}
    after = {row["function"]: row for row in new or []}
    found: Dict[str, List[dict]] = {"paired": []}
    for kind in ("inclusive", "self"):
        if not before or not after:
            found[kind] = []
            continue
        bounds = {"base": _stored_bound(before, kind, stored), "new": _stored_bound(after, kind, stored)}
        rows = []
        for name in set(before) | set(after):
            old = int(before[name].get(kind, 0)) if name in before else None
            now = int(after[name].get(kind, 0)) if name in after else None
            missing = "base" if old is None else "new" if now is None else None
            if missing and not bounds[missing]:  # that side kept every function (or its bound is 0): it counted 0
                old, now, missing = old or 0, now or 0, None
            if missing is None:
                if old != now:
                    rows.append({"function": name, "base": old, "new": now, "change": now - old})
                continue
            at_most = bounds[missing]
            least, most = ((now - at_most, now) if missing == "base" else (-old, at_most - old))
            rows.append({"function": name, "base": old, "new": now, "change": None,
                         "below_top": {"side": missing, "top": stored, "at_most": at_most},
                         "change_range": [least, most]})
        rows, paired = _pair_moved(rows, before, after, kind)
        rows.sort(key=lambda r: (-least_change(r), r["function"]))
        found[kind] = rows[:top]
        found["paired"] += paired
    found["objects"] = _object_delta(base_objects, new_objects)[:top]
    return found


def _stored_bound(rows: Dict[str, dict], kind: str, stored: int) -> int:
    """The most a function missing from a side's stored profile may count of `kind`: the
    `stored`-th largest count kept (the profile keeps the top `stored` by each kind); 0 where the
    side kept fewer functions than that (it kept them all)."""
    if len(rows) < stored:
        return 0
    return sorted((int(row.get(kind, 0)) for row in rows.values()), reverse=True)[stored - 1]


def least_change(row: dict) -> int:
    """The smallest absolute change a delta row may stand for (0 where its range holds 0)."""
    if row.get("change") is not None:
        return abs(row["change"])
    least, most = row["change_range"]
    return 0 if least <= 0 <= most else min(abs(least), abs(most))


def shown_count(row: dict, side: str) -> str:
    """A delta row's count on one side, as text: the number, or where the function fell below
    that side's stored top, the bound."""
    if row.get(side) is not None:
        return f"{row[side]:,}"
    below = row["below_top"]
    return f"below top {below['top']} (≤ {below['at_most']:,})"


def shown_change(row: dict) -> str:
    """A delta row's change, as text: the number, or the range a function below one side's
    stored top allows."""
    if row.get("change") is not None:
        return f"{row['change']:+,}"
    least, most = row["change_range"]
    return f"{least:+,} to {most:+,}"


def _unnamed_object(function: str) -> Optional[str]:
    """The object of a profile row's function that callgrind named by its address (`0x… [obj]`)."""
    name, _, where = function.rpartition(" [")
    return where[:-1] if name and _UNNAMED.match(name) and where.endswith("]") else None


def _pair_moved(rows: List[dict], before: dict, after: dict, kind: str) -> Tuple[List[dict], List[dict]]:
    """Rows without the unnamed functions that only moved (see profile_delta), and the pairs."""
    gone: Dict[Tuple[str, int], List[dict]] = {}
    for row in sorted(rows, key=lambda r: r["function"]):
        where = _unnamed_object(row["function"])
        if where is not None and row["function"] not in after:
            gone.setdefault((where, row["base"]), []).append(row)
    paired: List[dict] = []
    dropped = set()
    for row in sorted(rows, key=lambda r: r["function"]):
        where = _unnamed_object(row["function"])
        if where is None or row["function"] in before:
            continue
        match = gone.get((where, row["new"]))
        if match:
            old = match.pop(0)
            dropped.update((old["function"], row["function"]))
            paired.append({"kind": kind, "base_function": old["function"], "new_function": row["function"],
                           "count": row["new"]})
    left = [row for row in rows if row["function"] not in dropped]
    return left, paired


def _object_delta(base: Optional[List[dict]], new: Optional[List[dict]]) -> List[dict]:
    sides = [{row["object"]: row for row in rows or []} for rows in (base, new)]
    if not sides[0] or not sides[1]:
        return []
    rows = []
    for name in set(sides[0]) | set(sides[1]):
        old, now = sides[0].get(name) or {}, sides[1].get(name) or {}
        for part, key, label in (("all", "self", "all its code"), ("unnamed", "unnamed_self", "unnamed functions")):
            a, b = int(old.get(key, 0)), int(now.get(key, 0))
            if a == b:
                continue
            row = {"function": f"{name}: {label}", "object": name, "part": part, "base": a, "new": b,
                   "change": b - a}
            if part == "unnamed":
                row["functions"] = [int(old.get("unnamed_functions", 0)), int(now.get("unnamed_functions", 0))]
                row["function"] += f" ({row['functions'][0]:,} → {row['functions'][1]:,})"
            rows.append(row)
    rows.sort(key=lambda r: (-abs(r["change"]), r["function"]))
    return rows
