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


#: runners that are nn.LSTM, as their references are: on a CPU their check compares nn.LSTM with
#: nn.LSTM, so they are also held against an independent float64 LSTM
NN_LSTM_RUNNERS = ["cudnn", "aten", "vl_cudnn", "cudnn_dropout", "cudnn_bidirectional"]


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
    if name in NN_LSTM_RUNNERS:
        _assert_matches_float64_lstm(name, num_layers)


def _float64_lstm(x, h, c, params, directions):
    """One sequence x (T, I) through the LSTM formula, written out here in float64 (PyTorch's
    gate order i, f, g, o and parameter order; h and c of shape (layers * directions, H); the
    reverse direction reads the sequence backwards): (top layer's outputs (T, directions * H),
    final h, final c)."""
    hs, cs = [], []
    for layer in range(len(params) // (4 * directions)):
        outputs = []
        for direction in range(directions):
            index = layer * directions + direction
            w_ih, w_hh, b_ih, b_hh = params[4 * index:4 * index + 4]
            h_t, c_t, steps = h[index], c[index], []
            for x_t in (x.flip(0) if direction else x):
                i, f, g, o = (w_ih @ x_t + b_ih + w_hh @ h_t + b_hh).chunk(4)
                c_t = f.sigmoid() * c_t + i.sigmoid() * g.tanh()
                h_t = o.sigmoid() * c_t.tanh()
                steps.append(h_t)
            outputs.append(torch.stack(steps).flip(0) if direction else torch.stack(steps))
            hs.append(h_t)
            cs.append(c_t)
        x = torch.cat(outputs, dim=1)
    return x, torch.stack(hs), torch.stack(cs)


def _assert_matches_float64_lstm(name, num_layers, seed=17):
    """The runner's outputs, final states and parameter gradients equal, to float32 rounding,
    the float64 formula's on the same seeded data, under the same seeded output weights."""
    runner = runners.get_runner(name)
    varlen, directions = runner.reference == "varlen", 2 if runner.reference == "bidirectional" else 1
    sizes = dict(SMALL, numLayers=num_layers)
    data = factory.lstm_data(**sizes, device="cpu", seed=seed, variable_length=varlen, directions=directions)
    batch, hidden = sizes["miniBatch"], sizes["hiddenSize"]
    seqs = list(data.x) if varlen else [data.x[:, b] for b in range(batch)]
    gen = torch.Generator().manual_seed(seed)
    weights = [torch.randn(len(x), directions * hidden, generator=gen, dtype=torch.float64) for x in seqs]
    w_h, w_c = (torch.randn(num_layers * directions, batch, hidden, generator=gen, dtype=torch.float64) for _ in "hc")

    params64 = [p.detach().double().requires_grad_() for p in data.params]
    ran = [_float64_lstm(x.double(), data.hx[:, b].double(), data.cx[:, b].double(), params64, directions)
           for b, x in enumerate(seqs)]
    out64 = [out for out, _, _ in ran]
    h64, c64 = (torch.stack([r[k] for r in ran], dim=1) for k in (1, 2))
    loss64 = sum((out * w).sum() for out, w in zip(out64, weights)) + (h64 * w_h).sum() + (c64 * w_c).sum()
    loss64.backward()

    with runner.context():
        md = runner.creator(**sizes, device="cpu", seed=seed, **runner.check_options)
        output, (h, c) = md.forward(*md.inputs)
        outs = [output[:len(x), b] for b, x in enumerate(seqs)]  # padded (T_max, B, H) when varlen
        loss = sum((out.double() * w).sum() for out, w in zip(outs, weights)) \
            + (h.double() * w_h).sum() + (c.double() * w_c).sum()
        loss.backward()
    close = dict(rtol=1e-5, atol=1e-5)
    for out, expected in zip(outs, out64):
        torch.testing.assert_close(out.detach().double(), expected.detach(), **close)
    torch.testing.assert_close(h.detach().double(), h64.detach(), **close)
    torch.testing.assert_close(c.detach().double(), c64.detach(), **close)
    grads = dict(zip(md.param_names, (p.grad for p in md.params)))
    assert set(grads) == set(data.names)
    for param_name, expected in zip(data.names, params64):
        torch.testing.assert_close(grads[param_name].double(), expected.grad, **close, msg=param_name)


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


def custom_lstm_creator(stack_fn, script: bool = False):
    """A creator for an LSTM written as `stack_fn(x, hx, cx, params) -> (output, (h, c))` with
    nn.LSTM's parameter layout: a cell under test, checked as a registered runner."""

    def creator(seqLength=100, numLayers=1, inputSize=512, hiddenSize=512, miniBatch=64, device="cpu", seed=None):
        stack = factory.scripted(stack_fn) if script else stack_fn
        data = factory.lstm_data(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed)
        params = data.params

        def forward(x, hx, cx):
            return stack(x, hx, cx, params)

        return factory._lstm_modeldef(data, forward, params, data.names, data.hx.device)

    return creator


@pytest.fixture
def register(monkeypatch):
    """Register a runner for one test only."""
    def add(name, creator, **kw):
        monkeypatch.setitem(runners.RUNNERS, name, runners.Runner(name, creator, **kw))
    return add


def test_a_wrong_cell_is_reported_as_failed(register):
    register("broken", custom_lstm_creator(_broken_stack))
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
    register("custom", custom_lstm_creator(cells.premul_stack, script=True))
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
    """jit differs from nn.LSTM by float32 rounding only: atol decides around its largest difference."""
    def check(**tolerance):
        return correctness.check_runner("jit", numLayers=1, scale_grads=False, **SMALL, **tolerance)

    diffs = check().max_abs_diff
    worst = max(diffs["output"], diffs["h"], diffs["c"], *diffs["grads"].values())
    assert 0 < worst < 1e-5
    exact = check(atol=0.0)
    assert not exact.passed and "atol=0" in exact.message
    assert check(atol=2 * worst).passed
    assert not check(atol=worst / 2).passed
    strict = correctness.check_runner("jit_layernorm_decom", atol=0.0, numLayers=1, **SMALL)
    assert not strict.passed and "atol=0" in strict.message
    assert correctness.check_runner("jit_layernorm_decom", atol=0.0, rtol=1e-2,
                                    numLayers=1, **SMALL).passed


# ------------------------------------------------------------------------- usage errors

def test_default_runners_are_every_lstm_runner(register):
    names = correctness.default_check_runners()
    assert names == [name for name, runner in runners.RUNNERS.items() if runner.group != "cnns"]
    assert set(runners.DEFAULT_RNNS) | set(runners.DEFAULT_VL) | set(COMPILE) | {
        "cudnn_layernorm", "jit_layernorm", "cudnn_bidirectional", "jit_dropout"} <= set(names)
    assert not set(names) & set(runners.DEFAULT_CNNS)
    # a runner registered later is checked by default too; a CNN runner is not
    register("later", factory.nn_lstm_creator)
    register("later_cnn", factory.nn_lstm_creator, group="cnns", reference=None)
    assert correctness.default_check_runners() == [*names, "later"]


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
