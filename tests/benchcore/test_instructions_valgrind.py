"""The instruction engine under real valgrind (marker `valgrind`: scripts/test-valgrind).

Each sweep pays its framework's start-up under callgrind once (MXNet ~80 s, torch ~2 min on a
quiet 2-core machine), so every test runs several cases in one worker process, at tiny sizes.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchcore.compare import count_verdicts
from benchcore.measure.instructions import counts_of
from benchcore.report.model import Report
from frameworks.mxnet import COUNT_ENVIRONMENT

pytestmark = pytest.mark.valgrind
ROOT = Path(__file__).resolve().parents[2]


def _run(argv, tmp_path, timeout=1500):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPBENCH_TINY="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _counted(report: Report):
    return {r.spec.name: r for r in report.results if r.ok}


def _check_counts(result, phases=("forward", "backward")):
    for phase in phases:
        ir = counts_of(result.metrics, phase)
        assert ir is not None and ir.unit == "instructions" and len(ir.samples) == 2, (result.spec.name, phase)
        # tiny shapes: the call's overhead is most of it and varies between repeats (FullyConnected's
        # forward at (2,3,8,4): 226,306 and 238,788, 5.4%, after the full warmup on 2026-12-05's CI leg);
        # compare judges such a quantity with its own spread (non-repeatable), so it is bounded, not exact
        assert ir.median > 1000 and ir.spread < 0.10
        cycles = counts_of(result.metrics, phase, "cycles_est")
        assert cycles.unit == "cycles (estimated)" and cycles.median >= ir.median
        profile = result.metrics["profile"][phase]
        assert profile and all(row["inclusive"] >= row["self"] >= 0 for row in profile)


def test_mxnet_operators_counted_in_one_valgrind_process(tmp_path):
    out = tmp_path / "mx.json"
    _run(["-m", "opbench", "--engine", "instructions", "--ops", "broadcast_add,FullyConnected", "-w", "20", "-r", "2",
          "--no-audit", "-o", str(out), "-f", "json,md"], tmp_path)
    report = Report.load(out)
    cases = _counted(report)
    assert set(cases) == {"broadcast_add", "FullyConnected"}
    for result in cases.values():
        _check_counts(result)
        # the warmup ends once three counted iterations agree within 0.1%, at most the 20 asked
        assert result.metrics["warmup_asked"] == 20 and 3 <= result.metrics["warmup"] <= 20
    assert any(result.metrics["warmup"] < 20 for result in cases.values())
    assert report.settings["valgrind"]["cache_sim"] == {"I1": "32768,8,64", "D1": "32768,8,64", "LL": "8388608,16,64"}
    code_path = report.settings["valgrind"]["code_path"]
    assert code_path["valgrind"]["threads_env"]["OMP_NUM_THREADS"] == "1"
    # the path MXNet's libraries took: valgrind 3.19 emulates a CPU without AVX-512, so oneDNN never picks it there
    assert code_path["native"]["onednn_isa"] and "AVX-512" not in code_path["valgrind"]["onednn_isa"]
    assert code_path["valgrind"]["openblas"]["core"] and code_path["valgrind"]["openblas_threads"] == 1
    differs = code_path["native"]["onednn_isa"] != code_path["valgrind"]["onednn_isa"]
    assert differs == ("onednn_isa" in {d["key"] for d in code_path["differences"]})
    assert (code_path["warning"] is not None) == bool(code_path["differences"])
    assert "## Instruction counts" in (tmp_path / "mx.md").read_text()
    # nothing timed to read against roofs, so no probe ran
    roofs = report.extra["roofs"]["mxnet"]
    assert roofs["source"] == "off" and roofs["obtain_s"] == 0 and "counted sweep" in roofs["reason"]
    # the same cases timed natively, joined with their counts into one report of both kinds
    timed = tmp_path / "timed.json"
    _run(["-m", "opbench", "--ops", "broadcast_add,FullyConnected", "-w", "2", "-r", "3", "--no-audit", "-o",
          str(timed)], tmp_path)
    _run(["-m", "opbench", "merge", "--both", str(timed), str(out), "-o", str(tmp_path / "both.json")], tmp_path)
    both = [r for r in Report.load(tmp_path / "both.json").results if r.ok]
    assert len(both) == sum(r.ok for r in report.results)
    assert all(r.metrics["counts"] and r.metrics["forward"] for r in both)
    # one valgrind process for both cases: MXNet's names of its operators' kernels in the profile
    functions = " ".join(row["function"] for row in cases["broadcast_add"].metrics["profile"]["forward"])
    assert "mxnet" in functions


def test_torch_operator_and_an_rnnbench_runner_counted(tmp_path):
    out = tmp_path / "torch.json"
    _run(["-m", "opbench", "--framework", "torch", "--engine", "instructions", "--ops", "add,mm", "-w", "20", "-r", "2",
          "--no-audit", "--cache-sim", "off", "-o", str(out)], tmp_path)
    report = Report.load(out)
    cases = _counted(report)
    assert {"add", "mm"} <= {r.spec.params["op"] for r in cases.values()}
    # torch's kernels dispatch on its CPU capability: never AVX512 under valgrind 3.19's emulated CPU
    code_path = report.settings["valgrind"]["code_path"]
    capability = code_path["native"]["torch_cpu_capability"], code_path["valgrind"]["torch_cpu_capability"]
    assert capability[0] and capability[1] and capability[1] != "AVX512"
    assert (capability[0] != capability[1]) == ("torch_cpu_capability" in {d["key"] for d in code_path["differences"]})
    for result in cases.values():
        ir = counts_of(result.metrics, "forward")
        assert len(ir.samples) == 2 and ir.median > 1000
        assert counts_of(result.metrics, "forward", "cycles_est") is None  # --cache-sim off: instructions only
    rnn = tmp_path / "rnn.json"
    _run(["-m", "rnnbench", "bench", "--engine", "instructions", "--group", "rnns", "--rnns", "aten",
          "--seqLength", "3", "--inputSize", "8", "--hiddenSize", "8", "--miniBatch", "2", "--warmup", "20",
          "--nloops", "2", "--no-audit", "--output-file", str(rnn)], tmp_path)
    runner = _counted(Report.load(rnn))["aten"]
    _check_counts(runner)


BROADCAST_ADD = {"suite": "opbench", "name": "broadcast_add", "params": {
    "op": "broadcast_add", "category": "binary_broadcast", "inputs": {
        "lhs": {"shape": [512, 256], "init": "normal", "dtype": "float32"},
        "rhs": {"shape": [512, 256], "init": "normal", "dtype": "float32"}},
    "dtype": "float32", "ctx": "cpu(0)", "run_backward": True, "seed": 41, "variant": "(512,256)", "profile": "tiny"}}


def test_function_delta_between_two_real_runs_that_differ(tmp_path, monkeypatch):
    """One case key counted at two input sizes (tests/benchcore/planted_executor.py) in one
    valgrind process: compare judges it slower and names the functions whose counts grew."""
    from benchcore.execute import valgrind
    from benchcore.execute.checkpoint import Slot
    from benchcore.execute.worker import run_slots
    from benchcore.measure.case import CaseSpec
    from benchcore.measure.runner import RunSettings

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    spec = CaseSpec.from_dict(BROADCAST_ADD)
    options = {"profiler": "instructions", "settings": RunSettings(warmup=20, runs=2).to_dict(), "audit": False,
               "planted": [spec.key], "planted_factor": 2.0, "planted_second_time": True}
    runs = run_slots([Slot(spec), Slot(spec), Slot(spec)], "tests.benchcore.planted_executor:execute", options,
                     launcher=valgrind.plan("off", dict(COUNT_ENVIRONMENT)).launcher, timeout_s=1500)
    base, new, again = (result for _slot, result in runs)
    assert base.ok and new.ok and again.ok, (base.error, new.error, again.error)
    found = count_verdicts.compare_counts(Report("opbench", results=[base]), Report("opbench", results=[new]))
    forward = next(v for v in found.verdicts if v.phase == "forward")
    assert forward.verdict == "slower" and forward.ratio > 1.05
    assert forward.functions["self"][0]["change"] > 0 and forward.functions["inclusive"][0]["change"] > 0
    # the planted size counted twice in one process: the same counts within the floor
    same = count_verdicts.compare_counts(Report("opbench", results=[new]), Report("opbench", results=[again]))
    assert same.verdicts and all(v.verdict == "same" for v in same.verdicts)


def test_framework_free_cases_share_one_valgrind_process(monkeypatch, tmp_path):
    """Several cases in one worker under valgrind, counted per call, with the work each did:
    a 1% larger input counts ~1% more instructions."""
    from benchcore.execute import valgrind
    from benchcore.execute.worker import run_cases
    from benchcore.measure.case import CaseSpec
    from benchcore.measure.runner import RunSettings

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    specs = [CaseSpec("t", "sum", {"n": n}) for n in (20000, 20200)]
    small, large = run_cases(specs, "tests.benchcore.count_executor:execute",
                             {"settings": RunSettings(warmup=2, runs=3).to_dict()},
                             launcher=valgrind.plan("default").launcher, timeout_s=900)
    assert small.ok and large.ok, (small.error, small.stderr_tail)
    for result in (small, large):
        ir = counts_of(result.metrics, "forward")
        assert len(ir.samples) == 3 and ir.unit == "instructions"
        assert counts_of(result.metrics, "backward").median > 0
        assert result.metrics["count_overhead"]["Ir"] > 0
        assert "AVX512F" not in result.metrics["code_path"]["cpu_features"]  # valgrind's emulated CPU
    ratio = counts_of(large.metrics, "forward").median / counts_of(small.metrics, "forward").median
    assert 1.005 < ratio < 1.02
    names = [row["function"] for row in small.metrics["profile"]["forward"]]
    assert any(name.startswith("builtin_sum ") for name in names) and not any("'" in name for name in names)
