"""Rows: a report or a comparison as a tidy table, one row per case × phase, for CSV and pandas.

The JSON report nests (spec, metrics, profiler blocks, per-operator keys); a spreadsheet or a
data frame wants one flat row per quantity with the same columns for every suite. The figure in
each row is the case's headline (benchcore.views.headline), named as in every other view.

    >>> import benchcore.views.rows, pandas
    >>> frame = pandas.DataFrame(benchcore.views.rows.load_rows("opbench.json"))

`pandas.read_csv` reads what `-f csv` writes as is (one header line, no index column).
"""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional

from benchcore.report.efficiency import NO_EFFICIENCY
from benchcore.suite import declared
from benchcore.views.headline import Headline, headlines

if TYPE_CHECKING:
    from benchcore.compare.verdicts import Comparison
    from benchcore.report.model import CaseResult, Report
    from benchcore.suite import Suite

#: a phase's efficiency against the machine's roofs (benchcore.report.efficiency); empty where
#: the report has none, and efficiency_reason says why a figure is empty
EFFICIENCY_COLUMNS = ("bytes", "flops", "gb_per_s", "gflop_per_s", "intensity", "percent_of_roof", "roof_ms",
                      "to_win_ms", "efficiency_reason")
#: the columns of a report's rows, in order
REPORT_COLUMNS = ("suite", "framework", "case", "variant", "category", "inputs", "dtype", "device", "engine",
                  "phase", "figure", "unit", "median_ms", "iqr_ms", "relative_iqr", "round_spread", "rounds",
                  "samples", "noisy", "bimodal", "fast_ms", "slow_ms", *EFFICIENCY_COLUMNS, "status", "error", "key")
#: the columns of a comparison's rows, in order
COMPARISON_COLUMNS = ("suite", "case", "category", "phase", "base_ms", "new_ms", "ratio", "change_pct",
                      "verdict", "basis", "q_value", "ratio_low", "ratio_high", "detectable_ratio", "rounds_base",
                      "rounds_new", "key")


def shape_text(value) -> str:
    """A parameter value as a person writes it: a tensor description as its shape `(4,6)`,
    a list of them in brackets, a string as it is, anything else as JSON (`true`, `1`, `null`)."""
    if isinstance(value, dict) and "shape" in value:
        return "(" + ",".join(str(n) for n in value["shape"]) + ")"
    if isinstance(value, list) and value and all(isinstance(v, dict) and "shape" in v for v in value):
        return "[" + " ".join(shape_text(v) for v in value) + "]"
    if isinstance(value, str):  # already written for people (opperf's `"(4, 6)"`)
        return value
    return json.dumps(value, separators=(",", ":"), default=str)


def inputs_text(inputs) -> str:
    """Readable inputs: `lhs (4,6), rhs (1,6), axis=1`."""
    if not isinstance(inputs, dict):
        return "" if inputs is None else shape_text(inputs)
    parts = []
    for name, value in inputs.items():
        text = shape_text(value)
        parts.append(f"{name} {text}" if text.startswith(("(", "[")) else f"{name}={text}")
    return ", ".join(parts)


def _case_columns(report: "Report", result: "CaseResult", suite: "Suite") -> dict:
    """The columns that describe the case (not its figure); the framework, where neither the case
    nor the settings name one, is the suite's only framework (rnnbench: torch)."""
    params, settings = result.spec.params, report.settings
    only = suite.frameworks[0] if len(suite.frameworks) == 1 else ""
    return {
        "suite": report.suite,
        "framework": params.get("framework") or settings.get("framework") or only,
        "case": params.get("op", result.spec.name),
        "variant": params.get("variant") or "",
        "category": params.get("category") or params.get("group") or "",
        "inputs": inputs_text(suite.case_inputs(result)),
        "dtype": params.get("dtype") or settings.get("dtype") or "",
        "device": params.get("device") or params.get("ctx") or "",
        "engine": settings.get("profiler") or report.environment.get("timer") or "",
        "status": result.status,
        "error": result.error or "",
        "key": result.spec.key,
    }


def _figure_columns(h: Optional[Headline]) -> dict:
    if h is None:
        return {"phase": "", "figure": "", "unit": "", "median_ms": None, "iqr_ms": None, "relative_iqr": None,
                "round_spread": None, "rounds": None, "samples": None, "noisy": None, "bimodal": "", "fast_ms": None,
                "slow_ms": None}
    return {"phase": h.phase, "figure": h.figure, "unit": h.unit, "median_ms": h.median_ms, "iqr_ms": h.iqr_ms,
            "relative_iqr": h.relative_iqr, "round_spread": h.round_spread, "rounds": h.rounds,
            "samples": h.samples, "noisy": h.noisy, "bimodal": h.bimodal or "", "fast_ms": h.fast_ms,
            "slow_ms": h.slow_ms}


def _efficiency_columns(stored: Optional[dict]) -> dict:
    found = {column: (stored or {}).get(column) for column in EFFICIENCY_COLUMNS[:-1]}
    reason = stored.get("reason") if stored else NO_EFFICIENCY
    return {**found, "efficiency_reason": reason or ""}


def _stored_headlines(result: "CaseResult") -> Optional[Dict[str, Headline]]:
    stored = (result.metrics or {}).get("headline")
    if not isinstance(stored, dict):
        return None
    return {phase: Headline.from_dict(data) for phase, data in stored.items()}


def report_rows(report: "Report", suite: Optional["Suite"] = None) -> List[dict]:
    """One dict per case × measured phase (a case measured in no phase, e.g. a failed one:
    one row with an empty phase), columns REPORT_COLUMNS."""
    rows, stored = [], suite is None
    suite = suite or declared(report.suite)
    for result in report.results:
        found = _stored_headlines(result) if stored else None
        if found is None:
            found = headlines(result, suite)
        case = _case_columns(report, result, suite)
        efficiency = (result.metrics or {}).get("efficiency") or {}
        for h in list(found.values()) or [None]:
            row = {**case, **_figure_columns(h), **_efficiency_columns(efficiency.get(h.phase) if h else None)}
            rows.append({column: row[column] for column in REPORT_COLUMNS})
    return rows


def comparison_rows(comparison: "Comparison") -> List[dict]:
    """One dict per compared case × phase, columns COMPARISON_COLUMNS (ratio: the judged one,
    new/base with the machine's drift divided out where it was)."""
    rows = []
    for case in comparison.cases:
        for m in case.metrics:
            ratio = m.judged_ratio
            rows.append({"suite": comparison.suite, "case": case.label, "category": case.category,
                         "phase": m.metric, "base_ms": m.base_ms, "new_ms": m.new_ms, "ratio": ratio,
                         "change_pct": None if ratio is None else (ratio - 1) * 100, "verdict": m.verdict,
                         "basis": m.basis, "q_value": m.q_value, "ratio_low": m.ratio_low,
                         "ratio_high": m.ratio_high, "detectable_ratio": m.detectable_ratio,
                         "rounds_base": m.rounds_base, "rounds_new": m.rounds_new, "key": case.key})
    return rows


def to_csv(rows: Iterable[dict], columns: Iterable[str]) -> str:
    """CSV text with a header line; None is an empty cell, booleans `True`/`False` (pandas reads
    both as a bool column)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return out.getvalue()


def load_rows(path) -> List[dict]:
    """The tidy rows of a JSON report on disk (any suite, any schema version this tool reads)."""
    from benchcore.report.model import Report

    return report_rows(Report.load(path))
