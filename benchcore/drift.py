"""Drift: the change that every case of a comparison shares, and where it comes from.

Two sweeps of one build, run an hour apart on a shared VM, differ as a whole by several percent
(docs/COMPARING.md): the machine drifts. Judged case by case, such a shift turns into dozens of
"slower" verdicts. But a build can also change everything at once (a threading or allocator
change). Two readings tell them apart:

- the cases' common shift: the median over all compared quantities of log(new / base), which a
  change to a minority of the cases does not move;
- the machine reference (benchcore.reference), timed in every round of both sweeps, which no
  build change touches.

When the two agree within the effect threshold, or the reference is too noisy to say they
differ (its 95% bounds reach the cases' shift: on a VM whose memory bandwidth swings by a fifth
from one second to the next, a handful of reference timings is), the shift is taken for the
machine's, and the cases' median (the more precise of the two) is divided out of every case
before it is judged; the build's own sweep-wide change is then `noisy` or `same`. When the
reference clearly disagrees, only its shift is divided out, and the rest is reported as a
build-wide change with its own verdict. Without a reference (older reports), nothing is divided
out and the shift is only reported. An interleaved A/B run (`ab`) needs none of this: drift hits
both sides alike, so a common shift there is the build's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from . import reference
from .stats import Measurement
from .timing import METRICS

#: fewer quantities than this make the cases' median a poor estimate of a common shift
MIN_QUANTITIES = 10
#: a median of n log ratios is about this many times noisier than their mean (normal data)
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)


@dataclass
class Drift:
    """The shift shared by all cases, and the part of it divided out before judging each case."""

    #: "interleaved" (ab: nothing to remove), "machine" (cases and reference agree: the cases'
    #: shift removed), "reference" (they disagree, or too few quantities for a common shift: the
    #: reference's shift removed), "none" (no reference: nothing removed)
    basis: str
    #: exp(median log(new/base)) over the quantities judged on rounds; None below MIN_QUANTITIES
    cases_ratio: Optional[float] = None
    quantities: int = 0
    #: machine reference new/base (geometric mean of its parts), with 95% bounds
    reference_ratio: Optional[float] = None
    reference_low: Optional[float] = None
    reference_high: Optional[float] = None
    #: the ratio divided out of every case, and the variance of its log (added to each test's)
    removed_ratio: float = 1.0
    removed_log_variance: float = 0.0
    #: what is left once the machine is accounted for: the build's own sweep-wide change
    build_ratio: Optional[float] = None
    #: faster / slower / same / noisy for the build-wide change; None when it cannot be judged
    verdict: Optional[str] = None
    reason: str = ""

    @property
    def removed_log(self) -> float:
        return math.log(self.removed_ratio)


def estimate(pairs: Sequence[Tuple[Measurement, Measurement]], base_reference: Optional[dict],
             new_reference: Optional[dict], interleaved: bool, threshold: float) -> Drift:
    """The Drift of a comparison from its round-based (base, new) Measurement pairs and the two
    reports' reference blocks (benchcore.reference.of_report)."""
    cases = _cases_shift(pairs)
    reference = None if interleaved else reference_shift(base_reference, new_reference)
    limit = math.log1p(threshold)
    drift = Drift("none", quantities=len(pairs))
    if cases is not None:
        drift.cases_ratio = math.exp(cases[0])
    if reference is not None:
        drift.reference_ratio, drift.reference_low, drift.reference_high = (
            math.exp(reference[0]), *_bounds(reference[0], reference[1]))
    if interleaved:
        drift.basis = "interleaved"
        drift.build_ratio = drift.cases_ratio
        drift.verdict = _build_verdict(cases, limit)
        drift.reason = "interleaved A/B run: the machine's drift hits both sides alike, so a common shift is the build's"
    elif reference is None:
        drift.reason = ("no machine reference in both reports (older reports): a common shift cannot be told from "
                        "a machine difference, and nothing is removed")
    elif cases is None:
        drift.basis, drift.removed_ratio, drift.removed_log_variance = "reference", drift.reference_ratio, reference[1]
        drift.reason = (f"too few quantities ({len(pairs)} < {MIN_QUANTITIES}) for a common shift: the machine "
                        f"reference's {_pct(drift.reference_ratio)} is removed from every case")
    else:
        gap = (cases[0] - reference[0], cases[1] + reference[1])  # the build's own shift, and its variance
        drift.build_ratio = math.exp(gap[0])
        drift.verdict = _build_verdict(gap, limit)
        moved = f"the cases moved {_pct(drift.cases_ratio)} together and the machine reference {_pct(drift.reference_ratio)}"
        if abs(gap[0]) <= limit or drift.verdict == "noisy":
            drift.basis, drift.removed_ratio, drift.removed_log_variance = "machine", drift.cases_ratio, cases[1]
            why = ("the machine's drift" if abs(gap[0]) <= limit else
                   f"the reference ({_pct(drift.reference_low)} to {_pct(drift.reference_high)}) cannot rule out "
                   "that the machine did it")
            drift.reason = f"{moved}: {why}, removed from every case"
        else:
            drift.basis, drift.removed_ratio, drift.removed_log_variance = "reference", drift.reference_ratio, reference[1]
            drift.reason = (f"{moved}: only the reference's shift is removed from every case, and the build as a "
                            f"whole changed {_pct(drift.build_ratio)}")
    return drift


def _build_verdict(shift: Optional[Tuple[float, float]], limit: float) -> Optional[str]:
    """faster / slower / same / noisy for a sweep-wide (log shift, variance): beyond the
    threshold and beyond its 95% bounds → a change; bounds inside the threshold → same."""
    if shift is None:
        return None
    change, half = shift[0], 1.96 * math.sqrt(shift[1])
    if abs(change) > limit and abs(change) > half:
        return "slower" if change > 0 else "faster"
    return "same" if abs(change) + half <= limit else "noisy"


def _cases_shift(pairs: Sequence[Tuple[Measurement, Measurement]]) -> Optional[Tuple[float, float]]:
    """(median log ratio of the centers, the variance of that median), or None with too few."""
    if len(pairs) < MIN_QUANTITIES:
        return None
    logs = np.array([math.log(new.center / base.center) for base, new in pairs])
    median = float(np.median(logs))
    spread = 1.4826 * float(np.median(np.abs(logs - median)))  # MAD: robust to the cases that did change
    return median, (MEDIAN_EFFICIENCY * spread) ** 2 / len(logs)


def reference_shift(base: Optional[dict], new: Optional[dict]) -> Optional[Tuple[float, float]]:
    """(log of the reference's new/base, its variance), averaged over the reference's parts;
    None without a reference on both sides, or references of different versions."""
    if not base or not new or base.get("version") != new.get("version"):
        return None
    logs, variances = [], []
    for part in reference.PARTS:
        b, n = _measurement(base.get(part)), _measurement(new.get(part))
        if b is None or n is None or b.round_count < 2 or n.round_count < 2:
            return None
        logs.append(math.log(n.center / b.center))
        variances.append(_difference_variance(b, n))
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


def _pct(ratio: Optional[float]) -> str:
    return "---" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"


def round_pairs(timing_pairs: Sequence[Tuple[dict, dict]]) -> List[Tuple[Measurement, Measurement]]:
    """The (base, new) Measurements judged on rounds, out of each case's {metric: Timing} pairs."""
    pairs = []
    for base, new in timing_pairs:
        for metric in METRICS:
            b, n = base.get(metric), new.get(metric)
            bm = b.measurement if b is not None else None
            nm = n.measurement if n is not None else None
            if (bm is not None and nm is not None and bm.round_count > 1 and nm.round_count > 1
                    and min(bm.round_medians) > 0 and min(nm.round_medians) > 0):
                pairs.append((bm, nm))
    return pairs
