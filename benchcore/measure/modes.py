"""Modes: a timed quantity with two speeds is bimodal, not noisy.

Why: some cases run at one of two speeds, set per process or flipping inside one:
`broadcast_add` on (10000, 1) took 4–6 µs in some fresh processes and 8–14 µs in others, and a
LeakyReLU round alternated 0.45 and 2–4 ms calls (docs/STEADY_STATE.md says why). Read as noise
such a case shows a round spread of hundreds of percent, and a comparison of three rounds a side
calls it "slower" whenever one side happens to draw the slow speed. So a Measurement is checked
for two clusters — of its round medians (across processes) or of one round's samples (within a
round; rounds too short to be judged alone, together) — and a comparison of a bimodal quantity
calls a change only when it lies beyond both speeds. lab/figures/modes_figures measures how often
the rules label rounds of known truth (docs/STEADY_STATE.md, *What the two rules cannot tell*).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Protocol, Sequence, Tuple

import numpy as np


class Measurement(Protocol):
    """What modes reads of a benchcore.measure.measurement.Measurement (named here, not imported:
    the Measurement writes its modes, so importing it back would close a circle)."""

    rounds: Sequence[Sequence[float]]
    round_medians: Sequence[float]
    round_count: int

#: two clusters whose nearest members are at least this ratio apart are two speeds
MODE_RATIO = 1.5
#: rounds needed to see two speeds across processes (two rounds are only a spread)
MIN_ROUNDS = 3
#: samples a round needs before its own two clusters are believed, and the share of them the
#: smaller cluster must hold (a few slow calls are outliers, not a second speed)
MIN_ROUND_SAMPLES = 10
MIN_CLUSTER_SHARE = 0.2
ACROSS, WITHIN = "across processes", "within a round"


@dataclass(frozen=True)
class Modes:
    """The two speeds of a bimodal quantity."""

    #: ACROSS (rounds sit at two levels) or WITHIN (one round's samples form two clusters)
    kind: str
    fast_ms: float
    slow_ms: float
    #: the rounds (1-based) at the slow speed (ACROSS), or holding two clusters (WITHIN)
    rounds: Tuple[int, ...]

    def describe(self) -> str:
        which = "slow" if self.kind == ACROSS else "with both speeds"
        return (f"bimodal {self.kind}: {_ms(self.fast_ms)} and {_ms(self.slow_ms)} "
                f"(round{'s' if len(self.rounds) > 1 else ''} {', '.join(map(str, self.rounds))} {which})")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "fast_ms": self.fast_ms, "slow_ms": self.slow_ms, "rounds": list(self.rounds),
                "text": self.describe()}


def _ms(value: float) -> str:
    return f"{value * 1e3:.3g} µs" if value < 1 else f"{value:.3g} ms"


def split(values: Sequence[float], smallest: int = 1) -> Optional[int]:
    """Where sorted `values` break into two clusters: the index of the first value of the upper
    cluster at the widest ratio gap between neighbours, if that gap reaches MODE_RATIO and both
    clusters hold at least `smallest` values; else None."""
    ordered = sorted(values)
    best, at = 1.0, None
    for i in range(max(1, smallest), len(ordered) - smallest + 1):
        low = ordered[i - 1]
        ratio = ordered[i] / low if low > 0 else 1.0
        if ratio > best:
            best, at = ratio, i
    return at if at is not None and best >= MODE_RATIO else None


def across_rounds(m: "Measurement") -> Optional[Modes]:
    """Two levels of round medians whose rounds do not overlap: the fast rounds' samples'
    upper quartile below the slow rounds' lower quartile (rounds as wide as the gap are noise)."""
    medians = m.round_medians
    if m.round_count < MIN_ROUNDS:
        return None
    at = split(medians)
    if at is None:
        return None
    ordered = sorted(medians)
    slow = tuple(i + 1 for i, v in enumerate(medians) if v >= ordered[at])
    fast_samples = [s for i, r in enumerate(m.rounds, 1) if i not in slow for s in r]
    slow_samples = [s for i, r in enumerate(m.rounds, 1) if i in slow for s in r]
    if np.percentile(fast_samples, 75) >= np.percentile(slow_samples, 25):
        return None
    return Modes(ACROSS, float(np.median(ordered[:at])), float(np.median(ordered[at:])), slow)


def within_rounds(m: "Measurement") -> Optional[Modes]:
    """Rounds whose samples form two clusters (the levels: the clusters' medians, pooled).

    A round of MIN_ROUND_SAMPLES or more is judged alone. Shorter rounds (7 samples a round at
    `-r 20` over 3 rounds) are judged together (_short_rounds)."""
    fast: List[float] = []
    slow: List[float] = []
    found = []
    for number, samples in enumerate(m.rounds, 1):
        if len(samples) < MIN_ROUND_SAMPLES:
            continue
        at = _cluster_split(samples)
        if at is not None:
            ordered = sorted(samples)
            fast += ordered[:at]
            slow += ordered[at:]
            found.append(number)
    if not found:
        return _short_rounds(m)
    return Modes(WITHIN, float(np.median(fast)), float(np.median(slow)), tuple(found))


def _cluster_split(samples: Sequence[float]) -> Optional[int]:
    return split(samples, max(2, int(np.ceil(MIN_CLUSTER_SHARE * len(samples)))))


def _short_rounds(m: "Measurement") -> Optional[Modes]:
    """The rounds too short to be judged alone, pooled: their samples split by the same rule as
    one long round's, and some round holds at least two samples of each cluster (the rounds it
    names). Why: a round of 7 calls alternating 0.8 and 16 ms (LeakyReLU gelu, the quickstart's
    sizes) beside two rounds at 0.8 ms is neither a long enough round nor, its median being
    slow and its samples both, two levels of rounds (across_rounds); left unnamed, it showed as a
    round spread of 1,796%. A split that no round holds both sides of is between rounds:
    across_rounds' question, not this one's."""
    short = [(number, samples) for number, samples in enumerate(m.rounds, 1) if len(samples) < MIN_ROUND_SAMPLES]
    pooled = sorted(s for _number, samples in short for s in samples)
    if len(pooled) < MIN_ROUND_SAMPLES:
        return None
    at = _cluster_split(pooled)
    if at is None:
        return None
    cut = pooled[at]
    both = tuple(number for number, samples in short
                 if sum(s >= cut for s in samples) >= 2 and sum(s < cut for s in samples) >= 2)
    if not both:
        return None
    return Modes(WITHIN, float(np.median(pooled[:at])), float(np.median(pooled[at:])), both)


def of(m: Optional["Measurement"]) -> Optional[Modes]:
    """The quantity's two speeds, or None when it has one."""
    if m is None:
        return None
    return across_rounds(m) or within_rounds(m)


def odd_rounds(m: "Measurement") -> Tuple[int, ...]:
    """The rounds (1-based) that are not at the quantity's usual speed: across processes the
    rounds of the rarer speed, within a round those holding both; () with one speed."""
    found = of(m)
    if found is None:
        return ()
    if found.kind == WITHIN or 2 * len(found.rounds) <= m.round_count:
        return found.rounds
    return tuple(i for i in range(1, m.round_count + 1) if i not in found.rounds)


def _range(m: "Measurement", modes: Optional[Modes]) -> Tuple[float, float]:
    if modes is not None:
        return modes.fast_ms, modes.slow_ms
    return min(m.round_medians), max(m.round_medians)


def beyond_both_speeds(base: "Measurement", new: "Measurement", threshold: float) -> int:
    """1 when every speed of `new` is slower than every speed of `base` by more than the
    threshold, -1 when faster, 0 when the sides' speeds overlap."""
    b_lo, b_hi = _range(base, of(base))
    n_lo, n_hi = _range(new, of(new))
    if n_lo > b_hi * (1 + threshold):
        return 1
    if n_hi * (1 + threshold) < b_lo:
        return -1
    return 0


def pair_text(base: "Measurement", new: "Measurement") -> Optional[str]:
    """What a comparison says about a quantity bimodal on either side; None when neither is."""
    parts = [f"{label} {found.describe()}" for label, found in (("base", of(base)), ("new", of(new))) if found]
    return "; ".join(parts) if parts else None


#: the slow rounds "waited" when their threads' share of time waiting for a CPU exceeds the fast
#: rounds' by this much (absolute) and by half again; the other processes "were busier" when
#: they used this many more CPUs' worth during the slow rounds
WAIT_MARGIN, WAIT_FACTOR, OTHERS_MARGIN = 0.10, 1.5, 0.5
#: slow rounds blamed on the hypervisor: this much more of the CPUs' time stolen, and this factor
STEAL_MARGIN, STEAL_FACTOR = 0.05, 1.5


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def _median_of(records: Sequence[dict], rounds: Sequence[int], key: str) -> Optional[float]:
    values = [records[i - 1].get(key) for i in rounds if 0 < i <= len(records)]
    values = [v for v in values if isinstance(v, (int, float))]
    return float(np.median(values)) if values and len(values) == len(rounds) else None


def cause(found: Modes, records: Optional[Sequence[dict]], round_count: int) -> Optional[str]:
    """The likely cause of `found`'s two speeds, from the rounds' contention records
    (benchcore.measure.contention: one per round, in the rounds' order); None without them.

    Across processes: whether the slow rounds' threads waited for a CPU more than the fast
    rounds' (CPU contention: other processes held the CPUs), or the hypervisor stole more of the
    VM's CPU time while they ran (steal, which no thread's wait shows; records written before
    steal was recorded skip this test), or ran while other processes kept the machine busier
    (shared caches, memory bandwidth, the host's cores); when every round waited alike and much,
    the machine was busy throughout and may still be the cause, within rounds; otherwise the
    cause is not the machine's load. Within a round: how much it waited."""
    if not records or len(records) != round_count or any(not isinstance(r, dict) for r in records):
        return None
    if found.kind == WITHIN:
        wait = _median_of(records, found.rounds, "cpu_wait_share")
        others = _median_of(records, found.rounds, "others_cpus")
        if wait is None or others is None:
            return None
        return (f"the round's threads waited for a CPU {_pct(wait)} of their time; other processes "
                f"used {others:.1f} CPUs meanwhile")
    fast_rounds = [i for i in range(1, round_count + 1) if i not in found.rounds]
    waits = [_median_of(records, rounds, "cpu_wait_share") for rounds in (found.rounds, fast_rounds)]
    others = [_median_of(records, rounds, "others_cpus") for rounds in (found.rounds, fast_rounds)]
    if None in waits or None in others:
        return None
    steals = [_median_of(records, rounds, "steal_share") for rounds in (found.rounds, fast_rounds)]
    evidence = (f"the slow rounds' threads waited for a CPU {_pct(waits[0])} of their time, the fast "
                f"rounds' {_pct(waits[1])}; other processes used {others[0]:.1f} and {others[1]:.1f} CPUs"
                + ("" if None in steals else
                   f"; the hypervisor stole {_pct(steals[0])} and {_pct(steals[1])} of the CPUs' time"))
    if waits[0] - waits[1] >= WAIT_MARGIN and waits[0] >= WAIT_FACTOR * waits[1]:
        return f"likely cause: CPU contention from other processes ({evidence})"
    if None not in steals and steals[0] - steals[1] >= STEAL_MARGIN and steals[0] >= STEAL_FACTOR * steals[1]:
        return f"likely cause: the hypervisor took the VM's CPUs (steal) ({evidence})"
    if others[0] - others[1] >= OTHERS_MARGIN:
        return f"likely cause: other processes' load sharing the machine ({evidence})"
    if min(waits) >= WAIT_MARGIN:
        # a round's record covers the whole case: bursts inside rounds do not show in it
        return (f"the machine was busy throughout ({evidence}): its load may split the rounds at a finer "
                "scale than a round's record shows; cause not proven")
    return f"not the machine's load ({evidence}): cause unknown"


def described(m: "Measurement", records: Optional[Sequence[dict]]) -> Optional[dict]:
    """The JSON of `m`'s two speeds with their likely cause (None when it has one speed)."""
    found = of(m)
    if found is None:
        return None
    data = found.to_dict()
    why = cause(found, records, m.round_count)
    if why is not None:
        data["cause"] = why
        data["text"] = f"{data['text']}; {why}"
    return data
