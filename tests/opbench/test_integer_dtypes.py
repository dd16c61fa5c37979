"""--dtype int32/int64: forward only, divisors never zero, float-only operators left out with
MXNet's reason (real MXNet, tiny shapes)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import mxnet as mx
import numpy as np
import pytest

from benchcore.report.model import Report
from opbench.backends.mxnet import arrays, cases, registry, rules
from opbench.backends.mxnet import opperf_api as api

ROOT = Path(__file__).resolve().parents[2]
INTEGERS = ("int32", "int64")
#: MKLDNN (the CPU backend of the pip wheel) has no int64 type: amp_cast/amp_multicast run at
#: int32 but fail at int64 with MXNet's own message, so they are not left out
MKLDNN_NO_INT64 = {"amp_cast", "amp_multicast"}


def probe(dtype):
    """{operator: MXNet's error} for every selected operator whose tiny forward fails at dtype."""
    failures = {}
    for name in registry.selected_names():
        found = cases.rule_for(name, rules.TINY)
        if not found or name in rules.NO_RULE:
            continue
        for spec in cases.operator_cases(name, found, dtype, "cpu(0)", False, 41, rules.TINY):
            try:
                arrays.materialize(spec).call()
                mx.nd.waitall()
            except mx.base.MXNetError as exc:
                failures[name] = str(exc)
                break
    return failures


@pytest.mark.parametrize("dtype", INTEGERS)
def test_left_out_operators_are_exactly_those_mxnet_refuses(dtype):
    """The stored table rules.INTEGER_UNSUPPORTED equals what the installed MXNet does: every
    operator in it fails at this dtype with the quoted message, every other one runs. In a
    child process, so a crash (an integer division by zero is SIGFPE) fails only this test."""
    code = "import json, sys; from tests.opbench.test_integer_dtypes import probe; print(json.dumps(probe(sys.argv[1])))"
    proc = subprocess.run([sys.executable, "-c", code, dtype], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    failures = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = set(rules.INTEGER_UNSUPPORTED) | (MKLDNN_NO_INT64 if dtype == "int64" else set())
    assert set(failures) == expected
    for op, message in rules.INTEGER_UNSUPPORTED.items():
        assert message in failures[op], op
    for op in expected - set(rules.INTEGER_UNSUPPORTED):
        assert "unknown type for MKLDNN" in failures[op]


def test_integer_cases_time_forward_only_with_the_reason():
    specs, skipped = cases.generate_cases(categories=["gemm", "binary_broadcast", "reduction", "indexing"],
                                          dtype="int32", tiny=True)
    assert len(specs) > 100
    for spec in specs:
        assert spec.params["run_backward"] is False
        info = registry.get(spec.name)
        reason = info.no_backward_reason if not info.runs_backward else cases.integer_dtype_reason("int32")
        assert spec.params["no_backward_reason"] == reason
        assert not arrays.materialize(spec).grad_arrays
    assert cases.integer_dtype_reason("int32").startswith("integer dtype int32: no gradient")
    assert cases.integer_dtype_reason("float16") is None
    left_out = dict(skipped)
    assert set(left_out) == {"dot", "batch_dot", "khatri_rao"}
    assert "dot only supports float32/float64" in left_out["dot"]
    assert left_out["dot"].startswith("not run at integer dtype int32: MXNet refuses integer inputs")


def test_float_only_operators_are_left_out_only_for_integers_on_cpu():
    assert not cases.generate_cases(ops=["dot"], dtype="int64", tiny=True)[0]
    assert len(cases.generate_cases(ops=["dot"], dtype="float64", tiny=True)[0]) == 3
    # probed on CPU only: on a GPU the cases run (and fail with MXNet's message if refused)
    assert len(cases.generate_cases(ops=["dot"], dtype="int32", ctx="gpu(0)", tiny=True)[0]) == 3


@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("op", sorted(rules.DIVISORS))
def test_divisors_are_never_zero_at_integer_dtypes(op, dtype):
    """A zero integer divisor is SIGFPE; checked before the call, which then really runs."""
    specs, skipped = cases.generate_cases(ops=[op], dtype=dtype, tiny=True)
    assert specs and not skipped
    for spec in specs:
        m = arrays.materialize(spec)
        divisor = m.arrays[rules.DIVISORS[op]]
        divisor = divisor if divisor.stype == "default" else divisor.tostype("default")
        assert divisor.dtype == np.dtype(dtype) and (divisor.asnumpy() != 0).all(), spec.params["variant"]
        m.call()
        mx.nd.waitall()


def test_uniform_inputs_stay_in_their_bounds_as_integers():
    spec = cases.generate_cases(ops=["log"], dtype="int64", tiny=True)[0][0]
    values = arrays.materialize(spec).arrays["data"].asnumpy()
    low, high = rules.DOMAINS["log"]
    assert values.min() >= 1 and values.max() <= high  # [0.1, 10) → integers 1..10, never 0


def test_api_runs_an_integer_division_forward_only():
    (entry,) = api.run_performance_test("broadcast_div", [{"lhs": (4, 4), "rhs": (4, 4)}], dtype="int32",
                                        warmup=1, runs=2, isolate=True)[0]["broadcast_div"]
    assert entry["avg_time_forward_broadcast_div"] > 0 and entry["avg_time_backward_broadcast_div"] is None


def test_cli_integer_sweep_measures_every_case(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "opbench", "--category", "binary_broadcast,gemm", "--tiny",
                           "-w", "0", "-r", "2", "--dtype", "int32", "-o", "r.json"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = Report.load(tmp_path / "r.json")
    assert len(report.results) == 100 and all(r.ok for r in report.results)
    for result in report.results:
        op = result.spec.params["op"]
        assert result.metrics[f"avg_time_forward_{op}"] > 0
        reason = result.metrics["missing"][f"avg_time_backward_{op}"]  # the operator's own reason first
        assert reason.startswith("integer dtype int32") or reason.startswith("zero gradient"), reason
    assert {item["op"] for item in report.extra["no_benchmark"]} == {"dot", "batch_dot", "khatri_rao"}
    assert "batch_dot: not run at integer dtype int32" in proc.stderr
