"""From a CaseSpec back to real NDArrays and the call that runs its operator.

A spec is JSON only (it crosses into worker processes, checkpoints and other reports), so the
arrays are rebuilt where the case runs: seeded, on the case's context, with gradients attached
where backward is planned. The timed cases (opbench.backends.mxnet.executor) and the gradient
probe (opbench.backends.mxnet.gradients) both build their arrays here, so what is probed is
what is timed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec

from . import registry, releases
from .cases import (
    DEFAULT_SEED,
    FLOAT_DTYPES,
    INTEGER_DTYPES,
    is_tensor,
    unknown_operator,
)
from .device import mx_context


@dataclass
class Materialized:
    """Arrays on the case's context and the call that runs the operator on them.

    grad_arrays are the inputs with attach_grad() (float, differentiable, backward planned;
    when the rule marks none, every floating-point input the operator does not write);
    call() must run inside autograd.record() for a backward pass to follow.
    """

    args: List[Any]
    kwargs: Dict[str, Any]
    grad_arrays: List[Any]
    call: Callable[[], Any]
    arrays: Dict[str, Any] = field(default_factory=dict)


def _np_array(desc: Dict[str, Any], rng) -> Any:
    """A numpy array for a tensor description; mx.nd.array casts it to the case dtype.

    Bulk values are drawn in float32 (half the memory and time of float64): materialising
    is not timed, but it is part of a sweep's wall time.
    """
    import numpy as np

    shape = tuple(desc["shape"])
    init = desc.get("init", "normal")
    size = math.prod(shape)
    if init == "normal":
        out = rng.standard_normal(shape, dtype=np.float32)
        if desc.get("scale", 1.0) != 1.0 or desc.get("loc", 0.0) != 0.0:
            out = out * desc.get("scale", 1.0) + desc.get("loc", 0.0)
    elif init == "uniform":
        out = _uniform(desc, shape, rng)
    elif init == "indices":
        out = _indices(desc, shape, rng)
    elif init in ("spd", "near_identity", "tril"):
        out = _matrices(init, shape, rng)
    elif init == "simplex":
        out = rng.uniform(0.1, 1.0, shape)
        out = out / out.sum(axis=-1, keepdims=True)
    elif init == "rois":
        out = _rois(shape, desc, rng)
    elif init == "affine":
        out = np.tile(np.array([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]), (shape[0], 1))
        out = out + rng.uniform(-0.1, 0.1, shape)
    elif init == "sparse":
        out = rng.standard_normal(shape, dtype=np.float32)
        out *= rng.random(shape, dtype=np.float32) < desc.get("density", 0.1)
    elif init == "fill":
        out = np.full(shape, desc.get("value", 0.0))
    elif init == "reciprocal_pairs":
        out = _reciprocal_pairs(desc, shape, rng)
    else:
        raise UsageError(f"unknown tensor init {init!r}")
    assert out.size == size
    return out


#: bytes of drawn numpy arrays a worker keeps for later cases with the same inputs (_Draws): many
#: cases of a category draw the same seeded tensors, and a 1M-value draw costs more than many
#: operators' calls; small, so the cache barely moves a worker's peak memory
DRAW_CACHE_BYTES = 32 << 20
#: the largest draw kept (1M float32 values, the sweep's common size). A larger one empties the
#: cache: a case with inputs that large is one of the heavy cases a sweep's peak memory is made
#: of, and no other case's draws must ride on that peak (nor its own, after its arrays are made)
DRAW_CACHE_LARGEST = 4 << 20


class _DrawCache:
    """Drawn arrays by (seed, the descriptions drawn so far in the case, this one included),
    with the generator's state after each, least recently used first out. The arrays are made
    read-only: a case gets its own NDArray copy of one (mx.nd.array), never the array itself."""

    def __init__(self, budget: int, largest: int = DRAW_CACHE_LARGEST):
        self.budget, self.largest = budget, min(largest, budget)
        self.entries: "OrderedDict[tuple, tuple]" = OrderedDict()
        self.used = 0

    def get(self, key: tuple) -> Optional[tuple]:
        found = self.entries.get(key)
        if found is not None:
            self.entries.move_to_end(key)
        return found

    def put(self, key: tuple, array, state: dict) -> None:
        if array.nbytes > self.largest:
            self.entries.clear()
            self.used = 0
            return
        array.setflags(write=False)
        self.entries[key] = (array, state)
        self.used += array.nbytes
        while self.used > self.budget:
            _key, (dropped, _state) = self.entries.popitem(last=False)
            self.used -= dropped.nbytes


_DRAWN = _DrawCache(DRAW_CACHE_BYTES)

#: draws at least this large are left in the sweep's shared folder for the next rounds' (and the
#: other `ab` side's) fresh workers and for later cases in this one: drawing 1M float32 normals
#: costs ~9 ms, reading them back from memory well under one; smaller draws are cheaper to redo
SHARED_DRAW_SMALLEST = 1 << 20
#: the most bytes of draws a sweep leaves in its shared folder (the first ones drawn stay)
SHARED_DRAW_BYTES = 2 << 30


class _SharedDraws:
    """Draws kept in the sweep's shared folder (benchcore.execute.worker.SHARED_SCRATCH_ENV, in
    memory), one .npy file and the generator's state after it per key: a round's fresh worker
    reads what an earlier round drew instead of drawing it again. Same bytes either way; the
    key holds numpy's version, so two environments of an `ab` share only the draws they would
    both make. A file is written under a temporary name and renamed, so a reader never sees half
    of one; without the folder (a worker outside a sweep) nothing is kept."""

    def __init__(self, folder: Optional[str]):
        self.folder = folder

    def _path(self, key: tuple) -> Optional[str]:
        if not self.folder or not os.path.isdir(self.folder):
            return None
        import numpy as np

        digest = hashlib.sha1(json.dumps([np.__version__, *key]).encode()).hexdigest()
        return os.path.join(self.folder, f"draw-{digest}")

    def get(self, key: tuple) -> Optional[tuple]:
        import numpy as np

        path = self._path(key)
        if path is None or not os.path.exists(path + ".json"):
            return None
        try:
            with open(path + ".json") as handle:
                state = json.load(handle)
            return np.load(path + ".npy", mmap_mode="r"), state
        except (OSError, ValueError):
            return None

    def put(self, key: tuple, array, state: dict) -> None:
        import numpy as np

        path = self._path(key)
        if path is None or array.nbytes < SHARED_DRAW_SMALLEST or self._used() + array.nbytes > SHARED_DRAW_BYTES:
            return
        partial = f"{path}.{os.getpid()}.partial"
        try:
            with open(partial + ".npy", "wb") as handle:
                np.save(handle, array)
            with open(partial + ".json", "w") as handle:
                json.dump(state, handle)
            os.replace(partial + ".npy", path + ".npy")
            os.replace(partial + ".json", path + ".json")  # last: a reader looks for this one
        except OSError:  # a full /dev/shm: the draw is simply not kept
            for leftover in (partial + ".npy", partial + ".json"):
                if os.path.exists(leftover):
                    os.remove(leftover)

    def _used(self) -> int:
        return sum(entry.stat().st_size for entry in os.scandir(self.folder) if entry.name.endswith(".npy"))


def _shared_folder() -> Optional[str]:
    from benchcore.execute.worker import SHARED_SCRATCH_ENV

    return os.environ.get(SHARED_SCRATCH_ENV)


class _Draws:
    """One case's seeded draws, in order, from one numpy Generator seeded with the case's seed:
    the values depend only on the seed and the descriptions drawn before, so where an earlier
    case in this process drew the same sequence its arrays (and the generator's state after
    them) are taken from _DRAWN instead of drawn again. The values are the same either way."""

    def __init__(self, seed: int):
        import numpy as np

        self.rng = np.random.default_rng(seed)
        self.key: tuple = (seed,)
        self.state: Optional[dict] = None  # set where the generator must resume after a cached draw
        self.shared = _SharedDraws(_shared_folder())

    def draw(self, desc: Dict[str, Any]) -> Any:
        self.key += (json.dumps(desc, sort_keys=True),)
        found = _DRAWN.get(self.key)
        if found is None:
            found = self.shared.get(self.key)
            if found is not None:
                _DRAWN.put(self.key, *found)
        if found is not None:
            array, self.state = found
            return array
        if self.state is not None:
            self.rng.bit_generator.state = self.state
            self.state = None
        array = _np_array(desc, self.rng)
        state = self.rng.bit_generator.state
        _DRAWN.put(self.key, array, state)
        self.shared.put(self.key, array, state)
        return array


def _uniform(desc: Dict[str, Any], shape: Tuple[int, ...], rng) -> Any:
    """Uniform in [low, high); for an integer dtype, integers in [ceil(low), floor(high)].

    Casting float draws to integers truncates toward zero, which would turn a domain such as
    a divisor's [0.5, 2) into zeros (an integer division by zero kills the process with
    SIGFPE); drawing integers inside the bounds keeps the input in its domain. A range that
    holds no integer keeps the float draws (cast by MXNet).
    """
    import numpy as np

    low, high = desc.get("low", 0.0), desc.get("high", 1.0)
    first, last = math.ceil(low), math.floor(high)
    if desc.get("dtype") in INTEGER_DTYPES and first <= last:
        return rng.integers(first, last, size=shape, endpoint=True)
    return rng.random(shape, dtype=np.float32) * np.float32(high - low) + np.float32(low)


def _reciprocal_pairs(desc: Dict[str, Any], shape: Tuple[int, ...], rng) -> Any:
    """exp(u) with u ~ U(-log_bound, log_bound), each draw followed along `axis` (the flattened
    array when None) by exp(-u): the logs are symmetric around 0 and every partial product of
    an in-order reduction along the axis stays within exp(±log_bound) of 1, whatever its length
    and dtype. MXNet's prod multiplies in the input dtype, in order: independent draws would
    make the partial products a random walk in the log, spreading with the square root of the
    length (by 1e±50 over a million values at log_bound 0.1), out of float32's normal range."""
    import numpy as np

    bound = np.float32(desc.get("log_bound", 0.1))
    logs = rng.random(shape, dtype=np.float32) * (2 * bound) - bound
    axis = desc.get("axis")
    lined = logs.reshape(-1) if axis is None else np.moveaxis(logs, axis, -1)  # views into logs
    even = lined.shape[-1] // 2 * 2
    lined[..., 1:even:2] = -lined[..., 0:even:2]
    return np.exp(logs)


def _indices(desc: Dict[str, Any], shape: Tuple[int, ...], rng) -> Any:
    import numpy as np

    low, high = int(desc.get("low", 0)), desc["high"]
    if isinstance(high, list):  # one bound per row: multi-dimensional indices (gather_nd ...)
        if desc.get("unique"):
            flat = rng.choice(math.prod(high), size=shape[1], replace=False)
            return np.stack(np.unravel_index(flat, tuple(high)))
        return np.stack([rng.integers(low, h, size=shape[1:]) for h in high])
    if desc.get("unique"):
        return low + rng.choice(int(high) - low, size=shape, replace=False)
    return rng.integers(low, int(high), size=shape)


def _matrices(init: str, shape: Tuple[int, ...], rng) -> Any:
    """Batches of well-conditioned square matrices for the linalg operators."""
    import numpy as np

    n = shape[-1]
    base = rng.standard_normal(shape) / math.sqrt(n)
    eye = np.eye(n)
    if init == "spd":  # eigenvalues in about [1, 5]
        return base @ np.swapaxes(base, -1, -2) + eye
    if init == "near_identity":  # det close to 1: finite even for n = 1024
        return eye + 0.1 * base
    lower = np.tril(0.1 * base, -1)  # tril: diagonal in [1, 2], small off-diagonal
    return lower + eye * rng.uniform(1.0, 2.0, shape[:-1])[..., None]


def _rois(shape: Tuple[int, ...], desc: Dict[str, Any], rng) -> Any:
    import numpy as np

    n = shape[0]
    h, w = desc["height"], desc["width"]
    x1 = rng.uniform(0, w / 2, n)
    y1 = rng.uniform(0, h / 2, n)
    x2 = np.minimum(x1 + rng.uniform(1, w / 2, n), w - 1)
    y2 = np.minimum(y1 + rng.uniform(1, h / 2, n), h - 1)
    batch = rng.integers(0, desc["batch"], n)
    return np.stack([batch, x1, y1, x2, y2], axis=1)


_CUSTOM_REGISTERED = False


def _register_identity_custom_op() -> None:
    """Register "opbench_identity" once per process so the Custom operator can be timed."""
    global _CUSTOM_REGISTERED
    if _CUSTOM_REGISTERED:
        return
    import mxnet as mx

    class _Identity(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0])

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            self.assign(in_grad[0], req[0], out_grad[0])

    @mx.operator.register("opbench_identity")
    class _IdentityProp(mx.operator.CustomOpProp):  # noqa: F841 - registered by decorator
        def __init__(self):
            super().__init__(need_top_grad=True)

        def list_arguments(self):
            return ["data"]

        def list_outputs(self):
            return ["output"]

        def infer_shape(self, in_shape):
            return in_shape, [in_shape[0]], []

        def create_operator(self, ctx, shapes, dtypes):
            return _Identity()

    _CUSTOM_REGISTERED = True


def _op_function(name: str) -> Optional[Callable[..., Any]]:
    """The generated nd function for an operator, wherever MXNet exposes it."""
    import mxnet as mx

    for module in (mx.nd, mx.nd._internal):
        fn = getattr(module, name, None)
        if fn is not None:
            return fn
    if name.startswith("_contrib_"):
        return getattr(mx.nd.contrib, name[len("_contrib_"):], None)
    return None


def _raw_invoker(name: str, inputs: List[Any], params: Dict[str, Any], out: Any) -> Callable[[], Any]:
    """Call an operator through MXNet's imperative C API with explicit inputs.

    Needed when an operator takes an input its generated function cannot pass (auxiliary
    states such as IdentityAttachKLSparseReg's moving_avg).
    """
    import ctypes

    from mxnet.base import _LIB, c_str, check_call

    handle = ctypes.c_void_p()
    check_call(_LIB.NNGetOpHandle(c_str(name), ctypes.byref(handle)))
    keys = [k for k, v in params.items() if v is not None]
    vals = [str(params[k]) for k in keys]

    def call():
        return releases.imperative_invoke(handle.value, inputs, keys, vals, out)

    return call


# multi-tensor updates write in place: their weights (the first of each group) are the outputs.
_MULTI_UPDATE_PREFIXES = ("multi_sgd", "multi_mp_sgd", "preloaded_multi_")


def _multi_update_out(name: str, data: List[Any], num_weights: int) -> List[Any]:
    extra = 2 if name.startswith("preloaded_") else 0
    group = (len(data) - extra) // num_weights
    return [data[i * group] for i in range(num_weights)]


def _attach_fallback_grads(arrays: Dict[str, Any], out: Any, grad_arrays: List[Any]) -> None:
    """Backward planned but the rule marks no input for a gradient: attach one to every
    dense floating-point input that the operator does not write (`out`), index tensors
    included, so a differentiable operator whose only inputs are indices (one_hot) or
    look like state still records a graph. The gradient probe (opbench.backends.mxnet.gradients) and the
    timed cases share this policy, so what is probed is what is timed."""
    import numpy as np

    written = {id(a) for a in (out if isinstance(out, (list, tuple)) else [out]) if a is not None}
    for value in arrays.values():
        for array in (value if isinstance(value, list) else [value]):
            if id(array) in written or array.stype != "default" or np.dtype(array.dtype).kind != "f":
                continue
            array.attach_grad()
            grad_arrays.append(array)


def materialize(spec: CaseSpec, ctx: Any = None, given: Optional[Dict[str, Any]] = None) -> Materialized:
    """Create the case's arrays (seeded) on its context and the call that runs the operator."""
    import mxnet as mx

    params = spec.params
    name = params["op"]
    info = registry.get(name)
    if info is None:
        raise unknown_operator(name)
    context = mx_context(ctx if ctx is not None else params.get("ctx", "cpu(0)"))
    seed = int(params.get("seed", DEFAULT_SEED))
    if registry.draws_random(name):  # the others never read MXNet's generators: seeding costs ~1 ms
        mx.random.seed(seed)
    draws = _Draws(seed)
    want_grad = bool(params.get("run_backward"))
    given = given or {}
    grad_arrays: List[Any] = []

    def build(desc: Dict[str, Any], arg: str) -> Any:
        if desc.get("init") == "given":
            source = given.get(desc.get("given", arg))
            if source is None:
                raise UsageError(f"input {arg!r} of {name} was given as an NDArray; pass it "
                                 f"again in materialize(..., given={{{arg!r}: array}})")
            if "given_index" in desc:
                source = source[desc["given_index"]]
            array = source.as_in_context(context) if hasattr(source, "as_in_context") \
                else mx.nd.array(source, ctx=context)
        else:
            array = mx.nd.array(draws.draw(desc), ctx=context, dtype=desc["dtype"])
        if want_grad and desc.get("grad", True) and desc.get("dtype") in FLOAT_DTYPES \
                and desc.get("init") != "indices":
            array.attach_grad()
            grad_arrays.append(array)
        return array

    arrays: Dict[str, Any] = {}
    values: Dict[str, Any] = {}
    for arg, value in params["inputs"].items():
        if is_tensor(value):
            values[arg] = arrays[arg] = build(value, arg)
        elif isinstance(value, list) and value and all(is_tensor(v) for v in value):
            values[arg] = arrays[arg] = [build(v, arg) for v in value]
        elif isinstance(value, list):
            values[arg] = tuple(value)
        else:
            values[arg] = value

    if name == "Custom":
        _register_identity_custom_op()
    if "ctx" in info.arg_names and not info.tensor_args:
        values["ctx"] = context

    list_args = [a for a in values if info.is_list_arg(a)]
    variadic = values.pop(list_args[0]) if list_args else []
    # one tensor for a variadic input (squeeze's data is one before MXNet 1.5) is a list of one
    args: List[Any] = list(variadic) if isinstance(variadic, list) else [variadic]
    kwargs = values
    if name.startswith(_MULTI_UPDATE_PREFIXES) and "out" not in kwargs:
        kwargs["out"] = _multi_update_out(name, args, int(kwargs["num_weights"]))

    if want_grad and not grad_arrays:
        _attach_fallback_grads(arrays, kwargs.get("out"), grad_arrays)

    hidden = [a for a in kwargs if a not in info.arg_names and a not in ("out", "ctx")]
    fn = None if hidden else _op_function(name)
    if fn is None:
        tensor_order = [a for a in info.arg_names if a in arrays and a in kwargs] + hidden
        inputs = list(args) + [kwargs[a] for a in tensor_order]
        scalars = {k: v for k, v in kwargs.items() if k not in tensor_order and k != "out"}
        call = _raw_invoker(name, inputs, scalars, kwargs.get("out"))
    else:
        def call(fn=fn, args=args, kwargs=kwargs):
            return fn(*args, **kwargs)

    return Materialized(args=args, kwargs=kwargs, grad_arrays=grad_arrays, call=call, arrays=arrays)
