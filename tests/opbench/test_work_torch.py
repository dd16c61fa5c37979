"""opbench.backends.torch.work: a torch case's FLOPs equal torch.utils.flop_counter on the same
real call (manifest entries and direct calls, forward and backward), its bytes are its real
tensors', and the MXNet formula and its PyTorch equivalent's agree on every crossframe pair."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from opbench.backends.mxnet import work as mxnet_work
from opbench.backends.mxnet.cases import generate_cases
from opbench.backends.torch import case_spec, work
from opbench.backends.torch.callables import callable_for, resolve
from opbench.backends.torch.manifest import build
from opbench.backends.torch.sample import Decoder, Scale, describe_sample, tensors_in
from opbench.crossframe import _torch_spec
from opbench.equivalents import PAIRS

#: matrix products and convolutions (FlopCounterMode's formulas), a softmax, an add, a sort and a
#: value-dependent output shape (nonzero: no meta answer, run for real)
#: a small size target: the cases are small, the counts exact all the same
TARGET = 4096
SLICE = [("mm", ""), ("addmm", ""), ("baddbmm", ""), ("nn.functional.linear", ""), ("nn.functional.conv2d", ""),
         ("nn.functional.conv_transpose1d", ""), ("softmax", ""), ("add", ""), ("sort", ""), ("nonzero", ""),
         ("nn.functional.max_unpool2d", "")]


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    return build(tmp_path_factory.mktemp("manifest") / "m.json", "float32", "cpu", TARGET, 0, only=[list(k) for k in SLICE])


def counted(fn) -> int:
    with FlopCounterMode(display=False) as mode:
        fn()
    return mode.get_total_flops()


def real_counts(fn, entry, data, backward: bool):
    """FlopCounterMode's forward and backward counts of the call on its real inputs; the real outputs."""
    first, args, kwargs = Decoder(data, Scale(**entry["scale"]), "cpu", 0, grad=backward).sample(entry["tree"])
    forward = counted(lambda: fn(first, *args, **kwargs))
    result = fn(first, *args, **kwargs)
    heads = [t for t in tensors_in(result) if t.requires_grad]
    back = counted(lambda: torch.autograd.backward(heads, [torch.ones_like(t) for t in heads])) if heads else None
    return forward, back, tensors_in([first, args, kwargs]), tensors_in(result)


def nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def test_manifest_cases_equal_flop_counter_and_their_real_tensors(manifest):
    options = {"manifest": str(manifest.path), "manifest_sha256": manifest.sha256}
    for (name, variant), entry in manifest.entries.items():
        spec = case_spec(entry, manifest.digests[(name, variant)], "float32", "cpu", 0)
        phases = work.work(spec, options)
        fn = callable_for(entry["call"], name, variant)
        forward, backward, inputs, outputs = real_counts(fn, entry, manifest.data, bool(entry["backward"]))
        assert phases["forward"].bytes == nbytes(inputs) + nbytes(outputs), name
        if forward:  # FlopCounterMode has a formula: ours is the same, both phases
            assert phases["forward"].flops == forward, name
            # FlopCounterMode counts a grouped convolution's weight gradient `groups` times
            # (tests/benchcore/test_work.py); ours once
            extra = (entry["tree"]["kwargs"].get("groups", 1) - 1) * forward if "conv" in name else 0
            assert phases["backward"].flops + extra == backward, name
        assert phases["forward"].flops is not None or phases["forward"].reason, name
        assert all(p.flops is None or type(p.flops) is int for p in phases.values()), name
    assert {n for n, _ in manifest.entries} >= {"mm", "nn.functional.conv2d", "nonzero", "nn.functional.max_unpool2d"}


def test_unpooling_is_data_movement_not_a_pooling_of_its_indices(manifest):
    """max_unpool is in the pooling category, but its second argument is the indices tensor, not
    a kernel size: read as one, the window was a tensor and the FLOPs too (the default torch
    sweep's report ended in a traceback there)."""
    options = {"manifest": str(manifest.path), "manifest_sha256": manifest.sha256}
    [(key, entry)] = [(k, e) for k, e in manifest.entries.items() if k[0] == "nn.functional.max_unpool2d"]
    phases = work.work(case_spec(entry, manifest.digests[key], "float32", "cpu", 0), options)
    assert phases["forward"].flops is None and "data movement" in phases["forward"].reason
    assert phases["forward"].bytes > 0


def test_a_family_that_reads_a_tensor_as_a_size_gives_no_flops_with_the_reason(monkeypatch):
    from benchcore.measure import work as W

    monkeypatch.setitem(work.FAMILIES, "mm", lambda call: W.Flops(call.first.sum() * 0 + 1))
    entry, fn = direct("mm", (3, 4), (4, 5))
    phases = work.work_of(entry, {}, fn, "mm", "blas", False)
    assert phases["forward"].flops is None and "its family's reading gave a Tensor" in phases["forward"].reason


def direct(path, *tensors, category=None, dtype="float32", **kwargs):
    """An entry of a direct call on fresh tensors of these shapes (the format crossframe carries)."""
    node = [{"tensor": {"shape": list(shape), "dtype": dtype, "init": "normal"}} for shape in tensors]
    tree = {"input": node[0], "args": node[1:], "kwargs": kwargs}
    return {"tree": tree, "scale": {"k": 1, "ints": False}}, resolve(path)


@pytest.mark.parametrize("path,shapes,kwargs", [
    ("matmul", [(4, 3, 5), (5, 2)], {}), ("bmm", [(2, 3, 4), (2, 4, 5)], {}),
    ("nn.functional.conv1d", [(2, 3, 9), (4, 3, 3)], {"stride": 2}),
    ("nn.functional.conv3d", [(1, 2, 5, 5, 5), (3, 2, 2, 2, 2)], {}),
    ("nn.functional.conv_transpose2d", [(2, 4, 5, 6), (4, 3, 3, 3)], {"stride": 2}),
])
def test_direct_calls_equal_flop_counter(path, shapes, kwargs):
    entry, fn = direct(path, *shapes, **kwargs)
    phases = work.work_of(entry, {}, fn, path, None, True)
    forward, backward, _, _ = real_counts(fn, entry, {}, True)
    assert (phases["forward"].flops, phases["backward"].flops) == (forward, backward) and forward > 0


def test_a_call_that_fails_leaves_nulls_with_the_reason():
    entry, fn = direct("mm", (3, 4), (5, 6))
    phases = work.work_of(entry, {}, fn, "mm", "blas", False)
    assert list(phases) == ["forward"] and phases["forward"].bytes is None and phases["forward"].flops is None
    assert phases["forward"].reason.startswith("outputs unknown: the call failed (RuntimeError: ")


def test_mxnet_and_torch_formulas_agree_on_every_crossframe_pair():
    """Forward FLOPs of every tiny MXNet case with an equal torch call: the same number on both
    sides, or no formula on both; the matrix families' backward too."""
    compared = 0
    for pair in PAIRS:
        for spec in generate_cases(ops=[pair.mxnet], tiny=True)[0]:
            converted = pair.convert(spec.params["inputs"])
            if converted is None:
                continue
            path, tree = converted
            theirs = work.work(_torch_spec(spec, path, tree, describe_sample(tree, Scale(1))), {})
            ours = mxnet_work.work(spec)
            label = f"{pair.mxnet} {spec.params['variant']} / {path}"
            assert ours["forward"].flops == theirs["forward"].flops, (label, ours, theirs)
            if pair.mxnet in ("dot", "batch_dot", "linalg_gemm2", "Convolution", "RNN") and "backward" in ours:
                assert ours["backward"].flops == theirs["backward"].flops, label
            compared += ours["forward"].flops is not None
    assert compared >= 40


def test_contractions_that_torch_lowers_to_products_equal_flop_counter():
    """einsum and tensordot reach FlopCounterMode as bmm/mm calls: ours counts them from the call."""
    def tensor(*shape):
        return {"tensor": {"shape": list(shape), "dtype": "float32", "init": "normal"}}

    def einsum(tensors, equation):  # the manifest's form of the call: the operands first
        return torch.einsum(equation, *tensors)

    cases = [("einsum", einsum, {"input": [tensor(2, 3, 4), tensor(4, 5)], "args": ["aij,jk->aik"], "kwargs": {}}),
             ("tensordot", resolve("tensordot"), {"input": tensor(3, 4, 5), "args": [tensor(4, 5, 6)],
                                                  "kwargs": {"dims": 2}})]
    for path, fn, tree in cases:
        entry = {"tree": tree, "scale": {"k": 1, "ints": False}}
        phases = work.work_of(entry, {}, fn, path, "blas", True)
        forward, backward, _, _ = real_counts(fn, entry, {}, True)
        assert (phases["forward"].flops, phases["backward"].flops) == (forward, backward) and forward > 0, path


def phases_of(path, *shapes, category, **kwargs):
    entry, fn = direct(path, *shapes, **kwargs)
    found = work.work_of(entry, {}, fn, path, category, True)
    return found["forward"].bytes, found["backward"].bytes


def test_a_view_moves_nothing_and_a_copy_of_a_slice_reads_only_the_slice():
    """Bytes are a lower bound: counting a view's input and output whole put the default torch
    sweep's reshapes and transposes at 300-5000% of the bandwidth roof."""
    assert phases_of("t", (64, 32), category="shape") == (0, 0)  # a view, and its gradient a view of the head
    # returns its input itself, so the head reaches it untouched (atleast_1d's backward timed 1800 GB/s)
    assert phases_of("positive", (64, 32), category="unary_ufunc") == (0, 0)
    # an add's gradients are the head itself, twice: each leaf gets a copy (timed at 35 GB/s, not free)
    assert phases_of("add", (64, 32), (64, 32), category="binary_ufunc")[1] == 3 * 64 * 32 * 4
    # 8 rows of 64 copied: those read and written; the backward reads them of the head and writes the whole gradient
    assert phases_of("narrow_copy", (64, 32), category="shape", dim=0, start=0, length=8) == (2 * 8 * 32 * 4,
                                                                                              8 * 32 * 4 + 64 * 32 * 4)


def test_a_zero_derivative_writes_zeros_and_a_trace_reads_its_diagonal():
    assert phases_of("sign", (64, 32), category="unary_ufunc")[1] == 64 * 32 * 4
    assert phases_of("trace", (64, 32), category="linalg")[0] == 32 * 4 + 4
    assert phases_of("exp", (64, 32), category="unary_ufunc") == (2 * 64 * 32 * 4, 3 * 64 * 32 * 4)


def test_a_call_that_returns_its_input_computes_nothing():
    entry, fn = direct("positive", (64, 32))
    found = work.work_of(entry, {}, fn, "positive", "unary_ufunc", True)
    # a pointwise family's call that computed nothing: 0 FLOPs, 0 bytes, and why
    assert found["forward"].flops == found["backward"].flops == 0 and found["forward"].reason == work.VIEW
    assert found["backward"].reason == work.HEAD_VIEWS
    entry, fn = direct("t", (64, 32))  # a view of the shape family: no FLOP formula, as data movement
    assert work.work_of(entry, {}, fn, "t", "shape", True)["forward"].flops is None
    entry, fn = direct("sign", (64, 32))
    assert work.work_of(entry, {}, fn, "sign", "unary_ufunc", True)["backward"].flops == 0


def test_an_efficient_zero_tensor_gradient_is_written_nothing():
    """sgn's gradient of a real input is a ZeroTensor with no data: its timed backward wrote
    "4 MB" at 262 GB/s, above every roof, while those bytes were counted as written."""
    assert phases_of("sgn", (64, 32), category="unary_ufunc")[1] == 0
    entry, fn = direct("sgn", (64, 32))
    backward = work.work_of(entry, {}, fn, "sgn", "unary_ufunc", True)["backward"]
    assert backward.flops == 0 and backward.reason == work.ZERO_TENSORS
    entry, fn = direct("sgn", (64, 32), dtype="complex64")  # a complex input's gradient is computed
    assert work.work_of(entry, {}, fn, "sgn", "unary_ufunc", True)["backward"].bytes == 3 * 64 * 32 * 8


def test_a_sparse_output_is_written_data_not_a_view():
    import torch

    dense = torch.zeros(4, 4)
    sparse = dense.to_sparse()
    assert work.unaliased([sparse, dense.t()], [dense]) == [sparse]
