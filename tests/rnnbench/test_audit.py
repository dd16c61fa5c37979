"""The audit in rnnbench: each runner's inputs, outputs, final states and parameter gradients
counted in `bench` (reports, rounds) and in `test`; --flush-denormal in the worker (CPU, tiny)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchcore.measure.case import CaseSpec
from benchcore.report.model import Report
from rnnbench import cases, correctness, executor
from rnnbench.audit import audit_model
from rnnbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
SIZES = {"seqLength": 5, "numLayers": 1, "inputSize": 8, "hiddenSize": 8, "miniBatch": 2}
TINY = [arg for name, value in SIZES.items() for arg in (f"--{name}", str(value))]


def _spec(runner: str) -> CaseSpec:
    sizes = {k: v for k, v in SIZES.items() if k != "seqLength"} if runner.startswith("vl_") else SIZES
    return CaseSpec(cases.SUITE, runner, cases.case_params(sizes, "cpu", "te", None, 17, "lstm"))


def test_bench_executor_audits_outputs_states_and_gradients():
    for runner in ("cudnn", "vl_py"):
        metrics = executor.execute(_spec(runner), {"settings": {"warmup": 0, "runs": 2}})
        block = metrics["audit"]
        assert set(block["inputs"]) == {"x", "hx", "cx"} and set(block["states"]) == {"h", "c"}
        assert set(block["outputs"]) == {"output"}
        assert set(block["gradients"]) == {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"}
        assert block["gradients"]["weight_ih_l0"]["values"] == 4 * 8 * 8
        assert block["flagged"] is False and block["elapsed_ms"] > 0
        assert metrics["denormals"]["requested"] is False
    sequences = metrics["audit"]["outputs"]["output"]["values"]
    assert sequences % 8 == 0 and sequences > 30 * 2 * 8  # vl_py: every sequence, counted as one tensor


def test_audit_names_planted_values_in_states_and_gradients():
    import torch

    h = torch.ones(1, 2, 3)
    h[0, 0, 0] = float("nan")
    param = torch.ones(4, requires_grad=True)
    param.grad = torch.tensor([np.float32(1e-39), 1.0, float("-inf"), 0.0])
    block = audit_model([torch.ones(2)], (None, (h, torch.ones(1, 2, 3))), [param], ["w"])
    assert block["outputs"] == {} and block["states"]["h"]["nan"] == 1
    assert (block["gradients"]["w"]["subnormal"], block["gradients"]["w"]["neginf"]) == (1, 1)
    assert block["flagged"] and block["defect"] and "input0" in block["inputs"]


def test_bench_report_holds_the_audit_of_one_round(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(["bench", *TINY, "--nloops", "2", "--warmup", "0", "--device", "cpu", "--rnns", "cudnn",
                 "--no-isolation", "--rounds", "2", "-f", "json,md", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    [result] = Report.load(out).results
    assert result.metrics["audit"]["rounds"] == 1 and "round_values" not in result.metrics  # audited in one round
    assert Report.load(out).settings["audit_rounds"] == "first"
    assert "rnnbench: audit: all 1 audited case(s) computed on normal numbers" in err
    assert "## Non-normal values" in out.with_suffix(".md").read_text()


def test_test_subcommand_shows_the_audit(capsys):
    [result] = correctness.check_runners(["jit"], device="cpu", **SIZES)
    assert result.passed and result.audit["flagged"] is False and set(result.audit["states"]) == {"h", "c"}
    assert result.to_dict()["audit"] == result.audit
    table = correctness.format_results([result])
    assert "non-normal" in table.splitlines()[0] and " none " in table
    flagged = correctness.CheckResult("x", True, audit={**result.audit, "flagged": True, "states": {
        "h": {**result.audit["states"]["h"], "nan": 2, "flagged": True}}})
    assert "states h: 2 NaN of 16 values" in correctness.format_results([flagged])
    code = main(["test", "--rnns", "cudnn", *TINY])
    captured = capsys.readouterr()
    assert code == 0 and "rnnbench: audit: all 1 audited case(s) computed on normal numbers" in captured.err


def test_flush_denormal_reaches_torch_threads_in_the_worker_and_the_report(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "rnnbench", "bench", *TINY, "--nloops", "2", "--warmup", "0",
                           "--device", "cpu", "--rnns", "cudnn", "--rounds", "1", "--flush-denormal", "--no-audit",
                           "-o", "r.json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = Report.load(tmp_path / "r.json")
    assert report.settings["flush_denormal"] is True and report.environment["flush_denormal"] is True
    assert report.settings["audit"] is False
    [result] = report.results
    state = result.metrics["denormals"]
    assert state["requested"] is True and result.metrics["audit"] is None
    assert result.metrics["missing"]["audit"] == "not asked for (--no-audit)"  # beside the compile reasons
    assert "compile_ms" in result.metrics["missing"]
    assert state["python_thread"]["ftz"] and state["python_thread"]["daz"]
    assert state["operator_threads"] == {"ftz": 1.0, "daz": 1.0}  # torch's intra-op threads too
    assert "rnnbench: Subnormals: flushed to zero in the operator threads" in proc.stderr
