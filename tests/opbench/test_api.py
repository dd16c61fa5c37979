"""opperf's Python API names and shapes, on the real MXNet, at tiny sizes."""

import mxnet as mx
import pytest

from benchcore.errors import UsageError
from opbench.backends.mxnet import device
from opbench.backends.mxnet import opperf_api as api

FAST = {"warmup": 1, "runs": 3}


def test_run_performance_test_add_native():
    result = api.run_performance_test(mx.nd.add, inputs=[{"lhs": (16, 16), "rhs": (16, 16)}], **FAST)
    assert list(result[0]) == ["add"]
    (entry,) = result[0]["add"]
    assert entry["inputs"] == {"lhs": "(16, 16)", "rhs": "(16, 16)"}
    assert entry["avg_time_forward_add"] > 0
    assert entry["avg_time_backward_add"] > 0
    assert entry["max_storage_mem_alloc_cpu/0"] >= 16 * 16 * 4


def test_run_performance_test_list_shares_inputs_python_engine():
    inputs = [{"lhs": (8, 8), "rhs": (8, 8)}, {"lhs": (4, 1), "rhs": (4, 1)}]
    result = api.run_performance_test(["broadcast_add", mx.nd.broadcast_mul], inputs, profiler="python", **FAST)
    assert [list(r) for r in result] == [["broadcast_add"], ["broadcast_mul"]]
    for item, op in zip(result, ("broadcast_add", "broadcast_mul")):
        entries = item[op]
        assert len(entries) == 2  # one entry per input combination, never merged
        for entry in entries:
            assert set(entry) == {"inputs", f"avg_time_{op}", f"p50_time_{op}", f"p90_time_{op}", f"p99_time_{op}"}


def test_a_null_entry_value_carries_its_reason():
    (item,) = api.run_performance_test(mx.nd.add, inputs=[{"lhs": (4, 4), "rhs": (4, 4)}], run_backward=False, **FAST)
    (entry,) = item["add"]
    assert entry["avg_time_backward_add"] is None
    assert list(entry["missing"]) == ["avg_time_backward_add"] and entry["missing"]["avg_time_backward_add"]
    (item,) = api.run_performance_test("argmax_channel", inputs=[{"data": (4, 4)}], **FAST)
    (entry,) = item["argmax_channel"]
    assert entry["avg_time_backward_argmax_channel"] is None
    assert "differentiable" in entry["missing"]["avg_time_backward_argmax_channel"]


def test_internal_operator_without_code_edits():
    result = api.run_performance_test(mx.nd._internal._copyto, inputs=[{"data": (8, 8), "out": (8, 8)}],
                                      run_backward=False, **FAST)
    (entry,) = result[0]["_copyto"]
    assert entry["avg_time_forward__copyto"] > 0  # recorded by the profiler as CopyCPU2CPU


def test_run_benchmark_operator_returns_nd_np_npx():
    out = api.run_benchmark_operator("broadcast_add", size=(8, 8), printer=None, **FAST)
    assert out["nd"]["function"] == "mx.nd.broadcast_add"
    assert out["np"]["function"] == "mx.np.add"
    assert out["np"]["result"][0]["inputs"] == {"x1": [8, 8], "x2": [8, 8]}  # lhs/rhs → x1/x2
    assert out["npx"]["function"] is None and out["npx"]["reason"]

    lines = []
    gammas = {k: (8,) for k in ("gamma", "beta", "moving_mean", "moving_var")}
    out = api.run_benchmark_operator("BatchNorm", size=(4, 8), additional_inputs=gammas, printer=lines.append, **FAST)
    assert out["npx"]["function"] == "mx.npx.batch_norm"
    assert out["npx"]["result"][0]["avg_time_forward_batch_norm"] > 0
    assert out["nd"]["result"][0]["avg_time_forward_BatchNorm"] > 0
    assert len(lines) == 3  # one printed line per module, as opperf printed


def test_category_runner_tiny():
    assert "run_rounding_benchmarks" in api.CATEGORY_RUNNERS
    assert api.run_mx_binary_broadcast_operators_benchmarks is api.run_binary_broadcast_benchmarks
    result = api.run_rounding_benchmarks(warmup=1, runs=2, tiny=True)
    assert list(result) == sorted(result)
    assert {"ceil", "floor", "round", "trunc"} <= set(result)
    assert all("avg_time_forward_" + op in entries[0] for op, entries in result.items())


def test_operators_with_no_benchmark_and_bad_input():
    missing = api.get_operators_with_no_benchmark([{"abs": []}, "broadcast_add"])
    assert "abs" not in missing and "broadcast_add" not in missing and "Convolution" in missing
    with pytest.raises(UsageError):
        api.run_performance_test("broadcast_add", [{"lhs": (2, 2), "rhs": (2, 2)}], profiler="bogus")
    with pytest.raises(UsageError):
        api.run_performance_test("broadcast_add", [{"lhs": (2, 2), "rhs": (2, 2)}], ctx="tpu")
    with pytest.raises(UsageError):
        device.int64_tensor_flag("ON")  # case-insensitive on, refused on this MXNet


def test_api_signatures_show_the_cpu_default_opperf_documents():
    import inspect

    for fn in (api.run_performance_test, api.run_all_mxnet_operator_benchmarks,
               api.run_mx_unary_operators_benchmarks, api.run_benchmark_operator):
        assert inspect.signature(fn).parameters["ctx"].default == "cpu", fn.__name__


@pytest.mark.parametrize("name,size,additional,nd_inputs", [
    ("softmax", (16, 16), None, {"data": [16, 16]}),  # `length` only with use_length=True
    ("LeakyReLU", (4, 6), None, {"data": [4, 6]}),  # `gamma` only for act_type="prelu"
    ("LeakyReLU", (4, 6), {"act_type": "prelu", "gamma": (6,)}, {"data": [4, 6], "gamma": [6]}),
    ("SequenceMask", (4, 3, 2), None, {"data": [4, 3, 2]}),  # `sequence_length` likewise
    ("FullyConnected", (4, 8), {"weight": (5, 8), "num_hidden": 5, "no_bias": True},
     {"data": [4, 8], "weight": [5, 8]}),  # no bias input under no_bias=True
    ("FullyConnected", (4, 8), {"weight": (5, 8), "bias": (5,), "num_hidden": 5},
     {"data": [4, 8], "weight": [5, 8], "bias": [5]}),
])
def test_run_benchmark_operator_sizes_only_the_inputs_the_operator_expects(name, size, additional, nd_inputs):
    out = api.run_benchmark_operator(name, size=size, additional_inputs=additional, printer=None, **FAST)
    (entry,) = out["nd"]["result"]
    assert {k: v for k, v in entry["inputs"].items() if isinstance(v, list)} == nd_inputs
    assert entry[f"avg_time_forward_{name}"] > 0
    assert "result" in out["npx"], out["npx"]


def test_run_benchmark_operator_names_a_missing_parameter():
    with pytest.raises(UsageError, match=r"^FullyConnected: Required parameter num_hidden .*additional_inputs$"):
        api.run_benchmark_operator("FullyConnected", size=(4, 8), printer=None, **FAST)
