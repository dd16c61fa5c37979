"""Looks: the schedule of an A/B run that adds rounds until its quantities are decided, and the
error rates that hold under that optional stopping.

A comparison that tests again after every added round, at the same level each time, calls a
change that is not there far more often than its level says: each look is another chance. The
A/B run therefore fixes in advance where it may look (after its planned rounds, then every
`step` rounds up to `horizon` rounds a side) and how much of the error rate each look may spend
(an alpha-spending function, as in group-sequential trials: Lan & DeMets 1983). A quantity's
tests at its looks are each held to their share; by the union bound the chance that any look
calls a change that is not there (or a `same` that is not) stays below alpha however the run
decided to stop. The same bound makes min over looks of p·alpha/share a valid p-value, which the
false-discovery adjustment over all quantities then takes as any other.

The union bound ignores that successive looks share rounds, so it is conservative: the real
error rate is lower than alpha, and the power lower than a design that computes the looks'
correlation. In exchange it needs no assumption on when the run stops, and the comparison can
recompute every look from the rounds the reports hold, in their order: nothing but the schedule
has to be recorded (settings `sequential` of both reports).

Without added rounds (horizon = planned) there is one look that spends all of alpha: the
comparison of a plain sweep or an `ab` without a budget, as before.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from benchcore.compare.tests import TestResult

#: the name of the spending function (recorded; the only one so far)
SPENDING = "pocock"


@dataclass(frozen=True)
class Looks:
    """Where a sequential comparison may look, and what each look may spend of alpha.

    `planned`: rounds a side before the first look; `step`: rounds a side added between looks;
    `horizon`: the most rounds a side the schedule allows (all of alpha is spent there)."""

    planned: int
    step: int = 2
    horizon: Optional[int] = None

    def __post_init__(self):
        horizon = self.planned if self.horizon is None else self.horizon
        if self.planned < 2 or self.step < 1 or horizon < self.planned:
            raise ValueError(f"looks need planned >= 2 rounds, step >= 1 and horizon >= planned; got {self}")
        object.__setattr__(self, "horizon", horizon)

    @property
    def schedule(self) -> List[int]:
        """Rounds a side at each look: planned, planned + step, ..., and the horizon last."""
        points = list(range(self.planned, self.horizon + 1, self.step))
        return points if points[-1] == self.horizon else points + [self.horizon]

    def spent(self, rounds: int, alpha: float) -> float:
        """Alpha spent once `rounds` rounds a side have been looked at: Pocock's shape in Lan and
        DeMets' form, alpha·ln(1 + (e - 1)·t) at information fraction t = rounds / horizon. It
        spends early looks more than O'Brien–Fleming's shape would: the looks after the planned
        rounds are there to decide what those left open, not to confirm what they found."""
        fraction = min(1.0, rounds / self.horizon)
        return alpha * math.log1p((math.e - 1) * fraction)

    def shares(self, alpha: float) -> List[Tuple[int, float]]:
        """(rounds a side, the share of alpha that look may spend) for every look of the schedule."""
        points = self.schedule
        spent = [self.spent(n, alpha) for n in points]
        return [(n, s - (spent[i - 1] if i else 0.0)) for i, (n, s) in enumerate(zip(points, spent))]

    def at(self, rounds: int, alpha: float) -> List[Tuple[int, float]]:
        """The looks that a quantity with `rounds` rounds a side had (those of the schedule it
        reached), with their shares."""
        return [(n, share) for n, share in self.shares(alpha) if n <= rounds]

    def to_dict(self) -> dict:
        return {**asdict(self), "spending": SPENDING}

    @classmethod
    def from_dict(cls, data: Optional[dict]) -> Optional["Looks"]:
        if not isinstance(data, dict) or data.get("spending", SPENDING) != SPENDING:
            return None
        return cls(int(data["planned"]), int(data.get("step", 2)), data.get("horizon"))


def sequential_p(p_values: Sequence[Tuple[float, float]], alpha: float) -> float:
    """min over looks of p·alpha/share (capped at 1), from (p, share) per look: a valid p-value
    under any stopping rule (P(result <= u) <= sum of u·share/alpha <= u by the union bound)."""
    return min(1.0, min(p * alpha / share for p, share in p_values))


@dataclass(frozen=True)
class LookedTests:
    """One quantity's tests at each look it had (on the first n rounds a side), each with the
    share of alpha it may spend; the last is the test on all its rounds."""

    looks: Tuple[Tuple[int, float, "TestResult"], ...]

    @property
    def last(self) -> "TestResult":
        return self.looks[-1][2]

    @property
    def last_share(self) -> float:
        return self.looks[-1][1]

    def p_value(self, alpha: float) -> float:
        """The sequential p-value (the last test's own with a single look spending all of alpha)."""
        return sequential_p([(test.p_value, share) for _n, share, test in self.looks], alpha)

    def intervals(self) -> List[Tuple[Tuple[float, float], float]]:
        """Each look's (1 - 2·share) interval of the ratio (TOST at its share), with the share."""
        return [(test.interval(share), share) for _n, share, test in self.looks if test.log_change is not None]
