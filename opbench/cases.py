"""From operators to CaseSpecs, and from a CaseSpec back to real NDArrays and a call.

generate_cases() is the registry-driven path (every selected operator, one case per input
combination); spec_from_inputs() is opperf's `run_performance_test(op, inputs=[...])` path.
Both produce JSON-only CaseSpecs, so a case can cross into a worker process, a checkpoint or
another report; materialize() rebuilds the arrays there, seeded, on the case's context.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from benchcore.case import CaseSpec
from benchcore.errors import UsageError

from . import categories, registry, rules

SUITE = "opbench"
DEFAULT_SEED = 41
DTYPES = ("float16", "float32", "float64", "int8", "uint8", "int32", "int64", "bfloat16")
_FLOAT_DTYPES = ("float16", "float32", "float64", "bfloat16")
_INTEGER_DTYPES = ("int8", "uint8", "int32", "int64")

# Python-level nd wrappers opperf users pass as functions, mapped to the operator they run.
PY_WRAPPERS = {
    "add": "broadcast_add", "subtract": "broadcast_sub", "multiply": "broadcast_mul",
    "divide": "broadcast_div", "true_divide": "broadcast_div", "modulo": "broadcast_mod",
    "power": "broadcast_power", "maximum": "broadcast_maximum", "minimum": "broadcast_minimum",
    "equal": "broadcast_equal", "not_equal": "broadcast_not_equal",
    "greater": "broadcast_greater", "greater_equal": "broadcast_greater_equal",
    "lesser": "broadcast_lesser", "lesser_equal": "broadcast_lesser_equal",
}

NO_RULE_REASON = "no input rule: its inputs cannot be derived from the registry alone"


# ---------------------------------------------------------------- context and dtype

def parse_ctx(ctx: Any) -> Tuple[str, int]:
    """("cpu"|"gpu", device id) from "cpu", "cpu(N)", "gpu", "gpu(N)" or an mx.Context."""
    if hasattr(ctx, "device_type") and hasattr(ctx, "device_id"):
        return str(ctx.device_type), int(ctx.device_id)
    text = str(ctx).strip().lower()
    for kind in ("cpu", "gpu"):
        if text == kind:
            return kind, 0
        if text.startswith(kind + "(") and text.endswith(")"):
            inner = text[len(kind) + 1:-1].strip()
            if inner.isdigit():
                return kind, int(inner)
    raise UsageError(f"bad ctx {ctx!r}: use cpu, cpu(N), gpu or gpu(N)")


def normalize_ctx(ctx: Any) -> str:
    kind, index = parse_ctx(ctx)
    return f"{kind}({index})"


def mx_context(ctx: Any):
    import mxnet as mx

    kind, index = parse_ctx(ctx)
    return mx.cpu(index) if kind == "cpu" else mx.gpu(index)


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise UsageError(f"bad dtype {dtype!r}: choose from {', '.join(DTYPES)}")
    return dtype


def int64_tensor_supported() -> bool:
    import mxnet as mx

    return bool(mx.runtime.Features().is_enabled("INT64_TENSOR_SIZE"))


def _require_int64() -> None:
    if not int64_tensor_supported():
        import mxnet as mx

        raise UsageError(
            "--int64-tensor on needs an MXNet built with INT64_TENSOR_SIZE; the installed "
            f"mxnet {mx.__version__} lacks it; install a large-tensor build "
            "(e.g. built with USE_INT64_TENSOR_SIZE=1) or run with --int64-tensor off"
        )


# ---------------------------------------------------------------- operator selection

_GLOB_CHARS = set("*?[")


def operator_name(op: Any) -> str:
    """An operator name from a string or an mx.nd function (opperf passes functions)."""
    if isinstance(op, str):
        return op
    name = getattr(op, "__name__", None)
    if not name:
        raise UsageError(f"cannot tell which operator {op!r} is: pass its name")
    return name


def _unknown(name: str) -> UsageError:
    close = registry.suggest(name)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see opbench --list --all"
    return UsageError(f"unknown operator {name!r}{hint}")


def resolve_ops(ops: Optional[Iterable[Any]] = None,
                categories_: Optional[Iterable[str]] = None) -> List[str]:
    """Selected operator names for names/globs and categories (opperf's membership), sorted.

    A glob matches selected operators; only when it matches none does it search every
    registered operator (so "_contrib_*" works). An exact name may be any registered operator,
    internal ones included (e.g. "_copyto").
    """
    if isinstance(ops, str) or callable(ops):
        ops = [ops]
    wanted_categories = None
    if categories_ is not None:
        if isinstance(categories_, str):
            categories_ = [categories_]
        wanted_categories = set()
        for cat in categories_:
            categories.operators_in(cat)  # raises UsageError for an unknown category
            wanted_categories.add(cat)
    selected = registry.selected_names()
    if ops is None:
        names = set(selected)
    else:
        names = set()
        for op in ops:
            name = operator_name(op)
            name = PY_WRAPPERS.get(name, name) if registry.get(name) is None else name
            if _GLOB_CHARS & set(name):
                matched = fnmatch.filter(selected, name) or fnmatch.filter(registry.all_names(), name)
                if not matched:
                    raise UsageError(f"operator pattern {name!r} matches no registered operator")
                names.update(matched)
            elif registry.get(name) is None:
                raise _unknown(name)
            else:
                names.add(name)
    if wanted_categories is not None:
        # Selecting by category takes opperf's membership, so `--category unary` runs the same
        # 57 operators as opperf's unary benchmarks (rounding ones included); each case still
        # records one home category, so reports never count an operator twice.
        members = {n for cat in wanted_categories for n in categories.opperf_members(cat)}
        names &= members
    return sorted(names)


# ---------------------------------------------------------------- building specs

def _rule_for(name: str, profile: rules.Profile) -> Optional[List[rules.Variant]]:
    found = rules.variants(name, profile)
    if found is not None:
        return found
    info = registry.get(name)
    fallback = rules.generic_rule(info.arg_names, info.tensor_args,
                                  [a for a in info.arg_names if info.is_required(a)])
    return fallback(profile, name) if fallback else None


#: Case dtypes that cannot hold the index values exactly → the dtype indices get instead:
#: float16 is exact only up to 2048 (index 10000 would become 9992 or 10008, past the end).
_INDEX_DTYPES = {"float16": "float32"}


def _resolve(value: Any, dtype: str) -> Any:
    """Fill case-level choices into a rule value: tensor dtypes, the DTYPE placeholder."""
    if isinstance(value, dict) and "shape" in value:
        desc = dict(value)
        desc.setdefault("dtype", _INDEX_DTYPES.get(dtype, dtype) if desc.get("init") == "indices" else dtype)
        desc["shape"] = [int(d) for d in desc["shape"]]
        return desc
    if isinstance(value, (list, tuple)):
        return [_resolve(v, dtype) for v in value]
    if value == rules.DTYPE:
        return dtype
    return value


def _is_tensor(value: Any) -> bool:
    return isinstance(value, dict) and "shape" in value


def _auto_label(inputs: Dict[str, Any]) -> str:
    """Distinct tensor shapes in argument order, e.g. "(1024,1024)x(1024,)"."""
    shapes: List[str] = []
    for value in inputs.values():
        for t in (value if isinstance(value, list) else [value]):
            if _is_tensor(t):
                s = rules.fmt_shape(t["shape"])
                if s not in shapes:
                    shapes.append(s)
    return "x".join(shapes) or "scalar"


def integer_dtype_reason(dtype: str) -> Optional[str]:
    """Why a case of `dtype` has no backward: MXNet differentiates floating-point arrays only
    (an integer input fails with "Cannot differentiate node"); None for a float dtype."""
    if dtype in _FLOAT_DTYPES:
        return None
    return f"integer dtype {dtype}: no gradient (MXNet differentiates floating-point inputs only)"


def _backward_plan(name: str, requested: bool, dtype: str,
                   variant_off: Optional[str]) -> Tuple[bool, Optional[str]]:
    """Whether the case times a backward, else why not (the operator's reason first)."""
    info = registry.get(name)
    if not requested:
        return False, None
    why_not = (info.no_backward_reason if not info.runs_backward else None) \
        or variant_off or integer_dtype_reason(dtype)
    return why_not is None, why_not


def _make_spec(name: str, label: Optional[str], inputs: Dict[str, Any], dtype: str, ctx: str,
               run_backward: bool, seed: int, profile: str) -> CaseSpec:
    variant_off = inputs.pop(rules.NO_BACKWARD, None)
    non_normal = inputs.pop(rules.NON_NORMAL, None)
    if isinstance(non_normal, dict):
        non_normal = non_normal.get(dtype)
    backward, why_not = _backward_plan(name, run_backward, dtype, variant_off)
    params: Dict[str, Any] = {
        "op": name,
        "category": categories.category_of(name),
        "inputs": inputs,
        "dtype": dtype,
        "ctx": ctx,
        "run_backward": backward,
        "seed": int(seed),
        "variant": label or _auto_label(inputs),
        "profile": profile,
    }
    if why_not:
        params["no_backward_reason"] = why_not
    if non_normal:
        params["non_normal_reason"] = non_normal
    return CaseSpec(suite=SUITE, name=name, params=params)


def generate_cases(ops: Optional[Iterable[Any]] = None, categories: Optional[Iterable[str]] = None,
                   dtype: str = "float32", ctx: Any = "cpu(0)", int64_tensor: bool = False,
                   run_backward: bool = True, seed: int = DEFAULT_SEED, tiny: bool = False,
                   ) -> Tuple[List[CaseSpec], List[Tuple[str, str]]]:
    """All cases for the chosen operators, and the operators that get none, with the reason.

    Order is deterministic: by operator name, then the rule's variant order. `tiny` builds the
    same combinations at toy sizes (tests); `int64_tensor` uses the large-tensor set and is
    refused on an MXNet without INT64_TENSOR_SIZE.
    """
    check_dtype(dtype)
    ctx = normalize_ctx(ctx)
    if int64_tensor:
        _require_int64()
    profile = rules.TINY if tiny else (rules.LARGE if int64_tensor else rules.STANDARD)
    specs: List[CaseSpec] = []
    skipped: List[Tuple[str, str]] = []
    for name in resolve_ops(ops, categories):
        reason = _no_cases_reason(name, dtype, ctx, int64_tensor)
        found = None if reason else _rule_for(name, profile)
        if not reason and not found:
            reason = NO_RULE_REASON
        if reason:
            skipped.append((name, reason))
        else:
            specs += operator_cases(name, found, dtype, ctx, run_backward, seed, profile)
    return specs, skipped


def _no_cases_reason(name: str, dtype: str, ctx: str, int64_tensor: bool) -> Optional[str]:
    """Why an operator gets no case at all in this sweep, before looking for its rule.

    The integer refusals were probed on CPU; on a GPU such cases run, and fail with MXNet's
    own message where MXNet refuses them there too.
    """
    if int64_tensor and _category(name) == "linalg":
        return "linalg operators are not run with --int64-tensor (as in opperf)"
    if name in rules.NO_RULE:
        return rules.NO_RULE[name]
    if dtype in _INTEGER_DTYPES and ctx.startswith("cpu") and name in rules.INTEGER_UNSUPPORTED:
        return (f"not run at integer dtype {dtype}: MXNet refuses integer inputs to this operator "
                f"on CPU ({rules.INTEGER_UNSUPPORTED[name]!r})")
    return None


def operator_cases(name: str, found: List[rules.Variant], dtype: str, ctx: str, run_backward: bool,
                   seed: int, profile: rules.Profile) -> List[CaseSpec]:
    """One operator's cases from its rule's variants; repeated labels get a "#2" suffix."""
    specs: List[CaseSpec] = []
    labels: Dict[str, int] = {}
    for label, inputs in found:
        resolved = {k: _resolve(v, dtype) for k, v in inputs.items()}
        label = label or _auto_label(resolved)
        labels[label] = labels.get(label, 0) + 1
        if labels[label] > 1:
            label = f"{label}#{labels[label]}"
        specs.append(_make_spec(name, label, resolved, dtype, ctx, run_backward, seed, profile.name))
    return specs


def _category(name: str) -> Optional[str]:
    return categories.category_of(name)


# ---------------------------------------------------------------- opperf-style explicit inputs

def _init_hint(name: str, arg: str) -> Dict[str, Any]:
    """The op's rule initialiser for `arg` (domain bounds), so user shapes stay valid too."""
    try:
        found = _rule_for(name, rules.STANDARD) or []
    except Exception:  # a rule that needs more than the registry knows: no hint
        found = []
    for _, inputs in found[:1]:
        value = inputs.get(arg)
        if isinstance(value, list):
            value = value[0] if value and _is_tensor(value[0]) else None
        if _is_tensor(value):
            return {k: v for k, v in value.items() if k not in ("shape", "dtype")}
    return {"init": "normal"}


def _is_ndarray(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (tuple, list))


def _describe_value(name: str, info: registry.OperatorInfo, arg: str, value: Any,
                    dtype: str, index: Optional[int] = None) -> Any:
    tensor = info.is_tensor_arg(arg) or arg == "out"
    if _is_ndarray(value):
        desc = {"shape": [int(d) for d in value.shape], "dtype": _dtype_name(value.dtype),
                "init": "given", "given": arg}
        if index is not None:
            desc["given_index"] = index
        return desc
    if isinstance(value, (list, tuple)) and info.is_list_arg(arg):
        return [_describe_value(name, info, arg, v, dtype, i) for i, v in enumerate(value)]
    if isinstance(value, (list, tuple)) and tensor:
        return {**_init_hint(name, arg), "shape": [int(d) for d in value], "dtype": dtype}
    if isinstance(value, tuple):
        return list(value)
    return value


def _dtype_name(dtype: Any) -> str:
    import numpy as np

    return np.dtype(dtype).name


def spec_from_inputs(op: Any, inputs: Dict[str, Any], dtype: str = "float32", ctx: Any = "cpu(0)",
                     run_backward: bool = True, seed: int = DEFAULT_SEED) -> CaseSpec:
    """A case for opperf's explicit `inputs` dict: shapes (tuples), scalars or NDArrays.

    NDArrays are recorded by shape and dtype with init "given"; pass the same arrays to
    materialize(spec, given={arg: array}) to run on them.
    """
    check_dtype(dtype)
    ctx = normalize_ctx(ctx)
    name = resolve_ops([op])[0] if not (_GLOB_CHARS & set(operator_name(op))) else None
    if name is None:
        raise UsageError(f"spec_from_inputs needs one operator, not the pattern {op!r}")
    info = registry.get(name)
    allowed = set(info.arg_names) | {"out"}
    for _, rule_inputs in (_rule_for(name, rules.TINY) or [])[:1]:
        allowed |= set(rule_inputs)
    described: Dict[str, Any] = {}
    for arg, value in inputs.items():
        if arg not in allowed:
            raise UsageError(f"operator {name} has no argument {arg!r}; its arguments: "
                             f"{', '.join(info.arg_names)}")
        described[arg] = _describe_value(name, info, arg, value, dtype)
    return _make_spec(name, None, described, dtype, ctx, run_backward, seed, "explicit")


# ---------------------------------------------------------------- describing inputs

def _describe(value: Any) -> Any:
    if _is_tensor(value):
        return str(tuple(value["shape"]))
    if isinstance(value, list) and value and all(_is_tensor(v) for v in value):
        return "[" + ", ".join(str(tuple(v["shape"])) for v in value) + "]"
    if isinstance(value, list):
        return str(tuple(value))
    return value


def describe_inputs(spec: CaseSpec) -> Dict[str, Any]:
    """opperf's report form of a case's inputs: shapes as "(1024, 1024)", scalars as values."""
    return {arg: _describe(value) for arg, value in spec.params["inputs"].items()}


# ---------------------------------------------------------------- materialising

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
    if desc.get("dtype") in _INTEGER_DTYPES and first <= last:
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
    from mxnet.ndarray._internal import _imperative_invoke

    handle = ctypes.c_void_p()
    check_call(_LIB.NNGetOpHandle(c_str(name), ctypes.byref(handle)))
    keys = [k for k, v in params.items() if v is not None]
    vals = [str(params[k]) for k in keys]

    def call():
        return _imperative_invoke(handle.value, inputs, keys, vals, out, False, False)

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
    look like state still records a graph. The gradient probe (opbench.gradients) and the
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
    import numpy as np

    params = spec.params
    name = params["op"]
    info = registry.get(name)
    if info is None:
        raise _unknown(name)
    context = mx_context(ctx if ctx is not None else params.get("ctx", "cpu(0)"))
    seed = int(params.get("seed", DEFAULT_SEED))
    mx.random.seed(seed)
    rng = np.random.default_rng(seed)
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
            array = mx.nd.array(_np_array(desc, rng), ctx=context, dtype=desc["dtype"])
        if want_grad and desc.get("grad", True) and desc.get("dtype") in _FLOAT_DTYPES \
                and desc.get("init") != "indices":
            array.attach_grad()
            grad_arrays.append(array)
        return array

    arrays: Dict[str, Any] = {}
    values: Dict[str, Any] = {}
    for arg, value in params["inputs"].items():
        if _is_tensor(value):
            values[arg] = arrays[arg] = build(value, arg)
        elif isinstance(value, list) and value and all(_is_tensor(v) for v in value):
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
    args: List[Any] = list(values.pop(list_args[0])) if list_args else []
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
