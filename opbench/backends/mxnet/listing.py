"""`opbench --list [--all]` for MXNet: operator, category, backward_op, backward_timed, cases.

backward_op says where an operator's gradient comes from: `own` (a `_backward_<name>` operator,
opperf's has_backward), `shared` (differentiable through other operators' backward, e.g.
batch_dot: opperf counts it as having none, yet its backward is timed), `none`."""

from __future__ import annotations

import sys

from . import categories, registry
from .cases import integer_dtype_reason


def list_operators(backend, request, device: str, everything: bool = False) -> int:
    """The operators a run with the same flags covers (plus, with --all alone, the filtered ones)."""
    from tabulate import tabulate

    plan = backend.plan(request, device)
    planned: dict = {}
    for spec in plan.specs:
        planned.setdefault(spec.params["op"], []).append(spec)
    no_case = dict(plan.skipped)
    rows = []
    counts = {"has_backward": 0, "differentiable": 0, "timed": 0}
    for name in set(planned) | set(no_case):
        info = registry.get(name)
        cases = str(len(planned[name])) if name in planned else f"none: {no_case[name]}"
        counts["has_backward"] += info.has_backward
        counts["differentiable"] += bool(info.differentiable)
        counts["timed"] += any(s.params["run_backward"] for s in planned.get(name, ()))
        rows.append([name, categories.category_of(name) or "-", backward_op(info),
                     backward_cell(info, planned.get(name)), cases, info.reason or ""])
    selected = len(rows)
    if everything and not (request.category or request.ops):
        rows += [[info.name, "-", backward_op(info), "-", "-", info.reason]
                 for info in registry.scan() if not info.selected]
    rows.sort(key=lambda row: row[0])
    headers = ["operator", "category", "backward_op", "backward_timed", "cases"] + (
        ["filtered because"] if everything else [])
    if not everything:
        rows = [row[:5] for row in rows]
    print(tabulate(rows, headers=headers, tablefmt="simple"))
    print(f"\n{selected} selected operators" + (f", {len(rows) - selected} filtered" if everything else "")
          + f"; has_backward (opperf: a _backward_<name> operator) {counts['has_backward']}, "
            f"differentiable {counts['differentiable']}, backward timed {counts['timed']}. backward_op: own "
            "(a _backward_<name> operator), shared (differentiable through other operators' backward), none; "
            "cases: the cases this run times", file=sys.stderr)
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


def backward_op(info) -> str:
    """own, shared or none (see the module docstring)."""
    if info.has_backward:
        return "own"
    return "shared" if info.differentiable else "none"
