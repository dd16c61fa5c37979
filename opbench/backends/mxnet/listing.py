"""`opbench --list [--all]` for MXNet: operator, category, has_backward, backward timed, input rule."""

from __future__ import annotations

import sys

from . import categories, registry
from .cases import integer_dtype_reason


def list_operators(backend, args, device: str) -> int:
    """The operators a run with the same flags covers (plus, with --all alone, the filtered ones)."""
    from tabulate import tabulate

    plan = backend.plan(args, device)
    planned: dict = {}
    for spec in plan.specs:
        planned.setdefault(spec.params["op"], []).append(spec)
    no_case = dict(plan.skipped)
    rows = []
    counts = {"has_backward": 0, "differentiable": 0, "timed": 0}
    for name in set(planned) | set(no_case):
        info = registry.get(name)
        rule = "yes" if name in planned else f"no: {no_case[name]}"
        counts["has_backward"] += info.has_backward
        counts["differentiable"] += bool(info.differentiable)
        counts["timed"] += any(s.params["run_backward"] for s in planned.get(name, ()))
        rows.append([name, categories.category_of(name) or "-", _yes(info.has_backward),
                     backward_cell(info, planned.get(name)), rule, info.reason or ""])
    selected = len(rows)
    if args.all and not (args.category or args.ops):
        rows += [[info.name, "-", _yes(info.has_backward), "-", "-", info.reason]
                 for info in registry.scan() if not info.selected]
    rows.sort(key=lambda row: row[0])
    headers = ["operator", "category", "has_backward", "backward timed", "input rule"] + (
        ["filtered because"] if args.all else [])
    if not args.all:
        rows = [row[:5] for row in rows]
    print(tabulate(rows, headers=headers, tablefmt="simple"))
    print(f"\n{selected} selected operators" + (f", {len(rows) - selected} filtered" if args.all else "")
          + f"; has_backward (opperf: a _backward_<name> operator) {counts['has_backward']}, "
            f"differentiable {counts['differentiable']}, backward timed {counts['timed']}", file=sys.stderr)
    return 0


def backward_cell(info, specs) -> str:
    """The --list "backward timed" cell: yes, how many cases, or no and why (short)."""
    planned = [bool(spec.params["run_backward"]) for spec in specs or ()]
    if planned and all(planned):
        return "yes"
    if planned and any(planned):
        return f"{sum(planned)} of {len(planned)} cases"
    if info.differentiable is False:
        return "no: not differentiable"
    if info.zero_gradient:
        return "no: zero gradient"
    if info.backward_off:
        return "no: off (opperf's list)"
    if not planned:
        return "-"
    if integer_dtype_reason(specs[0].params["dtype"]):
        return "no: integer dtype"
    return "no"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
