"""Every covered operator really runs on the inputs its rule builds (tiny shapes, real MXNet).

Also checks what makes an input *valid* for the operator it feeds — the places where opperf
timed something other than what it reported: index arguments, domains, list arguments,
collapsed combinations, Dropout's probability.
"""

import fnmatch
import json
import math

import mxnet as mx
import numpy as np
import pytest

from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec
from opbench.backends.mxnet import arrays, cases, gradients, registry, rules

TINY_SPECS, TINY_SKIPPED = cases.generate_cases(tiny=True)
BY_OP = {}
for _spec in TINY_SPECS:
    BY_OP.setdefault(_spec.name, []).append(_spec)


#: tiny cases of operators with a nonzero gradient whose own gradient is zero: a softmax over
#: an axis of one element is constantly 1 (the legacy Softmax/SoftmaxOutput: p - onehot(label)
#: = 1 - 1). Checked both ways in _run_once, so the list cannot go stale.
ZERO_GRADIENT_CASES = {("Softmax", "(8,1)x(8,)"), ("SoftmaxActivation", "(8,1)"), ("SoftmaxOutput", "(8,1)x(8,)"),
                       ("softmax", "(8,1)"), ("softmin", "(8,1)")}


def _run_once(spec: CaseSpec):
    """Forward once; then, when the case plans a backward, forward under record + backward, which
    must write a gradient: attach_grad() makes zero buffers before backward runs, so "a gradient
    exists" proves nothing. A planned backward means the operator is not in ZERO_GRADIENT (its
    gradient is not identically zero), so from random head gradients (ones would make
    d(sum(softmax(x)))/dx = 0) some input gradient element must be nonzero, in every case but
    ZERO_GRADIENT_CASES."""
    m = arrays.materialize(spec)
    out = m.call()
    mx.nd.waitall()
    if spec.params["run_backward"]:
        assert m.grad_arrays, "backward planned but no input has a gradient"
        assert spec.name not in registry.ZERO_GRADIENT
        with mx.autograd.record():
            heads = gradients._ndarrays(m.call())
        mx.autograd.backward(heads, gradients._head_gradients(heads))
        mx.nd.waitall()
        written = any(np.any(g.grad.asnumpy() != 0) for g in m.grad_arrays)
        case = (spec.name, spec.params.get("variant"))
        assert written != (case in ZERO_GRADIENT_CASES), (
            f"{case}: backward left every input gradient zero" if not written else f"{case}: a gradient after all")
    return m, out


# ---------------------------------------------------------------- coverage


def test_coverage_beats_opperf_and_nothing_is_hidden():
    selected = set(registry.selected_names())
    covered = set(BY_OP)
    skipped = {op for op, _ in TINY_SKIPPED}
    assert len(covered & selected) >= 245  # opperf: 233
    assert covered | skipped == selected and not covered & skipped
    assert all(reason for _, reason in TINY_SKIPPED)


def test_standard_and_tiny_sets_have_the_same_structure():
    standard, skipped = cases.generate_cases()
    assert {s.name for s in standard} == set(BY_OP) and skipped == TINY_SKIPPED
    assert [(s.name, s.params["run_backward"]) for s in standard] == \
        [(s.name, s.params["run_backward"]) for s in TINY_SPECS]


@pytest.mark.parametrize("op", sorted(BY_OP))
def test_operator_runs_forward_and_backward(op):
    for spec in BY_OP[op]:
        _run_once(spec)


def test_backward_planned_for_every_differentiable_operator():
    """Backward runs for every differentiable operator (not only opperf's has_backward ones)
    unless its gradient is identically zero or it is on the forced-off list; a variant whose
    backward crashes MXNet says why."""
    variant_off = {}
    for op in BY_OP:
        for _label, inputs in rules.variants(op, rules.TINY) or []:
            if rules.NO_BACKWARD in inputs:
                variant_off[op] = variant_off.get(op, 0) + 1
    assert variant_off == {"LeakyReLU": 1, "SequenceLast": 2}  # rrelu; SequenceLast without lengths
    timed = set()
    for op, specs in BY_OP.items():
        info = registry.get(op)
        planned = [s.params["run_backward"] for s in specs]
        for spec in specs:
            if not spec.params["run_backward"]:
                assert spec.params.get("no_backward_reason"), op
        if info.runs_backward:
            assert planned.count(False) == variant_off.get(op, 0), op
            timed.add(op)
        else:
            assert not any(planned), op
            assert specs[0].params["no_backward_reason"] == info.no_backward_reason, op
    assert len(timed) == 171  # 214 differentiable minus 36 with a zero gradient and opperf's 7 forced off
    assert {"batch_dot", "split", "exp", "concat", "Softmax"} <= timed


# ---------------------------------------------------------------- validity of inputs


def _arrays(op, variant_index=0, standard=False):
    spec = (cases.generate_cases(ops=[op])[0] if standard else BY_OP[op])[variant_index]
    return spec, arrays.materialize(spec).arrays


def _assert_indices(values, low, high):
    values = values.asnumpy()
    assert np.array_equal(values, np.round(values)), "indices must be integers"
    assert values.min() >= low and values.max() < high


def test_every_index_tensor_is_in_its_declared_range():
    for spec in TINY_SPECS:
        built = None
        for arg, desc in spec.params["inputs"].items():
            if isinstance(desc, dict) and desc.get("init") == "indices":
                built = built or arrays.materialize(spec).arrays
                high = desc["high"]
                values = built[arg].asnumpy()
                if isinstance(high, list):
                    for row, bound in zip(values, high):
                        assert row.min() >= desc["low"] and row.max() < bound, spec.name
                else:
                    _assert_indices(built[arg], desc["low"], high)


@pytest.mark.parametrize("op,index_arg,data_arg,axis", [
    ("take", "indices", "a", 0),
    ("pick", "index", "data", -1),
    ("choose_element_0index", "index", "data", -1),
    ("fill_element_0index", "rhs", "lhs", -1),
    ("softmax_cross_entropy", "label", "data", -1),
    ("SoftmaxOutput", "label", "data", -1),
])
def test_indices_fit_the_indexed_axis(op, index_arg, data_arg, axis):
    for spec in cases.generate_cases(ops=[op])[0]:  # standard shapes
        built = arrays.materialize(spec).arrays
        _assert_indices(built[index_arg], 0, built[data_arg].shape[axis])


def test_index_arguments_of_structured_operators():
    spec, a = _arrays("one_hot", standard=True)
    _assert_indices(a["indices"], 0, spec.params["inputs"]["depth"])
    spec, a = _arrays("Embedding", standard=True)
    _assert_indices(a["data"], 0, spec.params["inputs"]["input_dim"])
    spec, a = _arrays("gather_nd")
    for row, bound in zip(a["indices"].asnumpy(), a["data"].shape):
        assert row.min() >= 0 and row.max() < bound
    spec, a = _arrays("ravel_multi_index")
    for row, bound in zip(a["data"].asnumpy(), spec.params["inputs"]["shape"]):
        assert row.min() >= 0 and row.max() < bound
    spec, a = _arrays("scatter_nd")
    positions = {tuple(c) for c in a["indices"].asnumpy().T.tolist()}
    assert len(positions) == a["indices"].shape[1], "scatter_nd positions must be unique"
    spec, a = _arrays("SequenceMask", variant_index=1)
    _assert_indices(a["sequence_length"], 1, a["data"].shape[0] + 1)
    spec, a = _arrays("ctc_loss")
    _assert_indices(a["label"], 1, a["data"].shape[2])  # 0 is the blank label
    spec, a = _arrays("ROIPooling")
    rois = a["rois"].asnumpy()
    n, _, h, w = a["data"].shape
    assert (rois[:, 0] >= 0).all() and (rois[:, 0] < n).all()
    assert (rois[:, 1] < rois[:, 3]).all() and (rois[:, 3] < w).all() and (rois[:, 4] < h).all()


@pytest.mark.parametrize("op,low,high", [
    ("log", 0, None), ("log10", 0, None), ("log2", 0, None), ("log1p", -1, None),
    ("sqrt", 0, None), ("rsqrt", 0, None), ("rcbrt", 0, None), ("reciprocal", 0, None),
    ("gamma", 0, None), ("gammaln", 0, None),
    ("arcsin", -1, 1), ("arccos", -1, 1), ("arctanh", -1, 1), ("erfinv", -1, 1),
    ("arccosh", 1, None),
])
def test_domain_restricted_inputs_are_in_the_domain(op, low, high):
    for spec in cases.generate_cases(ops=[op])[0]:  # standard shapes: a million values
        data = arrays.materialize(spec).arrays["data"].asnumpy()
        assert data.min() > low
        if high is not None:
            assert data.max() < high
        out = arrays.materialize(spec).call().asnumpy()
        assert np.isfinite(out).all()


def test_linalg_inputs_are_well_conditioned():
    _, a = _arrays("linalg_potrf", standard=True)
    np.linalg.cholesky(a["A"].asnumpy().astype("float64"))  # raises unless SPD
    _, a = _arrays("linalg_det", standard=True)
    det = mx.nd.linalg_det(a["A"]).asscalar()
    assert np.isfinite(det) and 0.01 < abs(det) < 100
    _, a = _arrays("linalg_inverse", standard=True)
    assert np.linalg.cond(a["A"].asnumpy().astype("float64")) < 100
    _, a = _arrays("linalg_potri", standard=True)
    factor = a["A"].asnumpy()
    assert np.allclose(factor, np.tril(factor)) and (np.diag(factor) >= 1).all()


#: outputs MXNet leaves unwritten by design: rrelu's mask is only filled in training mode, so
#: outside autograd it holds whatever memory it got (now and then NaN)
UNWRITTEN_OUTPUTS = {("LeakyReLU", "rrelu"): 1}


def test_no_input_value_is_nan_or_inf_after_running():
    bad = []
    for spec in TINY_SPECS:
        out = arrays.materialize(spec).call()
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        unwritten = UNWRITTEN_OUTPUTS.get((spec.name, spec.params["inputs"].get("act_type")))
        if unwritten is not None:
            outs.pop(unwritten)
        for o in outs:
            values = (o if o.stype == "default" else o.tostype("default")).asnumpy()
            if values.dtype.kind == "f" and not np.isfinite(values).all():
                bad.append((spec.name, spec.params["variant"]))
    assert not bad


def test_list_arguments_get_real_tensors_of_the_intended_shape():
    specs, _ = cases.generate_cases(ops=["add_n"])
    assert [s.params["inputs"]["args"][0]["shape"] for s in specs] == [[1024, 1024], [10000, 10], [10000, 1]]
    assert all(len(s.params["inputs"]["args"]) == 3 for s in specs)
    assert cases.describe_inputs(specs[0]) == {"args": "[(1024, 1024), (1024, 1024), (1024, 1024)]"}
    m = arrays.materialize(BY_OP["add_n"][0])
    assert [a.shape for a in m.args] == [tuple(d["shape"]) for d in BY_OP["add_n"][0].params["inputs"]["args"]]
    for op in ("khatri_rao", "concat", "stack", "multi_sgd_update", "amp_multicast", "ElementWiseSum"):
        for spec in cases.generate_cases(ops=[op])[0]:
            tensors = [v for v in spec.params["inputs"].values() if isinstance(v, list) and v and isinstance(v[0], dict)]
            assert tensors and all(math.prod(t["shape"]) >= 100 for t in tensors[0]), op


def test_every_combination_is_its_own_case():
    def variants(op):
        return [s.params["variant"] for s in cases.generate_cases(ops=[op])[0]]

    pooling = variants("Pooling")
    assert len(pooling) == len(set(pooling)) == 24
    assert "avg-global0-(32,3,256)" in pooling and "sum-global1-(32,3,64,64)" in pooling
    bn = cases.generate_cases(ops=["BatchNorm"])[0]
    assert len({tuple(s.params["inputs"]["data"]["shape"]) for s in bn}) == 3
    rnn = cases.generate_cases(ops=["RNN"])[0]
    assert sorted(s.params["inputs"]["mode"] for s in rnn) == ["gru", "lstm", "rnn_relu", "rnn_tanh"]
    conv = cases.generate_cases(ops=["Convolution"])[0]
    assert sorted(len(s.params["inputs"]["data"]["shape"]) for s in conv) == [3, 3, 4, 4]
    for op, specs in BY_OP.items():
        labels = [s.params["variant"] for s in specs]
        assert len(labels) == len(set(labels)), op
        assert len({s.key for s in specs}) == len(specs), op


def test_dropout_uses_a_real_probability():
    for spec in cases.generate_cases(ops=["Dropout"])[0]:
        assert spec.params["inputs"]["p"] == 0.5 and spec.params["inputs"]["mode"] == "always"
    m = arrays.materialize(BY_OP["Dropout"][0])
    zeros = (m.call().asnumpy() == 0).mean()
    assert 0.1 < zeros < 0.9


# ---------------------------------------------------------------- the spec and its options


def test_specs_are_json_and_deterministic():
    again, _ = cases.generate_cases(tiny=True)
    assert [s.key for s in again] == [s.key for s in TINY_SPECS]
    assert [s.name for s in TINY_SPECS] == sorted(s.name for s in TINY_SPECS)
    for spec in TINY_SPECS[:50]:
        assert CaseSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    spec = BY_OP["broadcast_add"][0]
    assert spec.suite == "opbench" and spec.params["seed"] == 41
    assert set(spec.params) >= {"op", "category", "inputs", "dtype", "ctx", "run_backward", "seed", "variant"}
    first = arrays.materialize(spec).arrays["lhs"].asnumpy()
    assert np.array_equal(first, arrays.materialize(spec).arrays["lhs"].asnumpy())
    other = cases.generate_cases(ops=["broadcast_add"], tiny=True, seed=7)[0][0]
    assert not np.array_equal(first, arrays.materialize(other).arrays["lhs"].asnumpy())


def test_cached_draws_equal_fresh_ones_and_no_case_sees_another_case_write(monkeypatch):
    """A worker's draw cache (arrays._DRAWN): a later case with the same seeded inputs takes the
    arrays drawn before (no draw), one that shares only its first input resumes the generator
    where that draw left it, and the values equal fresh draws either way; a case that writes
    its arrays in place leaves the cached ones untouched."""
    spec = BY_OP["broadcast_add"][0]
    rhs = dict(spec.params["inputs"]["rhs"], scale=2.0)
    other = CaseSpec(spec.suite, spec.name, {**spec.params, "inputs": {**spec.params["inputs"], "rhs": rhs}})

    def values(case):
        made = arrays.materialize(case)
        return [made.arrays["lhs"].asnumpy(), made.arrays["rhs"].asnumpy()]

    real_draw, drawn = arrays._np_array, []
    monkeypatch.setattr(arrays, "_np_array", lambda desc, rng: drawn.append(desc) or real_draw(desc, rng))
    monkeypatch.setattr(arrays, "_DRAWN", arrays._DrawCache(0))  # nothing kept: fresh draws
    fresh, fresh_other = values(spec), values(other)
    monkeypatch.setattr(arrays, "_DRAWN", arrays._DrawCache(arrays.DRAW_CACHE_BYTES))
    arrays.materialize(spec).arrays["lhs"][:] = 0  # an in-place write, as an optimizer update's
    del drawn[:]
    again_other = values(other)
    assert len(drawn) == 1  # only rhs, from where lhs's draw left the generator
    again = values(spec)
    assert len(drawn) == 1  # both inputs from the cache
    for got, want in zip(again + again_other, fresh + fresh_other):
        assert np.array_equal(got, want)
    assert not np.array_equal(fresh[1], fresh_other[1])


def test_large_draws_are_read_back_from_the_sweeps_shared_folder_by_a_fresh_worker(monkeypatch, tmp_path):
    """A draw of 1 MiB or more is left in the shared folder (SHARED_SCRATCH_ENV); a later
    worker with an empty draw cache reads it instead of drawing (here: drawing would fail), the
    values equal, and the generator resumes where the kept draw left it for the next input."""
    from benchcore.execute.worker import SHARED_SCRATCH_ENV

    big = {"dtype": "float32", "init": "normal", "shape": [512, 512]}  # 1 MiB of float32
    small = {"dtype": "float32", "init": "normal", "shape": [4, 4]}
    spec = CaseSpec("opbench", "broadcast_add", {"op": "broadcast_add", "seed": 3, "ctx": "cpu(0)",
                                                 "inputs": {"lhs": big, "rhs": small}})
    monkeypatch.setenv(SHARED_SCRATCH_ENV, str(tmp_path))
    monkeypatch.setattr(arrays, "_DRAWN", arrays._DrawCache(0))
    fresh = arrays.materialize(spec).arrays
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert len(kept) == 2 and kept[0].endswith(".json") and kept[1].endswith(".npy")  # the big one only

    real_draw = arrays._np_array

    def draw(desc, rng):
        assert desc["shape"] != big["shape"], "drew what the shared folder holds"
        return real_draw(desc, rng)

    monkeypatch.setattr(arrays, "_np_array", draw)
    monkeypatch.setattr(arrays, "_DRAWN", arrays._DrawCache(arrays.DRAW_CACHE_BYTES))  # a fresh worker's
    again = arrays.materialize(spec).arrays
    for name in ("lhs", "rhs"):
        assert np.array_equal(again[name].asnumpy(), fresh[name].asnumpy())
    again["lhs"][:] = 0  # an in-place write reaches neither the file nor the next case
    assert np.array_equal(arrays.materialize(spec).arrays["lhs"].asnumpy(), fresh["lhs"].asnumpy())


def test_the_draw_cache_keeps_small_draws_within_its_budget_and_a_large_one_empties_it():
    drawn = arrays._DrawCache(budget=3 * 400, largest=400)
    for index in range(4):  # 100 float32 values each: the oldest goes when the fourth comes
        drawn.put((index,), np.zeros(100, np.float32), {})
    assert list(drawn.entries) == [(1,), (2,), (3,)] and drawn.used == 1200
    assert not drawn.get((2,))[0].flags.writeable  # a case gets a copy, never this array
    drawn.put(("large",), np.zeros(101, np.float32), {})  # a heavy case: nothing rides on its peak
    assert not drawn.entries and drawn.used == 0


def test_int64_tensor_is_refused_without_int64_build():
    assert not mx.runtime.Features().is_enabled("INT64_TENSOR_SIZE")
    with pytest.raises(UsageError, match="INT64_TENSOR_SIZE"):
        cases.generate_cases(ops=["broadcast_add"], int64_tensor=True)


def test_large_tensor_rules_exist_and_exceed_int32():
    data = rules.variants("broadcast_add", rules.LARGE)
    assert any(math.prod(v["lhs"]["shape"]) >= 2 ** 32 for _, v in data)
    unchanged = set()
    for op in BY_OP:
        if rules.variants(op, rules.LARGE) == rules.variants(op, rules.STANDARD):
            unchanged.add(op)
    # Operators whose rule has no large-tensor shapes yet (linalg is not run with int64 at all).
    assert {op for op in unchanged if not op.startswith("linalg_")} == {
        "BatchNorm", "BilinearSampler", "CTCLoss", "Correlation", "GridGenerator", "RNN",
        "ROIPooling", "batch_dot", "col2im", "ctc_loss", "dot", "im2col", "khatri_rao",
        "random_pdf_dirichlet", "sample_multinomial"}


def test_glob_and_category_selection():
    specs, _ = cases.generate_cases(ops=["broadcast_*"], tiny=True)
    assert {s.name for s in specs} == set(fnmatch.filter(registry.selected_names(), "broadcast_*"))
    specs, _ = cases.generate_cases(categories=["linalg"], tiny=True)
    linalg = {n for n in BY_OP if n.startswith("linalg_") or n == "moments"}
    assert {s.name for s in specs} == linalg and len(linalg) == 17
    specs, _ = cases.generate_cases(ops=["log*"], categories=["unary"], tiny=True)
    assert {s.name for s in specs} == {"log", "log10", "log1p", "log2", "logical_not"}


def test_unknown_operator_is_a_usage_error_with_suggestions():
    with pytest.raises(UsageError, match=r"unknown operator 'broadcast_ad'.*broadcast_add"):
        cases.generate_cases(ops=["broadcast_ad"])
    with pytest.raises(UsageError, match="matches no"):
        cases.generate_cases(ops=["zz*"])
    with pytest.raises(UsageError, match="dtype"):
        cases.generate_cases(ops=["relu"], dtype="float33")
    with pytest.raises(UsageError, match="ctx"):
        cases.generate_cases(ops=["relu"], ctx="tpu(0)")
    with pytest.raises(UsageError, match="unknown category"):
        cases.generate_cases(categories=["nope"])


def test_internal_operators_are_accepted_when_named():
    specs, skipped = cases.generate_cases(ops=["_copyto", "_plus_scalar"], tiny=True)
    assert {s.name for s in specs} == {"_copyto", "_plus_scalar"} and not skipped
    for spec in specs:
        _run_once(spec)


def test_spec_from_inputs_shapes_scalars_and_given_arrays():
    spec = cases.spec_from_inputs("broadcast_add", {"lhs": (8, 8), "rhs": (8, 8)})
    assert cases.describe_inputs(spec) == {"lhs": "(8, 8)", "rhs": "(8, 8)"}
    assert spec.params["run_backward"] is True and spec.params["category"] == "binary_broadcast"
    _run_once(spec)
    assert cases.spec_from_inputs(mx.nd.add, {"lhs": (2, 2), "rhs": (2, 2)}).name == "broadcast_add"
    # a domain-restricted operator keeps its domain for user shapes
    log_spec = cases.spec_from_inputs("log", {"data": (16, 16)})
    assert arrays.materialize(log_spec).arrays["data"].asnumpy().min() > 0
    given = mx.nd.arange(6).reshape((2, 3))
    spec = cases.spec_from_inputs("sum", {"data": given, "axis": 1}, run_backward=False)
    assert spec.params["inputs"]["data"] == {"shape": [2, 3], "dtype": "float32", "init": "given", "given": "data"}
    out = arrays.materialize(spec, given={"data": given}).call()
    assert out.asnumpy().tolist() == [3.0, 12.0]
    with pytest.raises(UsageError, match="given"):
        arrays.materialize(spec)
    with pytest.raises(UsageError, match="no argument 'rsh'"):
        cases.spec_from_inputs("broadcast_add", {"lhs": (2, 2), "rsh": (2, 2)})
    internal = cases.spec_from_inputs(mx.nd._internal._copyto, {"data": (3, 3), "out": (3, 3)})
    assert internal.name == "_copyto"
    _run_once(internal)
