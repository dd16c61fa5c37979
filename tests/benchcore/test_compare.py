"""compare: the U test against scipy, verdicts on sample sets with known answers, geomeans,
environment checks, opperf-only averages, Markdown/JSON views."""

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu, ttest_ind

from benchcore.compare.tests import (
    VariancePrior,
    mann_whitney,
    paired_t_on_logs,
    t_on_logs,
)
from benchcore.compare.verdicts import Evidence, compare_timings, geometric_mean
from benchcore.compare.verdicts import compare as _compare
from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec
from benchcore.measure.measurement import Measurement, fenced_mean, judged_pair
from benchcore.report.figures import Timing, from_measurement, sampled
from benchcore.report.identity import environment_differences, timing_identity
from benchcore.report.model import CaseResult, Report
from benchcore.suite import Suite
from benchcore.views.markdown import comparison_markdown
from opbench.suite import from_opperf, from_profiler_phase


def opbench_like_timings(result):
    """A suite declaration like opbench's: the profiler's per-call times when the case has a
    profiler block, else its Measurements, else opperf's averages."""
    metrics, op = result.metrics, result.spec.params.get("op")
    profiler = metrics.get("profiler")
    found = {}
    for metric in ("forward", "backward"):
        timing = (from_profiler_phase(profiler.get(metric)) if isinstance(profiler, dict)
                  else from_measurement(metrics.get(metric)))
        timing = timing or from_opperf(metrics.get(f"avg_time_{metric}_{op}"))
        if timing:
            found[metric] = timing
    return found


SUITE = Suite("opbench", timings=opbench_like_timings, category=lambda r: r.spec.params.get("category", "all"))


def compare(base, new, **kwargs):
    return _compare(base, new, SUITE, **kwargs)

ENV = {"python": "3.11.4", "numpy": "1.23.5", "cpu_model": "Test CPU", "cpu_count": 2,
       "hostname": "a", "started_at": "2024-01-01T00:00:00+00:00", "git_commit": "abc",
       "threads_env": {"OMP_NUM_THREADS": "2"},
       "mxnet": {"version": "1.9.1", "features": ["MKLDNN"]},
       "torch": {"version": "2.13.0", "threads": 2}}


def samples(median, n=30, noise=0.01, seed=0):
    rng = np.random.default_rng(seed)
    return list(median * (1 + noise * rng.standard_normal(n)))


def op_result(name, fwd, bwd=None, category="unary", inputs=None, status="ok"):
    """An opbench-like case with python-engine Measurements (raw samples)."""
    params = {"op": name, "category": category, "inputs": inputs or {"data": [1024, 1024]}, "variant": "nd"}
    metrics = {}
    if fwd is not None:
        metrics["forward"] = Measurement(fwd).to_dict()
    if bwd is not None:
        metrics["backward"] = Measurement(bwd).to_dict()
    return CaseResult(CaseSpec("opbench", name, params), status, metrics)


def opperf_result(name, fwd_avg, bwd_avg=None, category="unary"):
    """An opbench case from the native engine: opperf averages only, no samples."""
    params = {"op": name, "category": category, "inputs": {"data": [1024, 1024]}, "variant": "nd"}
    metrics = {f"avg_time_forward_{name}": fwd_avg}
    if bwd_avg is not None:
        metrics[f"avg_time_backward_{name}"] = bwd_avg
    return CaseResult(CaseSpec("opbench", name, params), "ok", metrics)


def make_report(results, suite="opbench", env=None, settings=None):
    return Report(suite=suite, environment=dict(env or ENV), settings=dict(settings or {"runs": 30}),
                  results=list(results))


# --------------------------------------------------------------------------- the tests behind verdicts


def test_mann_whitney_is_scipys_two_sided_test_of_new_against_base():
    rng = np.random.default_rng(7)
    for _ in range(20):
        x, y = rng.normal(0, 1, rng.integers(3, 30)), rng.normal(0.3, 1, rng.integers(3, 30))
        assert mann_whitney(x, y).p_value == pytest.approx(mannwhitneyu(y, x, alternative="two-sided").pvalue)
    assert mann_whitney([5.0] * 4, [5.0] * 6).p_value == 1.0  # nothing to tell apart


def test_t_on_logs_is_students_t_on_the_logs_and_bounds_the_ratio():
    base, new = [1.0, 1.03, 0.98, 1.01], [1.21, 1.18, 1.22]
    ours = t_on_logs(base, new)
    theirs = ttest_ind(np.log(new), np.log(base), equal_var=True)
    assert ours.p_value == pytest.approx(theirs.pvalue) and ours.method == "t-log"
    low, high = theirs.confidence_interval(0.95)
    assert ours.ratio_ci95 == pytest.approx((math.exp(low), math.exp(high)))
    assert ours.ratio_ci95[0] < np.exp(np.mean(np.log(new)) - np.mean(np.log(base))) < ours.ratio_ci95[1]


def test_t_on_logs_tests_against_an_offset_and_widens_by_its_variance():
    base, new = [1.0, 1.02, 0.99], [1.10, 1.12, 1.09]
    plain = t_on_logs(base, new)
    shifted = t_on_logs(base, new, offset=math.log(1.10))
    assert plain.p_value < 0.01 and shifted.p_value > 0.5  # the whole change is the offset
    assert shifted.ratio_ci95[0] < 1.0 < shifted.ratio_ci95[1]
    wider = t_on_logs(base, new, offset=math.log(1.10), offset_variance=0.01)
    assert wider.ratio_ci95[1] - wider.ratio_ci95[0] > shifted.ratio_ci95[1] - shifted.ratio_ci95[0]


def test_t_on_rounds_that_agree_exactly_on_each_side():
    assert t_on_logs([3.0] * 3, [5.0] * 3).p_value == 0.0
    assert t_on_logs([3.0] * 3, [3.0] * 4).p_value == 1.0


def test_a_prior_moderates_a_case_whose_rounds_happened_to_agree():
    prior = VariancePrior(variance=0.03 ** 2, df=20.0)
    base, new = [1.0, 1.0001, 0.9999], [1.06, 1.0601, 1.0599]
    assert t_on_logs(base, new).p_value < 1e-6  # on its own: certain
    moderated = t_on_logs(base, new, prior)
    assert moderated.method == "moderated-t-log" and moderated.p_value > 0.01  # typical noise: not certain
    assert prior.moderated(0.0, 4) == pytest.approx((20 * 0.03 ** 2 / 24, 24))


def test_the_prior_recovers_a_common_variance_and_its_spread():
    rng = np.random.default_rng(3)
    same = [0.04 ** 2 * rng.chisquare(4) / 4 for _ in range(2000)]
    fitted = VariancePrior.fit(same, [4] * len(same))
    assert fitted.variance == pytest.approx(0.04 ** 2, rel=0.1) and fitted.df > 50
    spread = [(0.04 * math.exp(rng.normal(0, 0.5))) ** 2 * rng.chisquare(4) / 4 for _ in range(2000)]
    assert VariancePrior.fit(spread, [4] * len(spread)).df < 10  # cases truly differ: shrink less
    assert VariancePrior.fit(same[:5], [4] * 5) is None  # too few to fit


# --------------------------------------------------------------------------- verdicts


def test_clear_slowdown_is_slower():
    base = make_report([op_result("exp", samples(1.0, seed=1))])
    new = make_report([op_result("exp", samples(1.2, seed=2))])
    case = compare(base, new).cases[0]
    assert case.verdict == "slower"
    assert case.ratio == pytest.approx(1.2, rel=0.02)
    m = case.metrics[0]
    assert m.basis == "one-process" and m.p_value < 1e-6
    assert "cannot separate process noise" in m.reason
    assert m.ratio_low < m.ratio < m.ratio_high


def test_clear_speedup_is_faster():
    base = make_report([op_result("exp", samples(1.0, seed=1))])
    new = make_report([op_result("exp", samples(0.8, seed=2))])
    assert compare(base, new).cases[0].verdict == "faster"


def test_identical_distributions_are_same():
    base = make_report([op_result("exp", samples(1.0, seed=3), samples(2.0, seed=4))])
    new = make_report([op_result("exp", samples(1.0, seed=5), samples(2.0, seed=6))])
    case = compare(base, new).cases[0]
    assert case.verdict == "same"
    assert [m.verdict for m in case.metrics] == ["same", "same"]


def test_two_samples_each_are_noisy():
    base = make_report([op_result("exp", [1.0, 1.01])])
    new = make_report([op_result("exp", [1.5, 1.52])])
    case = compare(base, new).cases[0]
    assert case.verdict == "undecided"
    assert "too few samples" in case.metrics[0].reason


def test_large_change_the_test_cannot_confirm_is_undecided():
    # medians 20% apart, but the spread is so wide that the U test cannot tell them apart
    base = make_report([op_result("exp", samples(1.0, n=8, noise=0.6, seed=8))])
    new = make_report([op_result("exp", [v * 1.2 for v in samples(1.0, n=8, noise=0.6, seed=9)])])
    m = compare(base, new).cases[0].metrics[0]
    assert m.p_value >= 0.05
    assert m.verdict == "undecided" and "not confirmed" in m.reason


def test_small_significant_change_is_same():
    base = make_report([op_result("exp", samples(1.0, n=200, noise=0.001, seed=1))])
    new = make_report([op_result("exp", samples(1.02, n=200, noise=0.001, seed=2))])
    m = compare(base, new).cases[0].metrics[0]
    assert m.p_value < 1e-6 and m.verdict == "same"


def test_spread_too_wide_to_call_same_is_undecided():
    # medians within 5%, but each side's IQR is ~40%: the data cannot exclude a 10% change
    spread = samples(1.0, n=12, noise=0.3, seed=10)
    base = make_report([op_result("exp", spread)])
    new = make_report([op_result("exp", [v * 1.02 for v in spread])])
    m = compare(base, new).cases[0].metrics[0]
    assert m.ratio == pytest.approx(1.02)
    assert m.verdict == "undecided" and "95% interval" in m.reason and "reaches beyond ±5%" in m.reason


def test_summaries_without_samples_compare_medians():
    def summary(median, mean):
        return CaseResult(CaseSpec("opbench", "exp", {"op": "exp"}), "ok",
                          {"forward": {"median_ms": median, "mean_ms": mean}})

    m = compare(make_report([summary(1.0, 5.0)]), make_report([summary(1.5, 5.0)])).cases[0].metrics[0]
    assert (m.statistic, m.ratio, m.verdict, m.basis) == ("median", 1.5, "slower", "threshold-only")


def test_backward_regression_makes_case_slower():
    base = make_report([op_result("exp", samples(1.0, seed=1), samples(2.0, seed=2))])
    new = make_report([op_result("exp", samples(1.0, seed=3), samples(3.0, seed=4))])
    case = compare(base, new).cases[0]
    assert [m.verdict for m in case.metrics] == ["same", "slower"]
    assert case.verdict == "slower"
    assert case.worst_slowdown == pytest.approx(1.5, rel=0.02)
    # the case ratio is the ratio of total (forward + backward) time
    assert case.ratio == pytest.approx(4.0 / 3.0, rel=0.02)


def test_opperf_averages_give_threshold_only_verdicts():
    base = make_report([opperf_result("exp", 1.0, 2.0), opperf_result("log", 1.0), opperf_result("sin", 1.0)])
    new = make_report([opperf_result("exp", 1.2, 2.0), opperf_result("log", 0.8), opperf_result("sin", 1.03)])
    cases = {c.name: c for c in compare(base, new).cases}
    assert cases["exp"].verdict == "slower"
    assert cases["log"].verdict == "faster"
    # within the margin on averages alone is not established: averages have no interval
    assert cases["sin"].verdict == "undecided" and "no interval can establish `same`" in cases["sin"].metrics[0].reason
    for case in cases.values():
        assert case.basis == "threshold-only"
        assert all(m.basis == "threshold-only" and m.p_value is None for m in case.metrics)
    assert all("threshold alone" in cases[name].metrics[0].reason for name in ("exp", "log"))


def native_result(name, wall, kernel_fwd, kernel_bwd=None):
    """An opbench native-engine case: wall Measurements around the call, and the profiler's
    per-call kernel times, which are what its report shows."""
    result = op_result(name, wall, wall)
    profiler = {"forward": {"Avg_ms": float(np.mean(kernel_fwd)), "per_call_ms": list(kernel_fwd)}}
    if kernel_bwd is not None:
        profiler["backward"] = {"Avg_ms": float(np.mean(kernel_bwd)), "per_call_ms": list(kernel_bwd)}
    result.metrics["profiler"] = profiler
    return result


def test_native_cases_are_judged_on_the_profiler_times_their_report_shows():
    """A 3x kernel regression under an unchanged 20x dispatch overhead is a regression."""
    wall = samples(0.07)
    base = make_report([native_result("batch_dot", wall, samples(0.0027, seed=1), samples(0.004, seed=3))])
    new = make_report([native_result("batch_dot", wall, samples(0.0081, seed=2), samples(0.004, seed=4))])
    [case] = compare(base, new).cases
    forward = case.metrics[0]
    assert forward.metric == "forward" and forward.verdict == "slower" and forward.basis == "one-process"
    assert forward.base_ms == pytest.approx(0.0027, rel=0.05) and forward.ratio == pytest.approx(3, rel=0.1)
    assert case.metrics[1].verdict == "same"


def test_a_quantity_the_profiler_missed_is_not_replaced_by_wall_time():
    wall = samples(0.07)
    base, new = (make_report([native_result("Custom", wall, samples(0.01))]) for _ in range(2))
    for report in (base, new):
        del report.results[0].metrics["profiler"]["forward"]
    result = compare(base, new)
    assert result.cases == [] and result.unmeasured[0]["name"] == "Custom"


def test_reports_taken_by_different_methods_are_not_compared():
    """Native-profiler kernel times and python-engine wall times are different quantities."""
    base = make_report([op_result("exp", samples(1.0))], env={**ENV, "engine": "native", "timer": "mxnet-profiler"},
                       settings={"profiler": "native"})
    new = make_report([op_result("exp", samples(1.0))], env={**ENV, "engine": "python", "timer": "perf_counter"},
                      settings={"profiler": "python"})
    with pytest.raises(UsageError) as info:
        compare(base, new)
    assert "engine, settings.profiler, timer differ" in str(info.value)


def test_samples_on_one_side_only_compares_means():
    base = make_report([op_result("exp", [1.0, 1.0, 1.0, 4.0])])  # mean 1.75, median 1.0
    new = make_report([opperf_result("exp", 1.75)])
    m = compare(base, new).cases[0].metrics[0]
    assert m.statistic == "mean" and m.basis == "threshold-only"
    assert m.ratio == pytest.approx(1.0) and m.verdict == "undecided"


def test_unmatched_and_unmeasured_cases_are_listed():
    base = make_report([op_result("exp", samples(1.0)), op_result("log", samples(1.0)),
                        op_result("sin", samples(1.0))])
    failed = CaseResult(CaseSpec("opbench", "sin", base.results[2].spec.params), "failed", {}, error="Traceback\nValueError: bad")
    new = make_report([op_result("exp", samples(1.0)), failed, op_result("cos", samples(1.0))])
    result = compare(base, new)
    assert [c.name for c in result.cases] == ["exp"]
    assert [c["name"] for c in result.only_in_base] == ["log"]
    assert [c["name"] for c in result.only_in_new] == ["cos"]
    assert result.unmeasured[0]["name"] == "sin"
    assert "new: failed (ValueError: bad)" in result.unmeasured[0]["reason"]


def test_same_name_different_inputs_are_different_cases():
    base = make_report([op_result("exp", samples(1.0), inputs={"data": [10, 10]}),
                        op_result("exp", samples(5.0), inputs={"data": [100, 100]})])
    new = make_report([op_result("exp", samples(1.0, seed=3), inputs={"data": [10, 10]}),
                       op_result("exp", samples(6.0, seed=4), inputs={"data": [100, 100]})])
    verdicts = sorted((c.params["inputs"]["data"][0], c.verdict) for c in compare(base, new).cases)
    assert verdicts == [(10, "same"), (100, "slower")]


# --------------------------------------------------------------------------- geometric means


def test_geometric_means_per_category_and_overall():
    ratios = {"exp": ("unary", 1.2), "log": ("unary", 0.9), "dot": ("gemm", 2.0), "add": ("binary", 1.0)}
    base = make_report([opperf_result(n, 1.0, category=c) for n, (c, _) in ratios.items()])
    new = make_report([opperf_result(n, r, category=c) for n, (c, r) in ratios.items()])
    summary = {s.category: s for s in compare(base, new).summary}
    assert summary["unary"].geomean_ratio == pytest.approx(math.sqrt(1.2 * 0.9))
    assert summary["gemm"].geomean_ratio == pytest.approx(2.0)
    assert summary["overall"].geomean_ratio == pytest.approx((1.2 * 0.9 * 2.0 * 1.0) ** 0.25)
    assert summary["overall"].cases == 4
    assert summary["unary"].counts == {"faster": 1, "slower": 1, "same": 0, "undecided": 0}
    assert list(summary)[-1] == "overall"
    assert geometric_mean([]) is None


def test_rnnbench_cases_without_group_fall_in_all():
    def rnn(name, med, seed):
        m = {"forward": Measurement(samples(med, seed=seed)).to_dict(), "backward": None}
        return CaseResult(CaseSpec("rnnbench", name, {"seqLength": 5, "device": "cpu", "fuser": "default"}), "ok", m)

    base = make_report([rnn("cudnn", 1.0, 1), rnn("jit", 2.0, 2)], suite="rnnbench")
    new = make_report([rnn("cudnn", 1.0, 3), rnn("jit", 2.0, 4)], suite="rnnbench")
    summary = compare(base, new).summary
    assert [s.category for s in summary] == ["all", "overall"]
    assert all(len(c.metrics) == 1 for c in compare(base, new).cases)  # backward None is skipped


# --------------------------------------------------------------------------- refusals, environment


def test_different_suites_refused():
    with pytest.raises(UsageError, match="opbench report with a rnnbench report"):
        compare(make_report([]), make_report([], suite="rnnbench"))


def test_environment_mismatch_refused_then_allowed():
    other = json.loads(json.dumps(ENV))
    other["mxnet"]["version"] = "2.0.0"
    other["threads_env"]["OMP_NUM_THREADS"] = "1"
    other["hostname"] = "b"                    # never a reason to refuse
    other["started_at"] = "2025-01-01T00:00:00"
    other["git_commit"] = "def"
    base = make_report([op_result("exp", samples(1.0))])
    new = make_report([op_result("exp", samples(1.0))], env=other)
    with pytest.raises(UsageError) as info:
        compare(base, new)
    message = str(info.value)
    assert "\n" not in message
    assert "mxnet.version" in message and "threads_env.OMP_NUM_THREADS" in message
    assert "--allow-env-mismatch" in message and "hostname" not in message
    result = compare(base, new, allow_env_mismatch=True)
    assert {d["key"] for d in result.env_differences} == {"mxnet.version", "threads_env.OMP_NUM_THREADS"}
    assert result.cases[0].verdict == "same"


def test_thread_settings_count_as_environment():
    base = make_report([], settings={"threads": 2})
    new = make_report([], settings={"threads": 1})
    assert [d["key"] for d in environment_differences(base, new)] == ["settings.threads"]


def test_bad_threshold_and_alpha_refused():
    with pytest.raises(UsageError, match="threshold"):
        compare(make_report([]), make_report([]), threshold=0)
    with pytest.raises(UsageError, match="alpha"):
        compare(make_report([]), make_report([]), alpha=1.5)


# --------------------------------------------------------------------------- views


def test_markdown_and_json_views():
    base = make_report([op_result("exp", samples(1.0, seed=1)), opperf_result("log", 1.0),
                        op_result("sin", samples(1.0))])
    new = make_report([op_result("exp", samples(1.2, seed=2)), opperf_result("log", 1.0)])
    result = compare(base, new)
    text = comparison_markdown(result)
    assert "| Category" in text and "| overall" in text
    assert "slower" in text and "threshold-only" in text and "Only in base (1)" in text
    data = json.loads(result.to_json())
    assert data["schema"] == "benchcore-comparison"
    assert {c["name"]: c["verdict"] for c in data["cases"]} == {"exp": "slower", "log": "undecided"}
    assert data["summary"][-1]["category"] == "overall"
    assert data["only_in_base"][0]["name"] == "sin"


def test_labels_show_only_what_tells_cases_apart():
    base = make_report([op_result("exp", samples(1.0), inputs={"data": [10, 10]}),
                        op_result("exp", samples(1.0), inputs={"data": [100, 100]}),
                        op_result("log", samples(1.0))])
    labels = sorted(c.label for c in compare(base, base).cases)
    assert labels == sorted(['exp {"data":[10,10]}', 'exp {"data":[100,100]}', "log"])


def test_labels_tell_apart_cases_that_differ_in_dtype_and_in_long_inputs():
    def case(dtype, variant, rows):
        inputs = {"lhs": {"dtype": dtype, "init": "normal", "shape": [rows, 64, 64]}, "rhs": {"shape": [rows, 64, 64]}}
        result = op_result("batch_dot", samples(1.0), inputs=inputs)
        result.spec.params.update(dtype=dtype, variant=variant)
        return result

    base = make_report([case("float32", "(2,4,4)", 2), case("float32", "(8,4,4)", 8)])
    new = make_report([case("float64", "(2,4,4)", 2), case("float64", "(8,4,4)", 8)])
    result = compare(base, new)
    labels = [c["label"] for c in result.only_in_base + result.only_in_new]
    assert labels == ["batch_dot dtype=float32 (2,4,4)", "batch_dot dtype=float32 (8,4,4)",
                      "batch_dot dtype=float64 (2,4,4)", "batch_dot dtype=float64 (8,4,4)"]

    long_inputs = [op_result("Custom", samples(1.0), inputs={"data": [1] * 40 + [i]}) for i in range(3)]
    labels = [c.label for c in compare(make_report(long_inputs), make_report(long_inputs)).cases]
    assert len(set(labels)) == 3 and labels[0].endswith("#1")


def test_a_key_only_a_newer_suite_records_is_not_an_environment_difference():
    newer = json.loads(json.dumps(ENV))
    newer["torch"]["float32_matmul_precision"] = "highest"  # recorded from some version on
    base, new = make_report([op_result("exp", samples(1.0))]), make_report([op_result("exp", samples(1.0))], env=newer)
    assert environment_differences(base, new) == []
    on_gpu = json.loads(json.dumps(ENV))
    on_gpu["torch"].update(cuda_available=True, gpu={"name": "H200"})
    off_gpu = json.loads(json.dumps(ENV))
    off_gpu["torch"]["cuda_available"] = False
    keys = [d["key"] for d in environment_differences(make_report([], env=on_gpu), make_report([], env=off_gpu))]
    assert keys == ["torch.cuda_available"]


def _native(name, per_call):
    result = op_result(name, per_call)
    result.metrics["profiler"] = {"forward": {"Avg_ms": float(np.mean(per_call)), "per_call_ms": list(per_call),
                                              "resolution_ms": 0.001}}
    return result


def test_a_zero_lower_bound_on_the_new_side_is_unbounded_not_a_crash():
    base = make_report([op_result("exp", [0.001] * 10 + [0.002] * 10)])
    new = make_report([op_result("exp", [0.0] * 6 + [0.001] * 4 + [0.002] * 10)])
    [case] = compare(base, new).cases
    assert case.metrics[0].ratio_low == 0 and case.verdict == "undecided"


def test_same_needs_an_interval_even_when_the_samples_agree():
    """With fewer than 6 samples a side no interval exists, so nothing establishes `same`: samples
    that agree to 1% are undecided, as scattered ones are (not significant is never the same)."""
    for base, new in (([1, .3, 1, 3, 9], [1.01, .2, 1, 5, .1]), ([1.0, 1.01, 0.99, 1.0, 1.0], [1.0, 1.0, 1.01, 0.99, 1.0])):
        [case] = compare(make_report([op_result("exp", base)]), make_report([op_result("exp", new)])).cases
        assert case.verdict == "undecided" and "without an interval nothing establishes `same`" in case.metrics[0].reason


@pytest.mark.parametrize("new_us,verdict", [(3, "undecided"), (4, "undecided"), (6, "slower")])
def test_a_change_within_two_profiler_ticks_is_not_a_regression(new_us, verdict):
    """3 µs → 5 µs is +67% on paper and two steps of a microsecond clock that truncates both
    ends of every interval (the shape_array false alarm)."""
    base = make_report([_native("shape_array", [0.002] * 30)])
    new = make_report([_native("shape_array", [new_us / 1000] * 30)])
    [case] = compare(base, new).cases
    assert case.verdict == verdict
    if verdict == "undecided":
        assert "within 2 steps of the clock (1 µs each)" in case.metrics[0].reason


# --------------------------------------------------------------------------- verdicts on rounds


def rounds_result(name, levels, n=20, noise=0.01, seed=0, scale=1.0):
    """A case timed in len(levels) rounds: round k's samples scatter (within-process noise) around
    levels[k], the level that round's process happened to run at (between-process noise)."""
    rng = np.random.default_rng(seed)
    rounds = [list(scale * level * (1 + noise * rng.standard_normal(n))) for level in levels]
    result = op_result(name, [1.0])
    result.metrics["forward"] = Measurement.from_rounds(rounds).to_dict()
    return result


def levels(rng, rounds, spread, center=1.0):
    return list(center * np.exp(spread * rng.standard_normal(rounds)))


def test_between_round_noise_raises_no_alarm_where_the_sample_test_raises_many():
    """The case the issue measured: each process at its own level (5% between rounds), 1%
    scatter inside. A U test on the pooled samples calls most A/A pairs different; the test on
    round medians calls no more than its level allows (each pair is judged alone, at 5%: 3 of 60
    expected, 6 within two binomial deviations)."""
    rng = np.random.default_rng(11)
    by_rounds, by_samples = [], []
    for i in range(60):
        base = rounds_result("exp", levels(rng, 5, 0.05), seed=2 * i)
        new = rounds_result("exp", levels(rng, 5, 0.05), seed=2 * i + 1)
        by_rounds.append(compare(make_report([base]), make_report([new])).cases[0].verdict)
        pooled = [op_result("exp", r.metrics["forward"]["samples_ms"]) for r in (base, new)]
        by_samples.append(compare(make_report(pooled[:1]), make_report(pooled[1:])).cases[0].verdict)
    alarms = lambda verdicts: sum(v in ("faster", "slower") for v in verdicts)  # noqa: E731
    assert alarms(by_rounds) <= 6
    assert alarms(by_samples) >= 10


@pytest.mark.parametrize("scale,verdict", [(1.15, "slower"), (1 / 1.15, "faster"), (1.0, "same")])
def test_a_shift_beyond_the_between_round_noise_is_found_in_both_directions(scale, verdict):
    rng = np.random.default_rng(3)
    base = rounds_result("exp", levels(rng, 5, 0.02), seed=1)
    new = rounds_result("exp", levels(rng, 5, 0.02), seed=2, scale=scale)
    m = compare(make_report([base]), make_report([new])).cases[0].metrics[0]
    assert (m.verdict, m.basis, m.statistic) == (verdict, "rounds", "median of round medians")
    assert (m.rounds_base, m.rounds_new) == (5, 5)
    assert "5 vs 5 rounds; between-round spread" in m.reason
    assert m.ratio == pytest.approx(scale, rel=0.04)
    assert m.ratio_low < m.ratio < m.ratio_high


def test_a_large_change_that_the_rounds_do_not_confirm_is_noisy():
    """+20% on the medians, but the rounds scatter by 30%: two rounds a side cannot say."""
    base = rounds_result("exp", [0.8, 1.3], seed=1)
    new = rounds_result("exp", [1.0, 1.5], seed=2)
    m = compare(make_report([base]), make_report([new])).cases[0].metrics[0]
    assert m.verdict == "undecided" and m.p_value >= 0.05 and "not confirmed" in m.reason


def test_few_rounds_that_agree_still_support_a_verdict():
    base = rounds_result("exp", [1.0, 1.01], seed=1, noise=0.001)
    new = rounds_result("exp", [1.3, 1.31], seed=2, noise=0.001)
    m = compare(make_report([base]), make_report([new])).cases[0].metrics[0]
    assert m.verdict == "slower" and m.p_value < 0.05


def test_the_figure_is_the_median_of_round_medians_not_the_pooled_median():
    """A round with many samples must not outweigh the others: each process counts once."""
    heavy = Measurement.from_rounds([[1.0] * 50, [2.0] * 3, [2.0] * 3])
    assert heavy.median == 1.0 and heavy.center == 2.0
    base = CaseResult(CaseSpec("opbench", "exp", {"op": "exp"}), "ok", {"forward": heavy.to_dict()})
    m = compare(make_report([base]), make_report([base])).cases[0].metrics[0]
    assert m.base_ms == 2.0


def test_rounds_at_the_clock_step_are_not_a_verdict():
    """Round medians of 3 µs against 5 µs: two ticks of the profiler's clock."""
    def quantized(name, value):
        result = _native(name, [value] * 12)
        result.metrics["profiler"]["forward"]["round_sizes"] = [4, 4, 4]
        return result

    m = compare(make_report([quantized("shape_array", 0.003)]),
                make_report([quantized("shape_array", 0.005)])).cases[0].metrics[0]
    assert m.basis == "rounds" and m.verdict == "undecided" and "within 2 steps" in m.reason


def clocked(name, durations_ms, rounds=8, calls=40, seed=0):
    """A native case whose profiler reads each call's true duration (round k: durations_ms[k %
    len]) on a 1 µs clock, as MXNet's does: end and start truncated to whole microseconds, the
    call starting at a uniformly random phase between two ticks."""
    rng = np.random.default_rng(seed)
    readings = []
    for k in range(rounds):
        start = rng.uniform(0, 1, calls)
        true_us = durations_ms[k % len(durations_ms)] * 1e3
        readings += list((np.floor(start + true_us) - np.floor(start)) / 1e3)
    result = _native(name, readings)
    result.metrics["profiler"]["forward"]["round_sizes"] = [calls] * rounds
    return result


def test_a_change_within_a_clock_step_is_seen_through_the_dither_of_the_readings():
    """3.4 µs against 3.8 µs on a 1 µs clock: every round's median reads 3 or 4 µs, but the
    readings' mean over a round is the true duration (the phase of a call's start between two
    ticks is uniform), so the change is called, at about its true size."""
    m = compare(make_report([clocked("shape_array", [0.0034], seed=1)]),
                make_report([clocked("shape_array", [0.0038], seed=2)]), interleaved=True).cases[0].metrics[0]
    assert m.verdict == "slower" and m.statistic == "median of round means"
    assert m.ratio == pytest.approx(3.8 / 3.4, rel=0.03) and "fenced mean" in m.reason


def test_dithered_readings_of_one_duration_are_the_same():
    m = compare(make_report([clocked("shape_array", [0.0034], rounds=12, seed=3)]),
                make_report([clocked("shape_array", [0.0034], rounds=12, seed=4)]), interleaved=True).cases[0].metrics[0]
    assert m.verdict == "same" and m.ratio == pytest.approx(1.0, abs=0.03)


def test_a_round_of_equal_readings_keeps_the_medians_and_the_clock_step_rule():
    """Without dither in every round the means tell no more than the medians: judged_pair keeps
    the medians, and a change within two steps stays undecided."""
    bm = Measurement.from_rounds([[0.003] * 4, [0.003, 0.004] * 2])
    nm = Measurement.from_rounds([[0.004, 0.005] * 2] * 2)
    assert judged_pair(bm, nm, 0.001) == (bm, nm)
    judged = judged_pair(Measurement.from_rounds([[0.003, 0.004] * 2] * 2), nm, 0.001)
    assert [m.figure for m in judged] == ["mean", "mean"] and judged[0].round_figures == (0.0035, 0.0035)
    far = Measurement.from_rounds([[0.3, 0.4] * 2] * 2)  # 300 steps of the clock: medians
    assert judged_pair(far, far, 0.001)[0].figure == "median"


def test_the_fenced_mean_drops_a_preempted_call_and_keeps_the_dither():
    readings = [0.003] * 30 + [0.004] * 20 + [0.250]
    assert fenced_mean(readings, 0.001) == pytest.approx((30 * 0.003 + 20 * 0.004) / 50)
    assert fenced_mean([0.003] * 40 + [0.004] * 3, 0.001) == pytest.approx((40 * 0.003 + 3 * 0.004) / 43)


def test_one_side_without_rounds_is_judged_on_one_process_and_says_so():
    rng = np.random.default_rng(5)
    base = op_result("exp", samples(1.0, n=60))  # an old report: one process
    new = rounds_result("exp", levels(rng, 3, 0.01), seed=4, scale=1.3)
    m = compare(make_report([base]), make_report([new])).cases[0].metrics[0]
    assert m.basis == "one-process" and "cannot separate process noise" in m.reason
    text = comparison_markdown(compare(make_report([base]), make_report([new])))
    assert "*one-process*" in text and "*rounds*" not in text


# --------------------------------------------------------------------------- drift between sweeps


def reference_block(scale, seed, rounds=3, noise=0.0):
    """A report's machine reference (benchcore.measure.reference) whose rounds ran `scale` times slower,
    each round's level scattered by `noise` (the machine's speed from one moment to the next)."""
    rng = np.random.default_rng(seed)
    parts = {part: Measurement.from_rounds([list(scale * base * math.exp(noise * rng.standard_normal())
                                                 * (1 + 0.002 * rng.standard_normal(10)))
                                            for _ in range(rounds)]).to_dict()
             for part, base in (("compute", 0.8), ("memory", 20.0))}
    return {"status": "ok", "version": 1, **parts}


def sweep(scales, machine, reference_scale=None, seed=0, spread=0.02, env_extra=None, reference_noise=0.0):
    """A report of len(scales) cases with 3 rounds each: case i at 1 ms × scales[i] × machine;
    the reference at reference_scale (None: no reference)."""
    rng = np.random.default_rng(seed)
    results = [rounds_result(f"op{i}", levels(rng, 3, spread), seed=seed * 1000 + i, scale=s * machine, noise=0.005)
               for i, s in enumerate(scales)]
    env = dict(ENV, **(env_extra or {}))
    if reference_scale is not None:
        env["system"] = {"reference": reference_block(reference_scale, seed, noise=reference_noise)}
    return make_report(results, env=env)


def verdicts(comparison):
    return [c.verdict for c in comparison.cases]


def test_a_slower_machine_is_divided_out_when_the_reference_agrees():
    """The A/A pair the issue measured: the second sweep ran 8% slower as a whole, and so did the
    machine reference. Without drift handling nearly every case would be "slower"."""
    result = compare(sweep([1.0] * 40, 1.0, 1.0, seed=1), sweep([1.0] * 40, 1.08, 1.08, seed=2))
    (group,) = result.drift.groups
    assert result.drift.basis == group.basis == "machine" and group.name == "forward · unary"
    assert group.removed_ratio == pytest.approx(1.08, rel=0.02)
    assert group.verdict == "undecided"  # the reference stands for the cases too loosely to exclude a 5% build change
    assert sum(v in ("faster", "slower") for v in verdicts(result)) <= 1
    m = result.cases[0].metrics[0]
    assert m.ratio == pytest.approx(1.08, rel=0.04) and m.judged_ratio == pytest.approx(1.0, abs=0.04)
    assert "machine drift +8" in m.reason
    assert result.gate_verdict(10)["passed"]


def test_cases_that_changed_are_found_on_a_drifting_machine():
    """20% of the cases 10% slower, on a machine that drifted +6% between the sweeps."""
    scales = [1.10 if i % 5 == 0 else 1.0 for i in range(40)]
    result = compare(sweep([1.0] * 40, 1.0, 1.0, seed=3), sweep(scales, 1.06, 1.06, seed=4))
    found = {c.name for c in result.cases if c.verdict == "slower"}
    assert found == {f"op{i}" for i in range(0, 40, 5)}
    unchanged = [c for c in result.cases if c.name not in found]
    # 3 rounds a side on a drifting machine establish ±5% for most, never a change; the rest say
    # what would decide them
    assert {c.verdict for c in unchanged} <= {"same", "undecided"}
    assert sum(c.verdict == "same" for c in unchanged) >= 0.6 * len(unchanged)
    assert all(("would decide it" in c.metrics[0].reason or "count instructions" in c.metrics[0].reason)
               and c.metrics[0].detectable_ratio for c in unchanged if c.verdict == "undecided")


def test_a_build_wide_slowdown_the_machine_does_not_explain_is_its_own_verdict():
    """Every case 30% slower, the machine reference unchanged: the build, not the machine (a change
    must stand well beyond the reference's bracket: how well numpy stands for the cases is uncertain)."""
    result = compare(sweep([1.0] * 40, 1.0, 1.0, seed=5), sweep([1.0] * 40, 1.30, 1.0, seed=6))
    (g,) = result.drift.groups
    assert result.drift.basis == g.basis == "reference" and g.verdict == "slower"
    assert g.build_ratio == pytest.approx(1.30, rel=0.03)
    assert all(v == "slower" for v in verdicts(result))  # only the (unchanged) machine was divided out
    gate = result.gate_verdict(10)
    assert not gate["passed"] and gate["build_wide_slowdown_pct"] == pytest.approx(30, abs=4)
    assert gate["build_wide_group"] == "forward · unary"
    assert "The build's own" in comparison_markdown(result)
    result.gate = gate
    assert "the build's forward · unary as a whole (+" in comparison_markdown(result)


def test_a_reference_too_noisy_to_disagree_lets_the_cases_shift_be_the_machines():
    """The machine ran 8% faster in the second sweep, but its reference (three timings a side,
    the machine swinging by 30% between them) cannot pin that down: the cases' common shift is
    divided out, and whether the build changed as a whole stays open."""
    result = compare(sweep([1.0] * 40, 1.0, 1.0, seed=15, reference_noise=0.3),
                     sweep([1.0] * 40, 0.92, 1.0, seed=16, reference_noise=0.3))
    (g,) = result.drift.groups
    assert g.basis == "machine" and g.removed_ratio == pytest.approx(0.92, rel=0.02)
    assert g.verdict == "undecided"  # the build's own change can be neither confirmed nor excluded
    assert sum(v in ("faster", "slower") for v in verdicts(result)) <= 1
    assert result.gate_verdict(10)["passed"]


def test_without_a_reference_nothing_is_divided_out_and_the_shift_is_reported():
    result = compare(sweep([1.0] * 40, 1.0, seed=7), sweep([1.0] * 40, 1.08, seed=8))
    assert result.drift.basis == "none" and result.drift.removed_ratio == 1.0
    assert result.drift.cases_ratio == pytest.approx(1.08, rel=0.02)
    assert sum(v == "slower" for v in verdicts(result)) >= 30
    assert "## Drift" in comparison_markdown(result)


def test_an_interleaved_ab_pair_keeps_its_common_shift():
    """In `ab` both sides ran in one sitting: a common shift is the build's, never removed."""
    result = compare(sweep([1.0] * 40, 1.0, 1.0, seed=9, env_extra={"ab_side": "base"}),
                     sweep([1.0] * 40, 1.08, 1.08, seed=10, env_extra={"ab_side": "new"}))
    (g,) = result.drift.groups
    assert result.drift.basis == g.basis == "interleaved" and not result.drift.removes_anything
    assert g.verdict == "slower" and g.build_ratio == pytest.approx(1.08, rel=0.02)
    assert sum(v == "slower" for v in verdicts(result)) >= 36


def test_few_cases_divide_out_the_reference_alone():
    result = compare(sweep([1.0] * 3, 1.0, 1.0, seed=11), sweep([1.0] * 3, 1.08, 1.08, seed=12))
    assert result.drift.basis == "reference" and "too few quantities" in result.drift.reason
    assert result.drift.removed_ratio == pytest.approx(1.08, rel=0.01)
    assert result.drift.removed_log_variance >= REFERENCE_TRANSFER_SD ** 2 / 2  # what numpy tells of the cases
    assert all(v in ("same", "undecided") for v in verdicts(result))
    assert all(m.judged_ratio == pytest.approx(1.0, abs=0.03) for c in result.cases for m in c.metrics)


def test_the_drift_and_prior_reach_the_json():
    result = compare(sweep([1.0] * 40, 1.0, 1.0, seed=13), sweep([1.0] * 40, 1.05, 1.05, seed=14))
    data = json.loads(result.to_json())
    assert data["drift"]["basis"] == "machine" and data["variance_prior"]["variance"] > 0


# --------------------------------------------------------------------------- whole records
# Pinned by mutation testing (scripts/mutation): each record is compared whole, so a changed
# field, bound, formula or reason in the verdict rules fails a test.


def timing(samples_ms, resolution_ms=0.0, round_sizes=None):
    return sampled(list(samples_ms), "samples", resolution_ms, round_sizes)


def two_per_round(medians):
    """A Timing of rounds with two equal samples each: round medians exactly `medians`."""
    return timing([m for m in medians for _ in range(2)], round_sizes=[2] * len(medians))


def record(metric, **fields):
    """A MetricComparison as a dict: compare_timings' defaults plus `fields`."""
    defaults = dict(metric=metric, base_ms=None, new_ms=None, ratio=None, verdict="undecided", basis="rounds", q_value=None,
                    statistic="median of round medians", p_value=None, test_method=None, n_base=None, n_new=None,
                    rounds_base=None, rounds_new=None, ratio_low=None, ratio_high=None, ratio_vs_machine=None,
                    detectable_ratio=None, rounds_to_decide=None, bimodal=None,
                    reason="")
    return {**defaults, **fields}


def judged(metric, base, new, threshold=0.05, alpha=0.05):
    return dataclasses.asdict(compare_timings(metric, base, new, Evidence(threshold, alpha)))


def test_the_record_of_a_slowdown_on_rounds():
    base, new = [2.0, 2.2, 1.8], [4.0, 4.4, 3.6]
    test = t_on_logs(base, new)
    assert judged("backward", two_per_round(base), two_per_round(new)) == record(
        "backward", base_ms=2.0, new_ms=4.0, ratio=2.0, verdict="slower", p_value=test.p_value,
        test_method="t-log", n_base=6, n_new=6, rounds_base=3, rounds_new=3,
        ratio_low=test.ratio_ci95[0], ratio_high=test.ratio_ci95[1],
        detectable_ratio=test.detectable_ratio(0.05, 0.9, math.log(1.05)),
        reason=f"change +100.0%, t-test on log round medians p={test.p_value:.3g} < 0.05 "
               "(3 vs 3 rounds; between-round spread 20.0% vs 20.0%)")
    # a p-value equal to alpha does not confirm the change
    at_alpha = judged("backward", two_per_round(base), two_per_round(new), alpha=test.p_value)
    assert at_alpha["verdict"] == "undecided" and at_alpha["reason"].startswith(
        f"change +100.0% not confirmed: t-test on log round medians p={test.p_value:.3g} ≥ {test.p_value:g}; it could "
        "have shown slowdowns of")


@pytest.mark.parametrize("side", ["base", "new"])
def test_a_round_median_of_zero_on_either_side_leaves_no_ratio(side):
    zero, level = two_per_round([0.0, 1.0, 1.0]), two_per_round([1.0, 1.0, 1.0])
    base, new = (zero, level) if side == "base" else (level, zero)
    assert judged("forward", base, new) == record(
        "forward", base_ms=1.0, new_ms=1.0, n_base=6, n_new=6, rounds_base=3, rounds_new=3,
        reason="a round median of 0 ms: the ratio is undefined")


def test_rounds_on_one_side_only_are_judged_on_one_process():
    assert judged("forward", two_per_round([1.0, 1.0, 1.0]), timing([1.0] * 6))["basis"] == "one-process"


def test_the_record_of_one_process_with_confidence_intervals():
    base = [1.0] * 4 + [1.1] * 6
    new = [2.0] * 4 + [2.2] * 6
    p = mann_whitney(base, new).p_value
    assert judged("forward", timing(base), timing(new)) == record(
        "forward", base_ms=1.1, new_ms=2.2, ratio=2.0, verdict="slower", basis="one-process", statistic="median",
        p_value=p, test_method="mann-whitney", n_base=10, n_new=10, rounds_base=1, rounds_new=1,
        ratio_low=2.0 / 1.1, ratio_high=2.2 / 1.0,
        reason=f"change +100.0%, Mann-Whitney U on the samples p={p:.3g} < 0.05 (10 vs 10 samples from one process "
               "per side, which cannot separate process noise from a change (time with --rounds))")


def test_a_median_of_zero_on_either_side_leaves_no_ratio():
    for base, new in (([0.0] * 5, [1.0] * 5), ([1.0] * 5, [0.0] * 5)):
        got = judged("forward", timing(base), timing(new))
        assert (got["ratio"], got["verdict"], got["reason"]) == (None, "undecided", "a median of 0 ms; the ratio is undefined")


def test_one_side_without_a_confidence_interval_gives_no_ratio_bounds():
    # new: 4 samples, no interval; base: an interval whose lower bound is 0 ms (no division by it)
    for base, new in (([1.0] * 10, [1.0] * 4), ([0.0] * 3 + [5.0] * 5, [5.0] * 8)):
        got = judged("forward", timing(base), timing(new))
        assert (got["ratio_low"], got["ratio_high"]) == (None, None), (base, new)


def test_three_samples_a_side_are_enough_two_are_not():
    enough = judged("forward", timing([1.0] * 3), timing([2.0] * 3))
    assert enough["p_value"] == mann_whitney([1.0] * 3, [2.0] * 3).p_value and enough["verdict"] == "slower"
    for base, new in (([1.0] * 2, [2.0] * 10), ([1.0] * 10, [2.0] * 2)):
        got = judged("forward", timing(base), timing(new))
        n_base, n_new = len(base), len(new)
        assert got["reason"] == f"too few samples ({n_base} vs {n_new}; need at least 3 each)" and got["p_value"] is None


def test_without_an_interval_nothing_is_the_same():
    at_threshold = [19.0, 19.5, 20.0, 20.5, 21.0]  # 5 samples: no interval for a median
    got = judged("forward", timing(at_threshold), timing(at_threshold))
    assert got["verdict"] == "undecided" and got["reason"] == (
        "change +0.0%, but without an interval nothing establishes `same`; time both sides with --rounds (or use ab) "
        "to decide it (5 vs 5 samples from one process per side, which cannot separate process noise from a change "
        "(time with --rounds))")


def test_same_only_when_the_interval_lies_within_the_margin():
    base, new = [1.0] * 10, [0.9] * 4 + [1.0] * 6  # ratio 1, bounds 0.9 to 1.0: -10% is not excluded
    got = judged("forward", timing(base), timing(new))
    assert (got["ratio_low"], got["ratio_high"], got["verdict"]) == (0.9, 1.0, "undecided")
    assert "95% interval -10.0% to +0.0% reaches beyond ±5%" in got["reason"]
    tight = judged("forward", timing(base), timing([0.98] * 4 + [1.0] * 6))
    assert (tight["ratio_low"], tight["ratio_high"], tight["verdict"]) == (0.98, 1.0, "same")
    assert tight["reason"] == ("change +0.0%; its 95% interval -2.0% to +0.0% lies within ±5% (10 vs 10 samples from one "
                               "process per side, which cannot separate process noise from a change (time with --rounds))")


def test_the_clock_step_reason_gives_the_change_in_microseconds():
    got = judged("forward", timing([0.010] * 10, 0.001), timing([0.011004] * 10, 0.001))
    assert got["verdict"] == "undecided" and got["reason"] == (
        "change +10.0% is 1 µs, within 2 steps of the clock (1 µs each): not measurable; counting instructions "
        "(-p instructions) would decide it")


def test_the_records_of_threshold_only_verdicts():
    four = timing([1.0, 1.0, 1.0, 1.0])
    assert judged("forward", four, from_opperf(1.5)) == record(
        "forward", base_ms=1.0, new_ms=1.5, ratio=1.5, verdict="slower", basis="threshold-only", statistic="mean",
        n_base=4, reason="change +50.0%; no raw samples, so the verdict rests on the threshold alone")
    assert judged("forward", from_opperf(2.0), four) == record(
        "forward", base_ms=2.0, new_ms=1.0, ratio=0.5, verdict="faster", basis="threshold-only", statistic="mean",
        n_new=4, reason="change -50.0%; no raw samples, so the verdict rests on the threshold alone")
    # a median on one side and a mean on the other: the median stands in for the missing mean
    median_only = Timing(None, 2.0, None, "summary")
    got = judged("forward", median_only, from_opperf(2.0))
    assert (got["statistic"], got["base_ms"], got["verdict"]) == ("mean", 2.0, "undecided")
    for b, n in ((0.0, 1.0), (1.0, 0.0), (None, 1.0)):
        base = from_opperf(b) if b is not None else Timing(None, None, None, "summary")
        got = judged("forward", base, from_opperf(n))
        assert (got["ratio"], got["verdict"], got["reason"]) == (
            None, "undecided", "no raw samples, and a zero or missing average; nothing to compare"), (b, n)


def test_a_change_exactly_at_the_threshold_is_within_it():
    """Within the margin is never called slower or faster (on averages it is not `same` either:
    no interval)."""
    assert judged("forward", from_opperf(1.0), from_opperf(1.25), threshold=0.25)["verdict"] == "undecided"
    # 0.75 = 1 / (1 + t) exactly in floating point for this t: the lower bound, also within
    assert judged("forward", from_opperf(1.0), from_opperf(0.75), threshold=0.33333333333333326)["verdict"] == "undecided"
    exact = judged("forward", two_per_round([1.0, 1.0, 1.0]), two_per_round([1.25, 1.25, 1.25]), threshold=0.25)
    assert exact["verdict"] == "same" and "lies within ±25%" in exact["reason"]


def test_unmeasured_matched_cases_say_why_in_one_line():
    long_line = "x" * 130
    base = make_report([op_result("a", samples(1.0)), op_result("b", samples(1.0)), op_result("c", None, status="crashed"),
                        op_result("d", samples(1.0)), op_result("e", samples(1.0))])
    b_failed = op_result("b", None, status="failed")
    b_failed.error = "Traceback\n  first\nsecond\nValueError: last line"
    d_failed = op_result("d", None, status="failed")
    d_failed.error = f"{long_line}\n"
    e_failed = op_result("e", None, status="failed")
    e_failed.error = " \n "
    new = make_report([op_result("a", samples(1.0), bwd=samples(1.0)), b_failed, op_result("c", None, status="failed"),
                       d_failed, e_failed])
    new.results[0].metrics.pop("forward")  # a: backward only in new, forward only in base
    result = compare(base, new)
    assert not result.cases
    brief = {r.spec.name: {"key": r.spec.key, "name": r.spec.name, "label": r.spec.name} for r in base.results}
    assert result.unmeasured == [
        {**brief["a"], "base_status": "ok", "new_status": "ok", "reason": "no timing present in both reports"},
        {**brief["b"], "base_status": "ok", "new_status": "failed", "reason": "new: failed (ValueError: last line)"},
        {**brief["c"], "base_status": "crashed", "new_status": "failed", "reason": "base: crashed; new: failed"},
        {**brief["d"], "base_status": "ok", "new_status": "failed", "reason": f"new: failed ({'x' * 120})"},
        {**brief["e"], "base_status": "ok", "new_status": "failed", "reason": "new: failed ()"},
    ]


def test_a_metric_only_one_side_has_is_left_out_and_a_ratio_needs_every_metric():
    base = make_report([op_result("exp", samples(1.0), bwd=samples(2.0)), opperf_result("log", 1.0, 0.0)])
    new = make_report([op_result("exp", samples(1.0)), opperf_result("log", 1.0, 1.0)])
    exp, log = compare(base, new).cases
    assert [m.metric for m in exp.metrics] == ["forward"] and exp.key == base.results[0].spec.key
    assert [m.ratio for m in log.metrics] == [1.0, None] and log.ratio is None  # backward 0 ms in base: no ratio


def test_the_comparison_record_and_its_json():
    base = make_report([op_result("exp", samples(1.0)), op_result("gone", samples(1.0))])
    new = make_report([op_result("exp", samples(1.0)), op_result("added", samples(1.0))], env=dict(ENV, numpy="1.26.0"))
    result = compare(base, new, allow_env_mismatch=True)
    result.base_source, result.new_source = "a.json", "b.json"
    data = result.to_dict()
    assert list(data) == ["schema", "suite", "threshold", "alpha", "base", "new", "env_differences",
                          "env_mismatch_allowed", "bases", "summary", "cases", "only_in_base", "only_in_new",
                          "unmeasured", "drift", "variance_prior", "gate", "answer",
                          "instructions", "sequential", "efficiency"]
    assert data["drift"]["basis"] == "none" and data["variance_prior"] is None  # no rounds: no drift, no prior
    assert {k: data[k] for k in ("schema", "suite", "threshold", "alpha", "base", "new", "env_mismatch_allowed",
                                 "bases", "gate", "unmeasured")} == {
        "schema": "benchcore-comparison", "suite": "opbench", "threshold": 0.05, "alpha": 0.05, "base": "a.json",
        "new": "b.json", "env_mismatch_allowed": True, "bases": ["one-process"], "gate": None, "unmeasured": []}
    assert [d["key"] for d in data["env_differences"]] == ["numpy"]
    assert data["only_in_base"] == [{"key": base.results[1].spec.key, "name": "gone", "label": "gone", "status": "ok"}]
    assert data["only_in_new"] == [{"key": new.results[1].spec.key, "name": "added", "label": "added", "status": "ok"}]
    assert result.to_json() == json.dumps(data, indent=2)
    result.cases[0].ratio = math.nan  # JSON has no NaN: refused, not written as an invalid file
    with pytest.raises(ValueError):
        result.to_json()


def test_threshold_and_alpha_are_open_intervals():
    for kwargs in ({"threshold": 1.0}, {"threshold": 1.5}, {"alpha": 0.0}, {"alpha": 1.0}):
        with pytest.raises(UsageError):
            compare(make_report([]), make_report([]), **kwargs)


@pytest.mark.parametrize("side", ["base", "new"])
def test_a_case_twice_in_one_report_is_refused_naming_the_report(side):
    twice, once = make_report([op_result("exp", samples(1.0))] * 2), make_report([op_result("exp", samples(1.0))])
    base, new = (twice, once) if side == "base" else (once, twice)
    with pytest.raises(UsageError, match=rf"^the {side} report holds case .* twice; merge shards with the merge command"):
        compare(base, new)


def test_geometric_mean_leaves_out_missing_and_non_positive_ratios():
    assert geometric_mean([None, 0.0, -1.0, 2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([None, 0.0]) is None


def test_the_gate_counts_slowdowns_strictly_above_its_limit():
    base = make_report([rounds_like("exp", [2.0, 2.2, 1.8])])
    for factor, above_100 in ((2.0, False), (1.995, False), (2.01, True)):
        new = make_report([rounds_like("exp", [2.0 * factor, 2.2 * factor, 1.8 * factor])])
        result = compare(base, new)
        (case,) = result.cases
        assert case.verdict == "slower" and case.worst_slowdown == pytest.approx(factor)
        assert [c.label for c in result.regressions(100)] == (["exp"] if above_100 else []), factor
        assert [c.label for c in result.regressions(99)] == ["exp"]
    new = make_report([rounds_like("exp", [4.0, 4.4, 3.6])])  # exactly twice as slow
    assert compare(base, new).gate_verdict(50) == {"fail_above_pct": 50, "passed": False, "only_in_base": 0,
                                                   "build_wide_slowdown_pct": None, "build_wide_group": None, "sequential": True,
                                                   "slower": [{"label": "exp", "slowdown_pct": 100.0}], "broken": []}


def rounds_like(name, medians):
    """A case whose forward Measurement has three rounds of two equal samples: round medians `medians`."""
    result = op_result(name, None)
    result.metrics["forward"] = Measurement.from_rounds([[m, m] for m in medians]).to_dict()
    return result


def test_many_quantities_are_judged_as_a_set_false_discoveries_controlled():
    """200 unchanged cases with rounds that scatter by 10%: one test each at 5% would call about
    a dozen changed; adjusted for their number (Benjamini–Hochberg) almost none are, while the 40
    cases made 40% slower still are."""
    scales = [1.4 if i % 5 == 0 else 1.0 for i in range(200)]
    base = sweep([1.0] * 200, 1.0, 1.0, seed=21, spread=0.10)
    aa = compare(base, sweep([1.0] * 200, 1.0, 1.0, seed=22, spread=0.10))
    assert sum(v in ("faster", "slower") for v in verdicts(aa)) <= 2
    raw = [m for c in aa.cases for m in c.metrics if m.p_value is not None and m.p_value < 0.05
           and abs(math.log(m.judged_ratio)) > math.log(1.05)]
    assert len(raw) >= 5  # what one test per quantity would have called changed
    changed = compare(base, sweep(scales, 1.0, 1.0, seed=23, spread=0.10))
    found = {c.name for c in changed.cases if c.verdict == "slower"}
    assert len(found & {f"op{i}" for i in range(0, 200, 5)}) >= 30 and len(found - {f"op{i}" for i in range(0, 200, 5)}) <= 2
    m = changed.cases[0].metrics[0]
    assert m.q_value >= m.p_value and "Benjamini–Hochberg" in m.reason


def test_an_interleaved_pair_is_judged_round_by_round():
    """Rounds of an `ab` run ran side by side: the machine's speed of that moment (here ±20% from
    round to round) is common to both and cancels in each round's ratio, so a 10% slowdown
    stands out that two separate sweeps could never show."""
    from scipy.stats import ttest_rel

    rng = np.random.default_rng(31)
    base_results, new_results = [], []
    for i in range(40):
        machine = np.exp(0.2 * rng.standard_normal(4))
        slow = 1.10 if i % 5 == 0 else 1.0
        for results, scale, seed in ((base_results, 1.0, 2 * i), (new_results, slow, 2 * i + 1)):
            result = rounds_result(f"op{i}", list(machine * np.exp(0.01 * rng.standard_normal(4))), seed=seed,
                                   scale=scale, noise=0.002)
            results.append(result)
    paired = compare(make_report(base_results, env=dict(ENV, ab_side="base")),
                     make_report(new_results, env=dict(ENV, ab_side="new")))
    slower = {c.name for c in paired.cases if c.verdict == "slower"}
    assert len(slower & {f"op{i}" for i in range(0, 40, 5)}) >= 6 and len(slower) <= 9
    m = paired.cases[0].metrics[0]
    assert m.test_method == "moderated-paired-t-log" and "paired as they ran" in m.reason
    apart = compare(make_report(base_results), make_report(new_results))  # the same numbers, not interleaved
    assert sum(c.verdict == "slower" for c in apart.cases) <= 1
    base = Measurement.from_dict(base_results[1].metrics["forward"]).round_medians
    new = Measurement.from_dict(new_results[1].metrics["forward"]).round_medians
    assert paired_t_on_logs(base, new).p_value == pytest.approx(ttest_rel(np.log(new), np.log(base)).pvalue)


# --------------------------------------------------------------------------- pinned by mutation testing (2)

from benchcore.compare.drift import REFERENCE_TRANSFER_SD, Drift, GroupShift  # noqa: E402
from benchcore.compare.verdicts import Comparison  # noqa: E402
from benchcore.execute.cluster.driver import environment_groups  # noqa: E402


def rounds_of(name, medians):
    """A case whose forward Measurement has one round of two equal samples per median."""
    result = op_result(name, None)
    result.metrics["forward"] = Measurement.from_rounds([[m, m] for m in medians]).to_dict()
    return result


def _cluster_report(nodes_env, results):
    """A --ray sweep's report whose nodes ran in the environments `nodes_env` names."""
    groups = environment_groups("opbench", nodes_env)
    cluster = {"environment_groups": [g.to_dict() for g in groups],
               "nodes": [{"node": label, "group": g.number, "environment": g.environment}
                         for g in groups for label in g.nodes]}
    return make_report(results, env=dict(groups[0].environment, cluster=cluster))


def _on(node, result):
    result.node = node
    return result


A100 = dict(ENV, torch={"version": "2.13.0", "threads": 2, "gpu": {"name": "A100"}})
H100 = dict(ENV, torch={"version": "2.13.0", "threads": 2, "gpu": {"name": "H100"}})


@pytest.mark.parametrize("mixed_side", ["base", "new"])
def test_a_report_of_several_environments_is_judged_case_by_case_in_each_cases_environment(mixed_side):
    """One side a --ray sweep over A100 and H100 nodes, the other a plain report from an A100
    machine: cases that ran on A100 on both sides are judged (their category says where), the
    H100 case is listed as not measured, and the cases after it are still judged."""
    names = {"x": "n1", "y": "n2", "z": "n1"}
    mixed = _cluster_report({"n1": A100, "n2": H100}, [_on(node, op_result(name, samples(1.0, seed=i)))
                                                       for i, (name, node) in enumerate(names.items())])
    plain = make_report([op_result(name, samples(1.0, seed=9 + i)) for i, name in enumerate(names)], env=A100)
    base, new = (mixed, plain) if mixed_side == "base" else (plain, mixed)
    result = compare(base, new)
    assert [(c.name, c.label, c.category) for c in result.cases] == [
        ("x", "x", "unary @ torch.gpu.name=A100"), ("z", "z", "unary @ torch.gpu.name=A100")]
    [y] = result.unmeasured
    assert {k: y[k] for k in ("name", "label", "base_status", "new_status")} == {
        "name": "y", "label": "y", "base_status": "ok", "new_status": "ok"}
    assert y["reason"].startswith("measured in different environments (torch.gpu.name differ): judged only within")
    assert result.env_differences == []
    anyway = compare(base, new, allow_env_mismatch=True)
    assert [c.name for c in anyway.cases] == ["x", "y", "z"]
    assert [c.category for c in anyway.cases][1] == "unary @ torch.gpu.name=H100"
    assert [d["key"] for d in anyway.env_differences] == ["torch.gpu.name"]


def test_without_a_suite_the_reports_own_suites_defaults_judge_the_measurements():
    base = make_report([op_result("exp", samples(1.0), category="binary")])
    new = make_report([op_result("exp", samples(1.5), category="binary")])
    result = _compare(base, new)
    assert [(c.category, c.verdict) for c in result.cases] == [("all", "slower")]  # no opbench categories


def _drift(verdict, build_ratio, *more):
    groups = [GroupShift("forward · unary", 12, 1.0, 0.0, "reference", verdict=verdict, build_ratio=build_ratio)]
    return Drift("reference", groups=groups + list(more))


def test_a_build_wide_slowdown_fails_the_gate_only_when_judged_slower_and_strictly_above_the_limit():
    comparison = Comparison("opbench", 0.05, 0.05)
    assert comparison.build_wide_slowdown(10) is None  # no drift at all
    for drift, slowdown in ((_drift("slower", 1.25), 1.25), (_drift("slower", 1.1), None), (_drift("slower", 1.05), None),
                            (_drift("undecided", 1.25), None), (_drift("same", 1.25), None), (_drift("slower", None), None)):
        comparison.drift = drift
        assert comparison.build_wide_slowdown(10) == slowdown, drift
    comparison.drift = _drift("slower", 1.25)
    gate = comparison.gate_verdict(10)
    assert not gate["passed"] and gate["build_wide_slowdown_pct"] == pytest.approx(25.0, rel=1e-12)
    assert gate["build_wide_group"] == "forward · unary"
    worse = GroupShift("backward · unary", 12, 1.0, 0.0, "reference", verdict="slower", build_ratio=1.4)
    comparison.drift = _drift("slower", 1.25, worse)
    gate = comparison.gate_verdict(10)  # the slowest group is the one named
    assert gate["build_wide_group"] == "backward · unary" and gate["build_wide_slowdown_pct"] == pytest.approx(40.0)


def test_a_comparison_without_drift_or_prior_records_them_as_null():
    data = json.loads(Comparison("opbench", 0.05, 0.05).to_json())
    assert (data["drift"], data["variance_prior"], data["cases"]) == (None, None, [])


def test_each_quantity_claims_what_it_detects_at_the_bonferroni_level_of_its_comparison():
    """The claim is made at alpha / m with 90% power and the margin: a p-value under alpha / m is
    called by Benjamini–Hochberg whatever the other m - 1 quantities do, so a claim holds for a
    lone change as for many."""
    medians = {"a": ([2.0, 2.2, 1.8], [2.0, 2.1, 1.9]), "b": ([1.0, 1.05, 0.95], [1.0, 1.02, 0.99]),
               "c": ([3.0, 3.6, 2.7], [3.1, 3.3, 2.8])}
    result = compare(make_report([rounds_of(k, b) for k, (b, _n) in medians.items()]),
                     make_report([rounds_of(k, n) for k, (_b, n) in medians.items()]))
    assert result.prior is None and result.drift.removed_ratio == 1.0  # three cases, no reference
    detectable = [t_on_logs(b, n).detectable_ratio(0.05 / 3, 0.9, math.log(1.05)) for b, n in medians.values()]
    assert [m.detectable_ratio for c in result.cases for m in c.metrics] == pytest.approx(detectable)
    assert result.summary[-1].median_detectable_ratio == pytest.approx(float(np.median(detectable)))
    no_rounds = compare(make_report([op_result("exp", samples(1.0))]), make_report([op_result("exp", samples(1.0))]))
    assert no_rounds.summary[-1].median_detectable_ratio is None


def _medians(rng, rounds, spread):
    return list(np.exp(spread * rng.standard_normal(rounds)))


@pytest.mark.parametrize("paired", [False, True])
def test_the_prior_is_fitted_to_each_quantitys_variance_of_log_round_medians(paired):
    """Unpaired: the variance pooled over both sides' log round medians (3 and 4 rounds), on
    3 + 4 - 2 df; paired (an `ab` run, 3 rounds each): the variance of the 3 log ratios, on 2 df."""
    rng = np.random.default_rng(41)
    cases = [(_medians(rng, 3, 0.05 * (1 + i % 4)), _medians(rng, 3 if paired else 4, 0.05 * (1 + i % 4)))
             for i in range(12)]
    sides = [dict(ENV, ab_side=side) if paired else ENV for side in ("base", "new")]
    result = compare(make_report([rounds_of(f"op{i}", b) for i, (b, _n) in enumerate(cases)], env=sides[0]),
                     make_report([rounds_of(f"op{i}", n) for i, (_b, n) in enumerate(cases)], env=sides[1]))
    variances, dfs = [], []
    for b, n in cases:
        x, y = np.log(b), np.log(n)
        if paired:
            variances.append(float(np.var(y - x, ddof=1)))
            dfs.append(2)
        else:
            variances.append(float((np.sum((x - x.mean()) ** 2) + np.sum((y - y.mean()) ** 2)) / 5))
            dfs.append(5)
    expected = VariancePrior.fit(variances, dfs)
    assert expected is not None
    assert result.prior.variance == pytest.approx(expected.variance, rel=1e-9)
    assert result.prior.df == pytest.approx(expected.df, rel=1e-9)
    m = result.cases[0].metrics[0]
    b, n = cases[0]
    test = paired_t_on_logs(b, n, expected) if paired else t_on_logs(b, n, expected)
    assert m.test_method == test.method and m.p_value == pytest.approx(test.p_value, rel=1e-9)
    assert f"3 vs {3 if paired else 4} rounds{', paired as they ran' if paired else ''}; between-round spread " in m.reason
    assert "; variance moderated over the comparison's cases)" in m.reason


def test_two_rounds_a_side_of_an_ab_run_are_paired():
    base = make_report([rounds_of("exp", [1.0, 2.0])], env=dict(ENV, ab_side="base"))
    new = make_report([rounds_of("exp", [1.1, 2.3])], env=dict(ENV, ab_side="new"))
    m = compare(base, new).cases[0].metrics[0]
    test = paired_t_on_logs([1.0, 2.0], [1.1, 2.3])
    assert m.test_method == "paired-t-log" and m.p_value == pytest.approx(test.p_value)
    assert "(2 vs 2 rounds, paired as they ran; between-round spread 66.7% vs 70.6%)" in m.reason


def test_with_nothing_divided_out_the_ratio_is_judged_as_it_is():
    result = compare(sweep([1.0] * 12, 1.0, seed=7), sweep([1.0] * 12, 1.03, seed=8))
    assert result.drift.removed_ratio == 1.0
    for m in (m for c in result.cases for m in c.metrics):
        assert m.ratio_vs_machine is None and m.judged_ratio == m.ratio and "machine drift" not in m.reason


def test_a_divided_out_drift_is_the_tests_offset_with_its_variance():
    result = compare(sweep([1.0] * 40, 1.0, 1.0, seed=1), sweep([1.0] * 40, 1.08, 1.08, seed=2))
    (g,) = result.drift.groups
    assert g.removed_ratio != 1.0 and g.removed_log_variance > 0
    m = result.cases[0].metrics[0]
    bm = Measurement.from_dict(sweep([1.0] * 40, 1.0, 1.0, seed=1).results[0].metrics["forward"])
    nm = Measurement.from_dict(sweep([1.0] * 40, 1.08, 1.08, seed=2).results[0].metrics["forward"])
    scatter = result.drift.between_sweeps ** 2
    test = t_on_logs(bm.round_medians, nm.round_medians, result.prior, offset=g.removed_log,
                     offset_variance=g.removed_log_variance + scatter)
    assert m.p_value == pytest.approx(test.p_value, rel=1e-9)
    assert (m.ratio_low, m.ratio_high) == pytest.approx(test.ratio_ci95, rel=1e-9)
    assert m.ratio_vs_machine == pytest.approx(m.ratio / g.removed_ratio, rel=1e-12)


def test_quantities_judged_together_state_their_q_value_and_their_number():
    """Benjamini–Hochberg by hand for two p-values: q of the larger is p itself, of the smaller
    min(2 p, larger p)."""
    cases = {"a": ([1.0, 1.01, 0.99], [1.3, 1.32, 1.29]), "b": ([1.0, 1.1, 0.9], [1.2, 1.25, 1.05])}
    result = compare(make_report([rounds_of(k, b) for k, (b, _n) in cases.items()]),
                     make_report([rounds_of(k, n) for k, (_b, n) in cases.items()]))
    p = {k: t_on_logs(b, n).p_value for k, (b, n) in cases.items()}
    low, high = sorted(p, key=p.get)
    q = {high: p[high], low: min(2 * p[low], p[high])}
    for case in result.cases:
        m = case.metrics[0]
        assert m.q_value == pytest.approx(q[case.name], rel=1e-9)
        assert f"p={m.p_value:.3g}, q={m.q_value:.3g} over 2 quantities (Benjamini–Hochberg)" in m.reason
        assert m.verdict == ("slower" if m.q_value < 0.05 else "undecided") == case.verdict


H100_OLDER = dict(ENV, torch={"version": "2.12.0", "threads": 2, "gpu": {"name": "H100"}})


def test_each_case_of_a_mixed_report_names_what_differs_and_allowed_adds_each_key_once():
    mixed = _cluster_report({"n1": A100, "n2": H100, "n3": H100_OLDER},
                            [_on(node, op_result(name, samples(1.0, seed=i)))
                             for i, (name, node) in enumerate({"x": "n1", "y": "n2", "u": "n3", "w": "n2"}.items())])
    split = op_result("v", samples(1.0, seed=7))
    split.rounds = [{"round": 0, "node": "n1"}, {"round": 1, "node": "n2"}]  # its rounds on two environments
    mixed.results.append(split)
    mixed.environment = dict(H100, cluster=mixed.environment["cluster"])  # the driver's: not what counts
    plain = make_report([op_result(r.spec.name, samples(1.0, seed=20 + i)) for i, r in enumerate(mixed.results)],
                        env=A100)
    result = compare(mixed, plain)
    assert [c.name for c in result.cases] == ["x"] and result.env_differences == []
    suffix = ": judged only within one environment (--allow-env-mismatch compares anyway)"
    assert {u["name"]: u["reason"] for u in result.unmeasured} == {
        "y": "measured in different environments (torch.gpu.name differ)" + suffix,
        "u": "measured in different environments (torch.gpu.name, torch.version differ)" + suffix,
        "w": "measured in different environments (torch.gpu.name differ)" + suffix,
        "v": "its rounds ran in different environments" + suffix}
    anyway = compare(mixed, plain, allow_env_mismatch=True)
    assert [c.name for c in anyway.cases] == ["x", "y", "u", "w", "v"] and not anyway.unmeasured
    assert anyway.env_differences == [{"key": "torch.gpu.name", "base": "H100", "new": "A100"},
                                      {"key": "torch.version", "base": "2.12.0", "new": "2.13.0"}]


def test_a_case_of_a_mixed_report_is_judged_with_its_reports_thread_settings_too():
    mixed = _cluster_report({"n1": A100, "n2": H100}, [_on("n1", op_result("x", samples(1.0)))])
    mixed.settings = {"runs": 30, "threads": 2}
    plain = make_report([op_result("x", samples(1.0, seed=3))], env=A100, settings={"runs": 30, "threads": 1})
    [x] = compare(mixed, plain).unmeasured
    assert x["reason"].startswith("measured in different environments (settings.threads differ)")


def test_a_framework_block_counts_whole_whatever_the_framework_is_called():
    """The core names no framework: any collector's block with a `version` is part of the identity
    (its build features change timings), while a dict without one (the cluster's record) is not."""
    base_env = {**ENV, "jax": {"version": "0.4.30", "backend": "cpu"}, "notes": {"backend": "a"}}
    new_env = {**ENV, "jax": {"version": "0.4.30", "backend": "tpu"}, "notes": {"backend": "b"}}
    keys = [d["key"] for d in environment_differences(make_report([], env=base_env), make_report([], env=new_env))]
    assert keys == ["jax.backend"]
    assert "jax.backend" in timing_identity(make_report([], env=base_env))
    assert "mxnet.features" in timing_identity(make_report([], env={**ENV, "mxnet": {"version": "1.9.1",
                                                                                       "features": ["MKLDNN"]}}))


# --------------------------------------------------------------------------- a real change within the margin

WOBBLE = (1.03, 0.97, 1.02, 0.98, 1.03, 0.97, 1.01, 0.99)


def paired_rounds(change, center=1.0, resolution_ms=0.0):
    """Eight round pairs of an A/B run: base at `center`, new `change` times it with a 3% wobble."""
    base = [center] * len(WOBBLE)
    new = [center * change * w for w in WOBBLE]
    return (timing([m for m in base for _ in range(2)], resolution_ms, [2] * len(base)),
            timing([m for m in new for _ in range(2)], resolution_ms, [2] * len(new)))


def test_a_real_change_within_the_margin_that_same_cannot_place_is_called():
    """+4%, p = 0.004, its 90% interval +2.2% to +5.8%: neither beyond ±5% nor inside it. It is
    slower (a real change that may pass the margin), not "too noisy to tell"; an A/A pair of the
    same precision is `same`."""
    evidence = Evidence(0.05, 0.05, paired=True)
    m = compare_timings("forward", *paired_rounds(1.04), evidence)
    assert m.verdict == "slower" and m.p_value < 0.01
    assert "change +4.0%, t-test on log round medians p=" in m.reason
    assert "; within ±5%, but its 90% interval +2.2% to +5.8% reaches past it (8 vs 8 rounds, paired" in m.reason
    assert compare_timings("forward", *paired_rounds(1 / 1.04), evidence).verdict == "faster"
    assert compare_timings("forward", *paired_rounds(1.0), evidence).verdict == "same"


def test_a_change_within_the_margin_is_not_called_where_the_clock_cannot_see_it_or_one_process_cannot_tell():
    """The same +4% on 20 µs calls read by a 1 µs clock is 0.8 µs, within two steps: undecided.
    On one process per side (a U test that cannot see process noise) a change within the margin
    is never called."""
    evidence = Evidence(0.05, 0.05, paired=True)
    m = compare_timings("forward", *paired_rounds(1.04, center=0.02, resolution_ms=0.001), evidence)
    assert m.verdict == "undecided" and "reaches beyond ±5%" in m.reason
    one = compare_timings("forward", timing(samples(1.0, n=200, noise=0.1, seed=1)),
                          timing(samples(1.04, n=200, noise=0.1, seed=2)), Evidence(0.05, 0.05))
    assert one.basis == "one-process" and one.p_value < 0.01 and one.ratio_high > 1.05
    assert one.verdict == "undecided"
