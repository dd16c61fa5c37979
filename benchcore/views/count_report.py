"""A counted sweep in its report: the settings' `valgrind` block and the Markdown of the counts.

Both suites' sweeps under `--engine instructions` record how the counts were taken (the
launcher, valgrind's version, the simulated caches) and which code paths the libraries took
natively and under valgrind (benchcore.measure.instructions.faithfulness), and show every case's counts
as a table: the suites' own tables are of times.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

from benchcore.measure.instructions import PHASES, UNITS, counts_of, faithfulness
from benchcore.report.model import CaseResult

COLUMNS = ("Ir", "cycles_est", "L1_misses", "LL_misses")


def settings_block(record: Optional[dict], results: List[CaseResult], probed: Dict[str, dict]) -> Optional[dict]:
    """The report's settings.valgrind: the engine's record plus the code paths, from the probes'
    processes (`probed`: benchcore.execute.code_path.probe_both) and the counted workers (None:
    not counted)."""
    if not record:
        return None
    counted = [(r.metrics or {}).get("code_path") for r in results if r.ok]
    return dict(record, code_path=faithfulness(probed, counted))


def probed_settings(record: Optional[dict], results: List[CaseResult], probes,
                    python: Optional[str] = None) -> Optional[dict]:
    """settings_block with the probes run now (natively and under the record's launcher), under
    `python`: the interpreter the results' workers ran under (an A/B side's; None: this one), so a
    side's report records its own libraries' code paths."""
    if not record:
        return None
    from benchcore.execute.code_path import probe_both

    return settings_block(record, results, probe_both(record["launcher"], probes, python))


def warning(block: Optional[dict]) -> Optional[str]:
    """The one line a sweep prints when the code paths differ."""
    return ((block or {}).get("code_path") or {}).get("warning")


def markdown_section(results: List[CaseResult], label: Callable[[CaseResult], str], block: Optional[dict]) -> List[str]:
    """Every counted case: per phase, the median of each quantity and the spread between repeats."""
    from tabulate import tabulate

    rows = []
    for result in results:
        if not result.ok:
            continue
        for phase in PHASES:
            counts = {name: counts_of(result.metrics, phase, name) for name in COLUMNS}
            if counts["Ir"] is None:
                continue
            rows.append([label(result), phase]
                        + ["" if counts[n] is None else f"{counts[n].median:,.0f}" for n in COLUMNS]
                        + [f"{counts['Ir'].spread * 100:.3f}%", len(counts["Ir"].samples)])
    out = ["## Instruction counts", "",
           "Per call, under callgrind (docs/INSTRUCTIONS.md): medians of the repeats; *Ir spread* is (largest - "
           f"smallest) / median of the repeats' instructions. Units: {', '.join(f'{k} {v}' for k, v in UNITS.items())}; "
           "cycles_est = L1 hits + 5 LL hits + 35 RAM accesses.", ""]
    if block and block.get("cache_sim"):
        out += ["Simulated caches: " + ", ".join(f"{k} {v}" for k, v in block["cache_sim"].items()) + " (size, ways, line).",
                ""]
    note = warning(block)
    if note:
        out += [f"**Warning:** {note}.", ""]
    headers = ["Case", "Phase", *COLUMNS, "Ir spread", "Repeats"]
    out += [tabulate(rows, headers, tablefmt="github", disable_numparse=True) if rows else "(no case was counted)", ""]
    return out
