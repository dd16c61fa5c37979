"""The runner registry (name → creator + context) and the TorchScript fuser/executor switches.

Use a runner as
    runner = get_runner("aten")
    with runner.context():
        modeldef = runner.creator(seqLength=..., device=...)
        ...time modeldef.forward / backward here...
The context must also cover the timed calls: `aten` disables cuDNN and `py` turns TorchScript
off for exactly that span, and both restore the previous state on the way out.
"""

from __future__ import annotations

import contextlib
import difflib
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Dict, Iterator, List, Optional

import torch

from benchcore.errors import UsageError
from rnnbench import cells, factory

GROUPS = ("rnns", "cnns", "vl")
# fastrnns' --print-json oss groups its results under these keys.
GROUP_JSON_KEYS = {"rnns": "lstm", "cnns": "resnet", "vl": "vl_lstm"}
DEFAULT_RNNS = ["cudnn", "aten", "jit", "jit_premul", "jit_premul_bias", "jit_simple",
                "jit_multilayer", "py"]
DEFAULT_CNNS = ["resnet18", "resnet18_jit", "resnet50", "resnet50_jit"]
DEFAULT_VL = ["vl_cudnn", "vl_jit", "vl_py"]

# What a correctness check compares a runner with (see correctness.py); None: not checkable.
REFERENCES = ("lstm", "varlen", "layernorm", "bidirectional")


@dataclass
class Runner:
    """A named way to build and run one model.

    context: a zero-argument callable returning the context manager to hold while building
    and timing. reference: the correctness reference kind (REFERENCES) or None for CNNs.
    check_options: creator options a correctness check adds to make the runner deterministic
    (e.g. dropout 0) — the check reports them.
    """

    name: str
    creator: Callable[..., factory.ModelDef]
    context: Callable[[], ContextManager] = contextlib.nullcontext
    group: str = "rnns"
    cuda_only: bool = False
    description: str = ""
    reference: Optional[str] = "lstm"
    check_options: dict = field(default_factory=dict)

    @property
    def is_lstm(self) -> bool:
        return self.reference is not None


# ------------------------------------------------------------------------------- contexts

@contextlib.contextmanager
def cudnn_disabled() -> Iterator[None]:
    """cuDNN off for the span (the `aten` runner), previous setting restored."""
    saved = torch.backends.cudnn.enabled
    torch.backends.cudnn.enabled = False
    try:
        yield
    finally:
        torch.backends.cudnn.enabled = saved


@contextlib.contextmanager
def scripting_disabled() -> Iterator[None]:
    """TorchScript off for the span (the `py` runners), previous setting restored.

    fastrnns ran `py` only under PYTORCH_JIT=0, which switches TorchScript off for a whole
    process and so cannot share a run with the jit runners; this does the same per runner.
    """
    state = torch.jit._state
    saved = bool(state._enabled)
    state.disable()
    try:
        yield
    finally:
        if saved:
            state.enable()


@contextlib.contextmanager
def ieee_float32() -> Iterator[None]:
    """TF32 off for cuBLAS matmuls and cuDNN (RNNs included) for the span, then restored.

    On Ampere and later GPUs cuDNN's LSTM uses TF32 by default (torch.backends.cudnn.allow_tf32
    is True) while the hand-written runners' matmuls do not, so a correctness check would
    compare 10-bit-mantissa against full float32 arithmetic. The legacy switches are used (they
    set every cuDNN operator at once); once the newer per-operator fp32_precision API has been
    used, torch refuses legacy reads, and that API is used instead. No effect on a CPU.
    """
    try:
        legacy = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    except RuntimeError:
        legacy = None
    with (_legacy_tf32_off(legacy) if legacy is not None else _fp32_precision_ieee()):
        yield


@contextlib.contextmanager
def _legacy_tf32_off(saved: tuple) -> Iterator[None]:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@contextlib.contextmanager
def _fp32_precision_ieee() -> Iterator[None]:
    """The newer API's per-operator switches (torch versions that refuse legacy reads have it)."""
    switches = (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn)
    saved = [switch.fp32_precision for switch in switches]
    for switch in switches:
        switch.fp32_precision = "ieee"
    try:
        yield
    finally:
        for switch, value in zip(switches, saved):
            switch.fp32_precision = value


# Each JIT switch: (getter, setter) names in torch._C. Getters let a context restore exactly
# what it found.
_SWITCHES = {
    "profiling_executor": ("_jit_set_profiling_executor", "_jit_set_profiling_executor"),
    "graph_optimize": ("_get_graph_executor_optimize", "_set_graph_executor_optimize"),
    "texpr_fuser": ("_jit_texpr_fuser_enabled", "_jit_set_texpr_fuser_enabled"),
    "fuse_on_cpu": ("_jit_can_fuse_on_cpu", "_jit_override_can_fuse_on_cpu"),
    "fuse_on_gpu": ("_jit_can_fuse_on_gpu", "_jit_override_can_fuse_on_gpu"),
}

_FUSER_SETTINGS = {
    "te": {"profiling_executor": True, "graph_optimize": True, "texpr_fuser": True,
           "fuse_on_gpu": True, "fuse_on_cpu": False},
    "old": {"profiling_executor": False, "graph_optimize": False, "texpr_fuser": False,
            "fuse_on_gpu": True},
    "none": {"profiling_executor": False, "graph_optimize": False, "texpr_fuser": False,
             "fuse_on_gpu": False, "fuse_on_cpu": False},
    "default": {},
}

_EXECUTOR_SETTINGS = {
    "profiling": {"profiling_executor": True, "graph_optimize": True},
    "simple": {"graph_optimize": False},
    "legacy": {"profiling_executor": False, "graph_optimize": True},
    "default": {},
}


def _get_switch(name: str) -> bool:
    getter = getattr(torch._C, _SWITCHES[name][0])
    if name == "profiling_executor":
        # torch offers no pure getter: set-and-restore reads the current value.
        current = getter(True)
        getter(current)
        return bool(current)
    return bool(getter())


def _set_switch(name: str, value: bool) -> None:
    getattr(torch._C, _SWITCHES[name][1])(value)


def _require_switches(what: str, settings: dict) -> None:
    missing = [fn for key in settings for fn in _SWITCHES[key] if not hasattr(torch._C, fn)]
    if missing:
        raise UsageError(f"{what} needs torch._C.{', torch._C.'.join(sorted(set(missing)))}, "
                         f"which torch {torch.__version__} lacks; use 'default'")


@contextlib.contextmanager
def _switches(what: str, settings: dict) -> Iterator[None]:
    """Apply JIT switch settings, restoring every switch touched even on error."""
    _require_switches(what, settings)
    saved = {key: _get_switch(key) for key in settings}
    try:
        for key, value in settings.items():
            _set_switch(key, value)
        yield
    finally:
        for key, value in saved.items():
            _set_switch(key, value)


def _settings(kind: str, name: str) -> dict:
    """The switch settings of a fuser or executor name, or a UsageError listing the valid ones."""
    table = _FUSER_SETTINGS if kind == "fuser" else _EXECUTOR_SETTINGS
    if name not in table:
        raise UsageError(f"unknown {kind} {name!r}; choose one of {', '.join(table)}")
    return table[name]


def check_jit_settings(fuser: str, executor: str = "default") -> None:
    """Refuse, before any case runs, a fuser or executor that is unknown or that the installed
    torch cannot apply (a switch missing from torch._C); the contexts would refuse it only
    inside each worker, one failed case at a time."""
    for kind, name in (("fuser", fuser), ("executor", executor)):
        _require_switches(f"{kind} {name!r}", _settings(kind, name))


def fuser_context(name: str) -> ContextManager:
    """The TorchScript fuser choice of fastrnns' --fuser: te, old, none or default (untouched).

    te: profiling executor with the TensorExpr fuser, fusion on GPU only; old: legacy executor
    without graph optimisation; none: every executor optimisation and fuser off.
    """
    return _switches(f"fuser {name!r}", _settings("fuser", name))


def executor_context(name: str) -> ContextManager:
    """The TorchScript executor of fastrnns' --executor; applied after (so over) the fuser."""
    return _switches(f"executor {name!r}", _settings("executor", name))


@contextlib.contextmanager
def jit_settings(fuser: str = "default", executor: str = "default") -> Iterator[None]:
    """fuser_context then executor_context, as fastrnns applies --fuser then --executor."""
    with fuser_context(fuser), executor_context(executor):
        yield


# ------------------------------------------------------------------------------- registry

def _lstm(name, creator, description, **kw) -> Runner:
    return Runner(name=name, creator=creator, description=description, **kw)


def _default_runners() -> List[Runner]:
    hw = factory.handwritten_creator
    return [
        _lstm("cudnn", factory.nn_lstm_creator, "nn.LSTM (cuDNN on CUDA)"),
        _lstm("aten", factory.nn_lstm_creator, "nn.LSTM with cuDNN disabled",
              context=cudnn_disabled),
        _lstm("jit", hw("lstm", True), "hand-written LSTM, TorchScript, one call per layer"),
        _lstm("jit_premul", hw("premul", True),
              "TorchScript LSTM, input×W_ih for all steps in one matmul"),
        _lstm("jit_premul_bias", hw("premul_bias", True),
              "jit_premul with b_ih folded into that matmul"),
        _lstm("jit_simple", hw("simple", True),
              "TorchScript LSTM, flat arguments, returns only the final (h, c)"),
        _lstm("jit_multilayer", hw("multilayer", True),
              "TorchScript LSTM looping over layers with a flat parameter list"),
        _lstm("py", hw("lstm", False), "hand-written LSTM, eager (TorchScript off)",
              context=scripting_disabled),
        _lstm("vl_cudnn", factory.varlen_nn_lstm_creator,
              "variable-length batch, packed nn.LSTM", group="vl", reference="varlen"),
        _lstm("vl_jit", factory.varlen_creator(True),
              "variable-length batch, TorchScript loop per sequence", group="vl",
              reference="varlen"),
        _lstm("vl_py", factory.varlen_creator(False),
              "variable-length batch, eager loop per sequence", group="vl",
              reference="varlen", context=scripting_disabled),
        _lstm("cudnn_layernorm", factory.nn_layernorm_creator,
              "layer-norm LSTM from nn.Linear + nn.LayerNorm modules, eager",
              reference="layernorm"),
        _lstm("jit_layernorm", factory.layernorm_creator(False),
              "layer-norm LSTM, TorchScript, F.layer_norm", reference="layernorm"),
        _lstm("jit_layernorm_decom", factory.layernorm_creator(True),
              "layer-norm LSTM, TorchScript, layer norm from mean/var", reference="layernorm"),
        _lstm("cudnn_dropout", factory.nn_dropout_creator,
              "nn.LSTM with dropout 0.4 between layers", check_options={"dropout": 0.0}),
        _lstm("jit_dropout", factory.dropout_creator,
              "TorchScript stacked LSTM with dropout 0.4 between layers",
              check_options={"dropout": 0.0}),
        _lstm("cudnn_bidirectional", factory.nn_bidirectional_creator,
              "bidirectional nn.LSTM", reference="bidirectional"),
        _lstm("jit_bidirectional", factory.bidirectional_creator,
              "bidirectional TorchScript LSTM", reference="bidirectional"),
        _lstm("compile", factory.compiled_creator(cells.lstm_stack),
              "hand-written LSTM through torch.compile (compile time in info)"),
        _lstm("compile_premul", factory.compiled_creator(cells.premul_stack),
              "premul LSTM through torch.compile (compile time in info)"),
        Runner("resnet18", factory.resnet_creator("resnet18", False), group="cnns",
               description="ResNet-18, eager", reference=None),
        Runner("resnet18_jit", factory.resnet_creator("resnet18", True), group="cnns",
               description="ResNet-18, traced", reference=None),
        Runner("resnet50", factory.resnet_creator("resnet50", False), group="cnns",
               description="ResNet-50, eager", reference=None),
        Runner("resnet50_jit", factory.resnet_creator("resnet50", True), group="cnns",
               description="ResNet-50, traced", reference=None),
    ]


RUNNERS: Dict[str, Runner] = {runner.name: runner for runner in _default_runners()}


def register_runner(runner: Runner, replace: bool = False) -> Runner:
    """Add a runner (e.g. a deliberately broken one in a test); refuses to shadow silently."""
    if runner.name in RUNNERS and not replace:
        raise ValueError(f"runner {runner.name!r} is already registered")
    if runner.group not in GROUPS:
        raise ValueError(f"runner group must be one of {GROUPS}, got {runner.group!r}")
    if runner.reference is not None and runner.reference not in REFERENCES:
        raise ValueError(f"runner reference must be one of {REFERENCES} or None")
    RUNNERS[runner.name] = runner
    return runner


def runner_names(group: Optional[str] = None) -> List[str]:
    """Registered names in registration order, optionally of one group."""
    return [name for name, r in RUNNERS.items() if group is None or r.group == group]


def lstm_runner_names() -> List[str]:
    """Every runner a correctness check can compare with nn.LSTM (all but the CNNs)."""
    return [name for name, r in RUNNERS.items() if r.is_lstm]


def get_runner(name: str) -> Runner:
    """The runner called `name`, or a UsageError that suggests and lists the valid names."""
    return get_runners([name])[0]


def get_runners(names: List[str]) -> List[Runner]:
    """Several runners; every unknown name is reported at once."""
    unknown = [name for name in names if name not in RUNNERS]
    if unknown:
        close = [match for name in unknown for match in difflib.get_close_matches(name, RUNNERS, n=2, cutoff=0.7)]
        hint = f"did you mean {', '.join(dict.fromkeys(close))}? " if close else ""
        raise UsageError(f"unknown runner{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))}; {hint}valid runners: {', '.join(RUNNERS)}")
    return [RUNNERS[name] for name in names]
