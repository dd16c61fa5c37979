"""scripts/fastrnns_loop (fastrnns' timing loop on rnnbench's runners, the same-sitting reference
of issue 23's rnnbench target) and how scripts/speed_figures reads it beside rnnbench."""

import importlib.util
import json
from importlib.machinery import SourceFileLoader
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--seqLength", "4", "--inputSize", "8", "--hiddenSize", "8", "--miniBatch", "2"]


def _script(name):
    loader = SourceFileLoader(name, str(ROOT / "scripts" / name))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    loader.exec_module(module)
    return module


def test_loop_runs_fastrnns_iterations_per_runner(tmp_path):
    out = tmp_path / "loop.json"
    assert _script("fastrnns_loop").main(["--rnns", "cudnn", "jit", *TINY, "--warmup", "1", "--nloops", "2",
                                          "-o", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["runners"]) == {"cudnn", "jit"}
    for record in report["runners"].values():
        assert record["iterations"] == 3 and record["gc_collects"] == 6  # warmup + nloops, two collections each
        assert len(record["forward_ms"]) == len(record["backward_ms"]) == 2  # the warmup is not kept
        assert all(ms > 0 for ms in record["forward_ms"] + record["backward_ms"])
    assert report["settings"]["seqLength"] == 4 and report["settings"]["fuser"] == "te"
    assert report["wall_s"] > 0


def test_iteration_zeroes_every_gradient_and_refuses_a_missing_one():
    import pytest
    import torch

    from rnnbench.runners import get_runner

    loop = _script("fastrnns_loop")
    modeldef = get_runner("cudnn").creator(device="cpu", seqLength=3, inputSize=4, hiddenSize=4, miniBatch=2)
    record = {"forward_ms": [], "backward_ms": [], "iterations": 0, "gc_collects": 0}
    loop.iteration(modeldef, record)
    assert all(torch.count_nonzero(p.grad) == 0 for p in modeldef.params)
    modeldef.params.append(torch.zeros(2, requires_grad=True))  # a parameter the model does not use
    with pytest.raises(AssertionError, match="no gradient"):
        loop.iteration(modeldef, record)


def _rnnbench_run(figures, wall_s, warmups, timed):
    steady = [{"warmup_calls": w, "extra_warmup": max(0, w - 2), "reached": True, "reason": None} for w in warmups]
    result = {"status": "ok", "metrics": {"steady": steady, "forward": {"n": timed}, "timed_total_ms": 1000.0}}
    return figures.Run("rnnbench lstm", [], wall_s=wall_s, report={"results": [result], "settings": {}})


def test_speed_figures_judges_rnnbench_against_the_loop_of_the_same_sitting():
    figures = _script("speed_figures")
    loop = figures.Run("fastrnns loop", [], wall_s=50.0,
                       report={"runners": {"cudnn": {"iterations": 12}, "jit": {"iterations": 12}}})
    ours = _rnnbench_run(figures, 60.0, [4, 2, 2], 10)
    assert figures.iterations_per_runner(ours) == 18
    lines = figures.against_fastrnns(ours, loop)
    verdicts = {line.split(":")[0].strip(): passed for passed, line in lines}
    assert verdicts["wall / fastrnns' loop in this sitting (50.0 s, scripts/fastrnns_loop)"] is False  # 1.2x
    assert "18.0" in lines[0][1] and "fastrnns' loop 12.0" in lines[0][1]
    assert figures.against_fastrnns(_rnnbench_run(figures, 45.0, [2, 2, 2], 10), loop)[1][0] is True
    failed = figures.against_fastrnns(ours, figures.Run("fastrnns loop", [], returncode=1))
    assert failed[0][0] is False and "no same-sitting ratio" in failed[0][1]


def test_speed_figures_passes_the_runner_and_size_flags_to_the_loop():
    figures = _script("speed_figures")
    assert figures.loop_flags(["--rnns", "jit", "cudnn", "--rounds", "1", "--seqLength=5", "--miniBatch", "8"]) == [
        "--rnns", "jit", "cudnn", "--seqLength=5", "--miniBatch", "8"]
