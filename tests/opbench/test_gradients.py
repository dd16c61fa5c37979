"""The stored differentiability table equals what the real MXNet says (opbench.gradients)."""

import pytest

pytest.importorskip("mxnet")

from opbench import gradients, registry  # noqa: E402
from opbench.mxnet_backend import CRASH_HOOK_ENV  # noqa: E402


def test_stored_table_equals_the_probe_on_the_installed_mxnet():
    """The probe runs autograd.record + backward on every selected operator (child processes,
    so a crash cannot take the test run down); the stored table must say exactly the same."""
    probed = gradients.probe(registry.selected_names())
    unknown = {op: item["reason"] for op, item in probed.items() if item["differentiable"] is None}
    assert not unknown, f"the probe could not tell: {unknown}"
    not_differentiable = {op: item["reason"] for op, item in probed.items() if not item["differentiable"]}
    assert not_differentiable == registry.NOT_DIFFERENTIABLE, (
        "registry.NOT_DIFFERENTIABLE no longer matches MXNet; `python -m opbench.gradients` prints "
        "the table to paste")
    assert set(probed) == set(registry.selected_names())


def test_probe_answers_and_reasons():
    assert gradients.probe_one("batch_dot") == (True, None)  # gradient made of two batch_dots
    assert gradients.probe_one("split") == (True, None)      # _backward_SliceChannel
    assert gradients.probe_one("sgd_update") == (False, gradients.NO_FGRADIENT)
    assert gradients.probe_one("random_uniform") == (False, gradients.NO_TENSOR_INPUT)
    assert set(registry.NOT_DIFFERENTIABLE.values()) == set(gradients.REASONS)


def test_a_crashing_operator_is_reported_and_the_probe_goes_on(monkeypatch):
    monkeypatch.setenv(CRASH_HOOK_ENV, "exp")
    probed = gradients.probe(["abs", "exp", "relu"])
    assert probed["abs"] == probed["relu"] == {"differentiable": True, "reason": None}
    assert probed["exp"]["differentiable"] is None
    assert "died" in probed["exp"]["reason"]
