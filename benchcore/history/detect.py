"""Step detection: where a case's level changed beyond the noise its history shows.

One series per case, metric (forward/backward) and environment fingerprint, in the order the
runs ran. The method (docs/HISTORY.md has the reasoning):

1. Work on logarithms: a step is a ratio (+20%), whatever the size of the case.
2. Noise per point: the history's own scatter, from the median absolute difference of
   successive runs (a step moves one difference, so it barely moves the median), shrunk on the
   log scale toward a prior (5%, or the rounds' own noise where larger) while the history is
   short; a run whose rounds disagreed more than the series' typical run weighs proportionally
   less; never below a floor, nor below the rounding noise of the clock's step (MXNet's
   profiler counts whole microseconds: step / sqrt(12), relative to the figure).
3. A median of three over the interior points removes single-run spikes and keeps step edges.
   The latest run is left as it is: it may be the first run of a new level.
4. The levels: the piecewise-constant fit that minimises the weighted squared residuals plus a
   penalty per change (optimal partitioning, exact, by dynamic programming). A segment spans two
   runs or more, except the last, so a change shows at the first run that has it and a one-run
   excursion earlier in the history is noise. The penalty is 16: one run alone must lie 4 noise
   units off to start a level; k runs need 4/sqrt(k) each.
5. A step is the boundary of two segments: before and after are the segments' medians of the
   raw figures. It is reported when the change is at least the threshold and more than one
   clock step (the rule `compare` applies: a clock that counts whole steps cannot see less).

A series of instruction counts (docs/INSTRUCTIONS.md) is judged by the count verdict rules
instead (benchcore.compare.count_verdicts.judge, the rules `compare` applies to two counted
reports): counts repeat to a few hundredths of a percent whatever the machine's load, so the
timing's noise model, its 5% prior and its threshold would hide the 1% changes they show.
Each run is judged against the level so far (the repeats of its runs pooled, so the level's
spread holds the differences between processes too); a change beyond the band (the floor, or
both sides' spreads) starts a new level, and every such boundary of the `Ir` series is a step,
whatever `--threshold` says. A quantity whose repeats disagree is judged with its own spread
and named with the reason (count_verdicts.non_repeatable), never dropped. Other count
quantities (`cycles_est`) get levels, shown beside `Ir`, but no steps: verdicts rest on `Ir`.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from benchcore.compare.count_verdicts import judge, non_repeatable
from benchcore.history.store import History, Point, Run, count_metric, figure_text
from benchcore.measure.instructions import HEADLINE, PHASES, Counts
from benchcore.measure.measurement import within_step

#: what one more level costs, in squared noise units (4 noise units for a single run)
PENALTY = 16.0
#: the relative noise assumed before a history shows its own (between sweeps on a 2-core VM,
#: NOISE.md: several percent), raised to what the rounds show when they show more
PRIOR_NOISE = 0.05
#: how many successive differences the prior counts as
PRIOR_WEIGHT = 4
#: no run is trusted to better than this (0.5%)
NOISE_FLOOR = 0.005
#: runs a level needs, except the latest one
MIN_SEGMENT = 2
#: median |a - b| of two independent normal draws, in standard deviations (sqrt(2) * 0.6745)
MEDIAN_ABS_DIFFERENCE = 0.9539
#: the standard error of a median, in standard errors of a mean (sqrt(pi / 2))
MEDIAN_EFFICIENCY = 1.2533


@dataclass(frozen=True)
class Segment:
    start: int
    stop: int
    level_ms: float


@dataclass(frozen=True)
class Fit:
    """The levels of one series: its segments and the noise each point was weighed with."""

    segments: Tuple[Segment, ...]
    #: each point's noise (relative, i.e. on the log scale)
    noise: Tuple[float, ...]
    #: the series' scatter between runs (relative), before the per-run weights and floors
    history_noise: float
    #: a count series' boundaries, one per pair of segments: (the band the change was judged
    #: beyond, why the counts may not repeat or None); empty for a time series
    judged: Tuple[Tuple[float, Optional[str]], ...] = ()

    @property
    def levels_ms(self) -> List[float]:
        """The fitted level at each point."""
        return [s.level_ms for s in self.segments for _ in range(s.start, s.stop)]


def fit(values_ms: Sequence[float], round_medians: Optional[Sequence[Sequence[float]]] = None,
        resolution_ms: Optional[Sequence[float]] = None) -> Fit:
    """The levels of a series of positive figures (ms), with each run's round medians (empty for
    a single round) and clock step (0: none known)."""
    values = np.asarray(values_ms, dtype=np.float64)
    if values.size == 0 or np.any(values <= 0):
        raise ValueError("a series needs positive figures")
    y = np.log(values)
    rounds = list(round_medians) if round_medians is not None else [()] * len(y)
    steps = np.asarray(resolution_ms if resolution_ms is not None else [0.0] * len(y), dtype=np.float64)
    history_noise, noise = point_noise(y, rounds, steps / values / math.sqrt(12.0))
    bounds = partition(despike(y), 1.0 / noise ** 2)
    segments = tuple(Segment(a, b, float(np.median(values[a:b]))) for a, b in zip(bounds[:-1], bounds[1:]))
    return Fit(segments, tuple(float(s) for s in noise), history_noise)


def count_fit(counts: Sequence[Counts]) -> Fit:
    """The levels of a series of counts by the count verdict rules (see the module docstring):
    each point's noise is its repeats' spread."""
    bounds, judged, level = [0], [], counts[0]
    for i, point in enumerate(counts[1:], start=1):
        verdict, band = judge(level, point)
        if verdict == "same":
            level = Counts.from_rounds([level, point])
        else:
            bounds.append(i)
            judged.append((band, non_repeatable(level, point)))
            level = point
    bounds.append(len(counts))
    segments = tuple(Segment(a, b, Counts.from_rounds(counts[a:b]).median) for a, b in zip(bounds[:-1], bounds[1:]))
    spreads = tuple(c.spread for c in counts)
    return Fit(segments, spreads, float(np.median(spreads)), tuple(judged))


def visible_steps(levels: Fit, threshold: float, resolution_ms: float = 0.0) -> List[Tuple[Segment, Segment]]:
    """The (before, after) segment pairs that count as steps: a change of at least `threshold`
    (a fraction; a speed-up of 1/(1 + threshold) or more, so both directions weigh the same on the
    log scale) and more than one clock step."""
    pairs = zip(levels.segments[:-1], levels.segments[1:])
    return [(a, b) for a, b in pairs if abs(math.log(b.level_ms / a.level_ms)) >= math.log1p(threshold)
            and not within_step(b.level_ms - a.level_ms, resolution_ms)]


def round_noise(medians: Sequence[float]) -> Optional[float]:
    """The standard error (relative) of a run's figure, from its rounds' medians; None for one round."""
    if len(medians) < 2 or min(medians) <= 0:
        return None
    logs = np.log(np.asarray(medians, dtype=np.float64))
    return MEDIAN_EFFICIENCY * float(logs.std(ddof=1)) / math.sqrt(len(logs))


def point_noise(y: np.ndarray, rounds: Sequence[Sequence[float]], clock: np.ndarray) -> Tuple[float, np.ndarray]:
    """(the history's scatter, each point's noise): see the module docstring, step 2."""
    own = [round_noise(r) for r in rounds]
    known = [s for s in own if s is not None]
    typical = float(np.median(known)) if known else 0.0
    prior = max(PRIOR_NOISE, typical)
    diffs = np.abs(np.diff(y))
    if diffs.size:  # shrunk on the log scale: noise levels span orders of magnitude
        estimate = max(float(np.median(diffs)) / MEDIAN_ABS_DIFFERENCE, NOISE_FLOOR)
        scatter = math.exp((diffs.size * math.log(estimate) + PRIOR_WEIGHT * math.log(prior))
                           / (diffs.size + PRIOR_WEIGHT))
    else:
        scatter = prior
    weight = np.array([max(1.0, s / typical) if s is not None and typical > 0 else 1.0 for s in own])
    return scatter, np.maximum.reduce([scatter * weight, np.full(len(y), NOISE_FLOOR), clock])


def despike(y: np.ndarray) -> np.ndarray:
    """Median of three over the interior points (the first point with its next two); the last
    point is kept. Removes a single-run spike, keeps a step's edge."""
    if y.size < 3:
        return y.copy()
    out = y.copy()
    out[0] = np.median(y[:3])
    out[1:-1] = np.median(np.stack([y[:-2], y[1:-1], y[2:]]), axis=0)
    return out


def partition(y: np.ndarray, w: np.ndarray) -> List[int]:
    """Segment bounds [0, …, n] minimising Σ w (y - segment mean)² + PENALTY per segment, every
    segment at least MIN_SEGMENT long except the last."""
    n = y.size
    s0 = np.concatenate([[0.0], np.cumsum(w)])
    s1 = np.concatenate([[0.0], np.cumsum(w * y)])
    s2 = np.concatenate([[0.0], np.cumsum(w * y * y)])
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    back = np.zeros(n + 1, dtype=int)
    for stop in range(1, n + 1):
        longest_start = stop - (1 if stop == n else MIN_SEGMENT)
        if longest_start < 0:
            continue
        starts = np.arange(0, longest_start + 1)
        weight = s0[stop] - s0[starts]
        total = s1[stop] - s1[starts]
        cost = (s2[stop] - s2[starts]) - total * total / weight
        candidates = best[starts] + np.maximum(cost, 0.0) + PENALTY
        choice = int(np.argmin(candidates))
        best[stop], back[stop] = candidates[choice], starts[choice]
    bounds = [n]
    while bounds[-1] > 0:
        bounds.append(int(back[bounds[-1]]))
    return bounds[::-1]


# --------------------------------------------------------------------------- series of a history


@dataclass(frozen=True)
class Series:
    """One case's metric in one environment, over the runs that measured it."""

    case_key: str
    metric: str
    environment_id: str
    points: Tuple[Point, ...]
    fit: Fit

    @property
    def unit(self) -> str:
        return self.points[0].unit

    @property
    def judged_on_counts(self) -> bool:
        """Whether the series' steps are count verdicts (its `Ir`), rather than none (cycles_est) or timing's."""
        return self.metric in {count_metric(phase, HEADLINE) for phase in PHASES}


@dataclass(frozen=True)
class Change:
    """A step of one series: the level before, the level from `run` on."""

    case_key: str
    label: str
    category: str
    metric: str
    environment_id: str
    #: the first run at the new level, and the last one before it
    run: Run
    previous: Run
    before_ms: float
    after_ms: float
    #: the series' level now (its last segment's)
    latest_ms: float
    #: runs at the new level so far (1: only the latest run shows it, not yet confirmed)
    runs_after: int
    #: the smallest change the step had to pass: --threshold for a time, the count band for a count
    threshold: float
    unit: str = "ms"
    #: why a count series' repeats disagree (it was judged with their spread); None: they agree
    non_repeatable: Optional[str] = None

    @property
    def rests_on(self) -> str:
        return "time" if self.unit == "ms" else "instruction counts"

    def basis(self) -> str:
        """What the step rests on, as both history views write it: time, or counts with the band
        the step passed and, for a quantity whose repeats disagree, why."""
        if self.unit == "ms":
            return "time"
        note = f"; non-repeatable: {self.non_repeatable}" if self.non_repeatable else ""
        return f"instruction counts (band ±{100 * self.threshold:.2f}%{note})"

    def span(self) -> str:
        """The level before → after, in the series' unit."""
        return f"{figure_text(self.before_ms, self.unit)} → {figure_text(self.after_ms, self.unit)} {self.unit}"

    @property
    def change(self) -> float:
        """after / before - 1: +0.25 is 25% slower."""
        return self.after_ms / self.before_ms - 1.0

    @property
    def slower(self) -> bool:
        return self.after_ms > self.before_ms

    @property
    def provisional(self) -> bool:
        return self.runs_after < 2

    @property
    def holds(self) -> bool:
        """Whether the series is still beyond the threshold from the level before the step, in
        the step's direction (a regression that a later change undid does not hold)."""
        ratio = self.latest_ms / self.before_ms
        return ratio >= 1 + self.threshold if self.slower else ratio <= 1 / (1 + self.threshold)


def analyse(history: History) -> List[Series]:
    """Every series of a history, fitted."""
    grouped: Dict[Tuple[str, str, str], List[Point]] = {}
    for point in history.points:
        if point.median_ms > 0:  # a zero figure (under the clock's step) has no ratio to anyone
            grouped.setdefault((point.case_key, point.metric, point.environment_id), []).append(point)
    series = []
    for (key, metric, env), points in sorted(grouped.items()):
        counted = [p.counts for p in points]
        levels = (count_fit(counted) if all(counted) else
                  fit([p.median_ms for p in points], [p.round_medians_ms for p in points], [p.resolution_ms for p in points]))
        series.append(Series(key, metric, env, tuple(points), levels))
    return series


def _steps(s: Series, threshold: float) -> List[Tuple[Segment, Segment, float, Optional[str]]]:
    """(before, after, the threshold it passed, why its counts may not repeat) of each step of a series."""
    if s.unit == "ms":
        return [(a, b, threshold, None) for a, b in visible_steps(s.fit, threshold, max(p.resolution_ms for p in s.points))]
    if not s.judged_on_counts:
        return []
    return [(a, b, band, why) for (a, b), (band, why) in zip(zip(s.fit.segments[:-1], s.fit.segments[1:]), s.fit.judged)]


def changes(history: History, series: Sequence[Series], threshold: float,
            since: Optional[datetime.datetime] = None) -> List[Change]:
    """The steps, first run at or after `since`, newest first: of time series at least `threshold`
    (a fraction), of count series every one the count verdict rules find (see the module docstring)."""
    runs = history.runs_by_id
    latest_case = history.latest_cases()
    found = []
    for s in series:
        case = latest_case[s.case_key]
        latest = s.fit.segments[-1].level_ms
        for before, after, passed, why in _steps(s, threshold):
            change = Change(s.case_key, case.label, case.category, s.metric, s.environment_id,
                            runs[s.points[after.start].run_id], runs[s.points[after.start - 1].run_id],
                            before.level_ms, after.level_ms, latest, after.stop - after.start, passed, s.unit, why)
            if since is None or change.run.time >= since:
                found.append(change)
    return sorted(found, key=lambda c: (c.run.run_at, c.run.id, c.label, c.metric), reverse=True)
