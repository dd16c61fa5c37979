"""Verdicts on instruction counts: two reports' counts → slower / faster / same, with the functions.

Counts need no test of significance: the same call of the same build counts the same
instructions to within a few hundredths of a percent (docs/INSTRUCTIONS.md). So a quantity (a
case's forward or backward `Ir`) is judged on its medians: a change beyond the *band* —
the largest of the floor (`FLOOR`, 0.5%), an absolute floor (`ABSOLUTE_FLOOR` instructions: what
another heap layout moves a call's count by) and the two sides' own spreads between repeats added —
is `slower` or `faster`, anything within it `same`.

A quantity whose repeats disagree by more than `REPEATABLE` (a random operator drawing other
numbers, work that depends on thread scheduling, a lazy initialisation inside the measured
call) is *non-repeatable*: it is still judged, with its own spread as the band, and named with
the reason the repeats show (`reason_of`). A quantity counted once has no spread: its band is
the floor and the verdict says its repeatability is unknown.

For every quantity judged slower or faster, `functions` lists the functions whose instruction
counts moved most between the two reports' stored profiles (benchcore.measure.callgrind.profile_delta),
inclusive and exclusive: where the change lies; and the shared objects whose exclusive counts
moved, in all and in their unnamed functions (a stripped build's functions named by address,
which do not line up between builds). Each side stores only its top functions
(callgrind.TOP_FUNCTIONS by each kind): a function stored on one side only is shown below the
other side's top, with the range its change may be, never as a move to or from 0. How a
comparison shows them (the few that explain most of each change, names shortened):
benchcore.views.count_comparison.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

from benchcore.errors import UsageError
from benchcore.measure import callgrind
from benchcore.measure.instructions import ENGINE, HEADLINE, PHASES, Counts, any_counted, counts_of, has_counts
from benchcore.report.labels import case_labels
from benchcore.report.model import Report

#: the smallest change a count verdict reports (a fraction)
FLOOR = 0.005
#: ... and in instructions: a process whose heap is laid out otherwise (another build, another
#: version of the harness) counts a call a few hundred to a few thousand instructions more or
#: less, whatever its size; one build in one environment counts it to the instruction. Fitted on
#: two sweeps of tiny MXNet cases (up to 1,973 apart); on fresh pairs at the count shapes 243 of
#: 245 repeatable quantities stayed within it, the largest beyond 4,638 (lab/notes/instructions.md)
ABSOLUTE_FLOOR = 2500
#: spread between repeats beyond which a quantity is named non-repeatable
REPEATABLE = 0.0025
#: functions stored per changed quantity and kind (inclusive, exclusive), at least
TOP_CHANGED = 8
#: functions a view shows per changed quantity, those that explain most of its change (--functions)
FUNCTIONS = 5
RESTS_ON = ("instruction counts (callgrind Ir): medians of the repeats against max(floor, 2,500 instructions, "
            "both sides' spreads)")


@dataclass
class CountVerdict:
    """One quantity of one case, judged on counts."""

    key: str
    label: str
    phase: str
    quantity: str
    base: float
    new: float
    ratio: float
    band: float
    verdict: str
    repeats: List[int]
    #: why the repeats disagree (None: they agree within REPEATABLE)
    non_repeatable: Optional[str] = None
    cycles_ratio: Optional[float] = None
    functions: Optional[Dict[str, List[dict]]] = None

    @property
    def change_pct(self) -> float:
        return (self.ratio - 1.0) * 100.0


@dataclass
class CountComparison:
    """Every quantity both reports counted, judged (see the module docstring)."""

    floor: float = FLOOR
    verdicts: List[CountVerdict] = field(default_factory=list)
    #: functions a view shows per changed quantity (the JSON keeps at least TOP_CHANGED of each kind)
    shown: int = FUNCTIONS
    #: matched cases one side has counts for and the other not
    uncounted: List[dict] = field(default_factory=list)
    #: differences of how the counts were taken (tool version, cache geometry)
    settings_differences: List[dict] = field(default_factory=list)

    def regressions(self, fail_above_pct: float) -> List[CountVerdict]:
        limit = 1.0 + fail_above_pct / 100.0
        return [v for v in self.verdicts if v.verdict == "slower" and v.ratio > limit]

    def to_dict(self) -> dict:
        tally = {name: sum(v.verdict == name for v in self.verdicts) for name in ("slower", "faster", "same")}
        return {"rests_on": RESTS_ON, "floor": self.floor, "absolute_floor": ABSOLUTE_FLOOR, "repeatable": REPEATABLE,
                "verdicts": tally,
                "non_repeatable": sum(v.non_repeatable is not None for v in self.verdicts),
                "functions_shown": self.shown,
                "quantities": [dict(asdict(v), change_pct=v.change_pct) for v in self.verdicts],
                "uncounted": self.uncounted, "settings_differences": self.settings_differences}


def is_counted(report: Report) -> bool:
    return any_counted(report.results)


def check_comparable(base: Report, new: Report) -> bool:
    """Whether the two reports are to be judged on counts; a UsageError when only one has them."""
    counted = is_counted(base), is_counted(new)
    if counted[0] != counted[1]:
        which, other = ("BASE", "NEW") if counted[0] else ("NEW", "BASE")
        raise UsageError(f"{which} holds instruction counts but {other} holds only timings; measure {other}'s "
                         "cases with --engine instructions too, or compare two timing reports")
    return counted[0]


def reason_of(counts: Counts) -> Optional[str]:
    """Why a quantity's repeats disagree, as they show it; None when they agree."""
    samples = counts.samples
    if len(samples) < 2:
        return None
    if counts.spread <= REPEATABLE:
        return None
    rest = Counts(samples[1:], counts.unit)
    if len(samples) > 2 and rest.spread <= REPEATABLE and samples[0] > max(samples[1:]):
        return (f"the first repeat counted {(samples[0] / rest.median - 1) * 100:.2f}% more than the rest "
                "(lazy initialisation inside the measured call)")
    return (f"counts vary by {counts.spread * 100:.2f}% between repeats (a random operator, or work that depends "
            "on thread scheduling)")


def judge(base: Counts, new: Counts, floor: float = FLOOR, absolute_floor: int = ABSOLUTE_FLOOR) -> tuple:
    """(verdict, band) of one quantity (see the module docstring)."""
    band = max(floor, base.spread + new.spread, absolute_floor / base.median if base.median else 0.0)
    ratio = new.median / base.median if base.median else float("inf")
    if abs(ratio - 1.0) <= band:
        return "same", band
    return ("slower" if ratio > 1.0 else "faster"), band


def compare_counts(base: Report, new: Report, floor: float = FLOOR, absolute_floor: int = ABSOLUTE_FLOOR,
                   shown: int = FUNCTIONS) -> CountComparison:
    """Every case counted in both reports, every phase, judged on Ir (see the module docstring);
    `absolute_floor` other than ABSOLUTE_FLOOR only for figures (lab/figures/instruction_figures);
    `shown`: functions per changed quantity for the views (each kind's list keeps at least that many)."""
    found = CountComparison(floor, shown=shown, settings_differences=_settings_differences(base, new))
    base_cases = {r.spec.key: r for r in base.results}
    new_cases = {r.spec.key: r for r in new.results}
    labels = case_labels(list(base_cases.values()) + [n for k, n in new_cases.items() if k not in base_cases])
    for key, b in base_cases.items():
        n = new_cases.get(key)
        if n is None or not (b.ok and n.ok):
            continue
        if has_counts(b.metrics) != has_counts(n.metrics):
            found.uncounted.append({"key": key, "label": labels[key], "base_counted": has_counts(b.metrics),
                                    "new_counted": has_counts(n.metrics)})
            continue
        for phase in PHASES:
            bc, nc = counts_of(b.metrics, phase), counts_of(n.metrics, phase)
            if bc is None or nc is None:
                continue
            found.verdicts.append(_verdict(key, labels[key], phase, b.metrics, n.metrics, bc, nc,
                                           (floor, absolute_floor), max(TOP_CHANGED, shown)))
    return found


def non_repeatable(base: Counts, new: Counts) -> Optional[str]:
    """Why a judged pair's counts may not repeat, side by side (None: both repeat): what a
    verdict names with the band it was judged by."""
    reasons = [f"{side}: {why}" for side, why in (("base", reason_of(base)), ("new", reason_of(new))) if why]
    if len(base.samples) < 2 or len(new.samples) < 2:
        reasons.append("counted once: whether its counts repeat is unknown")
    return "; ".join(reasons) or None


def _verdict(key: str, label: str, phase: str, bm: dict, nm: dict, bc: Counts, nc: Counts,
             floors: tuple, top: int) -> CountVerdict:
    verdict, band = judge(bc, nc, *floors)
    cycles = counts_of(bm, phase, "cycles_est"), counts_of(nm, phase, "cycles_est")
    result = CountVerdict(key, label, phase, HEADLINE, bc.median, nc.median, nc.median / bc.median if bc.median else
                          float("inf"), band, verdict, [len(bc.samples), len(nc.samples)],
                          non_repeatable(bc, nc),
                          cycles[1].median / cycles[0].median if all(cycles) and cycles[0].median else None)
    if verdict != "same":
        result.functions = callgrind.profile_delta(_profile(bm, phase), _profile(nm, phase), top,
                                                   _profile(bm, phase, "objects"), _profile(nm, phase, "objects"))
    return result


def _profile(metrics: dict, phase: str, key: str = "profile") -> List[dict]:
    return ((metrics or {}).get(key) or {}).get(phase) or []


def _settings_differences(base: Report, new: Report) -> List[dict]:
    before = (base.settings or {}).get("valgrind") or {}
    after = (new.settings or {}).get("valgrind") or {}
    return [{"key": k, "base": before.get(k), "new": after.get(k)} for k in ("version", "cache_sim")
            if before.get(k) != after.get(k)]


def attach(result, base: Report, new: Report, shown: int = FUNCTIONS) -> None:
    """A Comparison of two counted reports gets its count verdicts (`result.counts`), and the
    cases it judged on counts and that neither side timed (counted-only results) leave its list
    of cases without timings; a case timed on one side only (a report of both kinds against a
    counted one) stays listed there."""
    if not check_comparable(base, new):
        return
    result.counts = compare_counts(base, new, shown=shown)
    judged = {v.key for v in result.counts.verdicts}
    untimed = [{r.spec.key for r in report.results if (r.metrics or {}).get("engine") == ENGINE}
               for report in (base, new)]
    result.unmeasured = [u for u in result.unmeasured
                         if not (u.get("key") in judged and u.get("key") in untimed[0] & untimed[1])]


def judged(result) -> bool:
    return result.counts is not None and bool(result.counts.verdicts)


def gate(result, verdict: dict, fail_above_pct: float) -> dict:
    """The --fail-above verdict with the quantities counts judged slower beyond it."""
    if result.counts is None:
        return verdict
    slower = [{"label": f"{v.label} {v.phase}", "slowdown_pct": v.change_pct, "rests_on": "instruction counts"}
              for v in result.counts.regressions(fail_above_pct)]
    return dict(verdict, slower=verdict["slower"] + slower, passed=verdict["passed"] and not slower)
