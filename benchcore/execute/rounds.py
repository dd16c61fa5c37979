"""Rounds: the case list timed N times, each time in fresh worker processes and a new order.

Why: on this kind of machine the variance of a timing lies mostly *between* processes (memory
layout, caches, the machine's state that minute), not inside one. Fifty samples from one
process say a lot about that process and little about the build; a comparison must rest on
several processes per side. So a sweep of N rounds runs the whole case list N times, each
round in a new worker and in its own shuffled order (so no case always runs after the same
neighbour, or always early while the machine is cool), with the measured runs split over the
rounds. Each case's per-round metrics are then combined into one result whose samples keep
their round boundaries (benchcore.measure.measurement.Measurement.round_sizes).

An A/B run (`ab`) schedules two sides the same way and alternates them case by case, ABBA, so
that drift of the machine hits both sides alike.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from benchcore.errors import UsageError
from benchcore.execute.checkpoint import Short, Slot
from benchcore.measure.case import CaseSpec
from benchcore.report.model import CaseResult

#: function(per-round metrics dicts) → one metrics dict: a suite's combiner
Combiner = Callable[[List[dict]], dict]

#: The status a case gets when its rounds disagree: the worst one (a crash in one round of five
#: is a crash, not a footnote).
STATUS_ORDER = ("crashed", "timeout", "failed", "skipped", "ok")


@dataclass(frozen=True)
class RoundPlan:
    """How a sweep's iterations are spread over rounds, and the seed of the rounds' orders.

    The measured runs are split over the rounds as evenly as they go (10 over 3: 4, 3, 3), so a
    sweep times exactly the runs asked for (at least one per round); the warmup is not split:
    warmup exists to bring a process to steady state, and every round is a fresh process, so
    every round runs the whole warmup asked for (docs/STEADY_STATE.md: split, the first timed
    calls of every round of a TorchScript runner were its compilation). N rounds cost what one
    round did plus N - 1 worker starts, per-case setups and warmups.
    """

    rounds: int = 1
    order_seed: int = 0

    def __post_init__(self):
        if self.rounds < 1:
            raise UsageError(f"--rounds must be at least 1, got {self.rounds}")

    def runs_per_round(self, runs: int) -> List[int]:
        """Each round's measured runs, in round order (the first rounds take the remainder)."""
        base, remainder = divmod(runs, self.rounds)
        return [max(1, base + (1 if number < remainder else 0)) for number in range(self.rounds)]

    def warmup_per_round(self, warmup: int) -> int:
        """Every round is a fresh process: it warms up as much as one process would."""
        return warmup

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

    def added_slots(self, added: Sequence[Tuple[CaseSpec, Optional[Short]]], sides: Sequence[str], first: int,
                    count: int) -> List[Slot]:
        """Rounds `first` .. `first + count - 1` of the `added` cases only: the rounds an A/B run
        adds to the cases it has not decided (benchcore.compare.sequential), each with its short
        round's calls (None: a planned round's), shuffled and alternated as planned rounds are,
        each side first in half of them."""
        slots: List[Slot] = []
        for number in range(first, first + count):
            ordered = list(added)
            random.Random(f"{self.order_seed}/{number}").shuffle(ordered)
            for pair, (spec, short) in enumerate(ordered):
                turn = sides if (pair + number) % 2 == 0 else tuple(reversed(sides))
                slots += [Slot(spec, number, side, short) for side in turn]
        return slots

    def to_dict(self) -> dict:
        return {"rounds": self.rounds, "order_seed": self.order_seed}


#: the worker option (in options["rounds"]) with each round's measured runs (RoundPlan.runs_per_round)
RUNS_PER_ROUND = "runs_per_round"


def round_options(options: dict, slot: Slot) -> dict:
    """A slot's options with its round's measured runs (options["rounds"][RUNS_PER_ROUND],
    which a sweep sets; a round an A/B run added takes the last planned round's, or its short
    round's calls); the options as given where none are set (a plain run_cases)."""
    runs = (options.get("rounds") or {}).get(RUNS_PER_ROUND)
    if not runs or "settings" not in options:
        return options
    settings = {**options["settings"], "runs": runs[min(slot.round, len(runs)) - 1]}
    if slot.short is not None:
        settings.update(warmup=slot.short.warmup, runs=slot.short.runs)
    return {**options, "settings": settings}


# --------------------------------------------------------------------------- short added rounds

#: how long a round an A/B run adds times a case by default, its warmup as long again (ms)
ADDED_ROUND_MS = 100.0
#: a short round's least calls: the timed ones (steady state needs 4 to judge the first ones)…
SHORT_MIN_RUNS = 5
#: …and the warmup's (a fresh process's first calls fault in pages and build the kernels)
SHORT_MIN_WARMUP = 3


def short_round(call_ms: Optional[float], warmup: int, runs: int, round_ms: float = ADDED_ROUND_MS) -> Optional[Short]:
    """The short round of a case whose timed phases take `call_ms` together per call, against a
    planned round's `warmup` and `runs`; None where the planned round's calls already fit (or
    `round_ms` is 0: added rounds as long as planned ones)."""
    if not call_ms or call_ms <= 0 or round_ms <= 0:
        return None
    fit = math.ceil(round_ms / call_ms)
    short = Short(min(warmup, max(SHORT_MIN_WARMUP, fit)), min(runs, max(SHORT_MIN_RUNS, fit)))
    return None if (short.warmup, short.runs) == (warmup, runs) else short


def call_ms(result: CaseResult) -> Optional[float]:
    """What one call of each of a case's timed phases took together (the sum of their wall
    medians, ms): what a round spends per call of the case; None without a timed phase."""
    from benchcore.report.figures import METRICS, from_measurement

    timings = [from_measurement((result.metrics or {}).get(metric)) for metric in METRICS]
    centers = [timing.center_ms for timing in timings if timing is not None and timing.center_ms]
    return sum(centers) if centers else None


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


def shard_specs(specs, shard: Optional[Tuple[int, int]]):
    """Round-robin over the cases sorted by key: the N shards partition the list exactly, and
    each gets a similar mix of cases, whatever order the suite generated them in."""
    if shard is None:
        return list(specs)
    index, count = shard
    ordered = sorted(specs, key=lambda spec: spec.key)
    return [spec for position, spec in enumerate(ordered) if position % count == index - 1]
