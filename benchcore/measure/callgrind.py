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


@dataclass
class Dump:
    """One dump's event totals and its functions' (exclusive, inclusive) costs by name."""

    events: Tuple[str, ...]
    totals: Dict[str, int]
    functions: Dict[str, Tuple[Dict[str, int], Dict[str, int]]] = field(default_factory=dict)

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
    obj = file = ""
    current: Optional[Tuple[Dict[str, int], Dict[str, int]]] = None
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
                current = functions.setdefault(_function_key(name, file, obj), ({}, {}))
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
    return Dump(events, {event: totals.get(event, 0) for event in events}, functions)


def _function_key(name: str, file: str, obj: str) -> str:
    name = _RECURSION.sub("", name)  # callgrind's `'N` recursion depth: one function at any depth
    where = short_path(file) if file and file != "???" else PurePosixPath(obj).name
    return f"{name} [{where}]" if where else name


def read(path, with_functions: bool = True) -> Dump:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return parse(handle, with_functions)


def profile_delta(base: List[dict], new: List[dict], top: int = 10) -> Dict[str, List[dict]]:
    """The functions whose inclusive and exclusive counts moved most between two stored profiles
    (Dump.profile rows): {"inclusive": [...], "self": [...]}, largest absolute change first.

    A function in only one profile counts as 0 in the other (it fell out of the top list, or was
    renamed or inlined away by the other build).
    """
    before = {row["function"]: row for row in base or []}
    after = {row["function"]: row for row in new or []}
    found: Dict[str, List[dict]] = {}
    for kind in ("inclusive", "self"):
        rows = []
        for name in set(before) | set(after):
            old = int((before.get(name) or {}).get(kind, 0))
            now = int((after.get(name) or {}).get(kind, 0))
            if old != now:
                rows.append({"function": name, "base": old, "new": now, "change": now - old})
        rows.sort(key=lambda r: (-abs(r["change"]), r["function"]))
        found[kind] = rows[:top]
    return found
