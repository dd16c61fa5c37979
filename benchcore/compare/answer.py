"""Answer: what a comparison says in a few lines, for the person who asked "did it get slower?".

A Comparison holds per quantity a verdict with its statistics (p, q, bounds, detectable change);
this module turns it into one line per changed quantity ("broadcast_add (4,6) forward: 1.71×
slower (+71%)"), one verdict line for the whole comparison that says what it could not see
(the slowdown its evidence detects 4 times in 5), and a warning when the two reports were not
timed with the same settings. The statistics stay in the JSON; these lines carry none of them.

Where the reports hold instruction counts (a counted `ab`, reports of both kinds from `merge
--both`), every line says what it rests on: "broadcast_add (1024,1024) forward: +220.0%
instructions (counted)", "… 1.71× slower (+71.0%) (timed)"; a quantity judged both ways gets
one line with both and whether they agree (the same direction, or time the same within its
margin and the counts within it too), disagree, or, time undecided, leave it to the counts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, List, Optional

from benchcore.measure.measurement import percent_change

if TYPE_CHECKING:
    from benchcore.compare.count_verdicts import CountComparison, CountVerdict
    from benchcore.compare.verdicts import Comparison, MetricComparison
    from benchcore.report.model import Report

#: settings whose difference changes what a figure is; (path in `settings`, name said)
SETTINGS_COMPARED = (
    (("warmup",), "warmup"), (("runs",), "runs"), (("settings", "warmup"), "warmup"), (("settings", "runs"), "runs"),
    (("run_settings", "target_precision"), "target precision"), (("settings", "target_precision"), "target precision"),
    (("rounds", "rounds"), "rounds"), (("profiler",), "engine"), (("dtype",), "dtype"), (("threads",), "threads"),
    (("fuser",), "fuser"), (("executor",), "executor"), (("flush_denormal",), "flush denormals"),
)
#: the answer's per-quantity lines stop here, with "and N more"
MAX_LINES = 20
#: the verdicts that change a quantity, on time or on counts
CHANGED = ("slower", "faster")


@dataclass
class Answer:
    """The comparison's answer: `changes` one line per changed quantity (slowest first),
    `verdict` one line, `warnings` (settings that differ)."""

    verdict: str
    changes: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    #: [{setting, base, new}]
    settings_differences: List[dict] = field(default_factory=list)

    def lines(self, limit: Optional[int] = MAX_LINES) -> List[str]:
        """Warnings, the changes (at most `limit`), then the verdict."""
        changes = self.changes if limit is None or len(self.changes) <= limit else \
            self.changes[:limit] + [f"… and {len(self.changes) - limit} more (see the table)"]
        return [f"warning: {w}" for w in self.warnings] + changes + [self.verdict]

    def to_dict(self) -> dict:
        return asdict(self)


def times(ratio: float) -> str:
    """A ratio as a multiple of the faster side: 1.71× slower (+71%), 1.25× faster (-20%)."""
    if ratio >= 1:
        return f"{ratio:.2f}× slower ({percent_change(ratio)})"
    return f"{1 / ratio:.2f}× faster ({percent_change(ratio)})"


def change_line(label: str, m: "MetricComparison") -> str:
    return f"{label} {m.metric}: {times(m.judged_ratio)}"


def short_reason(m: "MetricComparison", threshold: float) -> str:
    """What the verdict rests on, in a few words (the full reason and its statistics are in
    the JSON's `reason`, `p_value`, `q_value`, `ratio_low`, `ratio_high`)."""
    significance = m.q_value if m.q_value is not None else m.p_value
    if "clock" in m.reason:
        return "within the clock's resolution"
    if m.verdict in ("slower", "faster"):
        return f"q={significance:.2g}" if significance is not None else "beyond the threshold"
    if m.verdict == "same":
        return f"within ±{threshold * 100:g}%"
    from benchcore.compare.verdicts import PRACTICAL_ROUNDS

    if m.rounds_to_decide is not None and m.rounds_to_decide <= PRACTICAL_ROUNDS:
        return f"about {m.rounds_to_decide} more round(s) a side would decide it"
    if m.rounds_to_decide is not None:
        return f"more than {PRACTICAL_ROUNDS} more rounds: count instructions"
    if m.basis == "rounds" and m.p_value is not None:
        return "more rounds cannot decide it: use ab, or count instructions"
    if significance is not None:
        return f"not significant ({'q' if m.q_value is not None else 'p'}={significance:.2g})"
    return m.reason.split(" (")[0][:80]


def settings_differences(base: "Report", new: "Report") -> List[dict]:
    """The settings that shape the figures and differ between the two reports."""
    found = []
    for path, name in SETTINGS_COMPARED:
        values = [_lookup(report.settings, path) for report in (base, new)]
        if values[0] is not None and values[1] is not None and values[0] != values[1]:
            if not any(d["setting"] == name for d in found):
                found.append({"setting": name, "base": values[0], "new": values[1]})
    return found


def _lookup(settings: dict, path) -> object:
    value = settings
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def answer(c: "Comparison", settings_diff: Optional[List[dict]] = None) -> Answer:
    """The Answer of a comparison (settings_diff: from settings_differences, when both
    reports are at hand)."""
    changed = sorted(((case, m) for case in c.cases for m in case.metrics
                      if m.verdict in ("slower", "faster") and m.judged_ratio),
                     key=lambda pair: -pair[1].judged_ratio)
    settings_diff = settings_diff or []
    warnings = []
    if settings_diff:
        said = ", ".join(f"{d['setting']} {d['base']} vs {d['new']}" for d in settings_diff)
        warnings.append(f"the two sides ran different settings ({said}): a difference may come from that alone")
    counted = c.counts if c.counts is not None and c.counts.verdicts else None
    if counted is None:
        return Answer(_verdict(c, changed), [change_line(case.label, m) for case, m in changed], warnings,
                      settings_diff)
    verdict = _verdict(c, changed) + (f"; on instruction counts: {_count_tally(counted)}" if c.cases else "")
    return Answer(verdict + _undecided_on_counts(c, counted), _lines_of_both(c, counted), warnings, settings_diff)


def _undecided_on_counts(c: "Comparison", counted: "CountComparison") -> str:
    """What the counts say of the quantities time leaves undecided (`ab --count-undecided`
    counts just those): the answer a reader came for, where time alone has none."""
    counts = {(v.key, v.phase): v.verdict for v in counted.verdicts}
    left = [counts.get((case.key, m.metric)) for case in c.cases for m in case.metrics if m.verdict == "undecided"]
    told = [verdict for verdict in left if verdict is not None]
    if not told:
        return ""
    tally = {name: told.count(name) for name in ("slower", "faster", "same")}
    return (f"; of the {len(left)} undecided on time, the counts call {tally['slower']} slower, {tally['faster']} "
            f"faster and {tally['same']} the same" + (f" ({len(left) - len(told)} not counted)" if len(told) < len(left) else ""))


def _lines_of_both(c: "Comparison", counted: "CountComparison") -> List[str]:
    """One line per quantity that changed on time or on counts (largest first), saying what each
    rests on; where a quantity has both, whether they agree."""
    timed = {(case.key, m.metric): (case.label, m) for case in c.cases for m in case.metrics}
    counts = {(v.key, v.phase): v for v in counted.verdicts}
    lines = []
    for key in list(timed) + [k for k in counts if k not in timed]:
        label, m = timed.get(key, (None, None))
        v = counts.get(key)
        time_moved = m is not None and m.verdict in CHANGED and m.judged_ratio is not None
        if time_moved or (v is not None and v.verdict in CHANGED):
            ratio = m.judged_ratio if time_moved else v.ratio
            lines.append((ratio, quantity_line(label or v.label, key[1], m, v, c.threshold)))
    return [line for _ratio, line in sorted(lines, key=lambda pair: -pair[0])]


def quantity_line(label: str, phase: str, m: Optional["MetricComparison"], v: Optional["CountVerdict"],
                  threshold: float) -> str:
    """A changed quantity's line in a comparison with counts: what time says (`timed`), what the
    counts say (`counted`), and where it has both, whether they agree (see _agreement)."""
    parts = [p for p in (_time_part(m, threshold), _count_part(v)) if p]
    said = f"{label} {phase}: " + "; ".join(parts)
    return said + (f": {_agreement(m, v, threshold)}" if m is not None and v is not None else "")


def _time_part(m: Optional["MetricComparison"], threshold: float) -> Optional[str]:
    if m is None:
        return None
    if m.verdict in CHANGED:
        return f"{times(m.judged_ratio)} (timed)"
    if m.verdict == "same":
        return f"the same within ±{threshold * 100:g}% (timed)"
    return "undecided on time"


def _count_part(v: Optional["CountVerdict"]) -> Optional[str]:
    if v is None:
        return None
    if v.verdict in CHANGED:
        return f"{percent_change(v.ratio)} instructions (counted)"
    return f"instructions the same within ±{v.band * 100:.2f}% (counted)"


def _agreement(m: "MetricComparison", v: "CountVerdict", threshold: float) -> str:
    """Time and counts agree when they move the same way, or when time reads the same and the
    counts moved within its margin; time undecided leaves the answer to the counts."""
    if m.verdict not in CHANGED and m.verdict != "same":
        return "the counts decide it"
    time_way = 0 if m.verdict == "same" else (1 if m.verdict == "slower" else -1)
    count_way = 0 if v.verdict == "same" or (time_way == 0 and abs(v.ratio - 1) <= threshold) else \
        (1 if v.verdict == "slower" else -1)
    return "they agree" if time_way == count_way else "they disagree"


def _verdict(c: "Comparison", changed) -> str:
    quantities = [m for case in c.cases for m in case.metrics]
    counted = getattr(c, "counts", None)
    if not quantities and counted is not None and counted.verdicts:
        return _count_verdict(counted)
    if not quantities:
        return "Verdict: nothing to compare: no case was measured in both reports."
    slower = sum(1 for _case, m in changed if m.verdict == "slower")
    faster = len(changed) - slower
    broken = len(c.broken)
    same = sum(1 for m in quantities if m.verdict == "same")
    undecided = sum(1 for m in quantities if m.verdict == "undecided")
    head = (f"Verdict: {slower} of {len(quantities)} quantities slower, {faster} faster, {same} the same within "
            f"±{c.threshold * 100:g}%" + (f", {broken} case(s) broke" if broken else "") + f"; {undecided} undecided")
    claims = sorted(m.detectable_ratio for m in quantities if m.detectable_ratio is not None)
    if claims:
        return (head + f"; each quantity names the slowdown it catches 9 times in 10 (median "
                f"{percent_change(claims[len(claims) // 2])}, least precise {percent_change(claims[-1])}): "
                "smaller ones can hide in it")
    if any(m.basis == "one-process" for m in quantities):
        return head + "; without rounds on both sides it cannot say which slowdown it would miss (time with --rounds 3 or more, or use ab)"
    return head + f"; changes within ±{c.threshold * 100:g}% count as the same"


def _count_verdict(counted) -> str:
    """The verdict of two counted reports (no case timed on both sides): their count verdicts'
    tally (benchcore.compare.count_verdicts), which the timing verdict would call nothing."""
    return f"Verdict on instruction counts: {_count_tally(counted)}; no case was timed on both sides"


def _count_tally(counted) -> str:
    tally = {name: sum(v.verdict == name for v in counted.verdicts) for name in ("slower", "faster", "same")}
    odd = sum(v.non_repeatable is not None for v in counted.verdicts)
    return (f"{tally['slower']} of {len(counted.verdicts)} quantities slower, {tally['faster']} faster, "
            f"{tally['same']} the same within their bands"
            + (f" ({odd} non-repeatable, judged with their own spread)" if odd else ""))


def judged(base: "Report", new: "Report", suite, threshold_pct: float = 5.0, alpha: float = 0.05,
           allow_env_mismatch: bool = False) -> "Comparison":
    """compare() with its answer attached (`.answer`): what the suites' Python APIs return."""
    from benchcore.compare.verdicts import compare

    result = compare(base, new, suite, threshold=threshold_pct / 100, alpha=alpha,
                     allow_env_mismatch=allow_env_mismatch)
    result.answer = answer(result, settings_differences(base, new))
    return result
