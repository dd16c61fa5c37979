"""ModelDef creators, the runner registry and its contexts, on CPU at tiny sizes."""

import warnings

import pytest
import torch

from benchcore.errors import UsageError
from benchcore.measure.case import Workload
from rnnbench import cases, cells, factory, runners

TINY = dict(seqLength=4, numLayers=2, inputSize=6, hiddenSize=5, miniBatch=3)
VARLEN_TINY = dict(TINY, lengths=(2, 6))


def jit_switch_state():
    """The current value of every switch the fuser and executor contexts touch."""
    return {key: runners._get_switch(key) for key in runners._SWITCHES
            if all(hasattr(torch._C, fn) for fn in runners._SWITCHES[key])}


def _build(name, **sizes):
    runner = runners.get_runner(name)
    with runner.context():
        return runner.creator(**sizes)


def _iterate(modeldef, times=2):
    """Forward, backward and zero_grad through the benchcore Workload, as the bench loop does."""
    work = factory.modeldef_to_workload(modeldef, "cpu")
    assert isinstance(work, Workload) and work.device == "cpu"
    for _ in range(times):
        out = work.forward()
        work.backward(work.backward_setup(out))
        work.zero_grad()
    return work


# ------------------------------------------------------------------------------ ModelDef

def test_modeldef_params_are_a_list_even_from_a_generator():
    weight = torch.ones(2, requires_grad=True)
    md = factory.ModelDef(inputs=(torch.ones(2),), params=(p for p in [weight]),
                          forward=lambda x: (x * weight).sum(),
                          backward_setup=lambda out: ([out], [torch.ones(())]),
                          backward=factory.run_backward)
    assert md.params == [weight] and isinstance(md.inputs, list)
    _iterate(md, times=3)
    assert weight.grad is not None and float(weight.grad.abs().sum()) == 0.0  # zeroed each time


def test_zero_grad_refuses_a_parameter_without_gradient():
    used, unused = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    md = factory.ModelDef(inputs=[torch.ones(2)], params=[used, unused],
                          forward=lambda x: (x * used).sum(),
                          backward_setup=lambda out: ([out], [torch.ones(())]),
                          backward=factory.run_backward, param_names=["used", "unused"])
    work = factory.modeldef_to_workload(md, "cpu")
    work.backward(work.backward_setup(work.forward()))
    with pytest.raises(RuntimeError, match="unused"):
        work.zero_grad()


@pytest.mark.parametrize("name", [n for n in runners.lstm_runner_names()
                                  if not n.startswith("compile")])
def test_every_lstm_runner_iterates_with_two_layers(name):
    sizes = VARLEN_TINY if runners.get_runner(name).reference == "varlen" else TINY
    md = _build(name, seed=3, **sizes)
    assert isinstance(md.params, list) and len(md.params) == len(md.param_names)
    assert md.info["seed"] == 3
    runner = runners.get_runner(name)
    with runner.context():
        _iterate(md)
    assert all(p.grad is not None for p in md.params)


def test_grad_outputs_are_seeded():
    first, second = _build("jit", seed=5, **TINY), _build("jit", seed=5, **TINY)
    a = first.backward_setup(first.forward(*first.inputs))[1][0]
    b = second.backward_setup(second.forward(*second.inputs))[1][0]
    assert torch.equal(a, b)
    other = _build("jit", seed=6, **TINY)
    assert not torch.equal(a, other.backward_setup(other.forward(*other.inputs))[1][0])


def test_unseeded_creator_records_the_seed_it_drew():
    md = _build("cudnn", **TINY)
    again = _build("cudnn", seed=md.info["seed"], **TINY)
    assert torch.equal(md.inputs[0], again.inputs[0])


def test_lstm_data_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a = factory.lstm_data(**TINY, seed=11)
    b = factory.lstm_data(**TINY, seed=11)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a.x, b.x) and all(torch.equal(p, q) for p, q in zip(a.params, b.params))
    assert a.names[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert a.params[4].shape == (20, 5)  # layer 1 reads the hidden size


def test_variable_lengths_are_drawn_from_30_to_100_by_default():
    data = factory.lstm_data(miniBatch=40, inputSize=2, hiddenSize=2, seed=17,
                             variable_length=True)
    lengths = [len(seq) for seq in data.x]
    assert min(lengths) >= 30 and max(lengths) < 100 and len(set(lengths)) > 5


def test_simple_variant_returns_only_the_final_state():
    md = _build("jit_simple", seed=1, **TINY)
    output, (h, c) = md.forward(*md.inputs)
    assert output is None and h.shape == c.shape == (2, 3, 5)


def test_jit_runners_really_script_and_warn_nothing():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert isinstance(factory.scripted(cells.lstm_layer), torch.jit.ScriptFunction)
        _build("jit_premul", seed=1, **TINY)
        _build("resnet18_jit", seed=1, miniBatch=2, imageSize=32)
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("bad", [dict(numLayers=0), dict(hiddenSize=-1), dict(miniBatch=2.5)])
def test_bad_sizes_are_usage_errors(bad):
    with pytest.raises(UsageError):
        _build("cudnn", **dict(TINY, **bad))


def test_cuda_without_a_device_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # also on a machine with CUDA
    with pytest.raises(UsageError, match="cuda"):
        _build("cudnn", device="cuda", **TINY)


# -------------------------------------------------------------------------------- ResNets

@pytest.mark.parametrize("name,count", [("resnet18", 11_689_512), ("resnet18_jit", 11_689_512),
                                        ("resnet50", 25_557_032), ("resnet50_jit", 25_557_032)])
def test_resnets_run_forward_and_backward_with_torchvision_parameter_counts(name, count):
    md = _build(name, miniBatch=2, imageSize=32, seed=2)
    assert sum(p.numel() for p in md.params) == count
    assert md.inputs[0].shape == (2, 3, 32, 32)
    work = factory.modeldef_to_workload(md, "cpu")
    out = work.forward()
    assert out.shape == (2, 1000)
    work.backward(work.backward_setup(out))
    work.zero_grad()


def test_resnet_default_input_is_fastrnns_batch_of_224_images():
    import inspect
    signature = inspect.signature(runners.get_runner("resnet50").creator)
    assert signature.parameters["miniBatch"].default == 32
    assert signature.parameters["imageSize"].default == 224


# ------------------------------------------------------------------------------ registry

def test_unknown_runner_lists_the_valid_names():
    with pytest.raises(UsageError) as err:
        runners.get_runner("nope")
    assert "nope" in str(err.value) and "jit_premul_bias" in str(err.value)
    with pytest.raises(UsageError, match="'a', 'b'.*cudnn"):
        runners.get_runners(["cudnn", "a", "b"])


def test_groups_and_defaults():
    assert runners.DEFAULT_RNNS == ["cudnn", "aten", "jit", "jit_premul", "jit_premul_bias",
                                    "jit_simple", "jit_multilayer", "py"]
    assert runners.runner_names("cnns") == runners.DEFAULT_CNNS
    assert runners.runner_names("vl") == runners.DEFAULT_VL
    assert {r.group for r in runners.RUNNERS.values()} == set(runners.GROUPS)
    lstm = runners.lstm_runner_names()
    assert "resnet18" not in lstm and {"compile", "vl_py", "jit_layernorm"} <= set(lstm)


def test_register_runner_refuses_to_shadow():
    with pytest.raises(ValueError):
        runners.register_runner(runners.Runner("cudnn", factory.nn_lstm_creator))


# ------------------------------------------------------------------------------ contexts

def test_aten_context_disables_and_restores_cudnn():
    before = torch.backends.cudnn.enabled
    with runners.get_runner("aten").context():
        assert torch.backends.cudnn.enabled is False
    assert torch.backends.cudnn.enabled == before


@pytest.mark.parametrize("name", ["py", "vl_py"])
def test_py_runs_with_scripting_off_and_refuses_otherwise(name):
    runner = runners.get_runner(name)
    with pytest.raises(UsageError, match="TorchScript"):
        runner.creator(**TINY)
    with runner.context():
        assert not factory.scripting_enabled()
        md = runner.creator(**TINY)
    assert factory.scripting_enabled()
    assert not isinstance(md.forward, torch.jit.ScriptFunction)


def test_jit_runners_refuse_when_scripting_is_off():
    with runners.scripting_disabled():
        with pytest.raises(UsageError, match="TorchScript"):
            runners.get_runner("jit_multilayer").creator(**TINY)


@pytest.mark.parametrize("fuser", cases.FUSERS)
@pytest.mark.parametrize("executor", cases.EXECUTORS)
def test_fuser_and_executor_contexts_restore_every_switch(fuser, executor):
    before = jit_switch_state()
    with pytest.raises(KeyError):
        with runners.jit_settings(fuser, executor):
            raise KeyError("restores on error too")
    assert jit_switch_state() == before


def test_fuser_settings_take_effect():
    with runners.fuser_context("none"):
        state = jit_switch_state()
        assert not state["profiling_executor"] and not state["texpr_fuser"]
    with runners.fuser_context("te"), runners.executor_context("legacy"):
        state = jit_switch_state()
        assert state["texpr_fuser"] and not state["profiling_executor"]
        assert not state["fuse_on_cpu"]
    with runners.executor_context("simple"):
        assert not jit_switch_state()["graph_optimize"]


def test_jit_runner_runs_under_each_fuser():
    md = _build("jit_multilayer", seed=1, **TINY)
    for fuser in cases.FUSERS:
        with runners.fuser_context(fuser):
            for _ in range(3):  # past the profiling executor's profiling runs
                out, _ = md.forward(*md.inputs)
            assert out.shape == (4, 3, 5)


def test_unknown_fuser_or_executor_is_a_usage_error():
    with pytest.raises(UsageError, match="te, old, none, default"):
        runners.fuser_context("nvfuser")
    with pytest.raises(UsageError, match="profiling, simple, legacy, default"):
        runners.executor_context("fast")


def test_every_fuser_and_executor_name_has_its_settings():
    assert tuple(runners._FUSER_SETTINGS) == cases.FUSERS
    assert tuple(runners._EXECUTOR_SETTINGS) == cases.EXECUTORS
    for fuser in cases.FUSERS:
        for executor in cases.EXECUTORS:
            runners.check_jit_settings(fuser, executor)


def test_a_fuser_this_torch_cannot_honour_is_a_usage_error(monkeypatch):
    monkeypatch.delattr(torch._C, "_jit_set_texpr_fuser_enabled")
    before = jit_switch_state()
    with pytest.raises(UsageError, match="_jit_set_texpr_fuser_enabled"):
        with runners.fuser_context("te"):
            pass
    assert jit_switch_state() == before
    with runners.fuser_context("default"):  # touches nothing, so still fine
        pass


def test_compile_unavailable_is_a_usage_error(monkeypatch):
    import torch._dynamo
    monkeypatch.setattr(torch._dynamo, "is_dynamo_supported", lambda: False)
    with pytest.raises(UsageError, match="torch.compile"):
        runners.get_runner("compile").creator(**TINY)
