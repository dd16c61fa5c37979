"""Steady state: whether a round's timed samples are past the process's cold start.

Why: a fixed warmup count is a guess. A fresh process pays one-off costs on its first calls —
TorchScript's profiling executor profiles, then optimises, then runs the optimised graph;
torch.compile and oneDNN build kernels and primitives; the allocator and the kernel fault in
fresh pages — and how many calls that takes depends on the model, the sizes and the build. When
the warmup is too short, the round's first timed samples are compilation, and a mean over them
is not a speed (issue 20: a `jit` forward's mean 24.7 ms against its median 13.5 ms).

So after the timed runs the runner asks this module whether the round's first samples stand
apart from the rest; if they do, they become warmup (more runs are timed in their place), at
most `RunSettings.max_extra_warmup` of them, and the round records how many warmup calls it ran
and whether it reached steady state. A series that still has not settled, or that drifts from
its first third to its last, is marked with the reason: it is never silently averaged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

#: a leading sample this many times the settled level (the median of the series' second half)…
COLD_RATIO = 1.25
#: …and this many robust standard deviations of the second half above it stands apart: a cold
#: call, not the scatter the settled calls have anyway
COLD_SIGMAS = 4.0
#: fewer samples than this leave no settled half to hold the first ones against
MIN_SAMPLES = 4
#: a change of the median from the series' first third to its last beyond this is a drift, when
#: the thirds' interquartile ranges do not overlap either…
DRIFT_RATIO = 0.20
#: …and each third holds at least 5 samples (the quickstart's 7 samples a round gave thirds of
#: two, and under load 40% of its case-rounds "drifted": a spike is not a trend)
DRIFT_MIN_SAMPLES = 15
ROBUST_SIGMA = 1.4826  # MAD → standard deviation for normal scatter


@dataclass(frozen=True)
class Steadiness:
    """What one series of timed samples says about its own steady state."""

    #: leading samples that stand apart from the settled level
    cold: int
    #: (median of the last third / median of the first third) - 1, when the series drifts
    drift: Optional[float] = None

    @property
    def steady(self) -> bool:
        return self.cold == 0 and self.drift is None

    def reason(self, extra_warmup: int) -> Optional[str]:
        """Why the series is not in steady state (None when it is), in words for the report."""
        if self.cold:
            return (f"the first {self.cold} timed sample(s) still stand apart from the rest after "
                    f"{extra_warmup} extra warmup call(s)")
        if self.drift is not None:
            return f"the samples drift by {self.drift * 100:+.0f}% from the first third to the last"
        return None


def cold_head(samples: Sequence[float]) -> int:
    """How many leading samples belong to a cold start (0: none, or too few to say): up to the
    last sample of the series' first half that stands apart from the settled level.

    Not only a leading run: TorchScript's profiling executor runs its first call at the
    interpreter's speed, then compiles on the next few (the quickstart's `jit_premul` here: 62,
    330, 245, 105, then 50-68 ms; its backward 90, 2269, 349, 1009, then ~95 ms). The settled
    level is the median of the second half, its scatter the second half's median absolute
    deviation; a sample stands apart when it exceeds both COLD_RATIO times that level and
    COLD_SIGMAS robust deviations above it."""
    n = len(samples)
    if n < MIN_SAMPLES:
        return 0
    settled = np.asarray(samples[n // 2:], dtype=np.float64)
    level = float(np.median(settled))
    scale = ROBUST_SIGMA * float(np.median(np.abs(settled - level)))
    limit = max(level * COLD_RATIO, level + COLD_SIGMAS * scale)
    apart = [i for i in range(n // 2) if samples[i] > limit]
    return apart[-1] + 1 if apart else 0


def drift(samples: Sequence[float]) -> Optional[float]:
    """The relative change of the median from the first third of the series to the last, when it
    exceeds DRIFT_RATIO and the thirds' interquartile ranges do not overlap; else None."""
    n = len(samples)
    if n < DRIFT_MIN_SAMPLES:
        return None
    third = n // 3
    first = np.asarray(samples[:third], dtype=np.float64)
    last = np.asarray(samples[n - third:], dtype=np.float64)
    change = float(np.median(last) / np.median(first)) - 1 if np.median(first) > 0 else 0.0
    lo_first, hi_first = np.percentile(first, [25, 75])
    lo_last, hi_last = np.percentile(last, [25, 75])
    apart = hi_first < lo_last or hi_last < lo_first
    return change if abs(change) > DRIFT_RATIO and apart else None


def judge(samples: Sequence[float]) -> Steadiness:
    head = cold_head(samples)
    return Steadiness(head, None if head else drift(samples))


def judge_phases(phases: Sequence[Sequence[float]]) -> Steadiness:
    """One iteration's phases (forward, backward) together: an iteration is cold when any of its
    phases is, and the series drifts when any phase does."""
    judged = [judge(p) for p in phases if p]
    cold = max((j.cold for j in judged), default=0)
    drifts = [j.drift for j in judged if j.drift is not None]
    return Steadiness(cold, None if cold or not drifts else max(drifts, key=abs))


def round_record(warmup: int, extra_warmup: int, state: Steadiness) -> dict:
    """The report's record of one round's warmup (a metrics dict's `steady`, a list with one entry
    per round once rounds are combined)."""
    return {"warmup_calls": warmup + extra_warmup, "extra_warmup": extra_warmup,
            "reached": state.steady, "reason": state.reason(extra_warmup)}


def summary(metrics: dict) -> Optional[str]:
    """One line for a view: the extra warmup a case's rounds needed, and any that never settled;
    None when every round was steady after the fixed warmup (or nothing was recorded)."""
    records = [r for r in (metrics.get("steady") or []) if isinstance(r, dict)] if isinstance(metrics, dict) else []
    if not records:
        return None
    extra = [r.get("extra_warmup") or 0 for r in records]
    unsteady = [i + 1 for i, r in enumerate(records) if r.get("reached") is False]
    if not any(extra) and not unsteady:
        return None
    parts = [f"extra warmup per round {extra}"] if any(extra) else []
    if unsteady:
        reasons = sorted({records[i - 1].get("reason") or "" for i in unsteady})
        parts.append(f"not steady in round(s) {', '.join(map(str, unsteady))}: {'; '.join(reasons)}")
    return "; ".join(parts)


#: what the views' section says before listing the cases (docs/STEADY_STATE.md has the why)
SECTION_INTRO = ("Every round ran the whole warmup asked for; timed calls that still stood apart from the rest "
                 "were turned into extra warmup (bounded). Listed: cases that needed extra warmup or did not "
                 "settle, and quantities with two speeds (*bimodal*: across processes, or within one round), "
                 "whose round spread is not noise; `compare` calls those changed only beyond both speeds. "
                 "See docs/STEADY_STATE.md.")


def markdown_section(cases: Sequence[tuple]) -> List[str]:
    """The views' section on what is not one steady speed, from (label, metrics, {phase: the
    bimodal text or None}) per case; empty when every case was steady at one speed."""
    lines: List[str] = []
    for label, metrics, bimodal in cases:
        note = summary(metrics)
        if note:
            lines.append(f"- `{label}`: {note}")
        lines += [f"- `{label}` {phase}: {text}" for phase, text in bimodal.items() if text]
    if not lines:
        return []
    return ["## Steady state and two speeds", "", SECTION_INTRO, "", *lines, ""]
