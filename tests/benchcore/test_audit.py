"""benchcore.measure.audit: counts of NaN, ±Inf and subnormal values planted in real arrays, per dtype;
the flag rules, rounds, views; FTZ/DAZ reading and setting (benchcore.measure.denormals)."""

import numpy as np
import pytest

from benchcore.measure import audit, denormals
from benchcore.report import identity

SMALLEST_NORMAL = {"float16": 2.0 ** -14, "float32": 2.0 ** -126, "float64": 2.0 ** -1022}


def _subnormals(dtype: str, n: int) -> np.ndarray:
    """n subnormal values of dtype, built from their bits (float arithmetic could flush them)."""
    unsigned = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}[dtype]
    bits = np.arange(1, n + 1, dtype=unsigned)
    bits[::2] |= unsigned(1) << unsigned(np.dtype(dtype).itemsize * 8 - 1)  # every other one negative
    return bits.view(dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_planted_values_are_counted_exactly(dtype):
    tiny = SMALLEST_NORMAL[dtype]
    values = np.random.default_rng(0).standard_normal(1000).astype(dtype) + np.asarray(3, dtype)  # all normal
    values[:3] = np.nan
    values[3:5] = np.inf
    values[5] = -np.inf
    values[6:13] = _subnormals(dtype, 7)
    values[13:16] = 0.0  # zeros are normal
    values[16] = -0.0
    values[17] = tiny  # the smallest normal is normal
    values[18] = -tiny
    counts = audit.count(values.reshape(10, 100))
    assert counts == {"dtype": dtype, "values": 1000, "nan": 3, "posinf": 2, "neginf": 1, "subnormal": 7,
                      "fraction": 13 / 1000, "flagged": True}


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_largest_subnormal_and_smallest_normal_are_told_apart(dtype):
    finfo = np.finfo(dtype)
    largest_subnormal = np.nextafter(np.asarray(finfo.tiny, dtype), np.asarray(0, dtype))
    assert audit.count(np.array([largest_subnormal], dtype))["subnormal"] == 1
    assert audit.count(np.array([finfo.tiny, finfo.max, -finfo.max, 0.0], dtype))["flagged"] is False


def test_normal_data_is_not_flagged_and_a_non_contiguous_view_counts():
    data = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    assert audit.count(data) == {"dtype": "float32", "values": 4096, "nan": 0, "posinf": 0, "neginf": 0,
                                 "subnormal": 0, "fraction": 0.0, "flagged": False}
    data[::2, ::3] = np.nan
    assert audit.count(data[::2, ::3])["nan"] == 32 * 22


def test_float16_subnormals_flag_only_above_the_tolerance():
    values = np.ones(1000, np.float16)
    values[:10] = _subnormals("float16", 10)  # 1%: what float16 arithmetic makes by itself
    assert audit.count(values)["subnormal"] == 10 and not audit.count(values)["flagged"]
    values[10] = _subnormals("float16", 1)[0]
    assert audit.count(values)["flagged"]
    one = np.ones(1000, np.float32)
    one[0] = _subnormals("float32", 1)[0]  # float32 and float64: one is enough
    assert audit.count(one)["flagged"]


def test_integer_and_other_dtypes():
    assert audit.count(np.arange(10))["flagged"] is False
    assert audit.count(np.array([True, False]))["values"] == 2
    weird = audit.count(np.zeros(3, dtype=[("a", np.uint16)]))
    assert weird["values"] == 3 and "unaudited" in weird and not weird["flagged"]


def test_count_many_sums_pieces_as_one_tensor():
    pieces = [np.ones(4, np.float32), np.array([np.nan, 1.0], np.float32)]
    assert audit.count_many(pieces) == {**audit.count(np.concatenate(pieces))}


def _block(expected=None, subnormal=0, elapsed=1.0):
    values = np.ones(8, np.float32)
    values[:subnormal] = _subnormals("float32", subnormal) if subnormal else values[:0]
    block = audit.audit({"inputs": {"data": np.ones(4, np.float32)}, "outputs": {"0": values}, "gradients": {}},
                        expected)
    block["elapsed_ms"] = elapsed
    return block


def test_case_block_flag_expected_and_defect():
    clean, bad, inherent = _block(), _block(subnormal=2), _block("the operator's nature", subnormal=2)
    assert (clean["flagged"], clean["defect"]) == (False, False)
    assert (bad["flagged"], bad["defect"], bad["subnormal"], bad["values"]) == (True, True, 2, 12)
    assert (inherent["flagged"], inherent["defect"], inherent["expected"]) == (True, False, "the operator's nature")
    assert audit.flagged_tensors(bad) == [("outputs", "0", bad["outputs"]["0"])]
    assert audit.findings(bad) == "outputs 0: 2 subnormal of 8 values"
    assert audit.tally([clean, bad, inherent, None]) == {"audited": 3, "flagged": 2, "expected": 1, "defects": 1,
                                                        "elapsed_ms": 3.0}


def test_rounds_agree_or_keep_the_worst():
    same = audit.combine([_block(elapsed=1.0), _block(elapsed=2.5), None])
    assert same == {**_block(), "elapsed_ms": 3.5, "rounds": 2}
    differ = audit.combine([_block(), _block(subnormal=3)])
    assert differ["rounds_differ"] and differ["flagged"] and differ["outputs"]["0"]["subnormal"] == 3
    assert audit.combine([None, None]) is None
    combined = audit.combine_with_audit([{"a": 1, "audit": _block()}, {"a": 1, "audit": _block(elapsed=4.0)}],
                                        lambda rest: {"seen": rest})
    assert combined["seen"] == [{"a": 1}, {"a": 1}] and combined["audit"]["elapsed_ms"] == 5.0


def _slot_result(name: str, round_number: int, side: str = "", status: str = "ok", block=None):
    from benchcore.execute.checkpoint import Slot
    from benchcore.measure.case import CaseSpec
    from benchcore.report.model import CaseResult

    spec = CaseSpec("s", name, {})
    return Slot(spec, round_number, side), CaseResult(spec, status, {"audit": block} if status == "ok" else {})


def test_round_audits_audit_each_case_and_side_in_the_first_round_that_finished_it():
    options = {"audit": True, "audit_rounds": "first"}
    audits = audit.RoundAudits(options)
    seen = {}
    plan = [("a", 1, "", "ok", _block()), ("b", 1, "", "crashed", None), ("c", 1, "", "ok", None),  # c: pass failed
            ("a", 1, "new", "ok", _block()),
            ("a", 2, "", "ok", None), ("b", 2, "", "ok", _block()), ("c", 2, "", "ok", _block()),
            ("a", 2, "new", "ok", None), ("b", 3, "", "ok", None)]
    for name, number, side, status, block in plan:
        slot, result = _slot_result(name, number, side, status, block)
        seen[(name, number, side)] = audits.options_for(slot, options).get(audit.AUDITED_IN)
        audits.record(slot, result)
    assert seen == {("a", 1, ""): None, ("b", 1, ""): None, ("c", 1, ""): None, ("a", 1, "new"): None,
                    ("a", 2, ""): 1, ("b", 2, ""): None, ("c", 2, ""): None, ("a", 2, "new"): 1, ("b", 3, ""): 2}
    for every in ({"audit": True, "audit_rounds": "every"}, {"audit": False, "audit_rounds": "first"}):
        audits = audit.RoundAudits(every)
        slot, result = _slot_result("a", 1, block=_block())
        audits.record(slot, result)
        assert audits.options_for(_slot_result("a", 2)[0], every) is every


def test_wanted_says_whether_to_audit_and_records_why_not():
    metrics = {"missing": {}}
    assert audit.wanted(metrics, {}) and audit.wanted(metrics, {"audit": True}) and metrics == {"missing": {}}
    assert not audit.wanted(metrics, {"audit": True, audit.AUDITED_IN: 1}) and metrics == {"missing": {}}
    assert not audit.wanted(metrics, {"audit": False})
    assert metrics == {"audit": None, "missing": {"audit": "not asked for (--no-audit)"}}
    assert audit.audit_rounds(adaptive=False) == "first" and audit.audit_rounds(adaptive=True) == "every"


def test_summary_lines_and_markdown_name_the_flagged_cases():
    labelled = [("ok case", _block()), ("bad case", _block(subnormal=1)), ("rrelu", _block("unwritten", 2))]
    lines = audit.summary_lines(labelled, "opbench")
    assert lines[0] == ("opbench: audit: 2 of 3 case(s) computed on non-normal values (audit 0.0 s): "
                        "1 unexplained, 1 expected:")
    assert lines[1:] == ["  bad case: outputs 0: 1 subnormal of 8 values",
                         "  rrelu: outputs 0: 2 subnormal of 8 values [expected: unwritten]"]
    assert audit.summary_lines(labelled[:1], "x") == ["x: audit: all 1 audited case(s) computed on normal numbers "
                                                      "(audit 0.0 s)"]
    section = "\n".join(audit.markdown_section([(label, {"audit": block}) for label, block in labelled]))
    assert "3 case(s) audited, 2 flagged: 1 unexplained, 1 expected" in section and "once per case" in section
    per_round = "\n".join(audit.markdown_section([("a", {"audit": dict(_block(), rounds=2)})]))
    assert "once per round" in per_round
    assert "| bad case | outputs 0 | 0     | 0      | 0      | 1           | 8        | no" in section
    assert "Not audited" in "\n".join(audit.markdown_section([], audited=False))


def test_flush_text_tells_all_none_and_some_threads():
    state = lambda ftz, daz, asked=False: {"requested": asked, "operator_threads": {"ftz": ftz, "daz": daz}}  # noqa: E731
    assert "not flushed" in audit.flush_text([state(0.0, 0.0)]) and not audit.flush_notable([state(0.0, 0.0)])
    assert "flushed to zero" in audit.flush_text([state(1.0, 1.0, True)])
    assert "some operator threads" in audit.flush_text([state(0.5, 0.5, True)])
    assert audit.flush_notable([state(0.5, 0.0)]) and audit.flush_text([None]) is None


@pytest.mark.skipif(denormals.read_mxcsr() is None, reason="MXCSR is read through glibc on x86-64 Linux only")
def test_flush_denormal_sets_and_clears_ftz_and_daz_on_this_thread():
    multiply = lambda values, factor: values * np.float32(factor)  # noqa: E731
    before = denormals.thread_flush_state()
    try:
        assert denormals.set_flush_denormal(True)
        state = denormals.thread_flush_state()
        assert state["ftz"] and state["daz"] and int(state["mxcsr"], 16) & 0x8040 == 0x8040
        assert denormals.flush_probe(multiply) == {"ftz": 1.0, "daz": 1.0}
        counts = audit.count(_subnormals("float32", 5))
        assert counts["subnormal"] == 5  # the audit reads bits: DAZ does not hide subnormals from it
    finally:
        denormals.set_flush_denormal(before["ftz"])
    assert denormals.set_flush_denormal(False)
    assert not denormals.thread_flush_state()["ftz"]
    assert denormals.flush_probe(multiply) == {"ftz": 0.0, "daz": 0.0}


@pytest.mark.skipif(denormals.read_mxcsr() is None, reason="MXCSR is read through glibc on x86-64 Linux only")
def test_the_mxcsr_reading_is_the_settings_not_what_the_thread_computed_before():
    """MXCSR's exception flags are sticky: a subnormal operand sets one, and it stays set. A
    reading that kept them would differ between two rounds of a case whose worker ran other
    cases first (a CI failure: `round_values` on `denormals.python_thread.mxcsr`)."""
    smallest_normal = np.full(4, 0x00800000, dtype=np.uint32).view(np.float32)
    (smallest_normal * np.float32(0.5)).sum()  # a subnormal result, then a subnormal operand
    register = denormals.read_mxcsr()
    assert register & denormals.MXCSR_EXCEPTION_FLAGS  # raised, and they stay
    assert int(denormals.thread_flush_state()["mxcsr"], 16) == register & ~denormals.MXCSR_EXCEPTION_FLAGS


def test_chunked_counting_matches_one_pass(monkeypatch):
    values = np.random.default_rng(2).standard_normal(1000).astype(np.float32)
    values[[0, 6, 7, 13, 999]] = [np.nan, np.inf, -np.inf, np.nan, 0.0]
    values[[5, 8, 500]] = _subnormals("float32", 3)
    whole = audit.count(values)
    monkeypatch.setattr(audit, "CHUNK_VALUES", 7)
    assert audit.count(values) == whole and (whole["nan"], whole["posinf"], whole["neginf"], whole["subnormal"]) \
        == (2, 1, 1, 3)
    assert audit.count_many(values[i:i + 7] for i in range(0, 1000, 7)) == whole


def test_flushing_is_a_timing_relevant_setting_for_compare():
    assert identity.timing_relevant("flush_denormal")


# --------------------------------------------------------------------------- the last call


def _workload(calls):
    """A framework-free Workload whose forward makes a float32 array with one NaN (counted calls)."""
    from benchcore.measure.case import Workload

    def forward():
        calls.append("forward")
        return np.array([1.0, np.nan], dtype=np.float32)

    return Workload(forward=forward, backward=lambda output: calls.append("backward"),
                    zero_grad=lambda: calls.append("zero_grad"))


@pytest.mark.parametrize("deferred", [False, True])
def test_the_last_timed_call_is_counted_and_none_is_added(deferred):
    from benchcore.measure.runner import RunSettings, run_workload
    from benchcore.measure.timers import PerfCounterTimer

    calls = []
    workload = _workload(calls)

    def count_block(output):
        block = lambda: audit.summarize_tensors({"outputs": {"0": audit.count(output)}})  # noqa: E731
        return block if deferred else block()

    workload.last_call = counted = audit.LastCall(count_block, deferred=deferred)
    run_workload(workload, RunSettings(warmup=1, runs=2, max_extra_warmup=0), PerfCounterTimer(lambda: None))
    metrics = {}
    counted.record(metrics, {}, workload)
    assert calls.count("forward") == 3 and calls[-1] == "zero_grad"
    assert metrics["audit"]["nan"] == 1 and metrics["audit"]["elapsed_ms"] >= 0


def test_an_engine_that_hands_no_call_over_gets_one_more_and_a_failure_keeps_the_timings():
    calls = []
    counted = audit.LastCall(lambda output: audit.summarize_tensors({"outputs": {"0": audit.count(output)}}))
    metrics = {}
    counted.record(metrics, {}, _workload(calls))
    assert calls == ["forward", "backward", "zero_grad"] and metrics["audit"]["nan"] == 1
    failing = audit.LastCall(lambda output: 1 / 0)
    failed = {}
    failing.record(failed, {}, _workload([]))
    assert failed["audit"] is None and "ZeroDivisionError" in failed["missing"]["audit"]
    skipped = {}
    audit.LastCall(lambda output: pytest.fail("counted under --no-audit")).record(skipped, {"audit": False},
                                                                                  _workload([]))
    assert skipped["audit"] is None
