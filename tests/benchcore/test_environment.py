import json
import os
import subprocess
import sys
from pathlib import Path

import mxnet
import numpy
import torch

from benchcore.execute import environment

ROOT = Path(__file__).resolve().parents[2]
BOTH = ("frameworks.mxnet:collect", "frameworks.torch:collect")


def test_metadata_names_the_real_versions_and_machine():
    env = environment.collect("opbench", argv=["opbench", "--ctx", "cpu"], collectors=BOTH)
    assert env["suite"] == "opbench"
    assert env["command_line"] == ["opbench", "--ctx", "cpu"]
    assert env["numpy"] == numpy.__version__
    assert env["mxnet"]["version"] == mxnet.__version__
    assert "MKLDNN" in env["mxnet"]["features"] or env["mxnet"]["features"]
    assert env["torch"]["version"] == torch.__version__
    assert env["torch"]["threads"] == torch.get_num_threads()
    assert set(env["threads_env"]) == {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                       "MXNET_CPU_WORKER_NTHREADS", "MXNET_ENGINE_TYPE"}  # MXNet's joined to the core's
    assert env["cpu_count"] == os.cpu_count()
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    assert env["git_commit"] is None or len(env["git_commit"].split("-")[0]) == 40
    assert env["started_at"].endswith("+00:00")
    json.dumps(env)  # serializable as is


def test_tf32_settings_are_recorded_and_ambiguity_is_none_not_a_crash():
    switches = (torch.backends.cuda.matmul, torch.backends.cudnn.rnn)
    before = [switch.fp32_precision for switch in switches]
    env = environment.collect("rnnbench", collectors=("frameworks.torch:collect",))["torch"]
    assert env["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    assert env["cudnn_allow_tf32"] is torch.backends.cudnn.allow_tf32
    assert env["fp32_precision"]["cudnn_rnn"] == torch.backends.cudnn.rnn.fp32_precision
    try:
        for switch in switches:  # the newer per-operator API: torch then refuses legacy reads
            switch.fp32_precision = "ieee"
        env = environment.collect("rnnbench", collectors=("frameworks.torch:collect",))["torch"]
        assert env["cudnn_allow_tf32"] is None  # cuDNN conv and rnn now differ: no single legacy answer
        assert env["fp32_precision"]["matmul"] == env["fp32_precision"]["cudnn_rnn"] == "ieee"
    finally:
        for switch, value in zip(switches, before):
            switch.fp32_precision = value


def test_frameworks_are_only_imported_when_a_suite_names_their_collector():
    env = environment.collect("x")
    assert "mxnet" not in env and "torch" not in env


def test_threads_option_reaches_the_environment_before_frameworks_import():
    code = (
        "from benchcore.cli.options import apply_threads; apply_threads(1);"
        "import torch, json; from benchcore.execute import environment;"
        "print(json.dumps(environment.collect('x', collectors=('frameworks.torch:collect',))))"
    )
    clean = {k: v for k, v in os.environ.items() if k not in environment.THREAD_VARIABLES}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True, check=True)
    env = json.loads(out.stdout)
    assert env["threads_env"]["OMP_NUM_THREADS"] == "1"
    assert env["torch"]["threads"] == 1


def test_report_records_start_before_and_finish_after_the_run(tmp_path):
    from rnnbench.cli import main

    out = tmp_path / "r.json"
    code = main(["bench", "--group", "rnns", "--rnns", "cudnn", "--seqLength", "3", "--inputSize", "4", "--hiddenSize", "4",
                 "--miniBatch", "2", "--nloops", "2", "--warmup", "0", "--device", "cpu", "--no-isolation",
                 "--seed", "5", "--output-file", str(out)])
    assert code == 0
    env = json.loads(out.read_text())["environment"]
    assert env["started_at"] <= env["finished_at"]
    assert env["seed"] == 5 and env["timer"] == "perf_counter"
    assert env["command_line"][:2] == ["rnnbench", "bench"]


def test_a_machine_whose_speed_swings_is_warned_about_with_what_to_do():
    from benchcore.execute.system import SystemState, measure_speed

    speed = measure_speed(seconds=0.3, window_s=0.05)
    assert speed["windows"] >= 3 and speed["compute_swing"] >= 0 and speed["memory_swing"] >= 0
    calm = SystemState(threads_env={"OMP_NUM_THREADS": "1"}, usable_cores=2,
                       speed=dict(speed, compute_swing=0.01, memory_swing=0.02))
    assert not [a for a in calm.advice() if a.check == "speed swings"]
    shaky = SystemState(threads_env={"OMP_NUM_THREADS": "1"}, usable_cores=2,
                        speed=dict(speed, compute_swing=0.01, memory_swing=0.2))
    [advice] = [a for a in shaky.advice() if a.check == "speed swings"]
    assert "20% (memory)" in advice.found and "`ab`" in advice.fix
    assert shaky.to_dict()["speed"]["memory_swing"] == 0.2
