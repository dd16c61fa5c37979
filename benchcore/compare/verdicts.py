"""Two reports of one suite → per-quantity verdicts: slower, faster, same or undecided.

Each verdict is a decision the evidence supports, never the absence of one:

- `slower` / `faster`: the change is real (a test on the right evidence rejects "no change" at
  `alpha`, adjusted for the number of quantities judged together) and either large (the ratio is
  beyond the margin, ±5% by default) or, on rounds, not established within the margin (its
  interval reaches past it: a real +4% that may be +7% is slower, not "too noisy to tell"). A
  CI gate fails only on these.
- `same`: the change is established to lie within the margin: the ratio's (1 - 2·alpha) interval
  lies inside ±margin (two one-sided tests, TOST: an equivalence test). A change that is merely
  not significant is never `same`.
- `undecided`: neither. Its reason says the smallest change this quantity could have shown
  (`detectable_ratio`) and about how many more rounds a side would decide it
  (`rounds_to_decide`), or that counting instructions would.

What the test rests on depends on what the reports hold (docs/COMPARING.md has the method):

- **rounds** (both sides timed in ≥ 2 worker processes): the figure is the median of the round
  medians, and the test is a t-test on the logarithms of the round medians. A process is the
  unit of evidence: its samples are not independent draws about the build (the variance between
  processes dominates on a shared VM), so fifty samples from one process count once. With few
  rounds a case's own variance estimate is weak, so it is moderated by a prior fitted to all the
  comparison's cases (benchcore.compare.tests.VariancePrior), and a shift every case shares because the
  machine drifted between the sweeps is divided out first (benchcore.compare.drift).
- **one process** (a report without rounds): a Mann–Whitney U test on the raw samples, as
  before rounds existed; every such verdict says that it cannot separate process noise.
- **threshold only** (opperf's averages, no samples): the threshold alone, and it says so.

Either way, a change of no more than two steps of the clock (MXNet's profiler counts whole
microseconds, so each figure is uncertain by a step) is `undecided`: the clock cannot see it.

Which figures of a case are compared is the suite's declaration (benchcore.suite.Suite.timings):
opbench's native engine declares the profiler's per-call kernel times.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from benchcore.compare import drift as drift_model
from benchcore.compare import efficiency
from benchcore.compare.drift import Drift
from benchcore.compare.sequential import Level, LookedTests, Looks
from benchcore.compare.tests import (
    TestResult,
    VariancePrior,
    mann_whitney,
    paired_log_spread,
    paired_t_on_logs,
    t_on_logs,
    trimmed_count,
)
from benchcore.errors import UsageError
from benchcore.measure import modes, reference
from benchcore.measure.measurement import DITHER_STEPS, Measurement, judged_pair, percent_change, within_step
from benchcore.report.figures import METRICS, Timing
from benchcore.report.identity import (
    case_environment,
    environment_differences,
    environment_label,
    mixed_environments,
)
from benchcore.report.labels import case_labels
from benchcore.report.model import CaseResult, Report
from benchcore.suite import Suite

VERDICTS = ("faster", "slower", "same", "undecided")
#: fewer samples than this on either side cannot support any verdict
MIN_SAMPLES = 3
#: a change within this many clock steps is not measurable: each side's figure is off by up to
#: a step (a coarse clock truncates both ends of each interval)
CLOCK_STEPS = 2
#: what a verdict rests on (MetricComparison.basis)
BASES = ("rounds", "one-process", "threshold-only")
#: the power a quantity's claimed detectable change is stated at: of true changes at or above
#: it, at least this share is called
CLAIM_POWER = 0.9
#: an undecided quantity that would need more rounds a side than this is told to count instead
PRACTICAL_ROUNDS = 30


# --------------------------------------------------------------------------- comparison model


@dataclass
class MetricComparison:
    """One timed quantity (forward or backward) of one case, base vs new."""

    metric: str
    base_ms: Optional[float]
    new_ms: Optional[float]
    #: new/base of the statistic below; > 1 is slower
    ratio: Optional[float]
    verdict: str
    #: one of BASES
    basis: str
    #: "median of round medians", "median" or "mean" (opperf reports averages)
    statistic: str
    p_value: Optional[float] = None
    #: the p-value adjusted for the comparison's many quantities (Benjamini–Hochberg); the
    #: verdict's significance rests on it when the comparison judged several (see `compare`)
    q_value: Optional[float] = None
    test_method: Optional[str] = None
    n_base: Optional[int] = None
    n_new: Optional[int] = None
    rounds_base: Optional[int] = None
    rounds_new: Optional[int] = None
    #: 95% bounds of the judged ratio (from the test on rounds, or the medians' CIs); None without
    ratio_low: Optional[float] = None
    ratio_high: Optional[float] = None
    #: the ratio the verdict judges: `ratio` with the machine's drift divided out (see
    #: benchcore.compare.drift); None when nothing was divided out
    ratio_vs_machine: Optional[float] = None
    #: the smallest slowdown this quantity's evidence calls 9 times in 10 (CLAIM_POWER), at the
    #: level its p-value is held to among the quantities judged together (rounds only)
    detectable_ratio: Optional[float] = None
    #: undecided on rounds: about how many more rounds a side would decide it, were each round
    #: as precise as so far and the change where it is
    rounds_to_decide: Optional[int] = None
    reason: str = ""
    #: what makes the quantity bimodal on either side (benchcore.measure.modes); None when neither is
    bimodal: Optional[str] = None

    @property
    def judged_ratio(self) -> Optional[float]:
        return self.ratio_vs_machine if self.ratio_vs_machine is not None else self.ratio


@dataclass
class CaseComparison:
    key: str
    name: str
    label: str
    category: str
    params: dict
    metrics: List[MetricComparison]
    #: summary: slower if any metric is slower, else faster if any is faster, else undecided
    #: if any is undecided, else same. A regression anywhere must not hide behind a speedup elsewhere.
    verdict: str
    #: (sum of new)/(sum of base) over the compared metrics: the case's total time ratio
    ratio: Optional[float]
    basis: str

    @property
    def worst_slowdown(self) -> Optional[float]:
        """Largest judged ratio among metrics judged slower (None when none is)."""
        ratios = [m.judged_ratio for m in self.metrics if m.verdict == "slower" and m.judged_ratio is not None]
        return max(ratios) if ratios else None


@dataclass
class CategorySummary:
    category: str
    cases: int
    #: geometric mean of the case ratios (cases with a ratio only)
    geomean_ratio: Optional[float]
    counts: Dict[str, int]
    #: the median over the category's quantities of the smallest slowdown each could detect
    median_detectable_ratio: Optional[float] = None


@dataclass
class Comparison:
    suite: str
    threshold: float
    alpha: float
    cases: List[CaseComparison] = field(default_factory=list)
    only_in_base: List[dict] = field(default_factory=list)
    only_in_new: List[dict] = field(default_factory=list)
    #: matched cases that were not measured on one side (failed, skipped, no timings)
    unmeasured: List[dict] = field(default_factory=list)
    #: [{key, base, new}] over the environment keys that affect timings
    env_differences: List[dict] = field(default_factory=list)
    env_mismatch_allowed: bool = False
    base_source: Optional[str] = None
    new_source: Optional[str] = None
    #: the CI gate's verdict when one was asked for (see gate_verdict)
    gate: Optional[dict] = None
    #: the shift all cases share, and what of it was divided out before judging (benchcore.compare.drift)
    drift: Optional[Drift] = None
    #: the variance prior the round-based tests were moderated with (None: too few cases)
    prior: Optional[VariancePrior] = None
    #: the answer in a few lines (benchcore.compare.answer.Answer), set by the command that compared
    answer: Optional[object] = None
    #: the verdicts on instruction counts, when both reports hold them (benchcore.compare.count_verdicts)
    counts: Optional[object] = None
    #: the looks of an A/B run that added rounds until decided (benchcore.compare.sequential)
    looks: Optional[Looks] = None
    #: each matched case-phase's share of the roof on both sides (benchcore.compare.efficiency)
    efficiency: List[dict] = field(default_factory=list)

    @property
    def summary(self) -> List[CategorySummary]:
        """Per category (sorted), then an "overall" row."""
        groups: Dict[str, List[CaseComparison]] = {}
        for case in self.cases:
            groups.setdefault(case.category, []).append(case)
        rows = [_summarise(name, groups[name]) for name in sorted(groups)]
        rows.append(_summarise("overall", self.cases))
        return rows

    @property
    def overall_geomean(self) -> Optional[float]:
        return self.summary[-1].geomean_ratio

    @property
    def bases(self) -> List[str]:
        """The evidence the verdicts rest on, in BASES order (for the views' notes)."""
        used = {m.basis for case in self.cases for m in case.metrics}
        return [b for b in BASES if b in used]

    def regressions(self, fail_above_pct: float) -> List[CaseComparison]:
        """Cases judged slower by more than `fail_above_pct` percent: the CI gate."""
        limit = 1.0 + fail_above_pct / 100.0
        return [c for c in self.cases if c.worst_slowdown is not None and c.worst_slowdown > limit]

    @property
    def broken(self) -> List[dict]:
        """Cases measured in base that failed, crashed, timed out or were skipped in new: a CI
        gate must fail on these too, or a crashing kernel would pass it."""
        return [u for u in self.unmeasured if u.get("base_status") == "ok" and u.get("new_status") != "ok"]

    def build_wide_slowdown(self, fail_above_pct: float) -> Optional[float]:
        """The build's sweep-wide slowdown (the drift the machine does not explain) when it is
        judged slower by more than `fail_above_pct` percent, else None."""
        group = self.drift.slowest_build_group(fail_above_pct) if self.drift else None
        return group.build_ratio if group else None

    def gate_verdict(self, fail_above_pct: float) -> dict:
        """The --fail-above verdict, as recorded (field `gate`) in the JSON and Markdown views."""
        slower = self.regressions(fail_above_pct)
        build = self.build_wide_slowdown(fail_above_pct)
        group = self.drift.slowest_build_group(fail_above_pct) if self.drift else None
        return {"fail_above_pct": fail_above_pct, "passed": not slower and not self.broken and build is None,
                "slower": [{"label": c.label, "slowdown_pct": (c.worst_slowdown - 1) * 100} for c in slower],
                "broken": [{"label": u["label"], "new_status": u["new_status"]} for u in self.broken],
                "build_wide_slowdown_pct": None if build is None else (build - 1) * 100,
                "build_wide_group": group.name if group else None,
                "sequential": self.drift is not None and self.drift.basis != "interleaved",
                "only_in_base": len(self.only_in_base)}

    def to_dict(self) -> dict:
        return {
            "schema": "benchcore-comparison",
            "suite": self.suite,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "base": self.base_source,
            "new": self.new_source,
            "env_differences": self.env_differences,
            "env_mismatch_allowed": self.env_mismatch_allowed,
            "bases": self.bases,
            "summary": [asdict(row) for row in self.summary],
            "cases": [asdict(case) for case in self.cases],
            "only_in_base": self.only_in_base,
            "only_in_new": self.only_in_new,
            "unmeasured": self.unmeasured,
            "drift": self.drift.to_dict() if self.drift else None,
            "variance_prior": self.prior.to_dict() if self.prior else None,
            "gate": self.gate,
            "answer": self.answer.to_dict() if self.answer is not None else None,
            "instructions": self.counts.to_dict() if self.counts is not None else None,
            "sequential": self.looks.to_dict() if self.looks is not None else None,
            "efficiency": self.efficiency,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)


def geometric_mean(values: Sequence[Optional[float]]) -> Optional[float]:
    positive = [v for v in values if v is not None and v > 0]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def _summarise(category: str, cases: List[CaseComparison]) -> CategorySummary:
    counts = {v: sum(1 for c in cases if c.verdict == v) for v in VERDICTS}
    detectable = [m.detectable_ratio for c in cases for m in c.metrics if m.detectable_ratio is not None]
    return CategorySummary(category, len(cases), geometric_mean([c.ratio for c in cases]), counts,
                           float(np.median(detectable)) if detectable else None)


# --------------------------------------------------------------------------- the comparison


def compare(base: Report, new: Report, suite: Optional[Suite] = None, threshold: float = 0.05,
            alpha: float = 0.05, allow_env_mismatch: bool = False, interleaved: Optional[bool] = None) -> Comparison:
    """Compare `new` against `base`, case by case (matched by CaseSpec.key), on the figures
    `suite` declares (default: the forward/backward Measurements).

    `interleaved`: the two reports come from one A/B run (`ab`), so no machine drift is removed;
    None: decided from the reports (both record an `ab_side`).
    """
    suite = suite or Suite(base.suite)
    if base.suite != new.suite:
        raise UsageError(f"cannot compare a {base.suite} report with a {new.suite} report; pass two reports of the same suite")
    if not 0 < threshold < 1:
        raise UsageError(f"threshold is a fraction between 0 and 1 (e.g. 0.05 for 5%), got {threshold}")
    if not 0 < alpha < 1:
        raise UsageError(f"alpha must be between 0 and 1 (e.g. 0.05), got {alpha}")
    per_case = mixed_environments(base) or mixed_environments(new)
    differences = [] if per_case else environment_differences(base, new)
    if differences and not allow_env_mismatch:
        keys = ", ".join(d["key"] for d in differences)
        raise UsageError(f"reports come from different environments ({keys} differ); pass --allow-env-mismatch to compare anyway")
    if interleaved is None:
        interleaved = all((r.environment or {}).get("ab_side") for r in (base, new))
    result = Comparison(base.suite, threshold, alpha, env_differences=differences,
                        env_mismatch_allowed=allow_env_mismatch)
    base_cases, new_cases = _by_key(base, "base"), _by_key(new, "new")
    labels = case_labels(list(base_cases.values()) + [n for k, n in new_cases.items() if k not in base_cases])
    matched = []
    for key, b in base_cases.items():
        n = new_cases.get(key)
        if n is None:
            result.only_in_base.append(_brief(b, labels[key]))
            continue
        if per_case and not _same_environment(result, base, b, new, n, labels[key]):
            continue
        if not (b.ok and n.ok):
            result.unmeasured.append(_unmeasured(b, n, labels[key]))
        else:
            matched.append((b, n, suite.timings(b), suite.timings(n), suite.category(b)))
    result.only_in_new = [_brief(n, labels[k]) for k, n in new_cases.items() if k not in base_cases]
    pairs = drift_model.quantity_pairs([(bt, nt, category) for _b, _n, bt, nt, category in matched])
    variances = [_log_variance(b, n, interleaved) for _m, _c, b, n in pairs]
    result.prior = VariancePrior.fit(*zip(*variances)) if variances else None
    quantities = [_quantity(m, c, b, n, result.prior, interleaved) for m, c, b, n in pairs]
    result.drift = drift_model.estimate(quantities, reference.of_report(base), reference.of_report(new), interleaved,
                                        threshold)
    result.looks = looks_of(base, new) if interleaved else None
    evidence = Evidence(threshold, alpha, result.prior, result.drift, paired=interleaved, pending=[], looks=result.looks)
    judged = []
    for b, n, bt, nt, category in matched:
        shared = [m for m in METRICS if m in bt and m in nt]
        if shared:
            judged.append((b, n, [compare_timings(m, bt[m], nt[m], evidence, category) for m in shared]))
            result.unmeasured += [_one_sided(b, n, m, m in bt, labels[b.spec.key]) for m in METRICS
                                  if (m in bt) != (m in nt)]
        else:
            result.unmeasured.append(dict(_brief_pair(b, n, labels[b.spec.key]),
                                          reason="no timing present in both reports"))
    decide_pending(evidence.pending)  # the verdicts the cases summarise are known from here on
    result.efficiency = efficiency.changes([(b, n, labels[b.spec.key]) for b, n, *_rest in matched])
    for b, n, metrics in judged:
        # environment_label is None in a one-environment report; per environment, a case's
        # category says which, so the summary's geomeans are per environment too
        where = environment_label(base, b) or environment_label(new, n)
        result.cases.append(_case(b, metrics, suite, labels[b.spec.key], where))
    position = {key: i for i, key in enumerate(base_cases)}
    result.unmeasured.sort(key=lambda item: position[item["key"]])  # in the base report's order
    return result


def looks_of(base: Report, new: Report) -> Optional[Looks]:
    """The schedule of looks both sides of an A/B run record (settings `sequential`), or None
    (one look). Two sides that record different schedules were not one run: refused."""
    schedules = [(report.settings or {}).get("sequential") for report in (base, new)]
    if schedules[0] != schedules[1]:
        raise UsageError("the two reports record different schedules of added rounds (settings.sequential): they "
                         "are not the two sides of one A/B run; compare the base.json and new.json that ab wrote")
    return Looks.from_dict(schedules[0])


@dataclass(frozen=True)
class Evidence:
    """What every metric's verdict is judged with: the effect threshold and significance level,
    and, for round-based metrics, the variance prior and the drift to divide out."""

    threshold: float
    alpha: float
    prior: Optional[VariancePrior] = None
    drift: Optional[Drift] = None
    #: the two sides' rounds ran side by side (an interleaved A/B run): pair round k with round k
    paired: bool = False
    #: decisions waiting for the false-discovery adjustment over all quantities (compare() sets
    #: it); None: decide each quantity on its own p-value at once
    pending: Optional[list] = None
    #: the looks of an A/B run that added rounds until its quantities were decided
    #: (benchcore.compare.sequential); None: one look at all rounds, spending all of alpha
    looks: Optional[Looks] = None


def _log_variance(base: Measurement, new: Measurement, paired: bool) -> tuple:
    """(variance, degrees of freedom) of one quantity that its test will moderate: of the log
    ratios of paired rounds (trimmed as the paired test trims them), else pooled over the two
    sides' log round figures."""
    if _pairs(base, new, paired):
        return paired_log_spread(base.round_figures, new.round_figures)[1:]
    x, y = np.log(base.round_figures), np.log(new.round_figures)
    df = len(x) + len(y) - 2
    return float((((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum()) / df), df


def _quantity(metric: str, category: str, base: Measurement, new: Measurement, prior: Optional[VariancePrior],
              paired: bool) -> drift_model.Quantity:
    """What the drift model reads of one quantity: its change and the test's standard error
    before anything is divided out."""
    test = _test_on_rounds(base, new, prior, paired)
    change = float(np.mean(np.log(new.round_figures)) - np.mean(np.log(base.round_figures)))
    return drift_model.Quantity(metric, category, change, test.standard_error or 0.0, test.df or 0.0)


def _test_on_rounds(base: Measurement, new: Measurement, prior: Optional[VariancePrior], paired: bool,
                    offset: float = 0.0, offset_variance: float = 0.0, rounds: Optional[int] = None):
    """The paired t-test for rounds that ran side by side, else the two-sample one; on the first
    `rounds` rounds a side when given (a look of a sequential A/B run)."""
    x, y = base.round_figures[:rounds], new.round_figures[:rounds]
    if _pairs(base, new, paired) or (paired and rounds is not None and len(x) == len(y) >= 2):
        return paired_t_on_logs(x, y, prior, offset, offset_variance)
    return t_on_logs(x, y, prior, offset, offset_variance)


def _looked_tests(bm: Measurement, nm: Measurement, evidence: Evidence, offset: float,
                  offset_variance: float) -> LookedTests:
    """The quantity's test at each look it had: with `evidence.looks`, at every point of the
    schedule its rounds reached, each at its nominal levels; else one look at all rounds."""
    rounds = min(bm.round_count, nm.round_count)
    if evidence.looks is None:
        looks = [Level(rounds, evidence.alpha, evidence.alpha)]
    else:
        looks = evidence.looks.at(rounds, evidence.alpha) or evidence.looks.levels(evidence.alpha)[:1]
    return LookedTests(tuple((level, _test_on_rounds(bm, nm, evidence.prior, evidence.paired, offset, offset_variance,
                                                     level.rounds if evidence.looks is not None else None))
                             for level in looks), evidence.looks)


def _pairs(base: Measurement, new: Measurement, paired: bool) -> bool:
    """Round k of each side ran beside round k of the other (and every round ran on both)."""
    return paired and base.round_count == new.round_count >= 2


def _same_environment(result: Comparison, base: Report, b: CaseResult, new: Report, n: CaseResult, label: str) -> bool:
    """For reports whose cases ran in several environments (a --ray sweep with
    --allow-env-mismatch): whether this case may be judged, each side in the environment of the
    node it ran on. A case measured in two different environments is not (it is listed as not
    measured, with the keys); unless allowed, then its differences join `env_differences`."""
    base_env, new_env = case_environment(base, b), case_environment(new, n)
    if base_env is None or new_env is None:
        differences, why = [], "its rounds ran in different environments"
    else:
        differences = environment_differences(replace(base, environment=base_env), replace(new, environment=new_env))
        if not differences:
            return True
        why = f"measured in different environments ({', '.join(d['key'] for d in differences)} differ)"
    if result.env_mismatch_allowed:
        known = {d["key"] for d in result.env_differences}
        result.env_differences += [d for d in differences if d["key"] not in known]
        return True
    result.unmeasured.append({"key": b.spec.key, "name": b.spec.name, "label": label, "base_status": b.status,
                              "new_status": n.status, "reason": f"{why}: judged only within one environment "
                                                                "(--allow-env-mismatch compares anyway)"})
    return False


def _by_key(report: Report, which: str) -> Dict[str, CaseResult]:
    cases: Dict[str, CaseResult] = {}
    for r in report.results:
        if r.spec.key in cases:
            raise UsageError(f"the {which} report holds case {r.spec.key} twice; merge shards with the merge command, not by hand")
        cases[r.spec.key] = r
    return cases


def _brief(result: CaseResult, label: str) -> dict:
    return {"key": result.spec.key, "name": result.spec.name, "label": label, "status": result.status}


def _unmeasured(base: CaseResult, new: CaseResult, label: str) -> dict:
    bad = [f"{side}: {r.status}" + (f" ({_one_line(r.error)})" if r.error else "")
           for side, r in (("base", base), ("new", new)) if not r.ok]
    return dict(_brief_pair(base, new, label), reason="; ".join(bad))


def _one_sided(base: CaseResult, new: CaseResult, metric: str, in_base: bool, label: str) -> dict:
    """A metric one side measured and the other did not (a gradient one MXNet release lacks),
    with the other side's reason."""
    side, other = ("base", new) if in_base else ("new", base)
    why = ((other.metrics or {}).get("missing") or {}).get(metric) or "not measured"
    return dict(_brief_pair(base, new, label), reason=f"{metric}: measured on the {side} side only (other side: {why})")


def _brief_pair(base: CaseResult, new: CaseResult, label: str) -> dict:
    return {"key": base.spec.key, "name": base.spec.name, "label": label,
            "base_status": base.status, "new_status": new.status}


def _case(base: CaseResult, metrics: List[MetricComparison], suite: Suite, label: str,
          where: Optional[str]) -> CaseComparison:
    """A case's record from its decided metrics (`where`: the environment it ran in, in a report
    of several)."""
    # a metric with a ratio has positive figures on both sides, so the totals are positive too
    ratio = (sum(m.new_ms for m in metrics) / sum(m.base_ms for m in metrics)
             if all(m.ratio is not None for m in metrics) else None)
    basis = next(b for b in reversed(BASES) if any(m.basis == b for m in metrics))  # the weakest
    category = suite.category(base) + (f" @ {where}" if where else "")
    return CaseComparison(base.spec.key, base.spec.name, label, category, dict(base.spec.params), metrics,
                          _summary_verdict([m.verdict for m in metrics]), ratio, basis)


def _one_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1][:120] if lines else ""


def _summary_verdict(verdicts: List[str]) -> str:
    for v in ("slower", "faster", "undecided"):
        if v in verdicts:
            return v
    return "same"


def _beyond(ratio: float, threshold: float) -> int:
    """+1 slower, -1 faster, 0 within the threshold; symmetric in log space (1.05 ↔ 1/1.05)."""
    limit = math.log1p(threshold)
    change = math.log(ratio)
    return 1 if change > limit else -1 if change < -limit else 0


# --------------------------------------------------------------------------- verdict rules


def compare_timings(metric: str, base: Timing, new: Timing, evidence: Evidence,
                    category: str = "all") -> MetricComparison:
    """The verdict rule for one timed quantity of a case in `category`; see the module docstring."""
    if base.has_samples and new.has_samples:
        bm, nm = base.measurement, new.measurement
        resolution = max(base.resolution_ms, new.resolution_ms)
        if bm.round_count > 1 and nm.round_count > 1:
            return _compare_rounds(metric, category, *judged_pair(bm, nm, resolution), resolution, evidence)
        return _compare_one_process(metric, bm, nm, resolution, evidence)
    return _compare_summaries(metric, base, new, evidence.threshold)


def _compare_summaries(metric: str, base: Timing, new: Timing, threshold: float) -> MetricComparison:
    """Without samples on both sides, compare like with like: medians when both have one, else
    averages (opperf's statistic), on the threshold alone."""
    statistic = "median" if base.median_ms is not None and new.median_ms is not None else "mean"

    def figure(t: Timing):
        return t.median_ms if statistic == "median" else (t.mean_ms if t.mean_ms is not None else t.center_ms)

    b, n = figure(base), figure(new)
    result = MetricComparison(metric, b, n, None, "undecided", "threshold-only", statistic,
                              n_base=len(base.samples_ms or ()) or None, n_new=len(new.samples_ms or ()) or None)
    if b is None or n is None or b <= 0 or n <= 0:
        result.reason = "no raw samples, and a zero or missing average; nothing to compare"
        return result
    result.ratio = n / b
    direction = _beyond(result.ratio, threshold)
    if direction == 0:  # `same` needs an interval, and averages have none
        result.reason = (f"change {percent_change(result.ratio)} within ±{threshold * 100:g}% on the averages alone: "
                         "without raw samples no interval can establish `same` (time both sides with this suite)")
        return result
    result.verdict = {1: "slower", -1: "faster"}[direction]
    result.reason = f"change {percent_change(result.ratio)}; no raw samples, so the verdict rests on the threshold alone"
    return result


def _not_measurable(result: MetricComparison, delta_ms: float, resolution_ms: float, threshold: float) -> bool:
    """A change past the threshold but within CLOCK_STEPS of the clock: undecided, with the reason."""
    if _beyond(result.judged_ratio, threshold) == 0 or not within_step(delta_ms, CLOCK_STEPS * resolution_ms):
        return False
    result.reason = (f"change {percent_change(result.ratio)} is {abs(delta_ms) * 1e3:.3g} µs, within {CLOCK_STEPS} steps of "
                     f"the clock ({resolution_ms * 1e3:g} µs each): not measurable; counting instructions (-p instructions) "
                     "would decide it")
    return True


def _compare_rounds(metric: str, category: str, bm: Measurement, nm: Measurement, resolution: float,
                    evidence: Evidence) -> MetricComparison:
    """Median of round figures (medians, or near a coarse clock fenced means: judged_pair); a
    t-test on their logarithms, moderated by the variance prior and with the machine's drift
    divided out (a round is one piece of evidence, however many samples it holds)."""
    dithered = bm.figure == "mean"
    figure = "round means" if dithered else "round medians"
    result = MetricComparison(metric, bm.center, nm.center, None, "undecided", "rounds", f"median of {figure}",
                              n_base=bm.n, n_new=nm.n, rounds_base=bm.round_count, rounds_new=nm.round_count)
    if min(bm.round_figures) <= 0 or min(nm.round_figures) <= 0:
        result.reason = f"a {figure[:-1]} of 0 ms: the ratio is undefined"
        return result
    result.ratio = nm.center / bm.center
    drift = evidence.drift
    offset, offset_variance = drift.offset(metric, category) if drift is not None else (0.0, 0.0)
    scatter = drift.between_sweeps if drift is not None else 0.0
    if offset != 0.0:
        result.ratio_vs_machine = result.ratio / math.exp(offset)
    if not dithered and _not_measurable(result, nm.center - bm.center, resolution, evidence.threshold):
        return result
    # a change within the margin is called on its significance only where the clock can see it
    small_seen = dithered or not within_step(nm.center - bm.center, CLOCK_STEPS * resolution)
    looked = _looked_tests(bm, nm, evidence, offset, offset_variance + scatter ** 2)
    test = looked.last
    clear = _bimodal(result, bm, nm, evidence)
    trimmed = clear is not None and _odd_rounds_trimmed(result, bm, nm, evidence.paired)
    if trimmed:  # the looks before the trimming could reach the odd rounds do not count
        clear = 1 if (test.log_change or 0.0) > 0 else -1
    result.p_value, result.test_method = looked.p_value(last_only=trimmed), test.method
    result.ratio_low, result.ratio_high = test.ratio_ci95
    parts = [f"{bm.round_count} vs {nm.round_count} rounds" + (", paired as they ran" if _pairs(bm, nm, evidence.paired) else ""),
             f"between-round spread {_spread_pct(bm)} vs {_spread_pct(nm)}"]
    if dithered:
        parts.append(f"each round's fenced mean, not its median: calls within {DITHER_STEPS} steps of the "
                     f"{resolution * 1e3:g} µs clock")
    if evidence.prior is not None:
        parts.append("variance moderated over the comparison's cases")
    if offset != 0.0:
        group = drift.group_of(metric, category)
        parts.append(f"machine drift {percent_change(math.exp(offset))}" + (f" ({group.name})" if group else "") + " divided out")
    if scatter > 0:
        parts.append(f"±{scatter * 100:.1f}% scatter between the sweeps added")
    if len(looked.looks) > 1:
        parts.append(f"{len(looked.looks)} looks (at {', '.join(str(level.rounds) for level, _t in looked.looks)} rounds), "
                     + ("p the last look's" if trimmed else "p the sequential p-value over them"))
    _judge(result, evidence, "; ".join(parts), f"t-test on log {figure}", clear, looked, small_seen)
    return result


def _odd_rounds_trimmed(result: MetricComparison, bm: Measurement, nm: Measurement, paired: bool) -> bool:
    """Whether a bimodal quantity's odd rounds (those at its rarer speed, or holding both) are
    few enough, on both sides together, that the paired test trims them all from either end:
    then its figure is the speed most rounds ran at on both sides, and a side that drew the odd
    speed more often cannot read as a change. Noted on `result`."""
    if not _pairs(bm, nm, paired):
        return False
    odd = [len(modes.odd_rounds(m)) for m in (bm, nm)]
    cut = trimmed_count(bm.round_count)
    if sum(odd) > cut:
        return False
    result.bimodal += (f"; its odd rounds ({odd[0]} base, {odd[1]} new, of {bm.round_count}) are trimmed from the "
                       f"paired test (it cuts {cut} from each end), so the speeds hold no verdict back")
    return True


def _spread_pct(m: Measurement) -> str:
    """The spread of rounds whose medians are all positive (what _compare_rounds judges)."""
    return f"{m.round_spread * 100:.1f}%"


def _compare_one_process(metric: str, bm: Measurement, nm: Measurement, resolution: float,
                         evidence: Evidence) -> MetricComparison:
    """Reports without rounds: a U test on the samples of one process per side, flagged as such."""
    threshold = evidence.threshold
    result = MetricComparison(metric, bm.median, nm.median, None, "undecided", "one-process", "median",
                              n_base=bm.n, n_new=nm.n, rounds_base=bm.round_count, rounds_new=nm.round_count)
    if bm.median <= 0 or nm.median <= 0:
        result.reason = "a median of 0 ms; the ratio is undefined"
        return result
    result.ratio = nm.median / bm.median
    bci, nci = bm.median_ci95, nm.median_ci95
    if bci and nci and bci[0] > 0:  # a new-side bound of 0 gives ratio_low 0: unbounded below
        result.ratio_low, result.ratio_high = nci[0] / bci[1], nci[1] / bci[0]
    if bm.n < MIN_SAMPLES or nm.n < MIN_SAMPLES:
        result.reason = f"too few samples ({bm.n} vs {nm.n}; need at least {MIN_SAMPLES} each)"
        return result
    if _not_measurable(result, nm.median - bm.median, resolution, threshold):
        return result
    test = mann_whitney(bm.samples_ms, nm.samples_ms)
    result.p_value, result.test_method = test.p_value, test.method
    why = (f"{bm.n} vs {nm.n} samples from one process per side, which cannot separate process noise "
           "from a change (time with --rounds)")
    _judge(result, evidence, why, "Mann-Whitney U on the samples", _bimodal(result, bm, nm, evidence))
    return result


def _bimodal(result: MetricComparison, bm: Measurement, nm: Measurement, evidence: Evidence) -> Optional[int]:
    """Note on `result` what makes the quantity bimodal (benchcore.measure.modes); the direction of a
    change beyond both speeds (1, -1, 0), or None when neither side is bimodal."""
    result.bimodal = modes.pair_text(bm, nm)
    return None if result.bimodal is None else modes.beyond_both_speeds(bm, nm, evidence.threshold)


def _judge(result: MetricComparison, evidence: Evidence, why: str, test_name: str, clear: Optional[int] = None,
           looked: Optional[LookedTests] = None, small_seen: bool = False) -> None:
    """Decide now on the p-value alone, or leave the decision for compare() to take once every
    quantity's p-value is known (the false-discovery adjustment needs them all). `clear`: for a
    bimodal quantity, the direction a change must have beyond both speeds to be called; `looked`:
    the tests on rounds, whose intervals decide `same` and whose precision the claims rest on;
    `small_seen`: a real change within the margin that `same` cannot place is called too (on
    rounds, whose test holds the processes' scatter, and where the clock sees the change)."""
    decide = functools.partial(_decide, result, evidence.threshold, evidence.alpha, why, test_name, clear=clear,
                               looked=looked, small_seen=small_seen)
    if evidence.pending is None:
        decide()
    else:
        evidence.pending.append((result, decide))


def decide_pending(pending: list) -> None:
    """Adjust the pending quantities' p-values for their number (Benjamini–Hochberg: the share
    of false verdicts among the changes called stays below alpha) and decide each.

    A sweep compares hundreds of quantities; at a per-quantity 5% level an A/A pair of sweeps
    would call a dozen of them changed by chance alone. The adjustment makes the verdicts a set a
    gate can trust, while a change strong enough to stand out keeps its verdict."""
    from scipy.stats import false_discovery_control

    if not pending:
        return
    q_values = false_discovery_control([result.p_value for result, _ in pending], method="bh")
    for (result, decide), q in zip(pending, q_values):
        result.q_value = float(q)
        decide((float(q), len(pending)))


def _decide(result: MetricComparison, threshold: float, alpha: float, evidence: str, test_name: str,
            adjusted: Optional[Tuple[float, int]] = None, *, clear: Optional[int] = None,
            looked: Optional[LookedTests] = None, small_seen: bool = False) -> None:
    """Set verdict and reason from the judged ratio, its interval and the test's p-value (its
    q-value, when `adjusted` is (q-value, how many quantities were judged together)).

    The claim (`detectable_ratio`) is made at the Bonferroni level alpha/m: a p-value below it
    is called by Benjamini–Hochberg whatever the other quantities do, so the claim holds for a
    lone change as for many."""
    family = adjusted[1] if adjusted is not None else 1
    level = alpha / family if looked is None else looked.level(alpha / family)  # the last look's, at alpha/m
    if looked is not None:
        result.detectable_ratio = looked.last.detectable_ratio(level, CLAIM_POWER, math.log1p(threshold))
    direction = _beyond(result.judged_ratio, threshold)
    change = percent_change(result.judged_ratio)
    significance = result.p_value if adjusted is None else adjusted[0]
    stated = (f"p={result.p_value:.3g}" if adjusted is None else
              f"p={result.p_value:.3g}, q={adjusted[0]:.3g} over {adjusted[1]} quantities (Benjamini–Hochberg)")
    interval, interval_name = _same_interval(result, looked, alpha, threshold)
    if direction != 0 and significance < alpha:
        result.verdict = {1: "slower", -1: "faster"}[direction]
        result.reason = f"change {change}, {test_name} {stated} < {alpha:g} ({evidence})"
    elif small_seen and significance < alpha and interval is not None and not _inside(interval, threshold):
        result.verdict = "slower" if result.judged_ratio > 1 else "faster"
        result.reason = (f"change {change}, {test_name} {stated} < {alpha:g}; within ±{threshold * 100:g}%, but its "
                         f"{interval_name} interval {percent_change(interval[0])} to {percent_change(interval[1])} "
                         f"reaches past it ({evidence})")
    elif _inside(interval, threshold):
        result.verdict = "same"
        result.reason = (f"change {change}; its {interval_name} interval {percent_change(interval[0])} to "
                         f"{percent_change(interval[1])} lies within ±{threshold * 100:g}% ({evidence})")
    else:
        result.verdict = "undecided"
        if direction != 0:
            why = f"change {change} not confirmed: {test_name} {stated} ≥ {alpha:g}"
        elif interval is None:
            why = f"change {change}, but without an interval nothing establishes `same`"
        else:
            why = (f"change {change}, but its {interval_name} interval {percent_change(interval[0])} to "
                   f"{percent_change(interval[1])} reaches beyond ±{threshold * 100:g}%")
        result.reason = f"{why}; {_what_would_decide(result, looked, threshold, level)} ({evidence})"
    if result.bimodal is not None:
        _judge_bimodal(result, clear)


def _inside(interval: Optional[Tuple[float, float]], threshold: float) -> bool:
    """Both bounds within ±threshold (a bound of 0 is unbounded below: a new-side median
    interval reaching 0)."""
    return interval is not None and interval[0] > 0 and _beyond(interval[0], threshold) == 0 == _beyond(
        interval[1], threshold)


def _same_interval(result: MetricComparison, looked: Optional[LookedTests], alpha: float, threshold: float) -> tuple:
    """The interval of the judged ratio that `same` rests on, and its name: on rounds the first
    look's (1 - 2·level) interval that lies within the margin (TOST at the look's one-sided
    level), else the last look's; on one process the bounds of the two medians' 95% intervals;
    (None, "") without either."""
    if looked is not None and looked.intervals():
        intervals = looked.intervals()
        interval, level = next(((i, s) for i, s in intervals if _inside(i, threshold)), intervals[-1])
        return interval, f"{(1 - 2 * level) * 100:.4g}%"
    if result.ratio_low is not None:
        return (result.ratio_low, result.ratio_high), "95%"
    return None, ""


def _what_would_decide(result: MetricComparison, looked: Optional[LookedTests], threshold: float, level: float) -> str:
    """For an undecided quantity: the smallest change it could have shown, and what would decide
    it (more rounds, or counting instructions)."""
    said = []
    if result.detectable_ratio is not None:
        said.append(f"it could have shown slowdowns of {percent_change(result.detectable_ratio)} and more")
    test = looked.last if looked is not None else None
    if test is not None and result.basis == "rounds":
        result.rounds_to_decide = _rounds_to_decide(test, min(result.rounds_base, result.rounds_new), threshold, level)
    if result.rounds_to_decide is not None and result.rounds_to_decide <= PRACTICAL_ROUNDS:
        said.append(f"about {result.rounds_to_decide} more round(s) a side would decide it")
    elif result.basis == "rounds" and result.rounds_to_decide is None and test is not None and test.fixed_variance:
        said.append("no number of rounds would decide it: the machine's drift between the two sweeps is too uncertain "
                    "(time both builds in one sitting with ab, or count instructions with -p instructions)")
    elif result.basis == "rounds":
        said.append(f"more than {PRACTICAL_ROUNDS} more rounds a side would be needed: count instructions (-p instructions)")
    else:
        said.append("time both sides with --rounds (or use ab) to decide it")
    return "; ".join(said)


def _rounds_to_decide(test: TestResult, rounds: int, threshold: float, level: float) -> Optional[int]:
    """About how many more rounds a side would decide a quantity, were each new round as precise
    as the ones so far and the change where it is: to call it beyond the margin at `level` when
    it lies there, or `same` when inside. Only the rounds' share of the variance shrinks (as
    1/rounds); the drift divided out between two sweeps does not, so where it alone is too wide
    no number of rounds decides (None)."""
    from scipy.stats import norm

    if not test.standard_error or test.log_change is None or rounds < 1:
        return None
    change, limit = abs(test.log_change), math.log1p(threshold)
    if change > limit:
        target = change / float(norm.ppf(1 - level / 2))
    elif change < limit:
        target = (limit - change) / float(norm.ppf(1 - level))
    else:
        return None
    shrinking = test.standard_error ** 2 - test.fixed_variance
    if target ** 2 <= test.fixed_variance or shrinking <= 0:
        return None
    return max(1, math.ceil(rounds * shrinking / (target ** 2 - test.fixed_variance) - rounds))


def _judge_bimodal(result: MetricComparison, clear: Optional[int]) -> None:
    """A bimodal quantity is called slower or faster only when the change lies beyond both of
    its speeds: a side that drew the slow speed in more of its rounds is no regression."""
    called = {"slower": 1, "faster": -1}.get(result.verdict)
    if called is not None and called != clear:
        result.reason = (f"{result.bimodal}: the sides' speeds overlap, so {result.verdict} is not called "
                         f"({result.reason})")
        result.verdict = "undecided"
    else:
        result.reason = f"{result.bimodal}; {result.reason}"
