"""The audit in opbench --framework torch (real torch, CPU, small sizes): what the executor
counts on planted NaN, infinities and subnormals, --no-audit, the expected reason, and a small
sweep through the CLI (every case audited, --flush-denormal recorded)."""

import os
import subprocess
import sys
from pathlib import Path

import expecttest  # noqa: F401  (torch.testing._internal needs it: a missing one fails here)
import pytest
import torch

from benchcore.measure.case import CaseSpec
from benchcore.measure.runner import RunSettings, run_workload
from benchcore.measure.timers import PerfCounterTimer
from benchcore.report.model import Report
from opbench.backends.torch.audit import count_tensor, counter
from opbench.backends.torch.executor import build_workload, execute
from opbench.backends.torch.manifest import build

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {"warmup": 1, "runs": 2, "run_backward": True}
OPTIONS = {"settings": SETTINGS, "profiler": "python"}
#: plain entries, one whose OpInfo values are out of its domain (zeta: NaN at any size, fixed by
#: overrides.DOMAINS) and one whose NaN are the operator's (overrides.NON_NORMAL)
SLICE = [("add", ""), ("log", ""), ("sort", ""), ("special.zeta", ""), ("masked.softmax", "")]


def _spec(path: str, low: float, high: float, n: int = 64) -> CaseSpec:
    """A case whose call and sample travel in the spec (as crossframe's torch side): `path` on
    n fresh uniform float32 values in [low, high]."""
    tree = {"input": {"tensor": {"shape": [n], "init": "fresh", "dtype": "float32", "low": low, "high": high}},
            "args": [], "kwargs": {}}
    params = {"framework": "torch", "op": path, "variant": "", "category": "test", "dtype": "float32",
              "device": "cpu", "inputs": {"input": f"({n},) float32"}, "call": {"path": path}, "tree": tree,
              "run_backward": True, "seed": 0}
    return CaseSpec(suite="opbench", name=path, params=params)


def test_counts_per_dtype_on_planted_values():
    values = [1.0, float("nan"), float("inf"), -float("inf"), 1e-40, 0.0]
    found = count_tensor(torch.tensor(values))
    assert [found[k] for k in ("nan", "posinf", "neginf", "subnormal", "values")] == [1, 1, 1, 1, 6]
    assert found["flagged"] and found["dtype"] == "float32"
    widened = count_tensor(torch.tensor(values).bfloat16())  # bfloat16 keeps float32's classes
    assert widened["dtype"] == "bfloat16" and widened["subnormal"] == 1 and widened["nan"] == 1
    assert count_tensor(torch.complex(torch.tensor(values), torch.zeros(6)))["values"] == 12
    assert count_tensor(torch.tensor([1e-5, 1.0] * 100, dtype=torch.float16))["flagged"]  # 50% subnormal
    assert not count_tensor(torch.tensor([1e-5] + [1.0] * 199, dtype=torch.float16))["flagged"]  # 0.5%: tolerated
    assert not count_tensor(torch.tensor([1e-40], dtype=torch.float64))["flagged"]  # normal in float64
    x = torch.randn(4, requires_grad=True)
    torch.sgn(x).backward(torch.ones(4))  # sgn's gradient of a real input is a ZeroTensor, numpy refuses it
    assert count_tensor(x.grad)["values"] == 4 and not count_tensor(x.grad)["flagged"]
    integers = count_tensor(torch.zeros(3, dtype=torch.int64))
    assert integers["dtype"] == "int64" and not integers["flagged"] and "unaudited" not in integers


def test_large_tensor_is_counted_in_chunks_exactly():
    t = torch.ones(3 * 2**20 + 5)
    t[[0, 2**20, 3 * 2**20 + 4]] = float("nan")
    assert count_tensor(t)["nan"] == 3 and count_tensor(t)["values"] == t.numel()


def _audited_run(x, expected=None) -> dict:
    """log timed once on `x` with the audit as its last call (what the executor does)."""
    workload = build_workload(torch.log, x, [], {}, True, "cpu", 0)
    workload.last_call = counted = counter((x, [], {}), True, expected)
    run_workload(workload, RunSettings(warmup=0, runs=1), PerfCounterTimer(lambda: None))
    assert x.grad is None  # reset by the runner: what the audit counts was taken before
    metrics = {}
    counted.record(metrics, {}, workload)
    return metrics["audit"]


def test_audit_reads_inputs_and_what_the_last_timed_forward_and_backward_produced():
    """log on [-1, 0, 1e-40, 2]: NaN and -Inf out; the gradient 1/x is infinite at 0 and
    overflows float32 at 1e-40; the input's subnormal is counted where it is."""
    x = torch.tensor([-1.0, 0.0, 1e-40, 2.0], requires_grad=True)
    block = _audited_run(x)
    assert block["inputs"]["input"]["subnormal"] == 1
    out = block["outputs"]["0"]
    assert (out["nan"], out["neginf"], out["subnormal"]) == (1, 1, 0)
    assert block["gradients"]["input"]["posinf"] + block["gradients"]["input"]["neginf"] == 2
    assert block["flagged"] and block["defect"] and x.grad is None  # reset, as after every timed backward
    assert _audited_run(x, expected="log of 0 is -inf")["defect"] is False


def test_planted_nan_through_the_executor_and_no_audit():
    metrics = execute(_spec("log", -2.0, -1.0), OPTIONS)
    block = metrics["audit"]
    assert block["outputs"]["0"]["nan"] == 64 and not block["inputs"]["input"]["flagged"]
    assert block["defect"] and block["elapsed_ms"] > 0 and "gradients" in block
    assert metrics["denormals"]["requested"] is False
    clean = execute(_spec("log", 1.0, 2.0), OPTIONS)["audit"]
    assert not clean["flagged"] and clean["values"] == 3 * 64
    skipped = execute(_spec("log", 1.0, 2.0), {**OPTIONS, "audit": False})
    assert skipped["audit"] is None and skipped["missing"]["audit"] == "not asked for (--no-audit)"


# --------------------------------------------------------------------------- the CLI


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    path = tmp_path_factory.mktemp("manifest") / "m.json"
    return build(path, "float32", "cpu", 4096, 0, only=[list(key) for key in SLICE])


def opbench(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPBENCH_CACHE": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "opbench", "--framework", "torch", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_small_sweep_audits_every_case(manifest, tmp_path):
    proc = opbench("--manifest", str(manifest.path), "-w", "1", "-r", "2", "--rounds", "2", "-f", "json,md",
                   "-o", "t.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = Report.load(tmp_path / "t.json")
    assert sorted(r.spec.name for r in report.results) == ["add", "log", "masked.softmax", "sort", "special.zeta"]
    for result in report.results:
        block = result.metrics["audit"]
        assert block["rounds"] == 1 and not block["defect"], (result.spec.name, block)  # one of the 2 rounds
        assert (block["expected"] is not None) == (result.spec.name == "masked.softmax")
        assert set(block["inputs"]) >= {"input"} and block["outputs"]["0"]["values"] > 0
        backward = "backward" not in result.metrics["missing"]
        assert ("gradients" in block) == backward
        if backward:
            assert block["gradients"]["input"]["values"] == block["inputs"]["input"]["values"]
        assert result.metrics["denormals"]["requested"] is False
    assert report.settings["audit"] is True
    assert "0 unexplained" in proc.stderr or "all 5 audited case(s) computed on normal numbers" in proc.stderr
    assert "## Non-normal values" in (tmp_path / "t.md").read_text()


def test_no_audit_and_flush_denormal_reach_the_report(manifest, tmp_path):
    proc = opbench("--manifest", str(manifest.path), "--ops", "add", "-w", "1", "-r", "2", "--rounds", "1",
                   "--no-audit", "--flush-denormal", "-f", "json,md", "-o", "t.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = Report.load(tmp_path / "t.json")
    (result,) = report.results
    assert result.metrics["audit"] is None and result.metrics["missing"]["audit"] == "not asked for (--no-audit)"
    denormals = result.metrics["denormals"]
    assert denormals["requested"] is True and denormals["operator_threads"]["ftz"] == 1.0
    assert report.settings["flush_denormal"] is True and report.settings["audit"] is False
    assert "audit:" not in proc.stderr and "opbench: Subnormals: flushed to zero" in proc.stderr
    assert "Not audited (`--no-audit`)." in (tmp_path / "t.md").read_text()
