"""opbench.backends.mxnet.work: the outputs inferred for a case are those MXNet writes when it
runs (real MXNet, tiny cases), every default case has its bytes, the FLOP families cover the
matrix, convolution and recurrent cases and most of the rest, and an MXNet formula equals
torch.utils.flop_counter on the crossframe pair's real torch call."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from benchcore.measure import work as W
from opbench.backends.mxnet import work
from opbench.backends.mxnet.arrays import materialize
from opbench.backends.mxnet.cases import generate_cases
from opbench.equivalents import BY_MXNET

MATRIX_FAMILIES = ("dot", "batch_dot", "FullyConnected", "Convolution", "Deconvolution", "RNN", "linalg_gemm",
                   "linalg_gemm2")


def ran_outputs(spec):
    """What the operator wrote when it ran: its results, or the arrays an update writes in place."""
    made = materialize(spec)
    result = made.call()
    written = made.kwargs.get("out")
    arrays = written if written is not None else result
    arrays = arrays if isinstance(arrays, (list, tuple)) else [arrays]
    return sorted((tuple(a.shape), a.dtype.__name__ if hasattr(a.dtype, "__name__") else str(a.dtype)) for a in arrays)


@pytest.mark.parametrize("category", ["gemm", "convolution", "transpose_convolution", "pooling", "nn_basic", "linalg",
                                      "reduction", "join_split", "loss"])
def test_inferred_outputs_are_what_the_operator_writes(category):
    specs, _ = generate_cases(categories=[category], tiny=True)
    for spec in specs:
        case = work.case_of(spec)
        assert case.outputs is not None, (spec.name, case.why_no_outputs)
        inferred = sorted((t.shape, t.dtype) for t in case.outputs)
        assert inferred == ran_outputs(spec), spec.name


def test_an_update_writes_its_weight_and_states_and_reads_its_gradient():
    spec = next(s for s in generate_cases(ops=["adam_update"], tiny=True)[0])
    case = work.case_of(spec)
    assert sorted(t.shape for t in case.outputs) == [tuple(spec.params["inputs"][a]["shape"]) for a in ("mean", "var",
                                                                                                       "weight")]
    grad = W.tensor(spec.params["inputs"]["grad"]["shape"], "float32")
    assert work.flops_of(case).forward == work._UPDATE_OPS["adam_update"] * grad.elements


def test_every_default_case_has_its_bytes_and_the_matrix_families_their_flops():
    specs, _ = generate_cases()
    found = {spec.key: work.work(spec) for spec in specs}
    assert all(w.bytes for phases in found.values() for w in phases.values()), [
        (s.name, p.reason) for s in specs for p in found[s.key].values() if not p.bytes]
    for spec in specs:
        phases = found[spec.key]
        assert set(phases) == ({"forward", "backward"} if spec.params["run_backward"] else {"forward"})
        if spec.params["op"] in MATRIX_FAMILIES:
            assert all(p.flops for p in phases.values()), spec.name
        for phase in phases.values():
            assert phase.flops is None or phase.flops > 0 or phase.reason == W.SORT_BACKWARD  # 0: said why
            assert phase.flops is not None or phase.reason, spec.name
    with_flops = sum(all(p.flops for p in phases.values()) for phases in found.values())
    assert with_flops / len(specs) >= 0.6


def test_no_formula_says_why():
    spec = generate_cases(ops=["transpose"], tiny=True)[0][0]
    phases = work.work(spec)
    assert phases["forward"].flops is None and phases["forward"].reason == work.MOVEMENT
    elements = W.tensor(spec.params["inputs"]["data"]["shape"], "float32").elements
    assert phases["forward"].bytes == 2 * 4 * elements  # float32, read and written once each


def torch_call(path, tree):
    """The pair's torch call on real tensors of the descriptors' shapes."""
    def build(node):
        if isinstance(node, list):
            return [build(v) for v in node]
        if isinstance(node, dict) and set(node) == {"tensor"}:
            return torch.randn(*node["tensor"]["shape"], dtype=getattr(torch, node["tensor"]["dtype"]),
                               requires_grad=True)
        return node
    function = torch
    for part in path.split("."):
        function = getattr(function, part)
    return lambda: function(build(tree["input"]), *build(tree["args"]), **build(tree["kwargs"]))


def flop_counter(call):
    with FlopCounterMode(display=False) as mode:
        call()
    return mode.get_total_flops()


@pytest.mark.parametrize("op", ["dot", "batch_dot", "linalg_gemm2", "Convolution", "RNN"])
def test_mxnet_formula_is_flop_counters_on_the_crossframe_pair(op):
    checked = 0
    for spec in generate_cases(ops=[op], tiny=True)[0]:
        converted = BY_MXNET[op].convert(spec.params["inputs"])
        if converted is None:
            continue
        ours = work.flops_of(work.case_of(spec)).forward
        theirs = flop_counter(torch_call(*converted))
        if op == "RNN" and spec.params["inputs"]["mode"] == "lstm":
            assert theirs == 0  # FlopCounterMode has no formula for the CPU LSTM (one aten call)
            continue
        assert ours == theirs, spec.params["variant"]
        checked += 1
    assert checked


def test_the_coverage_script_prints_each_suites_targets():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(root / "scripts" / "work_coverage"), "--suites", "mxnet,rnnbench"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("mxnet: 779 cases; bytes for each timed phase: 779 (target all); "
                               "GEMM/convolution/RNN cases with FLOPs for each timed phase: 22 of 22")
    assert any(line.startswith("rnnbench: 8 cases") for line in lines)
    assert any(work.MOVEMENT in line for line in lines)
    bad = subprocess.run([sys.executable, str(root / "scripts" / "work_coverage"), "--suites", "tf"],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and bad.stderr.strip() == ("work_coverage: error: unknown suite 'tf'; choose from "
                                                          "mxnet, torch, rnnbench")


def only(op, variant=None):
    specs = generate_cases(ops=[op])[0]
    return next(s for s in specs if variant is None or s.params["variant"] == variant)


def test_data_movement_reads_no_more_than_it_writes_and_a_write_only_op_reads_nothing():
    """Bytes are a lower bound: counting every input whole put the default sweep's diag,
    shape_array and pick at 400-3500% of the bandwidth roof."""
    diag = work.work(only("diag", "(10000,100)"))  # 100 elements written, so at most 100 read
    assert diag["forward"].bytes == 2 * 100 * 4
    assert diag["backward"].bytes == 100 * 4 + 10000 * 100 * 4  # the head's 100, and the whole gradient written
    assert work.work(only("shape_array", "(1024,1024)"))["forward"].bytes == 2 * 4 + 2 * 8  # 2 int64 written, 2 read at most
    reset = only("reset_arrays")
    assert work.work(reset)["forward"].bytes == sum(t.nbytes for t in work.case_of(reset).outputs)
    loss = only("MakeLoss")
    gradient = sum(t.nbytes for t in work.gradient_tensors(loss))
    assert work.work(loss)["backward"].bytes == gradient  # the loss's scale, written: no head read


def test_a_diagonal_reduction_reads_the_diagonal():
    spec = only("linalg_sumlogdiag")
    n = spec.params["inputs"]["A"]["shape"][-1]
    assert work.work(spec)["forward"].bytes == n * 4 + 4
