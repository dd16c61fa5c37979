"""Both engines on real operators at tiny sizes, through the worker-side executor."""

import mxnet  # noqa: F401  (plainly: a broken MXNet fails these tests instead of skipping them)
import pytest

from benchcore.measure.measurement import Measurement
from opbench.backends.mxnet.cases import spec_from_inputs
from opbench.backends.mxnet.executor import execute

OPTIONS = {"settings": {"warmup": 1, "runs": 4}}


def _run(spec, engine):
    return execute(spec, {**OPTIONS, "profiler": engine})


@pytest.mark.parametrize("engine", ["native", "python"])
def test_broadcast_add_forward_and_backward(engine):
    spec = spec_from_inputs("broadcast_add", {"lhs": (32, 16), "rhs": (32, 1)}, run_backward=True)
    m = _run(spec, engine)
    forward, backward = Measurement.from_dict(m["forward"]), Measurement.from_dict(m["backward"])
    assert forward.n == 4 and backward.n == 4
    assert m["timed_total_ms"] >= sum(forward.samples_ms) + sum(backward.samples_ms)
    # the warmup counts whether it ran before the profiler (native) or in the runner (python);
    # the calls the runner turned into warmup are not among the profiler's per-call times
    (steady,) = m["steady"]
    assert steady["warmup_calls"] == 1 + steady["extra_warmup"]
    if engine == "native":
        assert len(m["profiler"]["forward"]["per_call_ms"]) == len(m["profiler"]["backward"]["per_call_ms"]) == 4
    assert m["inputs"] == {"lhs": "(32, 16)", "rhs": "(32, 1)"}
    assert m["input_bytes"] == (32 * 16 + 32) * 4
    # the worker's memory around the case: inherited, highest while it ran, left behind
    assert m["rss_before_bytes"] > 0 and m["rss_after_bytes"] > 0
    # the peak mark is reset to the resident memory at the case's start and read after its timed
    # runs; the untimed audit that follows may leave more behind than that (its copies stay in
    # the allocator's arenas), so rss_after is no bound for it
    assert m["rss_peak_bytes"] is None or m["rss_peak_bytes"] >= m["rss_before_bytes"]
    for key in m["opperf_keys"]:
        assert key in m
    if engine == "native":
        assert m["avg_time_forward_broadcast_add"] > 0
        assert m["avg_time_backward_broadcast_add"] > 0
        assert m["profiler"]["forward"]["source"] == "entry broadcast_add"
        assert "_backward_broadcast_add" in m["profiler"]["backward"]["entries"]
        # outputs and head gradients, in bytes (at least one 32x16 float32 output)
        assert m["max_storage_mem_alloc_cpu/0"] >= 32 * 16 * 4
        assert m["missing"] == {}
    else:
        assert m["p50_time_broadcast_add"] <= m["p99_time_broadcast_add"]
        assert m["avg_time_broadcast_add"] > 0
        assert m["profiler"] is None and "no memory" in m["missing"]["profiler"]  # null, and why


def test_aliased_forward_names_are_found():
    """Backward runs by default for both, although opperf's has_backward is false for split
    (its backward is registered as _backward_SliceChannel)."""
    for op, inputs, recorded in (("cast", {"data": (16, 16), "dtype": "float16"}, "Cast"),
                                 ("split", {"data": (16, 16), "num_outputs": 2}, "SliceChannel")):
        spec = spec_from_inputs(op, inputs, run_backward=True)
        assert spec.params["run_backward"] is True
        m = _run(spec, "native")
        assert m["profiler"]["forward"]["source"] == f"entry {recorded}"
        assert m[f"avg_time_forward_{op}"] is not None and m[f"avg_time_backward_{op}"] is not None


def test_batch_dot_backward_is_backward():
    """batch_dot registers no _backward_batch_dot; its gradient runs batch_dot twice."""
    spec = spec_from_inputs("batch_dot", {"lhs": (2, 8, 8), "rhs": (2, 8, 8)}, run_backward=True)
    assert spec.params["run_backward"] is True  # planned by default: batch_dot is differentiable
    m = _run(spec, "native")
    assert m["profiler"]["forward"]["entries"]["batch_dot"]["count"] == 4
    assert m["profiler"]["backward"]["entries"]["batch_dot"]["count"] == 8
    assert m["avg_time_backward_batch_dot"] > 0


def test_missing_backward_is_null_with_reason():
    spec = spec_from_inputs("broadcast_add", {"lhs": (8, 8), "rhs": (8, 8)}, run_backward=False)
    m = _run(spec, "native")
    assert m["avg_time_backward_broadcast_add"] is None
    assert m["missing"]["avg_time_backward_broadcast_add"]
    assert m["backward"] is None


def test_memory_is_per_case():
    """A big case first must not inflate a small case's peak (opperf's pool counter did)."""
    big = spec_from_inputs("broadcast_add", {"lhs": (512, 512), "rhs": (512, 512)}, run_backward=True)
    small = spec_from_inputs("broadcast_mul", {"lhs": (4, 4), "rhs": (4, 4)}, run_backward=False)
    first = _run(big, "native")["max_storage_mem_alloc_cpu/0"]
    second = _run(small, "native")["max_storage_mem_alloc_cpu/0"]
    assert first >= 512 * 512 * 4
    assert second < 4096  # a few 4x4 float32 outputs, not the big case's megabytes


_HISTORY = """
import json
from opbench.backends.mxnet.cases import spec_from_inputs
from opbench.backends.mxnet.executor import execute
options = {"settings": {"warmup": 1, "runs": 3}, "profiler": "native"}
small = spec_from_inputs("sort", {"data": (512, 512), "axis": -1}, run_backward=True)
big = spec_from_inputs("sort", {"data": (1024, 1024), "axis": -1}, run_backward=True)
metrics = [execute(spec, options) for spec in (small, big, small)]
print(json.dumps([[m["max_storage_mem_alloc_cpu/0"], m["profiler"]["cpu_temp_copies"]] for m in metrics]))
"""


def test_peak_does_not_depend_on_what_the_worker_ran_before():
    """A worker's first case must not read higher than the same case later: sort's temporary
    workspace, once grown by a bigger case, is reused (with MXNet's default 4 temp-space copies
    the small case read 6.3 MB first and 2.1 MB after the big one). Fresh process, as a worker."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    env.pop("MXNET_CPU_TEMP_COPY", None)
    proc = subprocess.run([sys.executable, "-c", _HISTORY], capture_output=True, text=True, timeout=120,
                          cwd=root, env=env)
    assert proc.returncode == 0, proc.stderr
    (first, copies), (big, _), (again, _) = json.loads(proc.stdout.strip().splitlines()[-1])
    assert copies == 1
    assert first == again >= 512 * 512 * 4  # at least the sorted output
    assert big >= 1024 * 1024 * 4
