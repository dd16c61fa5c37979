"""Looks: the schedule of an A/B run that adds rounds until its quantities are decided, and the
error rates that hold under that optional stopping.

A comparison that tests again after every added round, at the same level each time, calls a
change that is not there far more often than its level says: each look is another chance. The
A/B run therefore fixes in advance where it may look (after its planned rounds, then every
`step` rounds up to `horizon` rounds a side) and how much of the error rate each look may spend
(an alpha-spending function, as in group-sequential trials: Lan & DeMets 1983).

Each look's nominal level follows from its share the way group-sequential designs compute it:
the looks' statistics share rounds (the test on n rounds and the one on m > n rounds correlate
as sqrt(n/m)), so the chance that look k errs *when no earlier look did* is its share. The
boundaries come from the recursive numerical integration of Armitage, McPherson and Rowe (1969)
on that correlation, for the two-sided test of a change (alpha over both directions) and the
one-sided tests that `same` rests on (TOST: alpha each). A look late in the schedule so tests
at about six times the level a union bound over the shares would allow (at 33 rounds of a
3, 5, ..., 33 schedule: 1.2% against 0.2%), and its intervals are about a sixth narrower.

A quantity's p-value over its looks is the level of the strictest design of the same shape that
would have called it at one of them: the levels are tabulated for designs from 0.5 down to 1e-9
(their boundaries are computed as alpha's are) and each look's p is read back through its
column. So P(p <= u) is the level-u design's chance of a false call, u itself, at every u, which
the false-discovery adjustment over all quantities needs. (Scaling each look's p by alpha over
its level at alpha would not do: in the far tail the looks' overlap matters less, so a strict
design's levels are a smaller share of its overall level, and that p-value came out 20% too
small at u = 0.01 in tests/benchcore/test_sequential.py.) The comparison recomputes every look
from the rounds the reports hold, in their order: nothing but the schedule has to be recorded
(settings `sequential` of both reports).

Without added rounds (horizon = planned) there is one look at alpha: the comparison of a plain
sweep or an `ab` without a budget, as before.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

import numpy as np

if TYPE_CHECKING:
    from benchcore.compare.tests import TestResult

#: the name of the spending function (recorded; the only one so far)
SPENDING = "pocock"
#: points of the grid each look's density is carried on (the levels come out within a thousandth of
#: themselves at 100 looks)
GRID = 401
#: a one-sided design's continuation region reaches this many standard deviations down
FAR = 10.0
#: the overall levels of the designs tabulated for p-values (below the last, the union bound)
TABULATED = tuple(float(u) for u in np.geomspace(0.5, 1e-9, 25))


@dataclass(frozen=True)
class Level:
    """The nominal levels one look tests at: `two_sided` for a change in either direction (the
    p-value's threshold), `one_sided` for each of the two one-sided tests `same` rests on."""

    rounds: int
    two_sided: float
    one_sided: float


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

    def levels(self, alpha: float) -> List[Level]:
        """Every look's nominal levels: those at which the chance of a first false call at that
        look is its share, given the looks' correlation (see the module's docstring)."""
        return list(_levels(self, alpha))

    def at(self, rounds: int, alpha: float) -> List[Level]:
        """The looks that a quantity with `rounds` rounds a side had (those of the schedule it
        reached), with their levels."""
        return [level for level in self.levels(alpha) if level.rounds <= rounds]

    def p_value(self, tests: Sequence[Tuple[int, float]]) -> float:
        """The sequential p-value of (rounds, two-sided p) at looks of this schedule: the
        smallest overall level whose design calls one of them (see the module's docstring)."""
        logs, table = _table(self)
        index = {n: k for k, n in enumerate(self.schedule)}
        found = 1.0
        for n, p in tests:
            k = index[n]
            if p <= 0.0:
                return 0.0
            if p < math.exp(table[-1, k]):  # stricter than any tabulated design: the union bound
                found = min(found, p * TABULATED[-1] / self._share(k, TABULATED[-1]))
            elif p > math.exp(table[0, k]):  # laxer than any: scaled, for the record (never called)
                found = min(found, p * TABULATED[0] / math.exp(table[0, k]))
            else:
                found = min(found, math.exp(np.interp(math.log(p), table[::-1, k], logs[::-1])))
        return min(1.0, found)

    def two_sided_level(self, rounds: int, overall: float) -> float:
        """The nominal two-sided level of the look at `rounds` in the design of level `overall`."""
        logs, table = _table(self)
        k = self.schedule.index(rounds)
        if overall < TABULATED[-1]:
            return self._share(k, overall)
        return math.exp(np.interp(math.log(overall), logs[::-1], table[::-1, k]))

    def _share(self, k: int, overall: float) -> float:
        return self.shares(overall)[k][1]

    def to_dict(self) -> dict:
        return {**asdict(self), "spending": SPENDING}

    @classmethod
    def from_dict(cls, data: Optional[dict]) -> Optional["Looks"]:
        if not isinstance(data, dict) or data.get("spending", SPENDING) != SPENDING:
            return None
        return cls(int(data["planned"]), int(data.get("step", 2)), data.get("horizon"))


@functools.lru_cache(maxsize=32)
def _levels(looks: Looks, alpha: float) -> Tuple[Level, ...]:
    rounds = looks.schedule
    shares = [share for _n, share in looks.shares(alpha)]
    from scipy.special import ndtr

    two = _boundaries(rounds, shares, two_sided=True)
    one = _boundaries(rounds, shares, two_sided=False)
    return tuple(Level(n, float(2 * ndtr(-c2)), float(ndtr(-c1))) for n, c2, c1 in zip(rounds, two, one))


def _boundaries(rounds: Sequence[int], shares: Sequence[float], two_sided: bool) -> List[float]:
    """The z boundary of each look such that a path of the sum of `rounds` unit increments first
    crosses it there with probability `share` (|z| for `two_sided`, z above otherwise): the
    density of the sum on the region still going is carried from look to look on a grid
    (Armitage, McPherson & Rowe 1969)."""
    from scipy.optimize import brentq
    from scipy.special import ndtri

    first = float(-ndtri(shares[0] / 2 if two_sided else shares[0]))
    bounds = [first]
    grid, weights = _region(first, rounds[0], two_sided)
    density = np.exp(-grid ** 2 / (2 * rounds[0])) / math.sqrt(2 * math.pi * rounds[0])
    for previous, n, share in zip(rounds, rounds[1:], shares[1:]):
        spread = math.sqrt(n - previous)
        mass = weights * density
        step = (math.sqrt(n), grid, mass, spread, two_sided, share)
        inside = _crossing(40.0, *step) < 0 < _crossing(0.0, *step)
        c = brentq(_crossing, 0.0, 40.0, args=step, xtol=1e-7) if inside else 40.0
        bounds.append(c)
        next_grid, next_weights = _region(c, n, two_sided)
        kernel = np.exp(-((next_grid[:, None] - grid[None, :]) / spread) ** 2 / 2) / (spread * math.sqrt(2 * math.pi))
        density = kernel @ mass
        grid, weights = next_grid, next_weights
    return bounds


def _crossing(c: float, scale: float, grid: np.ndarray, mass: np.ndarray, spread: float, two_sided: bool,
              share: float) -> float:
    """The chance that a path still going (`mass` on `grid`) crosses boundary `c` at a look whose
    sum has `scale`² rounds, `spread`² of them since the last look, less the look's `share` (the
    root is the boundary)."""
    from scipy.special import ndtr

    edge = c * scale
    upper = ndtr((grid - edge) / spread)
    lower = ndtr((-edge - grid) / spread) if two_sided else 0.0
    return float(np.sum(mass * (upper + lower))) - share


def _region(c: float, rounds: int, two_sided: bool) -> Tuple[np.ndarray, np.ndarray]:
    """The grid (on the scale of the sum) and trapezoid weights of the region a path continues
    in after a look at `rounds` rounds with boundary `c`."""
    scale = math.sqrt(rounds)
    low = -c if two_sided else -FAR
    grid = np.linspace(low * scale, c * scale, GRID)
    weights = np.full(GRID, grid[1] - grid[0])
    weights[[0, -1]] /= 2
    return grid, weights


@functools.lru_cache(maxsize=32)
def _table(looks: Looks) -> Tuple[np.ndarray, np.ndarray]:
    """(log of each TABULATED level, log of each look's two-sided nominal level in its design:
    a row per level). The spending shape scales with the level, so one table serves any alpha."""
    from scipy.special import ndtr

    rounds = looks.schedule
    rows = [[math.log(2 * float(ndtr(-c))) for c in _boundaries(rounds, [s for _n, s in looks.shares(u)], True)]
            for u in TABULATED]
    return np.log(np.array(TABULATED)), np.array(rows)


@dataclass(frozen=True)
class LookedTests:
    """One quantity's tests at each look it had (on the first n rounds a side), each with the
    look's nominal levels at alpha; the last is the test on all its rounds. `design`: the
    schedule they come from (None: a single look at alpha)."""

    looks: Tuple[Tuple[Level, "TestResult"], ...]
    design: Optional[Looks] = None

    @property
    def last(self) -> "TestResult":
        return self.looks[-1][1]

    def p_value(self, last_only: bool = False) -> float:
        """The sequential p-value (with a single look, the test's own); `last_only`: from the
        last look alone (valid too: a design that looks once there is stricter)."""
        looks = self.looks[-1:] if last_only else self.looks
        if self.design is None:
            return looks[-1][1].p_value
        return self.design.p_value([(level.rounds, test.p_value) for level, test in looks])

    def level(self, overall: float) -> float:
        """The last look's two-sided level in the design of level `overall`: a p-value below it
        there is below `overall` over the looks."""
        if self.design is None:
            return overall
        return self.design.two_sided_level(self.looks[-1][0].rounds, overall)

    def intervals(self) -> List[Tuple[Tuple[float, float], float]]:
        """Each look's (1 - 2·level) interval of the ratio (TOST at its one-sided level), with
        that level."""
        return [(test.interval(level.one_sided), level.one_sided) for level, test in self.looks
                if test.log_change is not None]
