"""Drift: what the cases of two sweeps share, where it comes from, and how far apart they scatter.

Two sweeps of one build, run an hour apart on a shared VM, differ as a whole by several percent,
and by up to a fifth (docs/COMPARING.md): the machine drifts. Judged case by case, such a shift
turns into dozens of "slower" verdicts. Three things are estimated from the comparison itself:

1. **Group shifts.** The machine does not drift evenly: measured here, a 19%-faster machine sped
   memory-bound forwards up by a quarter and backwards by 15%. So the common shift is taken per
   group of quantities — a phase (forward, backward) of one category of cases — as the median of
   their log changes, which a change to a minority of the group does not move. A group with fewer
   than MIN_QUANTITIES quantities borrows the shift of its phase, then of all quantities.
2. **Whose shift.** A machine reference (benchcore.measure.reference), timed in every round of both
   sweeps and untouched by any build change, has two parts: compute (data in cache) and memory
   (data far beyond it). Any workload's time is some mix of the two, so the machine alone moves
   a group by a ratio between the two parts' ratios. A group shift inside that bracket (widened
   by the effect threshold, or by the bounds of the difference when those reach further) is the
   machine's and is divided out of the group's quantities. Beyond it, only the nearest end of
   the bracket is divided out, and the rest is the build's change to that group, with its own
   verdict (and `--fail-above` gates on it). Without a reference (older reports) nothing is
   divided out; with too few quantities for any group shift the reference's mean is.
3. **Scatter between sweeps.** Rounds of one sweep all ran within minutes of each other; a case
   can sit a few percent apart between two sweeps beyond what its rounds' spread says (seen
   here: 7% at 10 rounds a side). Left out, that turns into false alarms that grow with the
   number of rounds. As in Efron's empirical null, the unchanged majority of the comparison
   measures it: the extra variance is the one that makes the quantities' residuals around their
   group shift as scattered as their own standard errors claim (median two-sided p-value 1/2);
   it is added to every round-based test, and to the reference's parts (timed like any case,
   they scatter between sweeps as much) before a group is held against their bracket, together
   with how well numpy's reference stands for a framework's cases at all (REFERENCE_TRANSFER_SD,
   measured). A comparison whose residuals fit their errors adds 0.

An interleaved A/B run (`ab`) divides nothing out and adds no scatter: drift hits both sides
alike, so a group's shift there is the build's own change to it, and round k of each side ran
at the same minute of the same sitting (the paired test already holds what they share). There
the scatter estimate would only mistake a build's real, varied changes for noise: measured on a
10-round `ab` with 20% of cases made 10% slower, it rose from 0.7% to 3.3% and hid all of them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from benchcore.measure import reference
from benchcore.measure.measurement import Measurement, judged_pair, percent_change
from benchcore.report.figures import METRICS

#: fewer quantities than this make a median a poor estimate of a common shift
MIN_QUANTITIES = 10
#: a median of n log changes is about this many times noisier than their mean (normal data)
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)
#: how far the reference's shift can stand from the unchanged cases' between two sweeps of one
#: build (standard deviation of log), beyond its own timing error: the reference is numpy code,
#: the cases are a framework's, and a host can slow one and not the other (vector-unit clocks,
#: page placement). Measured on this project's VM in seven A/A pairs of sweeps: within 1% of
#: the bracket five times, 5% and 16% outside it twice (its compute part 18% slower per process
#: while the cases did not move); set so that 20% lies within two standard deviations. With it, a group
#: must sit about 20% beyond the bracket to be the build's between sequential sweeps (`ab`,
#: which needs no reference, sees far less).
REFERENCE_TRANSFER_SD = 0.10
#: quantities this unlikely under the fitted scatter are set aside as changed when fitting it
TRIM_P = 0.01
MAX_TRIM_ROUNDS = 10
#: the name of the group of every quantity
ALL = "all"


@dataclass(frozen=True)
class Quantity:
    """One round-based figure of one case, as the drift model reads it: its phase and category,
    and its change (mean log round median, new minus base) with that change's standard error and
    degrees of freedom from its rounds alone (the test's, before anything is divided out)."""

    metric: str
    category: str
    change: float
    standard_error: float
    df: float

    @property
    def key(self) -> str:
        return group_key(self.metric, self.category)


def group_key(metric: str, category: str) -> str:
    return f"{metric} · {category}"


@dataclass
class GroupShift:
    """The shift one group of quantities shares, and how much of it is the machine's."""

    #: "forward · unary"; "forward" (a phase's quantities together); "all"
    name: str
    quantities: int
    #: exp(median log change) of the group, and the variance of that median's log
    cases_ratio: float
    cases_log_variance: float
    #: "machine" (the group's shift removed), "reference" (the bracket's nearest end removed),
    #: "interleaved" or "none" (nothing removed)
    basis: str
    removed_ratio: float = 1.0
    removed_log_variance: float = 0.0
    #: what the machine does not explain: the build's own change to the group, and its verdict
    build_ratio: Optional[float] = None
    verdict: Optional[str] = None

    @property
    def removed_log(self) -> float:
        return math.log(self.removed_ratio)


@dataclass
class Drift:
    """The shifts the comparison's groups share, the part of each divided out before judging,
    and the scatter between the sweeps added to every test."""

    #: "interleaved" (ab), "machine" (every group's shift is the machine's), "reference" (some
    #: group's shift is beyond what the machine explains, or too few quantities for any), "none"
    #: (no reference: nothing removed)
    basis: str
    quantities: int = 0
    #: exp(median log change) over every round-based quantity; None below MIN_QUANTITIES
    cases_ratio: Optional[float] = None
    #: the machine reference new/base: geometric mean of its parts with 95% bounds, and each part
    reference_ratio: Optional[float] = None
    reference_low: Optional[float] = None
    reference_high: Optional[float] = None
    compute_ratio: Optional[float] = None
    memory_ratio: Optional[float] = None
    groups: List[GroupShift] = field(default_factory=list)
    #: each quantity's group key (group_key) → the name of the group whose shift it is judged by
    assignment: Dict[str, str] = field(default_factory=dict)
    #: the standard deviation (of log time) an unchanged quantity scatters between the sweeps
    #: beyond its rounds' errors; its square is added to every round-based test's variance
    between_sweeps: float = 0.0
    #: with too few quantities for any group: the reference's shift, removed from every quantity
    removed_ratio: float = 1.0
    removed_log_variance: float = 0.0
    reason: str = ""

    def group_of(self, metric: str, category: str) -> Optional[GroupShift]:
        name = self.assignment.get(group_key(metric, category))
        return next((g for g in self.groups if g.name == name), None)

    def offset(self, metric: str, category: str) -> Tuple[float, float]:
        """(log ratio divided out of this quantity, that ratio's log variance)."""
        group = self.group_of(metric, category)
        if group is not None:
            return group.removed_log, group.removed_log_variance
        return math.log(self.removed_ratio), self.removed_log_variance

    @property
    def removes_anything(self) -> bool:
        return self.removed_ratio != 1.0 or any(g.removed_ratio != 1.0 for g in self.groups)

    def slowest_build_group(self, fail_above_pct: float) -> Optional[GroupShift]:
        """The group the build itself made slowest, judged slower and by more than
        `fail_above_pct` percent; None when there is none (the gate's build-wide check)."""
        limit = 1.0 + fail_above_pct / 100.0
        slower = [g for g in self.groups if g.verdict == "slower" and g.build_ratio is not None
                  and g.build_ratio > limit]
        return max(slower, key=lambda g: g.build_ratio, default=None)

    def to_dict(self) -> dict:
        return asdict(self)


def estimate(quantities: Sequence[Quantity], base_reference: Optional[dict], new_reference: Optional[dict],
             interleaved: bool, threshold: float) -> Drift:
    """The Drift of a comparison from its round-based Quantities and the two reports' reference
    blocks (benchcore.measure.reference.of_report)."""
    parts = None if interleaved else reference_parts(base_reference, new_reference)
    drift = Drift("interleaved" if interleaved else "none", quantities=len(quantities))
    overall = _median_shift([q.change for q in quantities])
    if overall is not None:
        drift.cases_ratio = math.exp(overall[0])
    members = _assign(quantities, drift)
    shifts = {name: _median_shift([quantities[i].change for i in indices]) for name, indices in members.items()}
    if not interleaved:
        drift.between_sweeps = _between_sweeps(quantities, drift.assignment,
                                               {name: shift[0] for name, shift in shifts.items()})
    mean = None
    if parts is not None:
        # the reference is timed like any case (the scatter between the sweeps is in its shift too),
        # and it stands for the cases only so well (REFERENCE_TRANSFER_SD)
        extra = drift.between_sweeps ** 2 + REFERENCE_TRANSFER_SD ** 2
        parts = {part: (log, variance + extra) for part, (log, variance) in parts.items()}
        mean = _mean_of_parts(parts)
        drift.reference_ratio, (drift.reference_low, drift.reference_high) = math.exp(mean[0]), _bounds(*mean)
        drift.compute_ratio, drift.memory_ratio = (math.exp(parts[p][0]) for p in reference.PARTS)
    limit = math.log1p(threshold)
    drift.groups = [_attribute(name, len(members[name]), shift, parts, interleaved, limit)
                    for name, shift in shifts.items()]
    if not drift.groups and mean is not None:
        drift.basis, drift.removed_ratio, drift.removed_log_variance = "reference", math.exp(mean[0]), mean[1]
    elif drift.groups and not interleaved and parts is not None:
        drift.basis = "machine" if all(g.basis == "machine" for g in drift.groups) else "reference"
    drift.reason = _reason(drift, len(quantities))
    return drift


def _assign(quantities: Sequence[Quantity], drift: Drift) -> Dict[str, List[int]]:
    """Each quantity's group: its phase × category with MIN_QUANTITIES members, else its phase
    with that many, else all quantities; none when there are fewer than MIN_QUANTITIES in all."""
    by_key: Dict[str, List[int]] = {}
    by_metric: Dict[str, List[int]] = {}
    for i, q in enumerate(quantities):
        by_key.setdefault(q.key, []).append(i)
        by_metric.setdefault(q.metric, []).append(i)
    members: Dict[str, List[int]] = {}
    for key, indices in by_key.items():
        metric = quantities[indices[0]].metric
        for name, pool in ((key, indices), (metric, by_metric[metric]), (ALL, range(len(quantities)))):
            if len(pool) >= MIN_QUANTITIES:
                drift.assignment[key] = name
                members[name] = list(pool)
                break
    return members


def _attribute(name: str, count: int, shift: Tuple[float, float], parts: Optional[dict], interleaved: bool,
               limit: float) -> GroupShift:
    """Whose a group's shift is: the build's (interleaved), unknown (no reference), the
    machine's (inside the reference's bracket, give or take), or partly the build's."""
    group = GroupShift(name, count, math.exp(shift[0]), shift[1], "interleaved" if interleaved else "none")
    if interleaved:
        group.build_ratio, group.verdict = group.cases_ratio, _build_verdict(shift, limit)
        return group
    if parts is None:
        return group
    end = _nearest_end(shift[0], parts)
    gap = (0.0, shift[1]) if end is None else (shift[0] - end[0], shift[1] + end[1])
    verdict = _build_verdict(gap, limit)
    if abs(gap[0]) <= limit or verdict == "undecided":
        group.basis, group.removed_ratio, group.removed_log_variance = "machine", group.cases_ratio, shift[1]
    else:
        group.basis, group.removed_ratio, group.removed_log_variance = "reference", math.exp(end[0]), end[1]
    group.build_ratio, group.verdict = math.exp(gap[0]), verdict
    return group


def _nearest_end(log_shift: float, parts: dict) -> Optional[Tuple[float, float]]:
    """The (log, variance) of the reference part nearest a shift outside the bracket the two
    parts span; None for a shift inside it."""
    ends = sorted(parts.values())
    if log_shift < ends[0][0]:
        return ends[0]
    if log_shift > ends[-1][0]:
        return ends[-1]
    return None


def _between_sweeps(quantities: Sequence[Quantity], assignment: Dict[str, str], centers: Dict[str, float]) -> float:
    """τ, the extra standard deviation of an unchanged quantity's log change: 0 when the
    residuals around their group shifts fit their standard errors, else the value at which the
    median of their two-sided p-values (t on each quantity's df) is 1/2.

    Quantities that did change sit in the tail and would inflate τ by about the fraction they
    make up; so, as a trimmed empirical null, those with p < TRIM_P are set aside and τ refitted
    on the rest, against the median of a p-value given that it is at least TRIM_P, until the
    set stops changing."""
    from scipy.optimize import brentq
    from scipy.stats import t as student_t

    judged = [(q, centers[assignment[q.key]]) for q in quantities if q.key in assignment]
    if len(judged) < MIN_QUANTITIES:
        return 0.0
    r = np.array([abs(q.change - center) for q, center in judged])
    s = np.array([q.standard_error for q, _ in judged])
    d = np.array([q.df if q.df > 0 else 1.0 for q, _ in judged])

    def p_values(tau2: float) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(r == 0, 0.0, r / np.sqrt(s ** 2 + tau2))
        return 2 * student_t.sf(z, d)

    keep, tau2 = np.ones(len(r), dtype=bool), 0.0
    for _ in range(MAX_TRIM_ROUNDS):
        target = 0.5 if keep.all() else (1 + TRIM_P) / 2  # the median of p given p >= TRIM_P

        def excess(t2: float, target: float = target, keep=keep) -> float:
            return target - float(np.median(p_values(t2)[keep]))

        tau2 = 0.0 if excess(0.0) <= 0 else brentq(excess, 0.0, 4 * float(r.max()) ** 2 + 1e-12, xtol=1e-12)
        kept = p_values(tau2) >= TRIM_P
        if kept.sum() < MIN_QUANTITIES or (kept == keep).all():
            break
        keep = kept
    return math.sqrt(tau2)


def _median_shift(logs: Sequence[float]) -> Optional[Tuple[float, float]]:
    """(median log change, the variance of that median), or None with too few."""
    if len(logs) < MIN_QUANTITIES:
        return None
    values = np.array(logs, dtype=float)
    median = float(np.median(values))
    spread = 1.4826 * float(np.median(np.abs(values - median)))  # MAD: robust to the cases that did change
    return median, (MEDIAN_EFFICIENCY * spread) ** 2 / len(values)


def _build_verdict(shift: Optional[Tuple[float, float]], limit: float) -> Optional[str]:
    """faster / slower / same / undecided for a group-wide (log shift, variance): beyond the
    threshold and beyond its 95% bounds → a change; bounds inside the threshold → same."""
    if shift is None:
        return None
    change, half = shift[0], 1.96 * math.sqrt(shift[1])
    if abs(change) > limit and abs(change) > half:
        return "slower" if change > 0 else "faster"
    return "same" if abs(change) + half <= limit else "undecided"


def reference_parts(base: Optional[dict], new: Optional[dict]) -> Optional[Dict[str, Tuple[float, float]]]:
    """{part: (log of the reference's new/base, its variance)}; None without a reference on
    both sides, or references of different versions."""
    if not base or not new or base.get("version") != new.get("version"):
        return None
    parts = {}
    for part in reference.PARTS:
        b, n = _measurement(base.get(part)), _measurement(new.get(part))
        if b is None or n is None or b.round_count < 2 or n.round_count < 2:
            return None
        parts[part] = (math.log(n.center / b.center), _difference_variance(b, n))
    return parts


def _mean_of_parts(parts: Dict[str, Tuple[float, float]]) -> Tuple[float, float]:
    logs, variances = zip(*parts.values())
    return sum(logs) / len(logs), sum(variances) / len(variances) ** 2


def _difference_variance(base: Measurement, new: Measurement) -> float:
    """Variance of the difference of the mean log round medians (pooled over both sides)."""
    x, y = np.log(base.round_medians), np.log(new.round_medians)
    pooled = (((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum()) / (len(x) + len(y) - 2)
    return float(pooled * (1 / len(x) + 1 / len(y)))


def _measurement(data) -> Optional[Measurement]:
    if not isinstance(data, dict) or not data.get("samples_ms"):
        return None
    try:
        return Measurement.from_dict(data)
    except (ValueError, TypeError):
        return None


def _bounds(log_value: float, variance: float) -> Tuple[float, float]:
    half = 1.96 * math.sqrt(variance)
    return math.exp(log_value - half), math.exp(log_value + half)


def _reason(drift: Drift, count: int) -> str:
    """One sentence on what was divided out and why."""
    scatter = (f"; the sweeps scatter ±{drift.between_sweeps * 100:.1f}% beyond the rounds' errors, added to every "
               "test" if drift.between_sweeps > 0 else "")
    if drift.basis == "interleaved":
        return "interleaved A/B run: the machine's drift hits both sides alike, so each group's shift is the build's"
    if not drift.groups:
        if drift.basis == "reference":
            return (f"too few quantities ({count} < {MIN_QUANTITIES}) for a common shift: the machine reference's "
                    f"{percent_change(drift.removed_ratio)} is removed from every case")
        return "too few quantities for a common shift and no machine reference: nothing is removed"
    if drift.basis == "none":
        return ("no machine reference in both reports (older reports): a common shift cannot be told from a "
                "machine difference, and nothing is removed" + scatter)
    bracket = f"the machine reference moved compute {percent_change(drift.compute_ratio)}, memory {percent_change(drift.memory_ratio)}"
    if drift.basis == "machine":
        return (f"{bracket}; every group's shift lies within what a mix of the two explains (give or take the "
                f"threshold or the bounds): the machine's, divided out of its group" + scatter)
    beyond = ", ".join(f"{g.name} {percent_change(g.build_ratio)}" for g in drift.groups if g.basis == "reference")
    return (f"{bracket}; beyond what the machine explains: {beyond} (only the reference's nearest part divided out "
            f"there, the rest is the build's)" + scatter)


def quantity_pairs(timing_pairs: Sequence[Tuple[dict, dict, str]]) -> List[Tuple[str, str, Measurement, Measurement]]:
    """(metric, category, base, new) for the quantities judged on rounds, out of each case's
    ({metric: Timing} base, {metric: Timing} new, category), each pair as compare judges it
    (judged_pair: near a coarse clock, on its rounds' fenced means)."""
    pairs = []
    for base, new, category in timing_pairs:
        for metric in METRICS:
            b, n = base.get(metric), new.get(metric)
            bm = b.measurement if b is not None else None
            nm = n.measurement if n is not None else None
            if bm is None or nm is None or bm.round_count < 2 or nm.round_count < 2:
                continue
            bm, nm = judged_pair(bm, nm, max(b.resolution_ms, n.resolution_ms))
            if min(bm.round_figures) > 0 and min(nm.round_figures) > 0:
                pairs.append((metric, category, bm, nm))
    return pairs
