"""ModelDef creators: everything a timing loop or a correctness check needs about one model.

A creator builds seeded inputs and parameters on a device and returns a `ModelDef`; the timing
loop (through `modeldef_to_workload`) and `correctness.check_runner` know nothing else.

Creators share one signature,
`creator(seqLength=100, numLayers=1, inputSize=512, hiddenSize=512, miniBatch=64, device="cpu",
seed=None, **options) -> ModelDef`, and work on CPU and CUDA alike. Output conventions:
- LSTM creators: `forward(x, hx, cx) -> (output | None, (h_n, c_n))`, shaped as nn.LSTM's
  (output is None for the `simple` variant, which keeps only the final state);
- variable-length creators: `inputs[0]` is a list of (T_i, inputSize) sequences and output is a
  list of (T_i, H) tensors, or a padded (T_max, B, H) tensor for the packed nn.LSTM;
- CNN creators: `forward(images) -> logits`.
Parameters are always a list (fastrnns' custom LSTMs passed a generator, which the loop
exhausted once, so gradients were never zeroed afterwards).
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence

import torch

from benchcore.errors import UsageError, error_summary
from benchcore.measure.case import Workload
from rnnbench import cells

VARLEN_LENGTHS = (30, 100)  # fastrnns' variable-length range: lengths drawn from [30, 100)
LAYERNORM_EPS = 1e-5
DEFAULT_DROPOUT = 0.4


@dataclass
class ModelDef:
    """One model ready to run: `forward(*inputs)`, then `backward(*backward_setup(output))`.

    backward_setup draws a seeded random grad_output (untimed); backward runs autograd (timed).
    param_names name `params` one for one (nn.LSTM's names where the layout matches), so a
    check can report which gradient differs. info carries creator facts such as the seed used
    and, for compile runners, the compile time kept out of the steady-state figures.
    """

    inputs: list
    params: list
    forward: Callable[..., Any]
    backward_setup: Callable[[Any], tuple]
    backward: Callable[..., None]
    param_names: List[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.params = list(self.params)
        self.inputs = list(self.inputs)


@dataclass
class LSTMData:
    """Seeded inputs and parameters of an LSTM, shared by every runner and by the reference.

    x is a (T, B, I) tensor, or a list of (T_i, I) tensors for a variable-length batch.
    """

    x: Any
    hx: torch.Tensor
    cx: torch.Tensor
    params: List[torch.Tensor]
    names: List[str]
    seed: int

    @property
    def inputs(self) -> list:
        return [self.x, self.hx, self.cx]


# ---------------------------------------------------------------------------------- helpers

def resolve_device(device: str) -> torch.device:
    """A torch.device for a user's --device, or a UsageError saying why it cannot be used."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise UsageError(f"unknown device {device!r}: use cpu or cuda[:N]") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device {device!r} requested but this torch has no usable CUDA device; "
                         "use --device cpu")
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"device {device!r} is not supported: use cpu or cuda[:N]")
    return dev


def check_sizes(**sizes: int) -> None:
    """Reject sizes that would fail deep inside torch with an unreadable message."""
    for key, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{key} must be a positive integer, got {value!r}")


def make_generator(seed: Optional[int]) -> tuple:
    """A private CPU generator and the seed it was given (drawn when seed is None, to record it).

    A private generator keeps creators from disturbing, or depending on, the global RNG.
    """
    if seed is None:
        seed = torch.Generator().seed() % (2**31 - 1)
    gen = torch.Generator()
    gen.manual_seed(int(seed))
    return gen, int(seed)


@contextlib.contextmanager
def quiet_jit():
    """Silence torch 2.13's "`torch.jit.<name>` is deprecated" notices (only those).

    The jit runners exist precisely to measure TorchScript; the notice would be repeated for
    every case and bury the output a user asked for. Importing inductor (torch.compile) emits
    the same notice for torch.jit.script_method.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.\w+`? is deprecated",
                                category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.\w+`? is deprecated",
                                category=FutureWarning)
        yield


def scripting_enabled() -> bool:
    """False when TorchScript is off (PYTORCH_JIT=0 or torch.jit._state.disable())."""
    return bool(torch.jit._state._enabled)


def require_eager(runner: str) -> None:
    """The eager (`py`) runners run only with TorchScript off, as in fastrnns, where they ran
    under PYTORCH_JIT=0; their runner context switches it off for exactly their span."""
    if scripting_enabled():
        raise UsageError(f"the {runner} runner measures eager PyTorch and runs only with "
                         f"TorchScript off: use it through its runner context "
                         f"(runners.get_runner({runner!r}).context()) or set PYTORCH_JIT=0")


_SCRIPTED: dict = {}


def scripted(fn: Callable) -> Callable:
    """torch.jit.script(fn), once per process; refuses when TorchScript is off.

    With TorchScript off torch.jit.script silently returns the Python function, and a `jit`
    figure would then be an eager one under the wrong name.
    """
    if not scripting_enabled():
        raise UsageError("the jit runners need TorchScript, which is disabled here "
                         "(PYTORCH_JIT=0?); unset it or choose non-jit runners")
    if fn not in _SCRIPTED:
        with quiet_jit():
            _SCRIPTED[fn] = torch.jit.script(fn)
    return _SCRIPTED[fn]


def _sync_for(dev: torch.device) -> Callable[[], None]:
    if dev.type == "cuda":
        return torch.cuda.synchronize
    return _no_sync


def _no_sync() -> None:
    return None


def _primary_outputs(result: Any) -> List[torch.Tensor]:
    """The tensors a benchmark's grad_output is drawn for.

    As fastrnns: the output sequence of an LSTM, the final h of the simple variant, every
    sequence of a variable-length batch, the logits of a CNN.
    """
    if isinstance(result, torch.Tensor):
        return [result]
    output, (h, _c) = result
    if output is None:
        return [h]
    if isinstance(output, (list, tuple)):
        return list(output)
    return [output]


def grad_setup(device: torch.device, seed: int) -> Callable[[Any], tuple]:
    """A backward_setup drawing seeded grad_outputs from its own generator, on the device."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + 1)

    def backward_setup(result: Any) -> tuple:
        tensors = _primary_outputs(result)
        grads = [torch.randn(t.shape, generator=gen, device=t.device, dtype=t.dtype)
                 for t in tensors]
        return tensors, grads

    return backward_setup


def run_backward(tensors: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> None:
    """The timed backward: autograd from the outputs with the drawn grad_outputs."""
    torch.autograd.backward(list(tensors), list(grads))


def modeldef_to_workload(modeldef: ModelDef, device: str) -> Workload:
    """Adapt a ModelDef to benchcore's Workload.

    zero_grad checks that every parameter received a gradient (a parameter without one means
    the model does not use it, so its timing is of a different model) and zeroes it in place,
    as fastrnns does, so backward accumulates into existing buffers.
    """
    dev = torch.device(device)
    params = list(modeldef.params)
    names = modeldef.param_names or [f"param{i}" for i in range(len(params))]

    def forward() -> Any:
        return modeldef.forward(*modeldef.inputs)

    def backward(prepared: tuple) -> None:
        modeldef.backward(*prepared)

    def zero_grad() -> None:
        for name, param in zip(names, params):
            if param.grad is None:
                raise RuntimeError(f"parameter {name} got no gradient from backward")
            param.grad.zero_()

    return Workload(forward=forward, sync=_sync_for(dev), backward_setup=modeldef.backward_setup,
                    backward=backward, zero_grad=zero_grad, inputs=modeldef.inputs, params=params,
                    device=dev.type, info=dict(modeldef.info))


# ------------------------------------------------------------------------------- LSTM data

def lstm_param_names(num_layers: int, directions: int = 1, layernorm: bool = False) -> List[str]:
    """nn.LSTM's parameter names, in its order (layer-norm: our own eight per layer)."""
    if layernorm:
        kinds = ["weight_ih", "weight_hh", "ln_ih_weight", "ln_ih_bias", "ln_hh_weight",
                 "ln_hh_bias", "ln_c_weight", "ln_c_bias"]
    else:
        kinds = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    names = []
    for layer in range(num_layers):
        for direction in range(directions):
            suffix = f"_l{layer}" + ("_reverse" if direction else "")
            names += [kind + suffix for kind in kinds]
    return names


def _param_shape(name: str, layer: int, input_size: int, hidden_size: int,
                 directions: int) -> tuple:
    size_in = input_size if layer == 0 else hidden_size * directions
    if name.startswith("weight_ih"):
        return (4 * hidden_size, size_in)
    if name.startswith("weight_hh"):
        return (4 * hidden_size, hidden_size)
    if name.startswith("ln_c"):
        return (hidden_size,)
    return (4 * hidden_size,)


def _init_param(name: str, shape: tuple, bound: float, gen: torch.Generator) -> torch.Tensor:
    """nn.LSTM's uniform(-1/√H, 1/√H); layer-norm gains near 1 and shifts near 0.

    Layer-norm parameters are perturbed rather than left at 1 and 0 so a check would notice a
    runner that ignores them.
    """
    noise = torch.rand(shape, generator=gen) * 2 - 1
    if name.startswith("ln_") and name.split("_l")[0].endswith("weight"):
        return 1.0 + 0.1 * noise
    if name.startswith("ln_"):
        return 0.1 * noise
    return bound * noise


def lstm_data(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
              hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
              seed: Optional[int] = None, *, variable_length: bool = False,
              lengths: tuple = VARLEN_LENGTHS, directions: int = 1,
              layernorm: bool = False) -> LSTMData:
    """Seeded inputs and parameters, generated on CPU and moved, so CPU and CUDA runs agree.

    Draw order is fixed (input, h0, c0, then parameters in name order); the reference in
    correctness.py calls this too, which is what "built from the same seed" means.
    Variable-length batches ignore seqLength and draw each length from `lengths` = [low, high).
    """
    check_sizes(seqLength=seqLength, numLayers=numLayers, inputSize=inputSize,
                hiddenSize=hiddenSize, miniBatch=miniBatch)
    dev = resolve_device(device)
    gen, seed = make_generator(seed)
    if variable_length:
        low, high = lengths
        if not 1 <= low < high:
            raise UsageError(f"variable-length range must satisfy 1 <= low < high, got {lengths}")
        sizes = torch.randint(low, high, (miniBatch,), generator=gen).tolist()
        x = [torch.randn(n, inputSize, generator=gen).to(dev) for n in sizes]
    else:
        x = torch.randn(seqLength, miniBatch, inputSize, generator=gen).to(dev)
    state = (numLayers * directions, miniBatch, hiddenSize)
    hx = torch.randn(state, generator=gen).to(dev)
    cx = torch.randn(state, generator=gen).to(dev)
    names = lstm_param_names(numLayers, directions, layernorm)
    per_layer = len(names) // numLayers
    bound = 1.0 / math.sqrt(hiddenSize)
    params = []
    for index, name in enumerate(names):
        shape = _param_shape(name, index // per_layer, inputSize, hiddenSize, directions)
        params.append(_init_param(name, shape, bound, gen).to(dev).requires_grad_())
    return LSTMData(x=x, hx=hx, cx=cx, params=params, names=names, seed=seed)


def build_nn_lstm(data: LSTMData, inputSize: int, hiddenSize: int, numLayers: int,
                  dropout: float = 0.0, bidirectional: bool = False) -> torch.nn.LSTM:
    """An nn.LSTM holding exactly `data`'s parameter values (copied in place, so cuDNN's flat
    weight buffer stays valid)."""
    with warnings.catch_warnings():
        # nn.LSTM warns that dropout does nothing with one layer; fastrnns' sizes do that.
        warnings.filterwarnings("ignore", message=".*dropout option adds dropout.*")
        module = torch.nn.LSTM(inputSize, hiddenSize, numLayers, dropout=dropout,
                               bidirectional=bidirectional)
    module = module.to(data.hx.device)
    own = dict(module.named_parameters())
    with torch.no_grad():
        for name, value in zip(data.names, data.params):
            own[name].copy_(value)
    return module


# ---------------------------------------------------------------------------- LSTM creators

def _lstm_modeldef(data: LSTMData, forward: Callable, params: list, names: list,
                   dev: torch.device, **info: Any) -> ModelDef:
    return ModelDef(inputs=data.inputs, params=params, forward=forward,
                    backward_setup=grad_setup(dev, data.seed), backward=run_backward,
                    param_names=names, info={"seed": data.seed, **info})


def nn_lstm_creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                    hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                    seed: Optional[int] = None, *, dropout: float = 0.0,
                    bidirectional: bool = False) -> ModelDef:
    """nn.LSTM (cuDNN on CUDA unless disabled by the runner's context)."""
    directions = 2 if bidirectional else 1
    data = lstm_data(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed,
                     directions=directions)
    module = build_nn_lstm(data, inputSize, hiddenSize, numLayers, dropout, bidirectional)

    def forward(x, hx, cx):
        return module(x, (hx, cx))

    names, params = zip(*module.named_parameters())
    return _lstm_modeldef(data, forward, list(params), list(names), data.hx.device)


def varlen_nn_lstm_creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                           hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                           seed: Optional[int] = None, *,
                           lengths: tuple = VARLEN_LENGTHS) -> ModelDef:
    """nn.LSTM on a packed variable-length batch; packing and padding are inside forward."""
    data = lstm_data(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed,
                     variable_length=True, lengths=lengths)
    module = build_nn_lstm(data, inputSize, hiddenSize, numLayers)
    rnn_utils = torch.nn.utils.rnn

    def forward(seqs, hx, cx):
        packed = rnn_utils.pack_sequence(seqs, enforce_sorted=False)
        out, state = module(packed, (hx, cx))
        padded, _ = rnn_utils.pad_packed_sequence(out)
        return padded, state

    names, params = zip(*module.named_parameters())
    return _lstm_modeldef(data, forward, list(params), list(names), data.hx.device)


def _layered(layer_fn: Callable, params: list, num_layers: int,
             last_fn: Optional[Callable] = None) -> Callable:
    """forward(x, hx, cx) calling layer_fn once per layer with flat per-layer arguments.

    This keeps fastrnns' one-call-per-model shape of the jit/premul runners at one layer while
    stacking any number of layers; last_fn, when given, runs the top layer and returns only
    (h, c), as the simple variant does.
    """
    def forward(x, hx, cx):
        hs, cs = [], []
        for layer in range(num_layers):
            w = params[4 * layer:4 * layer + 4]
            if last_fn is not None and layer == num_layers - 1:
                h, c = last_fn(x, hx[layer], cx[layer], *w)
                x = None
            else:
                x, h, c = layer_fn(x, hx[layer], cx[layer], *w)
            hs.append(h)
            cs.append(c)
        return x, (torch.stack(hs), torch.stack(cs))

    return forward


def handwritten_creator(variant: str, script: bool) -> Callable[..., ModelDef]:
    """The hand-written LSTM: variant in lstm|premul|premul_bias|simple|multilayer.

    script=False is the `py` runner: it never scripts, and it refuses to run while TorchScript
    is on (its runner context turns TorchScript off), mirroring fastrnns, so a `py` figure is
    taken under the same switch state fastrnns used.
    """
    layer_fns = {"lstm": cells.lstm_layer, "premul": cells.premul_layer,
                 "premul_bias": cells.premul_bias_layer, "simple": cells.lstm_layer}
    if variant not in layer_fns and variant != "multilayer":
        raise ValueError(f"unknown hand-written LSTM variant {variant!r}")

    def creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                seed: Optional[int] = None) -> ModelDef:
        if not script:
            require_eager("py")
        wrap = scripted if script else (lambda fn: fn)
        data = lstm_data(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed)
        params = data.params
        if variant == "multilayer":
            stack = wrap(cells.lstm_stack)

            def forward(x, hx, cx):
                return stack(x, hx, cx, params)
        else:
            last = wrap(cells.simple_layer) if variant == "simple" else None
            forward = _layered(wrap(layer_fns[variant]), params, numLayers, last)
        return _lstm_modeldef(data, forward, params, data.names, data.hx.device)

    return creator


def varlen_creator(script: bool) -> Callable[..., ModelDef]:
    """Variable-length batch run one sequence at a time by the hand-written LSTM
    (script=False is `vl_py`, which like `py` runs only with TorchScript off)."""

    def creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                seed: Optional[int] = None, *, lengths: tuple = VARLEN_LENGTHS) -> ModelDef:
        if not script:
            require_eager("vl_py")
        stack = scripted(cells.varlen_stack) if script else cells.varlen_stack
        data = lstm_data(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed,
                         variable_length=True, lengths=lengths)
        params = data.params

        def forward(seqs, hx, cx):
            return stack(seqs, hx, cx, params)

        return _lstm_modeldef(data, forward, params, data.names, data.hx.device)

    return creator


def dropout_creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                    hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                    seed: Optional[int] = None, *, dropout: float = DEFAULT_DROPOUT) -> ModelDef:
    """Scripted stacked LSTM with dropout between layers (training mode), as nn.LSTM does it."""
    stack = scripted(cells.dropout_stack)
    data = lstm_data(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed)
    params = data.params
    p = float(dropout)

    def forward(x, hx, cx):
        return stack(x, hx, cx, params, p, True)

    return _lstm_modeldef(data, forward, params, data.names, data.hx.device, dropout=p)


def nn_dropout_creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                       hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                       seed: Optional[int] = None, *,
                       dropout: float = DEFAULT_DROPOUT) -> ModelDef:
    """nn.LSTM with dropout between layers: the library baseline for jit_dropout."""
    md = nn_lstm_creator(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed,
                         dropout=dropout)
    md.info["dropout"] = float(dropout)
    return md


def bidirectional_creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                          hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                          seed: Optional[int] = None) -> ModelDef:
    """Scripted bidirectional stack (a reversed-time pass per layer)."""
    stack = scripted(cells.bidirectional_stack)
    data = lstm_data(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed,
                     directions=2)
    params = data.params

    def forward(x, hx, cx):
        return stack(x, hx, cx, params)

    return _lstm_modeldef(data, forward, params, data.names, data.hx.device)


def nn_bidirectional_creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                             hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                             seed: Optional[int] = None) -> ModelDef:
    """nn.LSTM(bidirectional=True): the library baseline for jit_bidirectional."""
    return nn_lstm_creator(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed,
                           bidirectional=True)


def layernorm_creator(decompose: bool) -> Callable[..., ModelDef]:
    """Scripted layer-norm LSTM; decompose=True writes layer norm from mean/var primitives."""

    def creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                seed: Optional[int] = None) -> ModelDef:
        stack = scripted(cells.layernorm_stack)
        data = lstm_data(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed,
                         layernorm=True)
        params = data.params

        def forward(x, hx, cx):
            return stack(x, hx, cx, params, LAYERNORM_EPS, decompose)

        return _lstm_modeldef(data, forward, params, data.names, data.hx.device)

    return creator


def nn_layernorm_creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                         hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                         seed: Optional[int] = None) -> ModelDef:
    """The layer-norm LSTM from stock nn modules, eager: the baseline for jit_layernorm."""
    data = lstm_data(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed,
                     layernorm=True)
    module = cells.LayerNormLSTM(inputSize, hiddenSize, numLayers, LAYERNORM_EPS)
    module = module.to(data.hx.device)
    params = list(module.parameters())
    with torch.no_grad():
        for own, value in zip(params, data.params):
            own.copy_(value)
    return _lstm_modeldef(data, module, params, data.names, data.hx.device)


def compiled_creator(stack_fn: Callable) -> Callable[..., ModelDef]:
    """The hand-written LSTM stack through torch.compile (static shapes).

    The creator pays the compile itself with one forward and one backward, so the timing loop
    sees only steady-state calls; the cost goes to info: compile_forward_s, compile_backward_s
    and their sum compile_s. Dynamo's cache is reset first so the figure is a full compile
    (torch.compile caches per code object: without the reset a second ModelDef of the same
    shape would report ~0 s, and many shapes would hit the recompile limit and fall back to
    eager unnoticed). Consequence: an earlier compile ModelDef recompiles if used again.
    """

    def creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                seed: Optional[int] = None, *, backend: str = "inductor") -> ModelDef:
        dynamo = _require_dynamo()
        data = lstm_data(seqLength, numLayers, inputSize, hiddenSize, miniBatch, device, seed)
        params = data.params
        dynamo.reset()
        with quiet_jit():
            compiled = torch.compile(stack_fn, backend=backend, dynamic=False)

            def forward(x, hx, cx):
                return compiled(x, hx, cx, params)

            timings = _warm_compile(forward, data, backend)
        return _lstm_modeldef(data, forward, params, data.names, data.hx.device,
                              backend=backend, **timings)

    return creator


def _require_dynamo():
    try:
        import torch._dynamo as dynamo
    except ImportError as exc:  # pragma: no cover - torch builds without dynamo
        raise UsageError(f"torch.compile is unavailable in torch {torch.__version__}: {exc}") \
            from exc
    if not dynamo.is_dynamo_supported():
        raise UsageError(f"torch.compile is not supported by torch {torch.__version__} on this "
                         "Python/platform; choose non-compile runners")
    return dynamo


def _warm_compile(forward: Callable, data: LSTMData, backend: str) -> dict:
    """Run one forward and one backward to trigger both compiles; time each.

    A failure here is the environment's (no C compiler, unsupported platform), so it becomes a
    UsageError naming the cause rather than a traceback from deep inside inductor.
    """
    sync = _sync_for(data.hx.device)
    try:
        sync()
        start = time.perf_counter()
        output, _state = forward(*data.inputs)
        sync()
        mid = time.perf_counter()
        output.backward(torch.ones_like(output))
        sync()
        end = time.perf_counter()
    except Exception as exc:
        if not _is_compile_failure(exc):
            raise
        raise UsageError(f"torch.compile (backend {backend}) failed here: {error_summary(exc)}; "
                         "a C++ compiler is needed for the inductor backend on CPU") from exc
    for param in data.params:
        param.grad = None
    return {"compile_forward_s": mid - start, "compile_backward_s": end - mid,
            "compile_s": end - start}


def _is_compile_failure(exc: BaseException) -> bool:
    """True for errors raised by dynamo/inductor machinery rather than by the model's math."""
    module = type(exc).__module__ or ""
    return module.startswith(("torch._dynamo", "torch._inductor")) or isinstance(
        exc, (OSError, ImportError))


# ---------------------------------------------------------------------------- CNN creators

def resnet_creator(arch: str, jit: bool) -> Callable[..., ModelDef]:
    """ResNet-18/50 on seeded images (miniBatch × 3 × imageSize²), optionally traced.

    LSTM sizes are accepted and ignored so every runner shares one call signature. fastrnns
    fixed the batch at 32 whatever --miniBatch said; here miniBatch is the batch (default 32).
    """
    from rnnbench.models import resnet

    builders = {"resnet18": resnet.resnet18, "resnet50": resnet.resnet50}
    if arch not in builders:
        raise ValueError(f"unknown ResNet {arch!r}")

    def creator(seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                hiddenSize: int = 512, miniBatch: int = 32, device: str = "cpu",
                seed: Optional[int] = None, *, imageSize: int = 224) -> ModelDef:
        check_sizes(miniBatch=miniBatch, imageSize=imageSize)
        dev = resolve_device(device)
        gen, seed = make_generator(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = builders[arch]()
        model = model.to(dev).train()
        images = torch.randn(miniBatch, 3, imageSize, imageSize, generator=gen).to(dev)
        forward = model
        if jit:
            with quiet_jit(), warnings.catch_warnings():
                # BatchNorm's training-mode batch-size check becomes a constant in the trace;
                # harmless here, because the traced model is only ever run on these shapes.
                warnings.filterwarnings("ignore", category=torch.jit.TracerWarning,
                                        message="Converting a tensor to a Python boolean")
                # check_trace would re-run and re-trace the whole network only to compare
                # the two traces; for these static models it doubles creation time.
                forward = torch.jit.trace(model, (images,), check_trace=False)
        names, params = zip(*model.named_parameters())
        return ModelDef(inputs=[images], params=list(params), forward=forward,
                        backward_setup=grad_setup(dev, seed), backward=run_backward,
                        param_names=list(names), info={"seed": seed, "arch": arch})

    return creator
