"""Headline: the one figure per timed quantity (case × phase) that every view shows.

A case's metrics hold several times of one quantity (opbench's native engine: the wall time of
each Python call around the profiler, and the profiler's own per-call time). The suite's
declaration (Suite.timings) says which of them its reports present; this module names that
figure, with its unit and what measured it, so the JSON (`metrics.headline`), the Markdown,
the CSV rows, `compare` and `history` all say the same thing under the same name: `median_ms`,
the median of the round medians (docs/REPORT_FORMAT.md, "Headline figures").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Dict, Optional

from benchcore.measure import modes
from benchcore.report.figures import METRICS, Timing

if TYPE_CHECKING:
    from benchcore.report.model import CaseResult, Report
    from benchcore.suite import Suite

#: Timing.source → (figure name, what measured it)
FIGURES = {
    "profiler": ("profiler_ms", "the framework profiler's operator time per call"),
    "samples": ("call_ms", "wall time per call (perf_counter or CUDA events around a sync)"),
    "summary": ("call_ms", "wall time per call, summary only (the report kept no samples)"),
    "opperf": ("average_ms", "opperf's average per call (no samples)"),
}
UNIT = "ms"


@dataclass(frozen=True)
class Headline:
    """One quantity's figure and how far to trust it (times in ms)."""

    phase: str
    figure: str
    measured_by: str
    unit: str
    #: the median of the round medians (one round: the median; no samples: the average)
    median_ms: Optional[float]
    #: interquartile range of all samples, and that over the median (None without samples)
    iqr_ms: Optional[float]
    relative_iqr: Optional[float]
    #: (largest − smallest round median) / median_ms; None for one round
    round_spread: Optional[float]
    rounds: int
    samples: int
    #: relative IQR at or above benchcore.measure.measurement.NOISE_THRESHOLD
    noisy: bool
    #: two speeds (benchcore.measure.modes): "across processes" or "within a round", with the
    #: fast and the slow level; None with one speed. A round spread of a bimodal quantity is
    #: the distance between its speeds, not noise
    bimodal: Optional[str] = None
    fast_ms: Optional[float] = None
    slow_ms: Optional[float] = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Headline":
        """A stored headline; fields this version does not know (a newer report's) are left out."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def of_timing(phase: str, timing: Timing) -> Headline:
    figure, measured_by = FIGURES.get(timing.source, (f"{timing.source}_ms", timing.source))
    m = timing.measurement
    speeds = modes.of(m)
    return Headline(
        phase=phase, figure=figure, measured_by=measured_by, unit=UNIT, median_ms=timing.center_ms,
        iqr_ms=m.iqr if m else None, relative_iqr=m.relative_iqr if m else None,
        round_spread=m.round_spread if m else None, rounds=m.round_count if m else 1,
        samples=m.n if m else 0, noisy=bool(m and m.noisy), bimodal=speeds.kind if speeds else None,
        fast_ms=speeds.fast_ms if speeds else None, slow_ms=speeds.slow_ms if speeds else None)


def headlines(result: "CaseResult", suite: "Suite") -> Dict[str, Headline]:
    """{phase: Headline} for the phases the case measured, in METRICS order."""
    if not result.ok:
        return {}
    timings = suite.timings(result)
    return {phase: of_timing(phase, timings[phase]) for phase in METRICS if phase in timings}


def annotate(report: "Report", suite: "Suite") -> "Report":
    """Write each measured case's `metrics.headline` {phase: Headline dict} (in place; the
    report is returned for chaining). Recomputed from the samples every time, so a merged or
    re-written report never carries a stale one."""
    for result in report.results:
        if result.ok:
            result.metrics["headline"] = {phase: h.to_dict() for phase, h in headlines(result, suite).items()}
    return report
