"""rnnbench.work: an LSTM runner's FLOPs equal torch.utils.flop_counter on the real eager runner
(forward and the parameters-only backward) at toy sizes, its bytes are its real tensors', and the
runners without a formula say why."""

import pytest
from torch.utils.flop_counter import FlopCounterMode

from benchcore.measure.case import CaseSpec
from rnnbench import work
from rnnbench.cases import SUITE, case_params
from rnnbench.runners import get_runner

SIZES = {"seqLength": 4, "numLayers": 2, "inputSize": 5, "hiddenSize": 6, "miniBatch": 3}


def spec(name, **sizes):
    return CaseSpec(SUITE, name, case_params({**SIZES, **sizes}, "cpu", "default", None, 1, "rnns"))


def counted(fn):
    with FlopCounterMode(display=False) as mode:
        fn()
    return mode.get_total_flops()


def run(name, **sizes):
    runner = get_runner(name)
    with runner.context():
        model = runner.creator(**{**SIZES, **sizes}, device="cpu", seed=1)
        forward = counted(lambda: model.forward(*model.inputs))
        output = model.forward(*model.inputs)
        backward = counted(lambda: model.backward(*model.backward_setup(output)))
    return model, output, forward, backward


@pytest.mark.parametrize("layers", [1, 2])
def test_the_eager_lstms_products_are_flop_counters(layers):
    _, _, forward, backward = run("py", numLayers=layers)
    found = work.flops(spec("py", numLayers=layers))
    assert (found.forward, found.backward) == (forward, backward)


def test_nn_lstm_on_the_cpu_has_no_flop_counter_formula_and_ours_stands_alone():
    assert run("cudnn")[2:] == (0, 0)
    assert work.flops(spec("cudnn")).forward == work.flops(spec("py")).forward > 0


def test_bytes_are_the_runners_tensors():
    model, output, _, _ = run("py")
    sequence, (h, c) = output
    real = sum(t.numel() * t.element_size() for t in [*model.inputs, *model.params, sequence, h, c])
    found = work.work(spec("py"))
    assert found["forward"].bytes == real
    grads = sum(p.numel() * p.element_size() for p in model.params)
    reads = model.inputs[0].numel() * 4 + grads
    assert found["backward"].bytes == sequence.numel() * 4 + reads + grads


def test_the_simple_runner_returns_and_differentiates_its_final_state_only():
    t = work.tensors(spec("jit_simple"))
    assert [x.shape for x in t["heads"]] == [(2, 3, 6)] and len(t["outputs"]) == 2


def test_bidirectional_and_layer_norm_runners_are_counted():
    plain, both = work.flops(spec("jit")), work.flops(spec("jit_bidirectional"))
    assert both.forward > 2 * plain.forward  # the upper layer reads both directions
    assert work.flops(spec("jit_layernorm")).forward > plain.forward


def test_runners_without_a_formula_say_why():
    found = work.work(CaseSpec(SUITE, "resnet18", {"miniBatch": 2}), run_backward=False)
    assert list(found) == ["forward"] and found["forward"].flops is None
    assert found["forward"].reason.startswith("ResNet: no FLOP formula")


def test_fastrnns_default_lstm_group_all_have_flops_and_bytes():
    from rnnbench.cases import DEFAULT_RNNS, SIZE_DEFAULTS

    for name in DEFAULT_RNNS:
        phases = work.work(CaseSpec(SUITE, name, case_params(dict(SIZE_DEFAULTS), "cpu", "default", None, 1, "rnns")))
        assert all(p.flops and p.bytes for p in phases.values()), name
    assert work.flops(spec("cudnn", **{k: v for k, v in SIZE_DEFAULTS.items()})).forward == 2 * 100 * 64 * 2048 * 1024
