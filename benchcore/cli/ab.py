"""The A/B run: the same cases under two Python environments, interleaved, judged in one go.

How a change to a framework is checked. Two sweeps run an hour apart differ as a whole by
several percent on a shared machine (docs/COMPARING.md); rounds measure the noise inside a
sweep, not that drift. An A/B run times both environments in one sitting, alternating them case
by case and round by round (ABBA: base new, new base, …; benchcore.execute.rounds.RoundPlan.slots), each
side in its own worker processes, so whatever the machine does hits both sides alike. Both
sides run this suite's benchmark code (put first on their PYTHONPATH) with their own frameworks.

Output, in one folder: base.json and new.json (ordinary reports, each with its own side's
environment), comparison.md and comparison.json.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict

from benchcore.cli.commands import (
    add_gate_arguments,
    comparison_text,
    judge,
    report_gate,
)
from benchcore.cli.options import render_report
from benchcore.cli.request import SweepRequest
from benchcore.execute.sweep import check_side_python
from benchcore.report.model import (
    Report,
    check_writable,
    ensure_folder,
    write_text_atomic,
)
from benchcore.suite import Suite

SIDES = ("base", "new")
OUTPUT_FILES = ("base.json", "new.json", "comparison.md", "comparison.json")
CHECKPOINT = "ab.checkpoint.jsonl"


def add_ab_arguments(parser, default_dir: str) -> None:
    group = parser.add_argument_group("A/B run")
    group.add_argument("--base-python", required=True, metavar="PATH",
                       help="the baseline environment's python (e.g. venv-old/bin/python)")
    group.add_argument("--new-python", required=True, metavar="PATH",
                       help="the environment to judge (the same one twice is a valid A/A check)")
    group.add_argument("-o", "--output", "--output-dir", dest="output_dir", default=default_dir, metavar="DIR",
                       help=f"where base.json, new.json and comparison.md/json go (default {default_dir})")
    add_gate_arguments(group)


def plan(request: SweepRequest, suite: Suite) -> Dict[str, str]:
    """Check both interpreters and the output folder before anything runs; side → python."""
    sides = request.ab
    pythons = {side: check_side_python(python, f"--{side}-python", suite)
               for side, python in zip(SIDES, (sides.base_python, sides.new_python))}
    folder = ensure_folder(sides.output_dir, "A/B output folder", "choose a writable folder")
    if not request.resume:
        for name in OUTPUT_FILES:
            check_writable(folder / name, request.overwrite)
    return pythons


def checkpoint_path(request: SweepRequest) -> Path:
    return Path(request.ab.output_dir).expanduser() / CHECKPOINT


def warn_code_paths(prog: str, reports: Dict[str, Report]) -> None:
    """Each side's warning where its libraries take other code paths under valgrind than
    natively (its own probes, under its own python: benchcore.execute.code_path)."""
    from benchcore.views import count_report

    for side in SIDES:
        note = count_report.warning((reports[side].settings or {}).get("valgrind"))
        if note:
            print(f"{prog}: warning: {side}: {note}", file=sys.stderr)


def finish(suite: Suite, reports: Dict[str, Report], request: SweepRequest) -> int:
    """Write both reports and their comparison; the exit status (gate, or failed cases)."""
    folder = Path(request.ab.output_dir).expanduser()
    written = []
    for side in SIDES:
        text = render_report(reports[side], "json", None, suite)
        written.append(write_text_atomic(folder / f"{side}.json", text + "\n", request.overwrite))
    result = judge(suite, reports["base"], reports["new"], request.ab,
                   sources=(str(folder / "base.json"), str(folder / "new.json")), allow_env_mismatch=True)
    for name, fmt in (("comparison.md", "md"), ("comparison.json", "json")):
        text = comparison_text(result, fmt, folder / name, None)
        written.append(write_text_atomic(folder / name, text + "\n", request.overwrite))
    sys.stdout.write(comparison_text(result, "md", folder / "comparison.md", None) + "\n")
    for path in written:
        print(f"{suite.name}: wrote {path}", file=sys.stderr)
    status = report_gate(suite.name, result.gate) if result.gate is not None else 0
    failed = any(r.failures for r in reports.values())
    return status or (1 if failed else 0)
