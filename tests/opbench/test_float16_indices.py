"""Index inputs stay exact whatever the case dtype: float16 holds integers exactly only to 2048."""

import mxnet  # noqa: F401  (plainly: a broken MXNet fails these tests instead of skipping them)

from opbench.backends.mxnet import arrays, cases
from opbench.backends.mxnet import opperf_api as api


def _index_tensors(specs):
    for spec in specs:
        for arg, desc in spec.params["inputs"].items():
            if isinstance(desc, dict) and desc.get("init") == "indices":
                yield spec, arg, desc


def test_every_index_tensor_of_a_float16_sweep_is_float32():
    specs, _ = cases.generate_cases(dtype="float16")
    found = list(_index_tensors(specs))
    assert len({spec.params["op"] for spec, _, _ in found}) >= 8  # take, gather_nd, Embedding, ...
    assert {desc["dtype"] for _, _, desc in found} == {"float32"}
    assert {spec.params["dtype"] for spec, _, _ in found} == {"float16"}  # the data stays float16


def test_float16_cases_index_in_range_and_run():
    specs, _ = cases.generate_cases(ops=["take", "gather_nd", "scatter_nd"], dtype="float16")
    found = list(_index_tensors(specs))
    assert {spec.params["op"] for spec, _, _ in found} == {"take", "gather_nd", "scatter_nd"}
    for spec, arg, desc in found:
        values = arrays.materialize(spec).arrays[arg].asnumpy()
        highs = desc["high"] if isinstance(desc["high"], list) else [desc["high"]] * len(values)
        assert all((row < high).all() for row, high in zip(values, highs)), (spec.params["variant"], arg)
    ops = ["take", "gather_nd", "scatter_nd", "Embedding"]
    results = api.run_cases_for(ops=ops, dtype="float16", warmup=0, runs=1)
    assert list(results) == sorted(ops)  # every operator has its cases, none dropped
    for op, entries in results.items():
        assert entries, op
        for entry in entries:  # measured: no failure status, a forward time
            assert "status" not in entry and entry[f"avg_time_forward_{op}"] is not None, (op, entry)
