"""fastrnns' pytest-benchmark entry: every runner × {forward, backward}, group "fastrnns".

Run with `pytest benchmarks/rnnbench --benchmark-only` (any `--benchmark-*` option works);
it lives outside tests/ because at fastrnns' default sizes it takes minutes. The same runners,
contexts and Workloads as `rnnbench bench` are used; only the timing loop is
pytest-benchmark's, after `--rnnbench-warmup` untimed iterations. CUDA-only runners are
skipped, with a reason, on a machine without CUDA.
"""

from __future__ import annotations

import pytest

from benchcore.measure.case import CaseSpec
from rnnbench import cases, executor

SIZE_NAMES = tuple(cases.SIZE_DEFAULTS)


def _option(config, name, default=None):
    return config.getoption(name, default=default)


def _runner_names(config):
    chosen = _option(config, "--rnnbench-runners")
    if chosen:
        return list(chosen)
    from rnnbench.runners import RUNNERS

    return list(RUNNERS)


def pytest_generate_tests(metafunc):
    if "runner_name" in metafunc.fixturenames:
        metafunc.parametrize("runner_name", _runner_names(metafunc.config))


def _device(config) -> str:
    return _option(config, "--rnnbench-device") or cases.default_device()


def _spec(config, runner_name: str) -> CaseSpec:
    values = [int(v) for v in str(_option(config, "--rnnbench-sizes", "100,1,512,512,64")).split(",")]
    if len(values) != len(SIZE_NAMES):
        raise pytest.UsageError("--rnnbench-sizes needs five integers: seqLength,numLayers,inputSize,hiddenSize,miniBatch")
    sizes = dict(zip(SIZE_NAMES, values))
    return CaseSpec(cases.SUITE, runner_name, cases.case_params(
        sizes, _device(config), _option(config, "--fuser", "te"), _option(config, "--executor", "default"),
        _option(config, "--rnnbench-seed", 17), "pytest-benchmark"))


@pytest.fixture
def prepared(request, runner_name):
    """The runner's workload, inside its contexts for the whole test."""
    from benchcore.errors import SkipCase
    from rnnbench.runners import get_runner

    spec = _spec(request.config, runner_name)
    runner = get_runner(runner_name)
    if getattr(runner, "cuda_only", False) and not spec.params["device"].startswith("cuda"):
        pytest.skip(f"{runner_name} runs on CUDA only (device is {spec.params['device']})")
    try:
        with executor.prepared(spec) as prep:
            _warm_up(prep.workload, spec.params["device"], _option(request.config, "--rnnbench-warmup", 10))
            yield spec, prep
    except SkipCase as exc:
        pytest.skip(str(exc))


def _warm_up(workload, device: str, iterations: int) -> None:
    """Forward and backward iterations, untimed for the report, through rnnbench bench's loop.

    pytest-benchmark's own warmup is off by default and knows nothing of backward; without this
    the first rounds of a TorchScript runner (profiling runs, then optimisation: tens of ms
    where the steady state takes well under one) would land in its mean.
    """
    from benchcore.measure.runner import RunSettings, run_workload
    from benchcore.measure.timers import timer_for

    if iterations < 0:
        raise pytest.UsageError(f"--rnnbench-warmup must be >= 0, got {iterations}")
    if iterations:
        run_workload(workload, RunSettings(warmup=0, runs=iterations), timer_for(device, workload.sync))


def _rounds(config) -> int:
    return max(int(_option(config, "benchmark_min_rounds", 5) or 5), 1)


def _label(benchmark, spec, phase, config):
    benchmark.group = "fastrnns"
    benchmark.extra_info.update({"phase": phase, "unit_note": "pytest-benchmark reports seconds",
                                 "warmup_iterations": _option(config, "--rnnbench-warmup", 10),
                                 **{k: spec.params[k] for k in (*SIZE_NAMES, "device", "fuser", "executor", "seed")}})


def test_forward(benchmark, prepared, request):
    spec, prep = prepared
    workload = prep.workload
    _label(benchmark, spec, "forward", request.config)

    def forward():
        output = workload.forward()
        workload.sync()
        return output

    benchmark(forward)


def test_backward(benchmark, prepared, request):
    spec, prep = prepared
    workload = prep.workload
    if workload.backward is None:
        pytest.skip(f"{spec.name} has no backward")
    _label(benchmark, spec, "backward", request.config)

    ran = []

    def setup():
        # untimed: a fresh graph and grad_output for every round, gradients cleared
        if ran and workload.zero_grad:
            workload.zero_grad()
        output = workload.forward()
        prepared_input = workload.backward_setup(output) if workload.backward_setup else output
        workload.sync()  # the forward's queued kernels must not run inside the timed backward
        return (prepared_input,), {}

    def backward(prepared_input):
        workload.backward(prepared_input)
        workload.sync()
        ran.append(True)

    benchmark.pedantic(backward, setup=setup, rounds=_rounds(request.config), iterations=1, warmup_rounds=1)
