"""broadcast_* operators are also measured broadcasting (equal shapes run the element-wise kernel)."""

import mxnet  # noqa: F401  (plainly: a broken MXNet fails these tests instead of skipping them)

from opbench.backends.mxnet import cases


def test_every_broadcast_operator_has_a_row_and_a_column_broadcast():
    specs, _ = cases.generate_cases(categories=["binary_broadcast"])
    pairs = {}
    for spec in specs:
        inputs = spec.params["inputs"]
        pairs.setdefault(spec.params["op"], set()).add((tuple(inputs["lhs"]["shape"]), tuple(inputs["rhs"]["shape"])))
    broadcast_ops = [op for op in pairs if op.startswith("broadcast_")]
    assert len(broadcast_ops) >= 15
    for op in broadcast_ops:
        assert {((1024, 1024), (1, 1024)), ((1024, 1024), (1024, 1))} <= pairs[op], op
        assert ((1024, 1024), (1024, 1024)) in pairs[op]  # opperf's own case stays
