"""Two reports of one suite → per-case verdicts: faster, slower, same or noisy.

A change counts only when it is both large (the ratio of medians is beyond an effect
threshold, 5% by default) and real (a Mann–Whitney U test on the raw samples rejects "same
distribution" at `alpha`). This is the rule asv and Google Benchmark use: a threshold alone
flags noise as regressions, a test alone flags 0.1% shifts that nobody cares about. A large
change that the test cannot confirm is `noisy`, never `slower`: a CI gate must not fail on
scheduler jitter. A small change is `same` only when the samples are tight enough to say so:
when the ratio bounds from the two medians' 95% confidence intervals reach past the threshold
on both sides, the samples could hide a real change either way, and the verdict is `noisy`
(below 6 samples a side there is no interval: both IQR/median must then be under the
threshold). A change no larger than the clock's step (MXNet's profiler: 1 µs) is `noisy` too.

A case timed through a profiler (opbench's native engine) is compared on the profiler's
per-call samples, the figures its report shows. Reports holding only averages (opperf's own
output) are compared on the threshold alone, and every such verdict says so
(`basis: threshold-only`).

The U test is implemented here (scipy is a dev dependency only): midranks with the tie
correction and continuity-corrected normal approximation, and the exact null distribution
when one sample is small and there are no ties — the same rule scipy's "auto" method uses,
so the p-values can be checked against it.
"""

from __future__ import annotations

import fnmatch
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .errors import UsageError
from .report import CaseResult, Report
from .stats import Measurement, within_step

VERDICTS = ("faster", "slower", "same", "noisy")
METRICS = ("forward", "backward")
#: fewer samples than this on either side cannot support any verdict
MIN_SAMPLES = 3
#: exact U distribution when the smaller sample has at most this many values (scipy's rule)
EXACT_MAX_N = 8

#: Environment keys (flattened with dots, matched case-insensitively as globs) whose values
#: change timings: interpreter and framework versions, CPU and GPU model, thread settings,
#: device. Anything else (hostname, time, argv, paths) differs between any two runs.
ENV_KEY_PATTERNS = (
    "*python*", "*mxnet*", "*torch*", "*numpy*", "*cpu*", "*processor*", "*gpu*", "*cuda*",
    "*cudnn*", "*nvidia*", "*thread*", "*omp_*", "*mkl*", "*device*",
)
#: Exact keys that always count, whatever the patterns say: how the numbers were taken (a
#: profiler's kernel times and a wall clock around the Python call are different quantities),
#: and whether torch had a GPU ("*available*" is ignored for memory figures).
ALWAYS_RELEVANT_KEYS = ("engine", "timer", "settings.profiler", "torch.cuda_available")
ENV_KEY_IGNORED = (
    "*time*", "*date*", "*host*", "*argv*", "*pid*", "*path*", "*executable*", "*freq*",
    "*load*", "*usage*", "*percent*", "*available*", "*uptime*", "*git*", "*commit*", "*cwd*",
    "*seed*", "*command*",
)


# --------------------------------------------------------------------------- Mann–Whitney U


@dataclass(frozen=True)
class MannWhitney:
    """Two-sided test result; `u` is the statistic of the first sample (scipy's convention)."""

    u: float
    p_value: float
    method: str  # "exact" or "asymptotic"


def _midranks(values: Sequence[float]) -> Tuple[List[float], List[int]]:
    """1-based ranks with ties given their average rank, and the size of each tie group."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def _exact_u_counts(m: int, n: int) -> List[int]:
    """Number of orderings giving U = 0..m*n under H0 (coefficients of a Gaussian binomial).

    prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i); exact integers, so no overflow for big n.
    """
    size = m * n + 1
    counts = [0] * size
    counts[0] = 1
    for i in range(1, m + 1):
        shift = n + i
        for k in range(size - 1, shift - 1, -1):
            counts[k] -= counts[k - shift]
        for k in range(i, size):
            counts[k] += counts[k - i]
    return counts


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> MannWhitney:
    """Two-sided Mann–Whitney U test of "x and y come from the same distribution"."""
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("the Mann-Whitney U test needs at least one value in each sample")
    ranks, ties = _midranks(list(x) + list(y))
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2.0
    u = max(u1, n1 * n2 - u1)
    has_ties = any(t > 1 for t in ties)
    if min(n1, n2) <= EXACT_MAX_N and not has_ties:
        counts = _exact_u_counts(min(n1, n2), max(n1, n2))
        tail = sum(counts[int(round(u)):])
        p = 2.0 * tail / math.comb(n1 + n2, n1)
        return MannWhitney(u1, min(1.0, p), "exact")
    n = n1 + n2
    tie_term = sum(t ** 3 - t for t in ties)
    variance = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:  # every value equal: nothing to tell apart
        return MannWhitney(u1, 1.0, "asymptotic")
    z = (u - n1 * n2 / 2.0 - 0.5) / math.sqrt(variance)
    p = 2.0 * 0.5 * math.erfc(z / math.sqrt(2.0))
    return MannWhitney(u1, min(1.0, max(0.0, p)), "asymptotic")


# --------------------------------------------------------------------------- times of a case


@dataclass(frozen=True)
class Timing:
    """One timed quantity of one case as a report holds it: raw samples, or only a summary."""

    samples_ms: Optional[Tuple[float, ...]]
    median_ms: Optional[float]
    mean_ms: Optional[float]
    source: str  # "samples", "summary", "profiler", "opperf"
    #: the clock's step (MXNet's profiler: whole microseconds); a change within it is not seen
    resolution_ms: float = 0.0

    @property
    def has_samples(self) -> bool:
        return bool(self.samples_ms)

    @property
    def center_ms(self) -> Optional[float]:
        """Median when known (robust to the 4-10x spikes seen in fastrnns), else the mean."""
        return self.median_ms if self.median_ms is not None else self.mean_ms

    @property
    def measurement(self) -> Optional[Measurement]:
        return Measurement(self.samples_ms) if self.samples_ms else None


def case_timings(result: CaseResult) -> Dict[str, Timing]:
    """Forward/backward timings of a case: the figures its own report presents.

    A case measured through a profiler (opbench's native engine) is judged on the profiler's
    per-call times, as its report shows them, never on the wall time of the Python call around
    the profiler (at small sizes that is mostly dispatch overhead, ~20× the kernel, and would
    hide a kernel regression); a profiler quantity that is missing stays missing. Other cases:
    a Measurement dict with samples, one without samples, opperf's `avg_time_<metric>_<op>`.
    """
    metrics = result.metrics or {}
    profiler = metrics.get("profiler")
    found: Dict[str, Timing] = {}
    for metric in METRICS:
        if isinstance(profiler, dict):
            timing = _from_profiler(profiler.get(metric))
        else:
            timing = _from_measurement(metrics.get(metric))
        if timing is None:
            timing = _from_opperf(metrics, metric)
        if timing is not None:
            found[metric] = timing
    return found


def _number(value) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _sampled(samples, source: str, resolution_ms: float = 0.0) -> Optional[Timing]:
    """A Timing from a list of sample times, or None when it is not one (absent, empty, junk)."""
    if not (isinstance(samples, list) and samples and all(_number(s) is not None for s in samples)):
        return None
    m = Measurement(samples)
    return Timing(m.samples_ms, m.median, m.mean, source, resolution_ms)


def _from_measurement(data) -> Optional[Timing]:
    if not isinstance(data, dict):
        return None
    sampled = _sampled(data.get("samples_ms"), "samples")
    if sampled is not None:
        return sampled
    median, mean = _number(data.get("median_ms")), _number(data.get("mean_ms"))
    if median is None and mean is None:
        return None
    return Timing(None, median, mean, "summary")


def _from_profiler(data) -> Optional[Timing]:
    """Per-call samples when the profiler entry has them, else its average alone."""
    if not isinstance(data, dict):
        return None
    sampled = _sampled(data.get("per_call_ms"), "profiler", _number(data.get("resolution_ms")) or 0.0)
    if sampled is not None:
        return sampled
    avg = _number(data.get("Avg_ms"))
    return Timing(None, None, avg, "profiler") if avg is not None else None


def _from_opperf(metrics: dict, metric: str) -> Optional[Timing]:
    prefix = f"avg_time_{metric}_"
    for key, value in metrics.items():
        if key.startswith(prefix) and _number(value) is not None:
            return Timing(None, None, _number(value), "opperf")
    return None


def case_category(result: CaseResult) -> str:
    """opbench: the operator category; rnnbench: the runner group; otherwise "all"."""
    params = result.spec.params
    for key in ("category", "group"):
        if isinstance(params.get(key), str) and params[key]:
            return params[key]
    return "all"


def case_labels(results: Sequence[CaseResult], max_len: int = 60) -> Dict[str, str]:
    """Labels by case key: the name alone when unique, else the name plus only the params that
    differ between same-named cases (a runner's sizes, an operator's input shapes).

    Fixed settings repeated on every row (device, fuser, seed) only push the numbers off screen.
    A suite's own short label, params["variant"] (opbench: "(1024,1024)"), stands for all the
    differing params when it tells the cases apart by itself.
    """
    groups: Dict[str, List[CaseResult]] = {}
    for r in results:
        groups.setdefault(r.spec.name, []).append(r)
    labels: Dict[str, str] = {}
    for name, group in groups.items():
        keys = sorted({k for r in group for k in r.spec.params})
        differing = [k for k in keys if len({_compact(r.spec.params.get(k)) for r in group}) > 1]
        if "variant" in differing:
            if len({_compact(r.spec.params.get("variant")) for r in group}) == len(group):
                differing = ["variant"]
            else:  # the variant names the inputs; other differences (dtype, ctx) stay visible
                differing = [k for k in differing if k != "inputs"]
        texts = [_label_text(r.spec.params, differing, max_len) for r in group]
        if len(set(texts)) < len(texts):  # cut to the same text: number them, never merge them
            texts = [f"{text} #{i}" for i, text in enumerate(texts, 1)]
        for r, text in zip(group, texts):
            labels[r.spec.key] = f"{name} {text}".strip()
    return labels


def _label_text(params: dict, keys: List[str], max_len: int) -> str:
    parts = [_compact(params.get(k)) if k in ("inputs", "variant") else f"{k}={_compact(params.get(k))}"
             for k in keys]
    text = " ".join(parts)
    return text if len(text) <= max_len else text[: max_len - 1] + "…"


def _compact(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


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
    #: "mann-whitney" (samples on both sides) or "threshold-only"
    basis: str
    #: "median" with samples on both sides, else "mean" (opperf reports averages)
    statistic: str
    p_value: Optional[float] = None
    test_method: Optional[str] = None
    n_base: Optional[int] = None
    n_new: Optional[int] = None
    #: ratio bounds from the two medians' 95% CIs (conservative); None without enough samples
    ratio_low: Optional[float] = None
    ratio_high: Optional[float] = None
    reason: str = ""


@dataclass
class CaseComparison:
    key: str
    name: str
    label: str
    category: str
    params: dict
    metrics: List[MetricComparison]
    #: summary: slower if any metric is slower, else faster if any is faster, else noisy if
    #: any is noisy, else same. A regression anywhere must not hide behind a speedup elsewhere.
    verdict: str
    #: (sum of new)/(sum of base) over the compared metrics: the case's total time ratio
    ratio: Optional[float]
    basis: str

    @property
    def worst_slowdown(self) -> Optional[float]:
        """Largest ratio among metrics judged slower (None when none is)."""
        ratios = [m.ratio for m in self.metrics if m.verdict == "slower" and m.ratio is not None]
        return max(ratios) if ratios else None


@dataclass
class CategorySummary:
    category: str
    cases: int
    #: geometric mean of the case ratios (cases with a ratio only)
    geomean_ratio: Optional[float]
    counts: Dict[str, int]


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

    def regressions(self, fail_above_pct: float) -> List[CaseComparison]:
        """Cases judged slower by more than `fail_above_pct` percent: the CI gate."""
        limit = 1.0 + fail_above_pct / 100.0
        return [c for c in self.cases if c.worst_slowdown is not None and c.worst_slowdown > limit]

    @property
    def broken(self) -> List[dict]:
        """Cases measured in base that failed, crashed, timed out or were skipped in new: a CI
        gate must fail on these too, or a crashing kernel would pass it."""
        return [u for u in self.unmeasured if u.get("base_status") == "ok" and u.get("new_status") != "ok"]

    def gate_verdict(self, fail_above_pct: float) -> dict:
        """The --fail-above verdict, as recorded (field `gate`) in the JSON and Markdown views."""
        slower = self.regressions(fail_above_pct)
        return {"fail_above_pct": fail_above_pct, "passed": not slower and not self.broken,
                "slower": [{"label": c.label, "slowdown_pct": (c.worst_slowdown - 1) * 100} for c in slower],
                "broken": [{"label": u["label"], "new_status": u["new_status"]} for u in self.broken],
                "only_in_base": len(self.only_in_base)}

    def to_dict(self) -> dict:
        data = {
            "schema": "benchcore-comparison",
            "suite": self.suite,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "base": self.base_source,
            "new": self.new_source,
            "env_differences": self.env_differences,
            "env_mismatch_allowed": self.env_mismatch_allowed,
            "summary": [asdict(row) for row in self.summary],
            "cases": [asdict(case) for case in self.cases],
            "only_in_base": self.only_in_base,
            "only_in_new": self.only_in_new,
            "unmeasured": self.unmeasured,
            "gate": self.gate,
        }
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    def to_markdown(self, chart_links: str = "") -> str:
        return format_markdown(self, chart_links)


def geometric_mean(values: Sequence[float]) -> Optional[float]:
    positive = [v for v in values if v is not None and v > 0]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def _summarise(category: str, cases: List[CaseComparison]) -> CategorySummary:
    counts = {v: sum(1 for c in cases if c.verdict == v) for v in VERDICTS}
    return CategorySummary(category, len(cases), geometric_mean([c.ratio for c in cases]), counts)


# --------------------------------------------------------------------------- the comparison


def compare(
    base: Report,
    new: Report,
    threshold: float = 0.05,
    alpha: float = 0.05,
    allow_env_mismatch: bool = False,
) -> Comparison:
    """Compare `new` against `base`, case by case (matched by CaseSpec.key)."""
    if base.suite != new.suite:
        raise UsageError(f"cannot compare a {base.suite} report with a {new.suite} report; pass two reports of the same suite")
    if not 0 < threshold < 1:
        raise UsageError(f"threshold is a fraction between 0 and 1 (e.g. 0.05 for 5%), got {threshold}")
    if not 0 < alpha < 1:
        raise UsageError(f"alpha must be between 0 and 1 (e.g. 0.05), got {alpha}")
    differences = environment_differences(base, new)
    if differences and not allow_env_mismatch:
        keys = ", ".join(d["key"] for d in differences)
        raise UsageError(f"reports come from different environments ({keys} differ); pass --allow-env-mismatch to compare anyway")
    result = Comparison(base.suite, threshold, alpha, env_differences=differences,
                        env_mismatch_allowed=allow_env_mismatch)
    base_cases = _by_key(base, "base")
    new_cases = _by_key(new, "new")
    labels = case_labels(list(base_cases.values()) + [n for k, n in new_cases.items() if k not in base_cases])
    for key, b in base_cases.items():
        n = new_cases.get(key)
        if n is None:
            result.only_in_base.append(_brief(b, labels[key]))
            continue
        case, missing = _compare_case(b, n, threshold, alpha, labels[key])
        if case is not None:
            result.cases.append(case)
        else:
            result.unmeasured.append(missing)
    result.only_in_new = [_brief(n, labels[k]) for k, n in new_cases.items() if k not in base_cases]
    return result


def _by_key(report: Report, which: str) -> Dict[str, CaseResult]:
    cases: Dict[str, CaseResult] = {}
    for r in report.results:
        if r.spec.key in cases:
            raise UsageError(f"the {which} report holds case {r.spec.key} twice; merge shards with the merge command, not by hand")
        cases[r.spec.key] = r
    return cases


def _brief(result: CaseResult, label: str) -> dict:
    return {"key": result.spec.key, "name": result.spec.name, "label": label, "status": result.status}


def _compare_case(base: CaseResult, new: CaseResult, threshold: float, alpha: float, label: str):
    """(CaseComparison, None) when both sides have a common timing, else (None, reason dict)."""
    brief = {"key": base.spec.key, "name": base.spec.name, "label": label,
             "base_status": base.status, "new_status": new.status}
    if not (base.ok and new.ok):
        bad = [f"{side}: {r.status}" + (f" ({_one_line(r.error)})" if r.error else "")
               for side, r in (("base", base), ("new", new)) if not r.ok]
        return None, dict(brief, reason="; ".join(bad))
    bt, nt = case_timings(base), case_timings(new)
    shared = [m for m in METRICS if m in bt and m in nt]
    if not shared:
        return None, dict(brief, reason="no timing present in both reports")
    metrics = [compare_timings(m, bt[m], nt[m], threshold, alpha) for m in shared]
    verdict = _summary_verdict([m.verdict for m in metrics])
    base_total = sum(m.base_ms for m in metrics if m.base_ms is not None)
    new_total = sum(m.new_ms for m in metrics if m.new_ms is not None)
    ratio = new_total / base_total if base_total > 0 and all(m.ratio is not None for m in metrics) else None
    basis = "mann-whitney" if all(m.basis == "mann-whitney" for m in metrics) else "threshold-only"
    case = CaseComparison(base.spec.key, base.spec.name, label, case_category(base),
                          dict(base.spec.params), metrics, verdict, ratio, basis)
    return case, None


def _one_line(text: str) -> str:
    lines = [l for l in str(text).strip().splitlines() if l.strip()]
    return lines[-1][:120] if lines else ""


def _summary_verdict(verdicts: List[str]) -> str:
    for v in ("slower", "faster", "noisy"):
        if v in verdicts:
            return v
    return "same"


def _beyond(ratio: float, threshold: float) -> int:
    """+1 slower, -1 faster, 0 within the threshold; symmetric in log space (1.05 ↔ 1/1.05)."""
    limit = math.log1p(threshold)
    change = math.log(ratio)
    return 1 if change > limit else -1 if change < -limit else 0


def compare_timings(metric: str, base: Timing, new: Timing, threshold: float, alpha: float) -> MetricComparison:
    """The verdict rule for one timed quantity; see the module docstring."""
    if base.has_samples and new.has_samples:
        return _compare_samples(metric, base, new, threshold, alpha)
    # Without samples on both sides, compare like with like: medians when both have one,
    # else averages (opperf's statistic).
    statistic = "median" if base.median_ms is not None and new.median_ms is not None else "mean"
    b = base.median_ms if statistic == "median" else (base.mean_ms if base.mean_ms is not None else base.center_ms)
    n = new.median_ms if statistic == "median" else (new.mean_ms if new.mean_ms is not None else new.center_ms)
    result = MetricComparison(metric, b, n, None, "noisy", "threshold-only", statistic,
                              n_base=len(base.samples_ms or ()) or None, n_new=len(new.samples_ms or ()) or None)
    if b is None or n is None or b <= 0 or n <= 0:
        result.reason = "no raw samples, and a zero or missing average; nothing to compare"
        return result
    result.ratio = n / b
    result.verdict = {1: "slower", -1: "faster", 0: "same"}[_beyond(result.ratio, threshold)]
    result.reason = "no raw samples; verdict from the threshold alone"
    return result


def _spans_both_ways(result: MetricComparison, threshold: float) -> bool:
    """The ratio bounds reach past the threshold on both sides: "same" would be a guess."""
    if result.ratio_low is None or result.ratio_high is None:
        return False
    below = result.ratio_low <= 0 or _beyond(result.ratio_low, threshold) < 0
    return below and _beyond(result.ratio_high, threshold) > 0


def _tight(base: Measurement, new: Measurement, threshold: float) -> bool:
    """Without confidence intervals (n < 6), "same" needs both spreads inside the threshold."""
    return all(m.relative_iqr is not None and m.relative_iqr < threshold for m in (base, new))


def _compare_samples(metric: str, base: Timing, new: Timing, threshold: float, alpha: float) -> MetricComparison:
    bm, nm = base.measurement, new.measurement
    result = MetricComparison(metric, bm.median, nm.median, None, "noisy", "mann-whitney", "median",
                              n_base=bm.n, n_new=nm.n)
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
    test = mann_whitney_u(bm.samples_ms, nm.samples_ms)
    result.p_value, result.test_method = test.p_value, test.method
    direction = _beyond(result.ratio, threshold)
    change = f"{(result.ratio - 1) * 100:+.1f}%"
    resolution = max(base.resolution_ms, new.resolution_ms)
    if direction == 0 and _spans_both_ways(result, threshold):
        result.reason = (f"change {change}, but the medians' confidence intervals allow anything from "
                         f"{(result.ratio_low - 1) * 100:+.0f}% to {(result.ratio_high - 1) * 100:+.0f}%; samples too spread")
    elif direction == 0 and result.ratio_low is None and not _tight(bm, nm, threshold):
        result.reason = (f"change {change}, but with fewer than 6 samples a side there is no confidence interval, "
                         f"and the IQR/median of the samples is not under ±{threshold * 100:g}%")
    elif direction != 0 and within_step(nm.median - bm.median, resolution):
        result.reason = f"change {change} is within the clock's {resolution:g} ms step; not measurable"
    elif direction == 0:
        result.verdict = "same"
        result.reason = f"change {change} within ±{threshold * 100:g}%"
    elif test.p_value < alpha:
        result.verdict = "slower" if direction > 0 else "faster"
        result.reason = f"change {change}, p={test.p_value:.3g} < {alpha:g}"
    else:
        result.reason = f"change {change} not confirmed by the U test (p={test.p_value:.3g} ≥ {alpha:g}); samples too spread or too few"
    return result


# --------------------------------------------------------------------------- environment


def flatten(data, prefix: str = "") -> Dict[str, object]:
    """Nested dicts → {"a.b.c": leaf}; lists stay leaves (compared whole)."""
    flat: Dict[str, object] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                flat.update(flatten(value, name))
            else:
                flat[name] = value
    return flat


def timing_relevant(key: str) -> bool:
    lowered = key.lower()
    if lowered in ALWAYS_RELEVANT_KEYS:
        return True
    if any(fnmatch.fnmatchcase(lowered, p) for p in ENV_KEY_IGNORED):
        return False
    return any(fnmatch.fnmatchcase(lowered, p) for p in ENV_KEY_PATTERNS)


def environment_differences(base: Report, new: Report) -> List[dict]:
    """Timing-relevant environment keys (and the thread and profiler settings) whose values differ.

    Only keys both reports recorded are compared: a key on one side only comes from a newer
    version of the suite (a baseline from before it recorded TF32 settings must still gate).
    What one key per block always records catches the rest: a framework that failed to import
    has `version: null`, a GPU run differs in `torch.cuda_available` and `nvidia_driver`.
    """
    b = flatten(base.environment)
    n = flatten(new.environment)
    for key, value in flatten(base.settings, "settings").items():
        if "thread" in key.lower() or key == "settings.profiler":
            b[key] = value
    for key, value in flatten(new.settings, "settings").items():
        if "thread" in key.lower() or key == "settings.profiler":
            n[key] = value
    keys = sorted(k for k in set(b) & set(n) if timing_relevant(k))
    return [{"key": k, "base": b.get(k), "new": n.get(k)} for k in keys if b.get(k) != n.get(k)]


# --------------------------------------------------------------------------- Markdown


def _fmt(value: Optional[float], spec: Optional[str] = None) -> str:
    """Times keep 4 significant digits with trailing zeros (1.000, 0.01230), whole ms past 1000."""
    if value is None:
        return "---"
    if spec is None:
        spec = ".0f" if abs(value) >= 1000 else "#.4g"
    return format(value, spec)


def _env_value(value) -> str:
    if value is None:
        return "---"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "(none)"
    return str(value)


def _change(ratio: Optional[float]) -> str:
    return "---" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"


def format_markdown(comparison: Comparison, chart_links: str = "") -> str:
    """The Markdown view of a Comparison (tables in GitHub style)."""
    from tabulate import tabulate

    c = comparison
    out = [f"# Comparison ({c.suite})", ""]
    if c.base_source or c.new_source:
        out += [f"- base: `{c.base_source}`", f"- new: `{c.new_source}`"]
    out += [
        f"- effect threshold: {c.threshold * 100:g}%; significance: Mann–Whitney U, alpha {c.alpha:g}",
        "- ratio = new / base (median with raw samples, average without); < 1 is faster",
    ]
    if c.gate is not None:
        g = c.gate
        failing = [f"{x['label']} ({x['slowdown_pct']:+.1f}%)" for x in g["slower"]] + \
                  [f"{x['label']} ({x['new_status']})" for x in g["broken"]]
        out += [f"- gate (--fail-above {g['fail_above_pct']:g}%): " + ("**passed**" if g["passed"] else
                f"**failed** — {', '.join(failing)}")]
    out += [""]
    if c.env_differences:
        out += ["## Environment differences", ""]
        if c.env_mismatch_allowed:
            out += ["Compared anyway (--allow-env-mismatch): timings may differ for these reasons.", ""]
        rows = [[d["key"], _env_value(d["base"]), _env_value(d["new"])] for d in c.env_differences]
        out += [tabulate(rows, ["Key", "Base", "New"], tablefmt="github", disable_numparse=True), ""]
    out += ["## Summary", ""]
    rows = [[s.category, s.cases, _fmt(s.geomean_ratio), _change(s.geomean_ratio)]
            + [s.counts[v] for v in VERDICTS] for s in c.summary]
    out += [tabulate(rows, ["Category", "Cases", "Geomean ratio", "Change", *VERDICTS], tablefmt="github",
                     disable_numparse=True), ""]
    if any(case.basis == "threshold-only" for case in c.cases):
        out += ["Cases marked *threshold-only* have no raw samples on one side (e.g. opperf's native "
                "averages): their verdict rests on the threshold alone, without a significance test.", ""]
    out += ["## Cases", ""]
    rows = []
    for case in sorted(c.cases, key=lambda k: -(k.ratio or 0)):
        for m in case.metrics:
            why = m.reason if m.verdict == "noisy" else ""  # the one verdict that needs its reason
            rows.append([case.label, case.category, m.metric, _fmt(m.base_ms), _fmt(m.new_ms), _fmt(m.ratio, ".3f"),
                         _change(m.ratio), _fmt(m.p_value, ".3g"), m.verdict, m.basis, why.replace("|", "\\|")])
    headers = ["Case", "Category", "Metric", "Base (ms)", "New (ms)", "Ratio", "Change", "p", "Verdict", "Basis", "Why noisy"]
    out += [tabulate(rows, headers, tablefmt="github", disable_numparse=True) if rows else "No case measured in both reports.", ""]
    for title, items in (("Only in base", c.only_in_base), ("Only in new", c.only_in_new)):
        if items:
            out += [f"## {title} ({len(items)})", ""]
            out += [tabulate([[i["label"], i["status"]] for i in items], ["Case", "Status"], tablefmt="github",
                             disable_numparse=True), ""]
    if c.unmeasured:
        out += [f"## Not measured on both sides ({len(c.unmeasured)})", ""]
        out += [tabulate([[i["label"], i["reason"]] for i in c.unmeasured], ["Case", "Why"], tablefmt="github",
                         disable_numparse=True), ""]
    if chart_links:
        out += [chart_links.rstrip(), ""]
    return "\n".join(out)
