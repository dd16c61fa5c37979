"""`opbench --framework torch --list [--all]`: what a run with the same flags times."""

from __future__ import annotations

import json
import sys


def list_operators(backend, request, device: str, everything: bool = False) -> int:
    """Entry, category, backward timed (or why not), inputs at the chosen scale, strategy; with
    --all also every OpInfo entry left out, with the reason."""
    from tabulate import tabulate

    plan = backend.plan(request, device)
    rows = []
    for spec in plan.specs:
        p = spec.params
        backward = "yes" if p["run_backward"] else f"no: {p.get('no_backward_reason')}"
        rows.append([spec.name, p["category"], backward[:70], _inputs(p["inputs"]), f"k={p['scale']}"])
    timed = len(rows)
    if everything:
        rows += [[name, "-", "-", "-", f"left out: {reason[:110]}"] for name, reason in plan.skipped]
    rows.sort(key=lambda row: row[0])
    print(tabulate(rows, headers=["operator", "category", "backward timed", "inputs", "scale"], tablefmt="simple"))
    backward = sum(spec.params["run_backward"] for spec in plan.specs)
    record = plan.settings["manifest"]
    print(f"\n{timed} OpInfo entries timed (forward), {backward} with backward; {len(plan.skipped)} left out"
          f"{'' if everything else ' (--all lists them with the reason)'}; manifest {record['path']} "
          f"(torch {record['torch']}, size target {record['size_target']})", file=sys.stderr)
    return 0


def _inputs(inputs: dict) -> str:
    text = json.dumps([inputs["input"], *inputs["args"]] + ([inputs["kwargs"]] if inputs["kwargs"] else []))
    return text if len(text) <= 90 else text[:87] + "..."
