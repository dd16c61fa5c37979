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


def test_shared_slots_hold_two_to_the_17_elements_and_rules_without_count_shapes_keep_tiny_ones():
    counted, _ = cases.generate_cases(ops=["broadcast_add", "khatri_rao"], counted=True)
    tiny, _ = cases.generate_cases(ops=["khatri_rao"], tiny=True)
    assert {math.prod(s) for s in _shapes(counted, "broadcast_add")} == {2 ** 17}
    assert [s.params["inputs"] for s in counted if s.name == "khatri_rao"] == [s.params["inputs"] for s in tiny]
    assert rules.COUNT.pick("standard", "tiny") == "tiny" and rules.COUNT.pick("standard", "tiny", count=1) == 1


def test_the_engine_plans_its_sweep_at_the_count_shapes():
    def planned(engine):
        args = Namespace(ops=["broadcast_add"], category=None, exclude=None, dtype="float32", seed=41, tiny=False,
                         shard=None, ctx=None, device=None, size_target=None, manifest=None, int64_tensor=None,
                         engine=engine)
        return {s.params["profile"] for s in BACKEND.plan(args, BACKEND.check(args)).specs}

    assert planned("instructions") == {"count"} and planned("python") == {"standard"}
