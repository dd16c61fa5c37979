"""From MXNet operators to CaseSpecs: which operators a run selects, and their cases.

generate_cases() is the registry-driven path (every selected operator, one case per input
combination); spec_from_inputs() is opperf's `run_performance_test(op, inputs=[...])` path.
Both produce JSON-only CaseSpecs, so a case can cross into a worker process, a checkpoint or
another report; opbench.backends.mxnet.arrays rebuilds the arrays there. A case's key is made
here, so it must not change: old MXNet reports compare by it (tests/opbench/data/mxnet_case_keys.txt).
"""

from __future__ import annotations

import fnmatch
from typing import Any, Dict, Iterable, List, Optional, Tuple

from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec

from ..base import UnknownOperator
from . import categories, registry, releases, rules
from .device import normalize_ctx, require_int64

SUITE = "opbench"
DEFAULT_SEED = 41
DTYPES = ("float16", "float32", "float64", "int8", "uint8", "int32", "int64", "bfloat16")
FLOAT_DTYPES = ("float16", "float32", "float64", "bfloat16")
INTEGER_DTYPES = ("int8", "uint8", "int32", "int64")

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

def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise UsageError(f"bad dtype {dtype!r}: choose from {', '.join(DTYPES)}")
    return dtype


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


def unknown_operator(name: str) -> UnknownOperator:
    """A name MXNet lacks; a PyTorch name without a close MXNet one is pointed to --framework torch."""
    close = registry.suggest(name)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see opbench --list --all"
    return UnknownOperator(f"unknown operator {name!r}{hint}", name, None if close else (
        lambda framework: f"{name} is a PyTorch operator, not an MXNet one; add --framework {framework}"))


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
                raise unknown_operator(name)
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

def rule_for(name: str, profile: rules.Profile) -> Optional[List[rules.Variant]]:
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


def is_tensor(value: Any) -> bool:
    return isinstance(value, dict) and "shape" in value


def _auto_label(inputs: Dict[str, Any]) -> str:
    """Distinct tensor shapes in argument order, e.g. "(1024,1024)x(1024,)"."""
    shapes: List[str] = []
    for value in inputs.values():
        for t in (value if isinstance(value, list) else [value]):
            if is_tensor(t):
                s = rules.fmt_shape(t["shape"])
                if s not in shapes:
                    shapes.append(s)
    return "x".join(shapes) or "scalar"


def integer_dtype_reason(dtype: str) -> Optional[str]:
    """Why a case of `dtype` has no backward: MXNet differentiates floating-point arrays only
    (an integer input fails with "Cannot differentiate node"); None for a float dtype."""
    if dtype in FLOAT_DTYPES:
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
                   counted: bool = False) -> Tuple[List[CaseSpec], List[Tuple[str, str]]]:
    """All cases for the chosen operators, and the operators that get none, with the reason.

    Order is deterministic: by operator name, then the rule's variant order. `tiny` builds the
    same combinations at toy sizes (tests); `counted` at the instruction engine's shapes
    (rules.Profile); `int64_tensor` uses the large-tensor set and is refused on an MXNet
    without INT64_TENSOR_SIZE.
    """
    check_dtype(dtype)
    ctx = normalize_ctx(ctx)
    if int64_tensor:
        require_int64()
    profile = (rules.TINY if tiny else rules.LARGE if int64_tensor else rules.COUNT if counted
               else rules.STANDARD)
    specs: List[CaseSpec] = []
    skipped: List[Tuple[str, str]] = []
    for name in resolve_ops(ops, categories):
        reason = _no_cases_reason(name, dtype, ctx, int64_tensor)
        found = None if reason else rule_for(name, profile)
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
    if releases.broken(name, ctx):
        return releases.broken(name, ctx)
    if dtype in INTEGER_DTYPES and ctx.startswith("cpu") and name in rules.INTEGER_UNSUPPORTED:
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
        found = rule_for(name, rules.STANDARD) or []
    except Exception:  # a rule that needs more than the registry knows: no hint
        found = []
    for _, inputs in found[:1]:
        value = inputs.get(arg)
        if isinstance(value, list):
            value = value[0] if value and is_tensor(value[0]) else None
        if is_tensor(value):
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
    for _, rule_inputs in (rule_for(name, rules.TINY) or [])[:1]:
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
    if is_tensor(value):
        return str(tuple(value["shape"]))
    if isinstance(value, list) and value and all(is_tensor(v) for v in value):
        return "[" + ", ".join(str(tuple(v["shape"])) for v in value) + "]"
    if isinstance(value, list):
        return str(tuple(value))
    return value


def describe_inputs(spec: CaseSpec) -> Dict[str, Any]:
    """opperf's report form of a case's inputs: shapes as "(1024, 1024)", scalars as values."""
    return {arg: _describe(value) for arg, value in spec.params["inputs"].items()}
