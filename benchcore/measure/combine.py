"""One case's per-round metrics → one metrics dict, by structure and the suite's rules.

A sweep of N rounds (benchcore.execute.rounds) times each case in N worker processes; a suite's
combiner (benchcore.suite.Suite.combine_rounds) builds on combine_metrics to make one metrics dict
of them, whose Measurements keep their round boundaries.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchcore.measure import modes
from benchcore.measure.measurement import Measurement

#: Rules that combine one metric's per-round values: by leaf key name.
Rules = Dict[str, Callable[[list], Any]]

#: What every suite's metrics share: the timed runs' total adds up, and a case is capped when
#: any round ran out of --max-time.
COMMON_RULES: Rules = {"timed_total_ms": sum, "capped": any}
#: Keys of a metrics dict whose per-round value is a list of one record per round (the runner's
#: `steady` record, the worker's `contention` record): combined rounds concatenate them, one entry
#: per round in the rounds' order.
PER_ROUND_RECORDS = ("steady", "contention")


def combine_metrics(per_round: List[dict], rules: Optional[Rules] = None,
                    sample_lists: Sequence[str] = ()) -> dict:
    """Per-round metrics dicts → one, by structure:

    - a Measurement dict (it has `samples_ms`) becomes one Measurement over all rounds, its
      samples keeping their round boundaries;
    - a per-round record list (PER_ROUND_RECORDS) is concatenated: one entry per round;
    - a list under a key in `sample_lists` (e.g. a profiler's `per_call_ms`) is concatenated,
      with a sibling `round_sizes`;
    - a number (or flag) whose key has a rule (COMMON_RULES plus `rules`) gets the rule's value
      (the same key elsewhere holding text, e.g. a reason under `missing`, is a plain leaf);
    - any other leaf keeps its value when the rounds agree; when they differ, the first round's
      value stays and all of them are listed under `round_values` by their dotted path, so
      nothing a round measured is dropped.
    """
    all_rules = {**COMMON_RULES, **(rules or {})}
    differing: Dict[str, list] = {}
    combined = _combine(per_round, all_rules, tuple(sample_lists), "", differing)
    if differing:
        combined["round_values"] = differing
    _name_causes(combined)
    return combined


def _name_causes(combined) -> None:
    """A top-level Measurement with two speeds gets their likely cause from the rounds'
    contention records (benchcore.measure.modes.described)."""
    records = combined.get("contention") if isinstance(combined, dict) else None
    if not records:
        return
    for value in combined.values():
        if isinstance(value, dict) and isinstance(value.get("modes"), dict) and isinstance(value.get("samples_ms"), list):
            value["modes"] = modes.described(Measurement.from_dict(value), records) or value["modes"]


def _combine(values: list, rules: Rules, sample_lists: Tuple[str, ...], path: str, differing: Dict[str, list]):
    present = [v for v in values if v is not None]
    if not present:
        return None
    if all(isinstance(v, dict) for v in present):
        if all(isinstance(v.get("samples_ms"), list) for v in present):
            return Measurement.from_rounds([v["samples_ms"] for v in present], present[0].get("metadata")).to_dict()
        if all(isinstance(v.get("samples"), list) and "unit" in v for v in present):  # instruction Counts
            from benchcore.measure.instructions import Counts

            return Counts.from_rounds([Counts.from_dict(v) for v in present]).to_dict()
        return _combine_dict(present, rules, sample_lists, path, differing)
    if all(v == present[0] for v in present) and len(present) == len(values):
        return present[0]
    differing[path] = values
    return present[0]


def _combine_dict(dicts: List[dict], rules: Rules, sample_lists, path: str, differing) -> dict:
    keys: List[str] = []
    for d in dicts:
        keys += [k for k in d if k not in keys]
    out: Dict[str, Any] = {}
    for key in keys:
        values = [d.get(key) for d in dicts]
        where = f"{path}.{key}" if path else key
        if key in PER_ROUND_RECORDS and all(isinstance(v, list) for v in values):
            out[key] = [x for v in values for x in v]
        elif key in sample_lists and all(isinstance(v, list) for v in values):
            out[key] = [x for v in values for x in v]
            out["round_sizes"] = [len(v) for v in values]
        elif key in rules and all(isinstance(v, (int, float)) for v in values):  # not a reason string
            out[key] = rules[key](values)
        else:
            out[key] = _combine(values, rules, sample_lists, where, differing)
    return out


def median(values: list):
    """A rule for per-process costs (a build or compile time): the typical round's."""
    return statistics.median(values)
