"""Every LSTM runner agrees with its nn.LSTM-based reference; wrong runners are caught."""

from typing import List, Tuple

import pytest
import torch
from torch import Tensor

from benchcore.errors import UsageError
from rnnbench import correctness, factory, runners

SMALL = dict(seqLength=5, inputSize=8, hiddenSize=8, miniBatch=3)
COMPILE = ["compile", "compile_premul"]
EAGER_AND_JIT = [n for n in runners.lstm_runner_names() if n not in COMPILE]


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("name", EAGER_AND_JIT)
def test_runner_matches_reference(name, num_layers):
    result = correctness.check_runner(name, numLayers=num_layers, **SMALL)
    assert result.passed, result.message
    assert result.max_abs_diff["h"] is not None and result.max_abs_diff["c"] is not None
    expected = factory.lstm_param_names(
        num_layers, 2 if runners.get_runner(name).reference == "bidirectional" else 1,
        runners.get_runner(name).reference == "layernorm")
    assert list(result.max_abs_diff["grads"]) == expected


@pytest.fixture(scope="module")
def compile_results():
    """torch.compile takes seconds per model: compile each runner once per layer count."""
    return {layers: correctness.check_runners(COMPILE, numLayers=layers, seqLength=2,
                                              inputSize=8, hiddenSize=8, miniBatch=3)
            for layers in (1, 2)}


@pytest.mark.parametrize("num_layers", [1, 2])
def test_compile_runners_match_reference(compile_results, num_layers):
    for result in compile_results[num_layers]:
        assert result.passed, f"{result.runner}: {result.message}"
        assert result.max_abs_diff["output"] is not None


def test_compile_reports_compile_time_separately(compile_results):
    md = runners.get_runner("compile").creator(seqLength=2, numLayers=1, inputSize=8,
                                               hiddenSize=8, miniBatch=3, seed=17)
    assert {"compile_s", "compile_forward_s", "compile_backward_s"} <= set(md.info)
    assert md.info["compile_s"] >= md.info["compile_forward_s"] > 0
    assert all(p.grad is None for p in md.params)  # the warm-up leaves no gradients behind


def test_simple_runner_has_no_output_to_compare():
    result = correctness.check_runner("jit_simple", numLayers=1, **SMALL)
    assert result.passed and result.max_abs_diff["output"] is None


def test_variable_length_runners_compare_every_sequence():
    for name in runners.DEFAULT_VL:
        result = correctness.check_runner(name, numLayers=1, seqLength=5, inputSize=4,
                                          hiddenSize=4, miniBatch=4)
        assert result.passed, result.message
        assert result.max_abs_diff["output"] is not None


def test_dropout_runners_are_checked_with_dropout_off():
    result = correctness.check_runner("jit_dropout", numLayers=2, **SMALL)
    assert result.passed and result.options == {"dropout": 0.0}
    assert "dropout=0.0" in result.message


# ----------------------------------------------------------------------- wrong runners

def _broken_stack(x: Tensor, hx: Tensor, cx: Tensor,
                  params: List[Tensor]) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
    """An LSTM whose forget and input gates are swapped: plausible output, wrong numbers."""
    hs, cs = [], []
    for layer in range(len(params) // 4):
        w_ih, w_hh, b_ih, b_hh = params[4 * layer:4 * layer + 4]
        h, c, outputs = hx[layer], cx[layer], []
        for step in x.unbind(0):
            gates = step @ w_ih.t() + h @ w_hh.t() + b_ih + b_hh
            f, i, g, o = gates.chunk(4, 1)
            c = f.sigmoid() * c + i.sigmoid() * g.tanh()
            h = o.sigmoid() * c.tanh()
            outputs.append(h)
        x = torch.stack(outputs)
        hs.append(h)
        cs.append(c)
    return x, (torch.stack(hs), torch.stack(cs))


@pytest.fixture
def register(monkeypatch):
    """Register a runner for one test only."""
    def add(name, creator, **kw):
        monkeypatch.setitem(runners.RUNNERS, name, runners.Runner(name, creator, **kw))
    return add


def test_a_wrong_cell_is_reported_as_failed(register):
    register("broken", factory.custom_lstm_creator(_broken_stack))
    results = correctness.check_runners(["jit", "broken"], numLayers=2, **SMALL)
    assert [r.passed for r in results] == [True, False]
    broken = results[1]
    assert "out of tolerance" in broken.message and "output" in broken.message
    assert broken.max_abs_diff["output"] > 1e-3
    assert max(broken.max_abs_diff["grads"].values()) > 1e-3
    table = correctness.format_results(results)
    assert "broken" in table and "FAIL" in table and "PASS" in table


def test_a_scripted_custom_cell_passes(register):
    from rnnbench import cells
    register("custom", factory.custom_lstm_creator(cells.premul_stack, script=True))
    assert correctness.check_runner("custom", numLayers=2, **SMALL).passed


def test_a_runner_ignoring_the_seeded_parameters_fails_before_comparing(register):
    def creator(**kw):
        md = factory.nn_lstm_creator(**kw)
        with torch.no_grad():
            md.params[1].mul_(2)
        return md

    register("reseeded", creator)
    result = correctness.check_runner("reseeded", numLayers=1, **SMALL)
    assert not result.passed and "weight_hh_l0 differs" in result.message


def test_a_runner_that_raises_is_a_failed_check_not_a_crash(register):
    def creator(**kw):
        raise RuntimeError("shape mismatch in layer 1\nlong traceback text")

    register("crashing", creator)
    result = correctness.check_runner("crashing", numLayers=2, **SMALL)
    assert not result.passed
    assert result.message == "error: RuntimeError: shape mismatch in layer 1"


def test_the_check_runs_in_ieee_float32_and_restores_tf32_after(register):
    """cuDNN's LSTM uses TF32 on recent GPUs by default; the check must compare full float32."""
    seen = []

    def creator(**kw):
        seen.append((torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32))
        return factory.nn_lstm_creator(**kw)

    register("watched", creator)
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        assert correctness.check_runner("watched", **SMALL).passed
        assert seen == [(False, False)]
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (True, before[1])
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_the_check_switches_tf32_off_with_the_newer_api_when_that_is_in_use(register):
    """Once torch.backends.*.fp32_precision is set, torch refuses the legacy TF32 switches."""
    switches = (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn)
    before = [switch.fp32_precision for switch in switches]
    seen = []

    def creator(**kw):
        seen.append([switch.fp32_precision for switch in switches])
        return factory.nn_lstm_creator(**kw)

    register("watched", creator)
    torch.backends.cudnn.rnn.fp32_precision = "tf32"
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    try:
        assert correctness.check_runner("watched", **SMALL).passed
        assert seen == [["ieee", "ieee", "ieee"]]
        assert torch.backends.cudnn.rnn.fp32_precision == "tf32" and torch.backends.cudnn.conv.fp32_precision == "ieee"
    finally:
        for switch, value in zip(switches, before):
            switch.fp32_precision = value


def test_tolerance_is_configurable():
    assert correctness.check_runner("cudnn", atol=0.0, numLayers=1, **SMALL).passed
    strict = correctness.check_runner("jit_layernorm_decom", atol=0.0, numLayers=1, **SMALL)
    assert not strict.passed and "atol=0" in strict.message
    assert correctness.check_runner("jit_layernorm_decom", atol=0.0, rtol=1e-2,
                                    numLayers=1, **SMALL).passed


# ------------------------------------------------------------------------- usage errors

def test_default_runners_are_every_lstm_runner():
    names = correctness.default_check_runners()
    assert names == runners.lstm_runner_names()
    assert not any(name.startswith("resnet") for name in names)


def test_unknown_or_cnn_runner_is_a_usage_error():
    with pytest.raises(UsageError, match="valid runners"):
        correctness.check_runners(["jit", "jitt"], **SMALL)
    with pytest.raises(UsageError, match="resnet18 is a CNN runner"):
        correctness.check_runner("resnet18", **SMALL)


def test_bad_sizes_are_usage_errors():
    with pytest.raises(UsageError, match="hiddenSize"):
        correctness.check_runner("jit", hiddenSize=0)


def test_result_serialises():
    result = correctness.check_runner("cudnn", numLayers=1, **SMALL)
    data = result.to_dict()
    assert data["runner"] == "cudnn" and data["passed"] is True
    assert set(data["max_abs_diff"]) == {"output", "h", "c", "grads"}


@pytest.mark.parametrize("fuser", ["te", "old", "none"])
def test_jit_runners_stay_correct_under_each_fuser_once_optimised(fuser):
    """The profiling executor optimises from the third call on: check past that point, at the
    two layers where fastrnns' jit_multilayer broke under te."""
    with runners.fuser_context(fuser):
        for _ in range(3):
            results = correctness.check_runners(["jit", "jit_multilayer"], numLayers=2, **SMALL)
    assert all(r.passed for r in results), correctness.format_results(results)


def test_gradients_are_compared_relative_to_their_scale():
    """At default sizes the layer-norm LSTM's gradients reach ~4e4, where float32 resolution
    alone is ~4e-3: an absolute 1e-3 would fail correct code. Scaled, a 10 in 4e4 passes and a
    wrong gradient does not; small gradients keep the absolute tolerance."""
    reference = torch.full((3, 3), 4e4)
    tol = correctness.Tolerance()
    assert correctness.grad_scale(reference, tol) == 4e4
    assert correctness.grads_close(reference + 10, reference, tol)
    assert not correctness.grads_close(reference * 1.01, reference, tol)
    assert not correctness.grads_close(reference + 10, reference,
                                       correctness.Tolerance(scale_grads=False))
    small = torch.full((3,), 0.5)
    assert correctness.grad_scale(small, tol) == 1.0
    assert not correctness.grads_close(small + 2e-3, small, tol)


def test_check_records_the_gradient_scales():
    result = correctness.check_runner("jit", numLayers=1, **SMALL)
    assert set(result.grad_scale) == set(result.max_abs_diff["grads"])
    assert all(scale >= 1.0 for scale in result.grad_scale.values())
    unscaled = correctness.check_runner("jit", numLayers=1, scale_grads=False, **SMALL)
    assert unscaled.passed and set(unscaled.grad_scale.values()) == {1.0}
