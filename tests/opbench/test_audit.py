"""The audit in opbench: what the worker counts, the rules that keep every case on normal
numbers, the sweep of every category, --no-audit and --flush-denormal (real MXNet, CPU)."""

import os
import subprocess
import sys
from pathlib import Path

import mxnet as mx
import numpy as np
import pytest

from benchcore.measure import audit
from benchcore.measure.case import CaseSpec
from benchcore.report.model import Report
from opbench import cli
from opbench.backends.mxnet import arrays, cases
from opbench.backends.mxnet.executor import execute
from opbench.backends.mxnet.markdown import to_markdown

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = {"settings": {"warmup": 0, "runs": 1}, "profiler": "python"}


def _log_spec(value: float, **params) -> CaseSpec:
    """log of a constant 4x4 float32 input, backward timed: 1/x is its gradient."""
    spec = cases.generate_cases(ops=["log"], tiny=True)[0][0]
    inputs = {"data": {"shape": [4, 4], "init": "fill", "value": value, "dtype": "float32"}}
    return CaseSpec(spec.suite, spec.name, {**spec.params, "inputs": inputs, **params})


def test_worker_counts_inputs_outputs_and_gradients():
    metrics = execute(_log_spec(1e-39), OPTIONS)  # a float32 subnormal: log is -89.8, 1/x is +Inf
    block = metrics["audit"]
    assert block["inputs"]["data"]["subnormal"] == 16
    assert block["outputs"]["0"]["flagged"] is False
    assert block["gradients"]["data"]["posinf"] == 16
    assert (block["flagged"], block["defect"], block["expected"]) == (True, True, None)
    assert block["elapsed_ms"] > 0 and block["values"] == 48
    assert metrics["denormals"]["requested"] is False
    assert set(metrics["denormals"]["operator_threads"]) == {"ftz", "daz"}


def test_a_rule_reason_makes_it_expected_and_no_audit_leaves_a_reason():
    block = execute(_log_spec(-1.0, non_normal_reason="log of a negative number"), OPTIONS)["audit"]
    assert block["outputs"]["0"]["nan"] == 16
    assert (block["flagged"], block["defect"], block["expected"]) == (True, False, "log of a negative number")
    metrics = execute(_log_spec(1.0), {**OPTIONS, "audit": False})
    assert metrics["audit"] is None and metrics["missing"]["audit"] == "not asked for (--no-audit)"


def test_rule_marker_reaches_the_case_for_its_dtype_only(monkeypatch):
    from opbench.backends.mxnet import rules

    def marked(p, op):
        return [(None, {"data": rules.T((4, 4)), rules.NON_NORMAL: {"float16": "float16 only"}})]

    monkeypatch.setitem(rules.RULES, "relu", marked)
    half = cases.generate_cases(ops=["relu"], dtype="float16")[0][0]
    single = cases.generate_cases(ops=["relu"], dtype="float32")[0][0]
    assert half.params["non_normal_reason"] == "float16 only" and "non_normal_reason" not in single.params
    assert rules.NON_NORMAL not in half.params["inputs"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("op", ["prod", "nanprod"])
def test_prod_inputs_keep_every_partial_product_normal_at_the_default_shapes(op, dtype):
    """MXNet multiplies in the input dtype, in order: each partial product must stay normal."""
    for spec in cases.generate_cases(ops=[op], dtype=dtype)[0]:
        data = arrays.materialize(spec).arrays["data"].asnumpy()
        axis = spec.params["inputs"]["axis"]
        lined = data.reshape(-1) if axis is None else np.moveaxis(data, axis, 0)
        partial = np.cumprod(lined, axis=0, dtype=data.dtype)
        counts = audit.count(partial)
        assert counts["subnormal"] == counts["nan"] == counts["posinf"] == 0, (spec.params["variant"], counts)
        assert np.all(np.abs(partial) > 0.1) and np.all(np.abs(partial) < 10.0)  # near 1, all the way


def test_every_category_sweeps_at_tiny_sizes_without_an_unexplained_flag(tmp_path):
    """The whole tiny sweep through the real CLI (in-process: -w 0 -r 1, one round)."""
    out = tmp_path / "tiny.json"
    code = cli.main(["--tiny", "-w", "0", "-r", "1", "--rounds", "1", "-p", "python", "--no-isolation",
                     "-o", str(out)])
    assert code == 0
    report = Report.load(out)
    blocks = [(f"{r.spec.name} {r.spec.params['variant']}", r.metrics["audit"]) for r in report.results if r.ok]
    assert len(blocks) == len(report.results) and all(block is not None for _, block in blocks)
    assert [(label, audit.findings(block)) for label, block in blocks if block["defect"]] == []
    assert report.settings["audit"] is True and report.settings["flush_denormal"] is False
    assert "## Non-normal values" in to_markdown(report)


def _opbench(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "opbench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_flush_denormal_and_no_audit_reach_the_worker_and_the_report(tmp_path):
    proc = _opbench("--ops", "prod", "--tiny", "-w", "1", "-r", "1", "--rounds", "2", "--flush-denormal",
                    "--no-audit", "-f", "json,md", "-o", "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = Report.load(tmp_path / "r.json")
    assert report.settings["flush_denormal"] is True and report.environment["flush_denormal"] is True
    assert report.settings["audit"] is False
    for result in report.results:
        assert result.metrics["audit"] is None
        assert "round_values" not in result.metrics, result.metrics["round_values"]  # both rounds agree
        state = result.metrics["denormals"]
        assert state["requested"] is True
        if state["python_thread"]["method"] == "mxcsr":  # x86-64 Linux: set through glibc's fenv
            assert state["python_thread"]["ftz"] and state["python_thread"]["daz"]
            assert state["operator_threads"] == {"ftz": 1.0, "daz": 1.0}  # MXNet's engine threads too
    assert "opbench: Subnormals: flushed to zero in the operator threads" in proc.stderr
    assert "audit:" not in proc.stderr
    markdown = (tmp_path / "r.md").read_text()
    assert "Not audited (`--no-audit`)." in markdown and "--flush-denormal given" in markdown


def test_rounds_audit_each_case_once_with_the_counts_every_round_finds():
    """audit_rounds "first": one round per case audits it (in fresh worker processes); its block
    equals the one each round finds when every round audits (seeded inputs, in-place updates
    included: sgd_update writes its weight)."""
    from benchcore.execute.rounds import RoundPlan
    from benchcore.execute.worker import run_slots

    found = cases.generate_cases(ops=["log", "sgd_update"], tiny=True)[0]
    specs = [next(spec for spec in found if spec.name == name) for name in ("log", "sgd_update")]
    slots = RoundPlan(rounds=2).slots(specs)
    executor = "opbench.backends.mxnet.executor:execute"
    once = run_slots(slots, executor, {**OPTIONS, "audit": True, "audit_rounds": "first"})
    every = run_slots(slots, executor, {**OPTIONS, "audit": True, "audit_rounds": "every"}, isolate=False)
    def without_cost(block):
        return {k: v for k, v in block.items() if k != "elapsed_ms"}

    for spec in specs:
        audited = [result.metrics.get("audit") for slot, result in once if slot.spec.key == spec.key]
        assert audited[0] is not None and audited[1:] == [None], spec.name  # round 2 ran no pass
        assert all("audit" not in result.metrics.get("missing", {}) for _slot, result in once)
        per_round = [without_cost(result.metrics["audit"]) for slot, result in every if slot.spec.key == spec.key]
        assert per_round == [without_cost(audited[0])] * 2, spec.name


@pytest.mark.parametrize("engine", ["python", "native"])
def test_the_audit_counts_the_last_timed_call_and_adds_none(engine):
    """In a worker, an operator receives as many calls with the audit as without it (the
    warmup and timed ones): the audit counts what the last timed forward and backward produced.
    log's outputs and gradients are counted all the same (1/x is +Inf on a subnormal input)."""
    from benchcore.execute.worker import run_cases

    spec = _log_spec(1e-39)
    options = {"settings": {"warmup": 2, "runs": 3}, "profiler": engine}
    on, off = (run_cases([spec], "tests.opbench.counted_mxnet_executor:execute", {**options, "audit": asked})[0]
               for asked in (True, False))
    assert on.ok and off.ok
    for result in (on, off):
        (steady,) = result.metrics["steady"]
        assert result.metrics["operator_calls"] == steady["warmup_calls"] + 3
    block = on.metrics["audit"]
    assert block["outputs"]["0"]["values"] == 16 and block["gradients"]["data"]["posinf"] == 16
    assert off.metrics["audit"] is None


def test_counts_read_the_arrays_own_buffer_and_agree_with_a_chunked_copy(monkeypatch):
    from opbench.backends.mxnet import executor

    values = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    values[[1, 2, 3]] = [np.nan, np.inf, -np.inf]
    values[[10, 11]] = np.array([1, 0x807FFFFF], dtype=np.uint32).view(np.float32)  # two subnormals
    array = mx.nd.array(values)
    view = executor._host_view(array)
    array[:] = 2.0
    mx.nd.waitall()
    assert view is not None and np.all(view == 2.0)  # MXNet's own buffer, not a copy
    array = mx.nd.array(values)
    lent = executor._counts(array)
    assert (lent["nan"], lent["posinf"], lent["neginf"], lent["subnormal"]) == (1, 1, 1, 2)
    assert executor._host_view(mx.nd.ones((2, 2), dtype="bool")) is None  # numpy takes no DLPack bool
    monkeypatch.setattr(executor, "_host_view", lambda array: None)
    monkeypatch.setattr(audit, "TRANSFER_VALUES", 7)
    assert executor._counts(array) == lent == audit.count(values)


def test_an_output_in_onednns_blocked_layout_is_reordered_once_and_viewed():
    """A convolution's output lends no buffer (oneDNN's layout): one default-layout copy is viewed,
    instead of a chunked read that reordered the whole array for every chunk."""
    from opbench.backends.mxnet import executor

    data = mx.nd.array(np.random.default_rng(5).standard_normal((2, 3, 16, 16)).astype(np.float32))
    weight = mx.nd.array(np.random.default_rng(6).standard_normal((8, 3, 3, 3)).astype(np.float32))
    output = mx.nd.Convolution(data, weight, no_bias=True, kernel=(3, 3), num_filter=8)
    with pytest.raises(mx.base.MXNetError, match="MKLDNN"):
        output.to_dlpack_for_read()  # the layout the reorder is for (a build without oneDNN has none)
    view = executor._host_view(output)
    assert view is not None and np.array_equal(view, output.asnumpy())
    assert executor._counts(output) == audit.count(output.asnumpy())
