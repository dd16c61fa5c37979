"""Rounds: the case list timed N times, each time in fresh worker processes and a new order.

Why: on this kind of machine the variance of a timing lies mostly *between* processes (memory
layout, caches, the machine's state that minute), not inside one. Fifty samples from one
process say a lot about that process and little about the build; a comparison must rest on
several processes per side. So a sweep of N rounds runs the whole case list N times, each
round in a new worker and in its own shuffled order (so no case always runs after the same
neighbour, or always early while the machine is cool), with the measured runs split over the
rounds. Each case's per-round metrics are then combined into one result whose samples keep
their round boundaries (benchcore.stats.Measurement.round_sizes).

An A/B run (`ab`) schedules two sides the same way and alternates them case by case, ABBA, so
that drift of the machine hits both sides alike.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .case import CaseSpec
from .errors import UsageError
from .isolation import Slot
from .report import CaseResult
from .stats import Measurement

#: Rules that combine one metric's per-round values: by leaf key name.
Rules = Dict[str, Callable[[list], Any]]
#: function(per-round metrics dicts) → one metrics dict: a suite's combiner
Combiner = Callable[[List[dict]], dict]

#: What every suite's metrics share: the timed runs' total adds up, and a case is capped when
#: any round ran out of --max-time.
COMMON_RULES: Rules = {"timed_total_ms": sum, "capped": any}
#: The status a case gets when its rounds disagree: the worst one (a crash in one round of five
#: is a crash, not a footnote).
STATUS_ORDER = ("crashed", "timeout", "failed", "skipped", "ok")


#: Warmup iterations every round gets, when the warmup asked for has at least this many: a
#: fresh process must reach steady state again (first-call allocation, MKLDNN primitives,
#: TorchScript's profiling executor, which optimises after its first profiled run). Measured
#: (docs/COMPARING.md): after the warmup, the first timed iterations of a round run a few percent
#: slow on average, which moves a round's median by under 1%, against 10-15% between rounds on
#: this machine; a floor of 5 instead cost rnnbench's default group 1.6x the wall time of one
#: round (15 warmup iterations instead of 5), a floor of 2 keeps it near 1.1x.
WARMUP_FLOOR = 2


@dataclass(frozen=True)
class RoundPlan:
    """How a sweep's iterations are spread over rounds, and the seed of the rounds' orders.

    The measured runs and the warmup are split over the rounds (ceil(runs / rounds) each; the
    warmup likewise, but never below WARMUP_FLOOR), so N rounds cost about what one round did
    plus N - 1 worker starts and per-case setups.
    """

    rounds: int = 1
    order_seed: int = 0

    def __post_init__(self):
        if self.rounds < 1:
            raise UsageError(f"--rounds must be at least 1, got {self.rounds}")

    def runs_per_round(self, runs: int) -> int:
        return max(1, math.ceil(runs / self.rounds))

    def warmup_per_round(self, warmup: int) -> int:
        return max(math.ceil(warmup / self.rounds), min(warmup, WARMUP_FLOOR))

    def order(self, specs: Sequence[CaseSpec], round_number: int) -> List[CaseSpec]:
        """The case order of one round: as given for a single round, else shuffled with a
        generator seeded by (order_seed, round), so a resumed run repeats it exactly."""
        ordered = list(specs)
        if self.rounds > 1:
            random.Random(f"{self.order_seed}/{round_number}").shuffle(ordered)
        return ordered

    def slots(self, specs: Sequence[CaseSpec], sides: Sequence[str] = ("",)) -> List[Slot]:
        """Every case of every round; with two sides, alternated ABBA case by case (A B, B A,
        A B, …, continuing across rounds), so each side runs first half of the time."""
        slots: List[Slot] = []
        pair = 0
        for number in range(1, self.rounds + 1):
            for spec in self.order(specs, number):
                turn = sides if pair % 2 == 0 else tuple(reversed(sides))
                slots += [Slot(spec, number, side) for side in turn]
                pair += 1
        return slots

    def to_dict(self) -> dict:
        return {"rounds": self.rounds, "order_seed": self.order_seed}


# --------------------------------------------------------------------------- combining rounds


def combine_results(slot_results: Iterable[Tuple[Slot, CaseResult]], specs: Sequence[CaseSpec],
                    combine: Combiner, side: str = "") -> List[CaseResult]:
    """One CaseResult per spec (in the given order) from its rounds on `side`."""
    by_key: Dict[str, List[Tuple[Slot, CaseResult, int]]] = {}
    positions: Dict[tuple, int] = {}
    for slot, result in slot_results:
        position = positions.setdefault((slot.side, slot.round), 0)
        positions[(slot.side, slot.round)] += 1
        if slot.side == side:
            by_key.setdefault(slot.spec.key, []).append((slot, result, position))
    return [combine_case(spec, by_key.get(spec.key, []), combine) for spec in specs]


def combine_case(spec: CaseSpec, rounds: List[Tuple[Slot, CaseResult, int]], combine: Combiner) -> CaseResult:
    """A case's rounds → one result: the worst status, the ok rounds' metrics combined, and
    a record per round. A single round is returned as it ran (no rounds record)."""
    if not rounds:
        raise ValueError(f"no round of case {spec.key} ran")
    if len(rounds) == 1:
        return rounds[0][1]
    results = [result for _slot, result, _pos in rounds]
    worst = min(results, key=lambda r: STATUS_ORDER.index(r.status))
    ok = [r.metrics for r in results if r.ok]
    nodes = {r.node for r in results}
    return CaseResult(
        spec=spec,
        status=worst.status,
        metrics=combine(ok) if ok else worst.metrics,
        error=_round_errors([(slot.round, r) for slot, r, _pos in rounds]),
        stderr_tail=worst.stderr_tail,
        wall_s=sum(r.wall_s or 0.0 for r in results),
        rounds=[{"round": slot.round, "position": pos, "status": r.status, "wall_s": r.wall_s,
                 **({"error": r.error} if r.error else {}), **({"node": r.node} if r.node else {})}
                for slot, r, pos in rounds],
        node=nodes.pop() if len(nodes) == 1 else None,
    )


def _round_errors(rounds: List[Tuple[int, CaseResult]]) -> Optional[str]:
    """The errors of the rounds that did not end ok, each error once with the rounds it ended
    (a deterministic failure reads as itself, not repeated per round)."""
    by_error: Dict[str, List[int]] = {}
    for number, result in rounds:
        if not result.ok and result.error:
            by_error.setdefault(result.error, []).append(number)
    if not by_error:
        return None
    every = len(rounds)
    parts = [error if len(numbers) == every else f"{error} (round{'s' if len(numbers) > 1 else ''} "
             f"{', '.join(map(str, numbers))} of {every})" for error, numbers in by_error.items()]
    return "; ".join(parts)


def combine_metrics(per_round: List[dict], rules: Optional[Rules] = None,
                    sample_lists: Sequence[str] = ()) -> dict:
    """Per-round metrics dicts → one, by structure:

    - a Measurement dict (it has `samples_ms`) becomes one Measurement over all rounds, its
      samples keeping their round boundaries;
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
    return combined


def _combine(values: list, rules: Rules, sample_lists: Tuple[str, ...], path: str, differing: Dict[str, list]):
    present = [v for v in values if v is not None]
    if not present:
        return None
    if all(isinstance(v, dict) for v in present):
        if all(isinstance(v.get("samples_ms"), list) for v in present):
            return Measurement.from_rounds([v["samples_ms"] for v in present], present[0].get("metadata")).to_dict()
        if all(isinstance(v.get("samples"), list) and "unit" in v for v in present):  # instruction Counts
            from .instructions import Counts

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
        if key in sample_lists and all(isinstance(v, list) for v in values):
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
