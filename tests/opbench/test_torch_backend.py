"""opbench --framework torch: discovery on a slice of op_db, scaling, overrides, the real CLI.

One manifest is built for the whole module (a slice of op_db at a tiny size target, in the
discovery subprocess, as a sweep builds it); each CLI test runs `python -m opbench` on it.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import expecttest  # noqa: F401  (torch.testing._internal needs it: a missing one fails here)
import pytest
import torch

from benchcore.report.model import Report
from opbench.backends.torch import case_spec
from opbench.backends.torch.manifest import build, load
from opbench.backends.torch.sample import Decoder, Scale, describe_sample, encode_sample

ROOT = Path(__file__).resolve().parents[2]
TARGET = 4096
#: a slice of op_db covering each path through discovery: plain tiling (add, gather), fresh
#: values (sort), structured matrices (linalg.cholesky, linalg.solve), a fixed kernel (conv2d),
#: a factory override (arange), integer-argument scaling (layer_norm), no float32 (bitwise_and)
SLICE = [("add", ""), ("gather", ""), ("sort", ""), ("linalg.cholesky", ""), ("linalg.solve", ""),
         ("nn.functional.conv2d", ""), ("arange", ""), ("nn.functional.layer_norm", ""), ("bitwise_and", "")]


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    path = tmp_path_factory.mktemp("manifest") / "m.json"
    return build(path, "float32", "cpu", TARGET, 0, only=[list(k) for k in SLICE])


def _env(tmp_path):
    return {**os.environ, "PYTHONPATH": str(ROOT), "OPBENCH_CACHE": str(tmp_path / "cache")}


def opbench(*args, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "opbench", *args], cwd=cwd, env=_env(cwd), capture_output=True,
                          text=True, timeout=timeout)


def _one_line_error(proc, *words):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("opbench: error: "), proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_manifest_for_a_slice_of_op_db(manifest):
    assert manifest.header["torch"] == torch.__version__ and manifest.header["size_target"] == TARGET
    assert set(manifest.entries) == set(SLICE) - {("bitwise_and", "")}
    (left,) = manifest.left_out
    assert left["name"] == "bitwise_and" and "no float32" in left["reason"]
    add = manifest.entry("add", "")
    assert add["category"] == "binary_ufunc" and add["scale"]["k"] > 1 and add["backward"]
    assert TARGET / 8 <= add["elements"] <= 4 * TARGET
    assert manifest.entry("sort", "")["category"] == "sorting_searching"
    assert manifest.entry("linalg.solve", "")["category"] == "linalg"
    assert manifest.entry("arange", "")["strategy"] == "override+ints"
    assert manifest.entry("nn.functional.layer_norm", "")["scale"]["ints"]  # normalized_shape follows the input
    for entry in manifest.entries.values():
        assert entry["inputs"]["input"] is not None and entry["call"]


def test_every_entry_decodes_and_runs_at_its_scale(manifest):
    """What discovery checked is what a worker rebuilds: each entry runs forward (and backward)."""
    from opbench.backends.torch.callables import callable_for
    from opbench.backends.torch.executor import _heads

    for (name, variant), entry in manifest.entries.items():
        first, args, kwargs = Decoder(manifest.data, Scale(**entry["scale"]), "cpu", 0,
                                      grad=entry["backward"]).sample(entry["tree"])
        out = callable_for(entry["call"], name, variant)(first, *args, **kwargs)
        if entry["backward"]:
            heads = _heads(out)
            torch.autograd.backward(heads, [torch.randn_like(h) for h in heads])


class _Sample:
    def __init__(self, input, *args, **kwargs):
        self.input, self.args, self.kwargs = input, args, kwargs


def test_scaling_keeps_broadcasting_and_index_ranges():
    base = torch.randn(5, 4)
    index = torch.tensor([[0, 4, 2, 1], [3, 3, 0, 4]])
    data = {}
    tree = encode_sample(_Sample(base, 0, index), data)
    first, (dim, scaled_index), _ = Decoder(data, Scale(3), "cpu").sample(tree)
    assert first.shape == (15, 12) and scaled_index.shape == (6, 12)
    assert torch.equal(first[:5, :4], base) and torch.equal(first[5:10, 4:8], base)  # tiled, not redrawn
    assert int(scaled_index.min()) >= 0 and int(scaled_index.max()) < 5  # valid for dim 0 of 5, and of 15
    torch.gather(first, dim, scaled_index)  # the operator accepts the scaled pair
    tree = encode_sample(_Sample(torch.randn(5, 1), torch.randn(1, 5)), data)
    left, (right,), _ = Decoder(data, Scale(4), "cpu").sample(tree)
    assert left.shape == (20, 1) and right.shape == (1, 20) and (left + right).shape == (20, 20)
    assert describe_sample(tree, Scale(4))["input"] == "(20,1) float32"


def test_fresh_values_for_sorting():
    data = {}
    tree = encode_sample(_Sample(torch.tensor([3.0, 1.0, 2.0, 1.5])), data, fresh=True)
    (first, _, _) = Decoder(data, Scale(1000), "cpu", seed=1).sample(tree)
    assert first.shape == (4000,) and 1.0 <= float(first.min()) and float(first.max()) <= 3.0
    assert first.unique().numel() > 3900  # not 4 values repeated 1000 times


def test_overrides_produce_valid_inputs(manifest):
    cholesky, solve = manifest.entry("linalg.cholesky", ""), manifest.entry("linalg.solve", "")
    assert [d["tensor"]["init"] for d in [cholesky["tree"]["input"]]] == ["spd"]
    assert solve["tree"]["input"]["tensor"]["init"] == "full_rank"
    for entry, check in ((cholesky, "pd"), (solve, "rank")):
        a = Decoder(manifest.data, Scale(**entry["scale"]), "cpu").sample(entry["tree"])[0].detach().double()
        assert a.shape[-1] > 1
        if check == "pd":
            assert torch.allclose(a, a.mT) and bool((torch.linalg.eigvalsh(a) > 0.5).all())
        else:
            n = a.shape[-1]
            assert bool((torch.linalg.matrix_rank(a) == n).all()) and float(torch.linalg.cond(a).max()) < 100
    conv = manifest.entry("nn.functional.conv2d", "")
    weight = conv["tree"]["args"][0]["tensor"]
    scaled = Decoder(manifest.data, Scale(**conv["scale"]), "cpu").sample(conv["tree"])[1][0]
    assert list(scaled.shape[2:]) == weight["shape"][2:]  # the kernel keeps its size


def test_keys_stable_across_two_manifest_builds(manifest, tmp_path):
    again = build(tmp_path / "again.json", "float32", "cpu", TARGET, 0, only=[["add", ""], ["sort", ""]])
    for key in again.entries:
        first = case_spec(manifest.entries[key], manifest.digests[key], "float32", "cpu", 41).key
        second = case_spec(again.entries[key], again.digests[key], "float32", "cpu", 41).key
        assert first == second


def test_sweep_end_to_end_forward_and_backward(manifest, tmp_path):
    proc = opbench("--framework", "torch", "--manifest", str(manifest.path), "--ops", "add,sort,bitwise_and",
                   "-w", "1", "-r", "3", "--rounds", "2", "-f", "json,md", "-o", "t.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = Report.load(tmp_path / "t.json")
    assert report.settings["framework"] == "torch" and report.settings["device"] == "cpu"
    assert report.extra["manifest"]["sha256"] == manifest.sha256
    assert [r.spec.name for r in report.results] == ["add", "sort"] and all(r.ok for r in report.results)
    for result in report.results:
        profiler = result.metrics["profiler"]
        assert profiler["engine"] == "torch-profiler"
        for phase in ("forward", "backward"):
            assert len(profiler[phase]["per_call_ms"]) == 3 and profiler[phase]["round_sizes"] == [2, 1]  # -r 3
            assert all(ms > 0 for ms in profiler[phase]["per_call_ms"])
        assert profiler["forward"]["operator"] == f"aten::{result.spec.name}"
    assert [i["op"] for i in report.extra["no_benchmark"]] == ["bitwise_and"]
    md = (tmp_path / "t.md").read_text()
    assert "# PyTorch operators" in md and "| add " in md and "bitwise_and" in md
    sections = [line for line in md.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["## How far to trust these figures", "## Settings"]
    header = next(line for line in md.splitlines() if line.startswith("| Operator"))
    assert "Noise" in header and "Fwd Round Spread" in header and "Bwd Round Spread" in header
    assert "| rounds.runs_per_round" in md
    compared = opbench("compare", "t.json", "t.json", "-f", "json", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert len(json.loads(compared.stdout)["cases"]) == 2  # the same cases match, by key


def test_python_engine_and_list(manifest, tmp_path):
    proc = opbench("--framework", "torch", "--manifest", str(manifest.path), "--ops", "gather", "-p", "python",
                   "-w", "1", "-r", "3", "--rounds", "1", "-o", "p.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (result,) = Report.load(tmp_path / "p.json").results
    assert result.metrics["profiler"] is None
    assert len(result.metrics["forward"]["samples_ms"]) == 3 and len(result.metrics["backward"]["samples_ms"]) == 3
    listed = opbench("--framework", "torch", "--manifest", str(manifest.path), "--list", "--all", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "linalg.cholesky" in listed.stdout and "left out: OpInfo lists no float32" in listed.stdout
    assert "8 OpInfo entries timed (forward)" in listed.stderr


@pytest.mark.mxnet  # its last hints are MXNet's (an operator MXNet lacks)
def test_bad_input_is_one_line(manifest, tmp_path):
    _one_line_error(opbench("--framework", "jax", cwd=tmp_path), "--framework jax", "mxnet or torch")
    _one_line_error(opbench("--framework", "torch", "--ctx", "gpu(0)", cwd=tmp_path), "--device cuda:0")
    _one_line_error(opbench("--framework", "torch", "--device", "cuda", cwd=tmp_path), "no CUDA device")
    _one_line_error(opbench("--framework", "torch", "--device", "gpu", cwd=tmp_path), "cuda:N")
    _one_line_error(opbench("--framework", "torch", "--manifest", str(manifest.path), "--ops", "broadcast_add",
                            "--list", cwd=tmp_path), "MXNet operator", "equivalent is add")
    _one_line_error(opbench("--ops", "matmul", "--list", cwd=tmp_path), "PyTorch operator", "equivalent is dot")
    _one_line_error(opbench("--device", "cpu", cwd=tmp_path), "--framework torch")
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"format": "opbench-torch-manifest", "version": 1, "entries": [')
    _one_line_error(opbench("--framework", "torch", "--manifest", str(corrupt), "--list", cwd=tmp_path),
                    "corrupt.json is unreadable", "delete it")
    corrupt.write_text(json.dumps({"format": "opbench-torch-manifest", "version": 1, "entries": [{"name": "x"}],
                                   "left_out": [], "data": {}}))
    _one_line_error(opbench("--framework", "torch", "--manifest", str(corrupt), "--list", cwd=tmp_path),
                    "malformed entry")


def test_a_manifest_is_read_back_as_written(manifest):
    again = load(manifest.path)
    assert again.sha256 == manifest.sha256 and again.digests == manifest.digests


@pytest.mark.mxnet
def test_both_backends_scan_their_operators(manifest):
    from argparse import Namespace

    from opbench.backends import backend_for

    torch_rows = backend_for("torch").scan(Namespace(manifest=str(manifest.path), dtype="float32", size_target=TARGET,
                                                     size_target_given=True), "cpu")
    assert {(r.name, r.reason is None) for r in torch_rows} >= {("add", True), ("bitwise_and", False)}
    mxnet_rows = {r.name: r for r in backend_for("mxnet").scan(None, "cpu(0)")}
    assert mxnet_rows["broadcast_add"].reason is None and mxnet_rows["broadcast_add"].category == "binary_broadcast"
    assert mxnet_rows["Pad"].reason  # a deprecated alias: filtered, with why


def test_the_cached_manifest_is_named_by_the_discovery_code(tmp_path, monkeypatch):
    """An edited override must not be served the inputs an older checkout discovered."""
    from opbench.backends.torch import manifest as manifest_module

    monkeypatch.setenv(manifest_module.CACHE_ENV, str(tmp_path))
    sources = []
    for module in manifest_module.DISCOVERY_SOURCES:
        copy = tmp_path / module.name
        copy.write_bytes(module.read_bytes())
        sources.append(copy)
    monkeypatch.setattr(manifest_module, "DISCOVERY_SOURCES", tuple(sources))
    before = manifest_module.cache_path("float32", "cpu", 1 << 20, 0)
    assert before.parent == tmp_path and manifest_module.discovery_digest() in before.name
    sources[2].write_text(sources[2].read_text() + "\n# a changed override\n")  # overrides.py
    after = manifest_module.cache_path("float32", "cpu", 1 << 20, 0)
    assert after != before and after.parent == tmp_path


def test_freed_memory_is_collected_case_after_case_while_survivors_stay_frozen():
    """return_freed_memory freezes what survives its collection, so the next case's collection
    walks only that case's objects: a cycle a later case drops is still collected."""
    import gc
    import weakref

    from opbench.backends.torch.executor import return_freed_memory

    class Node:
        pass

    def make_cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a
        return weakref.ref(a)

    kept = Node()  # a survivor, frozen by the first call
    return_freed_memory()
    frozen = gc.get_freeze_count()
    assert frozen > 0 and kept is not None
    dropped = make_cycle()  # a later case's garbage cycle
    return_freed_memory()
    assert dropped() is None and gc.get_freeze_count() >= frozen
    gc.unfreeze()  # leave the test process as it was


def test_a_native_case_leaves_dynamo_unimported():
    """The native engine's profiler starts without importing torch._inductor and torch._dynamo
    (torch.profiler.profile's first start does: 1.3-1.5 s in every worker). In a fresh process,
    as a worker runs a case; the case's operators are still found inside their ranges."""
    script = (
        "import sys, torch\n"
        "from benchcore.measure.runner import RunSettings\n"
        "from opbench.backends.torch import executor\n"
        "x = torch.ones(64, requires_grad=True)\n"
        "workload = executor.build_workload(torch.mul, x, (2.0,), {}, True, 'cpu', 0)\n"
        "metrics = executor.run_engine(workload, RunSettings(warmup=1, runs=3), 'cpu', 'native', 'mul')\n"
        "profiler = metrics['profiler']\n"
        "print(profiler['forward']['operator'], profiler['forward']['Count'], profiler['backward']['Count'],\n"
        "      'torch._dynamo' in sys.modules, 'torch._inductor' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["aten::mul", "3", "3", "False", "False"]
