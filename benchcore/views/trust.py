"""Trust: how far a report's figures can be trusted, said before the figures themselves.

Why: a table of medians reads as facts. Whether they are depends on things the table does not
show: whether the frameworks competed with the rest of the machine for its cores, whether each
process reached steady state before it was timed, how far fresh processes of one build disagree
(the round spread), which quantities run at two speeds, and what the machine reported about
itself at the start. Both suites' Markdown views open with this section, so the first thing a
newcomer reads is how much of the table to believe (docs/STEADY_STATE.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, NamedTuple, Optional, Sequence

import numpy as np

from benchcore.measure import modes
from benchcore.measure.measurement import Measurement

if TYPE_CHECKING:
    from benchcore.report.model import CaseResult
    from benchcore.suite import Suite

#: the machine's warnings (benchcore.execute.system) not worth repeating: rounds average over them
QUIET = ("ASLR",)


def section(measurements: Sequence[Measurement], case_metrics: Sequence[dict], settings: dict,
            environment: dict) -> List[str]:
    """Markdown lines: threads, warmup and steady state, round spread, two speeds, the machine."""
    items = [_threads(settings, environment), _warmup(case_metrics, settings), _spread(measurements),
             _contention(case_metrics), _machine(environment)]
    return ["## How far to trust these figures", "", *[f"- {item}" for item in items if item], ""]


def _threads(settings: dict, environment: dict) -> str:
    threads = settings.get("threads")
    if threads:
        return (f"Threads: {threads} per framework (`--threads`), so the rest of the machine does not compete "
                "with every call for every core.")
    return ("Threads: not set; the frameworks use every core, and anything else running competes with every "
            "call (pass `--threads N`, leaving a core to the system).")


def _warmup(case_metrics: Sequence[dict], settings: dict) -> Optional[str]:
    records = _steady_records(case_metrics)
    if not records:
        return None
    rounds = (settings.get("rounds") or {})
    warmup = rounds.get("warmup_per_round", settings.get("warmup"))
    extra = sum(1 for r in records if r.get("extra_warmup"))
    unsteady = _unsteady(records)
    text = (f"Warmup: {warmup} call(s) in every worker process before its timed calls; {extra} of {len(records)} "
            "case-rounds still started cold and had their first timed calls turned into extra warmup")
    if unsteady:
        return text + f"; {unsteady} did not reach steady state (listed under *Steady state and two speeds*)."
    return text + "; every case-round reached steady state."


def _steady_records(case_metrics: Sequence[dict]) -> List[dict]:
    return [r for m in case_metrics for r in (m.get("steady") or []) if isinstance(r, dict)]


def _unsteady(records: Sequence[dict]) -> int:
    return sum(1 for r in records if r.get("reached") is False)


class RoundFigures(NamedTuple):
    """What the rounds of a sweep's quantities show."""

    rounds: int
    #: median and 90th percentile of the one-speed quantities' round spreads (None without any)
    spread_p50: Optional[float]
    spread_p90: Optional[float]
    #: how many quantities run at two speeds (benchcore.measure.modes)
    bimodal: int


def _round_figures(measurements: Sequence[Measurement]) -> Optional[RoundFigures]:
    """None without rounds."""
    with_rounds = [m for m in measurements if m.round_count > 1]
    if not with_rounds:
        return None
    speeds = [modes.of(m) for m in with_rounds]
    spreads = [m.round_spread for m, two in zip(with_rounds, speeds) if two is None and m.round_spread is not None]
    p50, p90 = np.percentile(spreads, [50, 90]) if spreads else (None, None)
    return RoundFigures(with_rounds[0].round_count, p50, p90, sum(two is not None for two in speeds))


def _spread(measurements: Sequence[Measurement]) -> Optional[str]:
    figures = _round_figures(measurements)
    if figures is None:
        return ("Rounds: one process per case; its samples say how steady that process was, not how far another "
                "process of the same build would differ (time with `--rounds`).")
    rounds, p50, p90, bimodal = figures
    text = f"Rounds: {rounds} fresh processes per case"
    if p50 is not None:
        text += (f"; the round medians of a quantity lie {p50 * 100:.0f}% apart (median; 90th percentile "
                 f"{p90 * 100:.0f}%): differences between two reports smaller than that are what fresh processes "
                 "of one build show, and `compare` judges them so")
    if bimodal:
        text += (f"; {bimodal} quantit{'y runs' if bimodal == 1 else 'ies run'} at two speeds (*bimodal*, "
                 "listed below): read both speeds, not the median")
    return text + "."


def _shares(case_metrics: Sequence[dict], key: str) -> List[float]:
    """One contention field (benchcore.measure.contention) of every case-round that has it."""
    records = [r for m in case_metrics for r in (m.get("contention") or []) if isinstance(r, dict)]
    return [r[key] for r in records if isinstance(r.get(key), (int, float))]


def _contention(case_metrics: Sequence[dict]) -> Optional[str]:
    """How long the workers' threads waited for a CPU, and how much of the VM's CPU time the
    hypervisor took (steal), which no thread's wait shows (benchcore.measure.contention): the
    causes of the second speed measured on a shared machine (docs/STEADY_STATE.md, *Why two
    speeds*)."""
    waits, others, steals = (_shares(case_metrics, key) for key in ("cpu_wait_share", "others_cpus", "steal_share"))
    if not waits or not others:
        return None
    p50, p90 = np.percentile(waits, [50, 90])
    text = (f"CPU contention: the workers' threads waited for a CPU {p50 * 100:.0f}% of their time (median "
            f"case-round; 90th percentile {p90 * 100:.0f}%) while other processes used {np.median(others):.1f} "
            "CPUs")
    stolen = np.percentile(steals, [50, 90]) if steals else (0.0, 0.0)
    if steals:  # reports written before steal was recorded have none
        text += (f"; the hypervisor took {stolen[0] * 100:.0f}% of the VM's CPU time (steal: median case-round; "
                 f"90th percentile {stolen[1] * 100:.0f}%)")
    if p90 >= modes.WAIT_MARGIN or stolen[1] >= modes.STEAL_MARGIN:
        return text + ("; at such a load a call can be preempted in the middle of its kernel, and a case's rounds "
                       "may split into two speeds (each bimodal quantity below names its likely cause).")
    return text + "."


def _machine(environment: dict) -> Optional[str]:
    start = ((environment or {}).get("system") or {}).get("start") or {}
    advice = [a for a in start.get("advice") or [] if a.get("check") not in QUIET]
    if not start:
        return None
    if not advice:
        return "Machine: no warning about its state at the start (busy processes, load, speed swings, governor)."
    return ("Machine: not quiet at the start — " + "; ".join(f"{a.get('check')}: {a.get('found')}" for a in advice)
            + ". The figures carry that noise.")


def sweep_line(results: Sequence["CaseResult"], suite: "Suite", prog: str) -> Optional[str]:
    """The section's figures in one stderr line at the end of a sweep with rounds, so that a
    user who writes JSON only still reads how far the figures go (pyperf warns the same way
    when a benchmark looks unstable): over the headline figures `suite` declares. None without
    rounds, where the Markdown says why."""
    ok = [r for r in results if r.ok]
    measurements = [t.measurement for r in ok for t in suite.timings(r).values() if t.measurement is not None]
    case_metrics = [r.metrics or {} for r in ok]
    figures = _round_figures(measurements)
    if figures is None:
        return None
    rounds, p50, p90, bimodal = figures
    parts = [f"{rounds} rounds" + (f", round medians {p50 * 100:.0f}% apart (median; 90th percentile "
                                   f"{p90 * 100:.0f}%)" if p50 is not None else "")]
    if bimodal:
        parts.append(f"{bimodal} quantit{'y' if bimodal == 1 else 'ies'} at two speeds")
    unsteady = _unsteady(_steady_records(case_metrics))
    if unsteady:
        parts.append(f"{unsteady} case-round{'s' if unsteady != 1 else ''} not steady")
    steals = _shares(case_metrics, "steal_share")
    stolen = np.percentile(steals, 90) if steals else 0.0
    if stolen >= modes.STEAL_MARGIN:
        parts.append(f"the hypervisor took {stolen * 100:.0f}% of the CPU time (steal, 90th percentile case-round)")
    return f"{prog}: trust: " + "; ".join(parts) + " (the Markdown report: *How far to trust these figures*)"
