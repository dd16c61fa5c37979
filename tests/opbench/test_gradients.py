"""The stored differentiability, zero-gradient and randomness tables equal what the real MXNet
says (opbench.backends.mxnet.gradients), a zero-gradient operator runs forward only, saying why,
and only the cases that draw from MXNet's generators seed them."""

import stat
import sys

import mxnet  # noqa: F401  (plainly: a broken MXNet fails these tests instead of skipping them)

from opbench.backends.mxnet import cases, gradients, registry
from opbench.backends.mxnet import opperf_api as api
from opbench.backends.mxnet.listing import backward_cell
from tests.opbench import faults


def test_stored_table_equals_the_probe_on_the_installed_mxnet():
    """The probe runs autograd.record + backward on every selected operator (child processes,
    so a crash cannot take the test run down); the stored table must say exactly the same."""
    probed = gradients.probe(registry.selected_names())
    unknown = {op: item["reason"] for op, item in probed.items() if item["differentiable"] is None}
    assert not unknown, f"the probe could not tell: {unknown}"
    not_differentiable = {op: item["reason"] for op, item in probed.items() if not item["differentiable"]}
    assert not_differentiable == registry.NOT_DIFFERENTIABLE, (
        "registry.NOT_DIFFERENTIABLE no longer matches MXNet; `python -m opbench.backends.mxnet.gradients` prints "
        "the table to paste")
    assert set(probed) == set(registry.selected_names())
    # both ways: every operator in ZERO_GRADIENT has an all-zero gradient in every variant, and
    # every other differentiable operator (so every timed one) has a nonzero gradient somewhere
    zero = {op for op, item in probed.items() if item["zero_gradient"]}
    assert zero == set(registry.ZERO_GRADIENT), (
        "registry.ZERO_GRADIENT no longer matches MXNet; `python -m opbench.backends.mxnet.gradients` prints the table")
    assert all((item["zero_gradient"] is None) == (item["differentiable"] is False) for item in probed.values())
    drawing = {op for op, item in probed.items() if item["draws_random"]}
    assert drawing == registry.DRAWS_RANDOM, (
        "registry.DRAWS_RANDOM no longer matches MXNet; `python -m opbench.backends.mxnet.gradients` prints the table")


def test_randomness_probe_tells_the_operators_that_draw():
    for op in ("Dropout", "sample_multinomial", "shuffle", "random_uniform"):  # both of MXNet's generators
        assert gradients.draws_random(op), op
    for op in ("exp", "LeakyReLU", "broadcast_add"):  # rrelu draws in training mode only, never entered
        assert not gradients.draws_random(op), op
    assert registry.draws_random("Dropout") and not registry.draws_random("exp")
    assert registry.draws_random("_plus_scalar")  # outside the probed selection: seeded, to be safe


def _next_draws():
    import mxnet as mx

    return mx.nd.random.uniform(shape=(6,)).asnumpy().tolist(), mx.nd.random.shuffle(mx.nd.arange(12)).asnumpy().tolist()


def test_only_the_cases_that_draw_seed_mxnet():
    """A drawing case gets the same values whatever ran before it in the worker (seeded before it);
    a case that does not draw leaves MXNet's generators where they were (not seeded: ~1 ms saved)."""
    import mxnet as mx

    from opbench.backends.mxnet.arrays import materialize

    uniform = cases.generate_cases(ops=["random_uniform"], tiny=True)[0][0]
    first = materialize(uniform).call().asnumpy().tolist()
    _next_draws()  # the generators move on, as another drawing case would move them
    assert materialize(uniform).call().asnumpy().tolist() == first
    specs, _ = cases.generate_cases(ops=["exp"], tiny=True)
    mx.random.seed(3)
    expected = _next_draws()
    mx.random.seed(3)
    materialize(specs[0]).call()
    assert _next_draws() == expected


def test_probe_answers_and_reasons():
    assert gradients.probe_one("batch_dot") == (True, None)  # gradient made of two batch_dots
    assert gradients.probe_one("split") == (True, None)      # _backward_SliceChannel
    assert gradients.probe_one("sgd_update") == (False, registry.NO_FGRADIENT)
    assert gradients.probe_one("random_uniform") == (False, registry.NO_TENSOR_INPUT)
    assert set(registry.NOT_DIFFERENTIABLE.values()) == set(registry.REASONS)


def test_zero_gradient_answers():
    for op in ("round", "sign", "argmax", "broadcast_equal", "BlockGrad", "sample_normal"):
        assert gradients.zero_gradient(op), op
    for op in ("exp", "abs", "broadcast_add", "random_pdf_normal", "SequenceLast"):
        assert not gradients.zero_gradient(op), op
    # random head gradients, not ones: with ones, d(sum(softmax(x)))/dx is zero, softmax's is not
    assert not gradients.zero_gradient("softmax")


def test_zero_gradient_operators_run_forward_only_with_the_reason():
    assert set(registry.ZERO_GRADIENT.values()) == {registry.ZERO_FILL}
    assert set(registry.ZERO_GRADIENT) <= set(registry.selected_names())
    assert not set(registry.ZERO_GRADIENT) & (set(registry.NOT_DIFFERENTIABLE) | set(registry.BACKWARD_OFF))
    selected = [registry.get(op) for op in registry.selected_names()]
    # differentiable (MXNet can run backward) stays apart from timed (worth timing)
    assert sum(bool(i.differentiable) for i in selected) == 214
    assert len(registry.ZERO_GRADIENT) == 36
    assert sum(i.runs_backward for i in selected) == 214 - 36 - len(registry.BACKWARD_OFF) == 171
    specs, skipped = cases.generate_cases(ops=sorted(registry.ZERO_GRADIENT), tiny=True)
    assert not skipped and {s.name for s in specs} == set(registry.ZERO_GRADIENT)
    for op in registry.ZERO_GRADIENT:
        info = registry.get(op)
        assert info.differentiable and info.zero_gradient == registry.ZERO_FILL, op
        assert not info.runs_backward and info.no_backward_reason == registry.ZERO_FILL, op
        own = [s for s in specs if s.name == op]
        assert all(not s.params["run_backward"] for s in own), op
        assert all(s.params["no_backward_reason"] == registry.ZERO_FILL for s in own), op
        assert backward_cell(info, own) == "no: zero gradient", op
    assert registry.get("exp").zero_gradient is None and registry.get("exp").runs_backward
    assert registry.get("_plus_scalar").zero_gradient is None  # outside the selection: not probed


def test_zero_gradient_reason_reaches_the_report():
    (item,) = api.run_performance_test("round", inputs=[{"data": (4, 4)}], warmup=1, runs=2)
    (entry,) = item["round"]
    assert entry["avg_time_forward_round"] is not None
    assert entry["avg_time_backward_round"] is None
    assert entry["missing"] == {"avg_time_backward_round": registry.ZERO_FILL}


def test_a_crashing_operator_is_reported_and_the_probe_goes_on(tmp_path, monkeypatch):
    """The children run under an interpreter whose exp kills its process (tests.opbench.faults)."""
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tests.opbench.faults "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(faults.CRASH_ENV, "exp")
    probed = gradients.probe(["abs", "exp", "relu"], python=str(python))
    assert probed["abs"] == probed["relu"] == {"differentiable": True, "reason": None, "zero_gradient": False,
                                               "draws_random": False}
    assert probed["exp"]["differentiable"] is None and probed["exp"]["zero_gradient"] is None
    assert probed["exp"]["draws_random"] is None
    assert "died" in probed["exp"]["reason"]
