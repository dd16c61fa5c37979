"""The instruction engine's shapes (opbench.backends.mxnet.rules.Profile "count"): the same cases as
opperf's, sized so an operator's own work dwarfs the call overhead's jitter (docs/INSTRUCTIONS.md)."""

import math
from argparse import Namespace
from collections import Counter

from opbench.backends.mxnet import BACKEND, cases, rules


def _shapes(specs, op):
    return [tuple(s.params["inputs"]["lhs"]["shape"]) for s in specs if s.params["op"] == op]


def test_the_count_profile_keeps_every_case_of_the_sweep():
    standard, _ = cases.generate_cases()
    counted, _ = cases.generate_cases(counted=True)
    assert Counter(s.name for s in standard) == Counter(s.name for s in counted)
    assert {s.params["profile"] for s in counted} == {"count"}
    assert len({s.key for s in standard} & {s.key for s in counted}) < len(counted) // 4


def _elements(value):
    if isinstance(value, dict) and "shape" in value:
        return math.prod(value["shape"])
    if isinstance(value, list):
        return sum(_elements(v) for v in value)
    return 0


def _inputs(specs, op, arg):
    return [s.params["inputs"][arg] for s in specs if s.params["op"] == op]


def test_shared_slots_hold_two_to_the_17_elements():
    counted, _ = cases.generate_cases(ops=["broadcast_add"], counted=True)
    assert {math.prod(s) for s in _shapes(counted, "broadcast_add")} == {2 ** 17}
    assert rules.COUNT.pick("standard", "tiny") == "tiny" and rules.COUNT.pick("standard", "tiny", count=1) == 1


def test_no_case_of_the_sweep_keeps_its_tiny_inputs_under_the_count_profile():
    counted, _ = cases.generate_cases(counted=True)
    tiny, _ = cases.generate_cases(tiny=True)
    by_op = lambda specs: {op: [s.params["inputs"] for s in specs if s.params["op"] == op]  # noqa: E731
                           for op in {s.params["op"] for s in specs}}
    counted_inputs, tiny_inputs = by_op(counted), by_op(tiny)
    kept = sorted(op for op, found in counted_inputs.items() if any(c == t for c, t in zip(found, tiny_inputs[op])))
    assert kept == []


def test_the_rules_that_fell_back_to_tiny_have_their_larger_count_shapes():
    ops = ["SequenceMask", "choose_element_0index", "stack", "concat", "RNN", "BatchNorm", "broadcast_axis",
           "broadcast_to", "broadcast_like", "Embedding", "one_hot", "squeeze", "transpose", "depth_to_space",
           "khatri_rao", "scatter_nd"]
    counted, _ = cases.generate_cases(ops=ops, counted=True)
    tiny, _ = cases.generate_cases(ops=ops, tiny=True)
    assert Counter(s.params["op"] for s in counted) == Counter(s.params["op"] for s in tiny)
    assert {tuple(d["shape"]) for d in _inputs(counted, "SequenceMask", "data")} == {(16, 128, 128), (128, 64, 32)}
    last, _ = cases.generate_cases(ops=["SequenceLast"], counted=True)
    assert min(d["shape"][1] * d["shape"][2] for d in _inputs(last, "SequenceLast", "data")) >= 2 ** 15
    # choose_element_0index's work is one pick per row: its count shapes have 2^15 rows or more
    assert min(d["shape"][0] for d in _inputs(counted, "choose_element_0index", "data")) >= 2 ** 15
    picked, _ = cases.generate_cases(ops=["pick"], counted=True)
    assert min(d["shape"][0] for d in _inputs(picked, "pick", "data")) >= 2 ** 15
    for op in ("stack", "concat"):
        assert min(map(_elements, _inputs(counted, op, "data"))) >= 2 ** 18
    assert min(_elements(d) for d in _inputs(counted, "RNN", "data")) >= 2 ** 14
    assert {s.params["inputs"]["state_size"] for s in counted if s.params["op"] == "RNN"} == {64}
    assert min(map(_elements, _inputs(counted, "BatchNorm", "data"))) >= 2 ** 14
    for s in (s for s in counted if s.params["op"] == "broadcast_axis"):
        assert _elements(s.params["inputs"]["data"]) * s.params["inputs"]["size"][0] == 2 ** 18
    for s in (s for s in counted if s.params["op"] == "broadcast_to"):
        assert math.prod(s.params["inputs"]["shape"]) == 2 ** 18
    assert min(map(_elements, _inputs(counted, "broadcast_like", "rhs"))) == 2 ** 18
    for s in (s for s in counted if s.params["op"] == "one_hot"):
        assert _elements(s.params["inputs"]["indices"]) * s.params["inputs"]["depth"] == 2 ** 19
    for op, arg in (("squeeze", "data"), ("transpose", "data"), ("depth_to_space", "data")):
        assert min(map(_elements, _inputs(counted, op, arg))) >= 2 ** 15
    assert min(map(_elements, _inputs(counted, "transpose", "data"))) >= 2 ** 18
    gather, _ = cases.generate_cases(ops=["gather_nd"], counted=True)
    assert {d["shape"][1] for d in _inputs(gather, "gather_nd", "indices")} == {2 ** 14}
    # the tiny profile is unchanged (the tests' sweeps rest on it)
    assert {tuple(d["shape"]) for d in _inputs(tiny, "SequenceMask", "data")} == {(4, 3, 2), (6, 2, 3)}


def test_the_engine_plans_its_sweep_at_the_count_shapes():
    def planned(engine):
        args = Namespace(ops=["broadcast_add"], category=None, exclude=None, dtype="float32", seed=41, tiny=False,
                         shard=None, ctx=None, device=None, size_target=None, manifest=None, int64_tensor=None,
                         engine=engine)
        return {s.params["profile"] for s in BACKEND.plan(args, BACKEND.check(args)).specs}

    assert planned("instructions") == {"count"} and planned("python") == {"standard"}
