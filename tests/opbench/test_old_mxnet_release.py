"""opbench on a real MXNet release older than 1.9.1: scripts/test-old-mxnet installs one
(1.4.1 by default) in its own venv and runs this file there, naming the release in
OPBENCH_OLD_MXNET, an mxnet 1.3.1 folder in OPBENCH_TOO_OLD_MXNET and the python of an MXNet
1.9.1 environment in OPBENCH_NEW_PYTHON (the other side of `ab`).

Every test carries the `old_mxnet` marker, which the main suite deselects (tests/conftest.py: it
runs on 1.9.1; its half of the release handling is tests/opbench/test_old_mxnet_handling.py);
the script runs them with `-m old_mxnet`. There, every test fails when the installed MXNet is
not the release named: nothing here skips.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import mxnet as mx
import pytest

from benchcore.report.model import Report
from frameworks.mxnet import mxnet_info
from opbench.backends.mxnet import cases, gradients, registry, releases
from opbench.backends.mxnet import opperf_api as api
from opbench.backends.mxnet.profiler import MXNetProfiler

pytestmark = pytest.mark.old_mxnet
#: the release scripts/test-old-mxnet installed (unset elsewhere: every test then fails)
RELEASE = os.environ.get("OPBENCH_OLD_MXNET")

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--tiny", "-w", "1", "-r", "2", "--rounds", "1"]

#: per release: operators registered, selected (opperf's filter), cases of a full sweep (standard
#: sizes, float32), cases among them whose backward is timed; docs/MXNET_RELEASES.md has the table
COUNTS = {
    "1.4.1": (687, 214, 672, 463),
    "1.5.0": (738, 231, 713, 480),
    "1.6.0": (1044, 254, 775, 509),
    "1.7.0.post2": (1161, 256, 776, 510),
    "1.8.0.post0": (1163, 256, 776, 510),
}
#: a few operators of each kind of difference, for the sweeps below: a variadic input given one
#: tensor before 1.5 (squeeze), calls through the raw C API (Softmax, IdentityAttachKLSparseReg),
#: a gradient 1.4 lacks (choose_element_0index), a choice 1.4 lacks (LeakyReLU's gelu), empty
#: sparse values the audit reads (cast_storage), and plain ones
SWEEP_OPS = ("exp,broadcast_add,sum,FullyConnected,take,dot,squeeze,Softmax,IdentityAttachKLSparseReg,"
             "choose_element_0index,LeakyReLU,cast_storage")


def _env(**extra):
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def opbench(*args, cwd, python=sys.executable, env=None, timeout=300):
    return subprocess.run([python, "-m", "opbench", *args], cwd=cwd, env=env or _env(), capture_output=True,
                          text=True, timeout=timeout)


def _one_line_error(proc, text):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("opbench: error: ") and text in lines[0], proc.stderr


def test_the_installed_mxnet_is_the_old_release_named():
    assert mx.__version__.startswith(RELEASE.split(".post")[0]) and releases.installed_version() == RELEASE
    assert releases.current() < releases.REFERENCE


def test_discovery_finds_the_release_own_operators_through_the_c_api():
    registered, selected, case_count, backward_cases = COUNTS[RELEASE]
    assert len(registry.all_names()) == registered and len(registry.selected_names()) == selected
    specs, skipped = cases.generate_cases()
    assert len(specs) == case_count and sum(s.params["run_backward"] for s in specs) == backward_cases
    assert all(reason.startswith("not run on mxnet") for _op, reason in skipped), skipped
    info = registry.get("FullyConnected")
    assert info.arg_names[:3] == ("data", "weight", "bias") and info.is_tensor_arg("data")


def test_list_names_every_selected_operator(tmp_path):
    proc = opbench("--list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"{COUNTS[RELEASE][1]} selected operators" in proc.stderr
    assert "exp" in proc.stdout.split() and "Traceback" not in proc.stderr


def test_what_the_release_lacks_is_said_not_raised(tmp_path):
    if releases.current() < (1, 5, 0):
        assert releases.features() is None and mxnet_info()["features"] is None
        assert "no build feature list" in mxnet_info()["reason"]
    else:
        assert "CPU_SSE" in releases.features() and mxnet_info()["features"]
    if releases.current() < (1, 6, 0):
        assert "has no mx.np / mx.npx" in releases.numpy_api()
        result = api.run_benchmark_operator("exp", size=(4, 4), warmup=1, runs=2, printer=None)
        assert result["nd"]["result"][0]["avg_time_forward_exp"] is not None
        assert result["np"] == {"function": None, "reason": releases.numpy_api()} == result["npx"]
    _one_line_error(opbench("--ops", "exp", "--int64-tensor", "on", *FAST, cwd=tmp_path), "INT64_TENSOR_SIZE")
    _one_line_error(opbench("--ops", "exp", "--ctx", "gpu", *FAST, cwd=tmp_path), "has no CUDA support")


def test_the_profiler_counts_each_call_once():
    """Before 1.6 the aggregate table holds every call twice (a device and an operator event);
    the engine's profiler halves it, so a call reads once with its own time."""
    twice = releases.current() < (1, 6, 0)
    assert releases.profiler_records_per_call() == (2 if twice else 1)
    profiler = MXNetProfiler(records_per_call=releases.profiler_records_per_call())
    a = mx.nd.ones((256, 256))
    mx.nd.waitall()
    profiler.start()
    try:
        for _ in range(3):
            mx.nd.exp(a)
        mx.nd.waitall()
        dump = profiler.dump()
    finally:
        profiler.stop()
    assert dump.operators["exp"].count == 3
    assert dump.memory["cpu/0"].max_bytes >= 256 * 256 * 4  # the memory rows of every release's table


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_sweep_runs_with_both_engines(tmp_path, engine):
    proc = opbench("--ops", SWEEP_OPS, *FAST, "-p", engine, "-o", "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = Report.load(tmp_path / "r.json")
    assert report.environment["mxnet"]["version"] == mx.__version__
    assert {r.spec.name for r in report.results} == set(SWEEP_OPS.split(","))
    skipped = {r.spec.params["variant"]: r.error for r in report.results if r.status == "skipped"}
    if releases.current() < (1, 5, 0):
        assert list(skipped) == ["gelu-(4,6)"]
        assert skipped["gelu-(4,6)"] == (f"not run on mxnet {mx.__version__}: its LeakyReLU takes act_type elu, leaky, "
                                         "prelu, rrelu, selu, not 'gelu' (the input rules follow 1.9.1's)")
    else:
        assert not skipped
    failed = [(r.spec.name, r.error) for r in report.results if r.status not in ("ok", "skipped")]
    assert not failed
    for result in (r for r in report.results if r.ok):
        metrics = result.metrics
        assert metrics["audit"] is not None, (result.spec.name, metrics["missing"].get("audit"))
        if engine == "native":
            profiler = metrics["profiler"]
            assert profiler["forward"]["Count"] >= profiler["forward"]["calls"] == 2, result.spec.name
            assert profiler["peak_bytes"] is not None, result.spec.name
            assert profiler["records_per_call"] == releases.profiler_records_per_call()
    choose = [r for r in report.results if r.spec.name == "choose_element_0index"]
    if releases.current() < (1, 5, 0):
        assert all(r.metrics["backward"] is None for r in choose)
        assert all(r.spec.params["no_backward_reason"] == registry.NO_FGRADIENT for r in choose)


def test_rnn_native_survives_the_memory_counter_of_1_4():
    """MXNet 1.4 aborts when the first timed RNN call frees the workspace the warmup made while
    the profiler was off; the engine profiles the warmup there (releases.warmup_under_profiler)."""
    assert releases.warmup_under_profiler() == (releases.current() < (1, 5, 0))
    inputs = {"data": (50, 32, 128), "parameters": (256 * (128 + 256) + 2 * 256,), "state": (1, 32, 256),
              "state_size": 256, "num_layers": 1, "mode": "rnn_relu", "p": 0.0}
    (item,) = api.run_performance_test("RNN", inputs=[inputs], warmup=1, runs=2, profiler="native", isolate=True)
    (entry,) = item["RNN"]
    assert entry["avg_time_forward_RNN"] is not None and entry["avg_time_backward_RNN"] is not None


def test_the_gradient_answers_equal_the_probe_on_this_release():
    """registry's stored answers (1.9.1's probe) with this release's differences
    (releases.GRADIENT_SINCE) equal what this MXNet answers, both ways, for every selected
    operator it can run; so do the operators that draw from MXNet's generators."""
    runnable = [op for op in registry.selected_names() if not releases.broken(op, "cpu(0)")]
    probed = gradients.probe(runnable)
    unknown = {op: item["reason"] for op, item in probed.items() if item["differentiable"] is None}
    assert not unknown
    for op, item in probed.items():
        info = registry.get(op)
        assert info.differentiable == item["differentiable"], op
        assert info.not_differentiable == item["reason"], op
        assert bool(info.zero_gradient) == bool(item["zero_gradient"]), op
        assert registry.draws_random(op) == item["draws_random"], op  # only these cases seed MXNet


def test_ab_between_this_release_and_1_9_1_skips_what_the_old_side_lacks(tmp_path):
    """The plan is 1.9.1's (the parent runs on it); the old side skips an operator it does not
    register and runs forward only where it has no gradient, each with the reason."""
    new_python = os.environ["OPBENCH_NEW_PYTHON"]
    newer = subprocess.run([new_python, "-c", "from opbench.backends.mxnet import registry; "
                            "print(' '.join(registry.selected_names()))"], env=_env(), capture_output=True,
                           text=True, timeout=300, check=True).stdout.split()
    lacking = sorted(set(newer) - set(registry.selected_names()))
    assert bool(lacking) == (releases.current() < (1, 7, 0))
    ops = ["exp", "choose_element_0index"] + lacking[:1]
    proc = opbench("ab", "--base-python", sys.executable, "--new-python", new_python, "--ops", ",".join(ops),
                   *FAST, "--output-dir", "ab", cwd=tmp_path, python=new_python, timeout=600)
    assert proc.returncode == 0, proc.stderr
    base, new = (Report.load(tmp_path / "ab" / f"{side}.json") for side in ("base", "new"))
    assert base.environment["mxnet"]["version"] == mx.__version__ and new.environment["mxnet"]["version"] == "1.9.1"
    assert {r.status for r in new.results} == {"ok"}
    for result in base.results:
        if result.spec.name in lacking:
            assert result.status == "skipped" and f"mxnet {mx.__version__} has no operator" in result.error
        else:
            assert result.status == "ok", (result.spec.name, result.error)
    comparison = json.loads((tmp_path / "ab" / "comparison.json").read_text())
    reasons = " ".join(item["reason"] for item in comparison["unmeasured"])
    if lacking:
        assert f"has no operator {lacking[0]}" in reasons
    if releases.current() < (1, 5, 0):
        assert "backward: measured on the new side only (other side: not differentiable" in reasons


def test_an_mxnet_older_than_supported_is_one_line_and_exit_2(tmp_path):
    too_old = os.environ["OPBENCH_TOO_OLD_MXNET"]
    env = _env(PYTHONPATH=f"{too_old}{os.pathsep}{ROOT}")
    version = subprocess.run([sys.executable, "-c", "import mxnet; print(mxnet.__version__)"], env=env,
                             capture_output=True, text=True, timeout=300)
    assert version.stdout.strip() == "1.3.1", version.stderr
    for args in (["--list"], ["--ops", "exp", *FAST]):
        _one_line_error(opbench(*args, cwd=tmp_path, env=env),
                        "mxnet 1.3.1 is older than opbench supports (1.4.1 to 1.9.1); install a supported "
                        "release (pip install 'mxnet>=1.4.1,<2' \"numpy<1.24\")")


def test_an_ab_side_older_than_supported_is_refused_before_anything_runs(tmp_path):
    """The side's python is checked by importing the executor, which refuses the release pip
    recorded; the side here is this venv's python with mxnet 1.3.1 first on its path."""
    side = tmp_path / "python-mxnet-1.3.1"
    side.write_text(f"#!/bin/sh\nPYTHONPATH={os.environ['OPBENCH_TOO_OLD_MXNET']}:$PYTHONPATH exec {sys.executable} \"$@\"\n")
    side.chmod(0o755)
    proc = opbench("ab", "--base-python", str(side), "--new-python", sys.executable, "--ops", "exp", *FAST,
                   "--output-dir", "ab", cwd=tmp_path)
    _one_line_error(proc, f"--base-python {side} cannot import what opbench needs (benchcore.errors.UsageError: "
                          "mxnet 1.3.1 is older than opbench supports (1.4.1 to 1.9.1)")
    assert not (tmp_path / "ab" / "base.json").exists()


def test_a_workers_second_import_takes_the_generated_operator_functions_from_the_store(tmp_path):
    """frameworks.mxnet_generated on this release: the second fresh worker compiles none of
    MXNet's generated operator functions and gets those of a plain import (code, handles by
    operator, docstrings, results)."""
    from tests.opbench import mxnet_import_probe

    assert releases.installed_version() == RELEASE
    plain, first, second = (mxnet_import_probe.run(how, tmp_path) for how in ("plain", "worker", "worker"))
    assert first["compiled"] > 1000 and second["compiled"] == 0
    assert first["digest"] == second["digest"] == plain["digest"]
    assert first["results"] == second["results"] == plain["results"]
