"""opperf's Python API, same names and parameters, on opbench's cases and engines.

Differences from opperf, on purpose:
- every input combination keeps its own entry (opperf merged them by operator name);
- internal operators (`mx.nd._internal._copyto`) and plain functions (`mx.nd.add`) are
  accepted as function objects or names, without editing any code;
- `run_benchmark_operator` returns its results (and prints them only when `printer` is set,
  which it is by default, as opperf printed);
- cases run in this process by default (`isolate=False`), as opperf did; pass `isolate=True`
  to run them in a worker process that a crashing operator cannot take down.

Each `run_<category>_benchmarks` is generated from opbench.backends.mxnet.categories.CATEGORIES;
opperf's own names (`run_mx_unary_operators_benchmarks`, …) are provided as aliases.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from benchcore.errors import UsageError, error_summary
from benchcore.execute.worker import run_cases
from benchcore.measure.case import CaseSpec, Workload
from benchcore.measure.runner import RunSettings
from benchcore.report.model import CaseResult
from opbench.backends.mxnet.markdown import opperf_entry

from . import registry, releases
from .cases import check_dtype as validate_dtype
from .cases import generate_cases, operator_name, spec_from_inputs
from .categories import CATEGORIES
from .device import check_ctx, int64_tensor_flag
from .executor import build_workload, measure
from .suite import EXECUTOR

PROFILERS = ("native", "python")
DTYPES = ("float32", "float64", "float16", "int32", "int64")


# ---------------------------------------------------------------------------------------------
# Argument normalisation (shared with the CLI)


def check_dtype(dtype) -> str:
    """A dtype name or a numpy type (opperf accepted both) → its validated name."""
    return validate_dtype(str(getattr(dtype, "__name__", dtype)))


def check_profiler(profiler) -> str:
    if profiler not in PROFILERS:
        raise UsageError(f"unknown profiler {profiler!r}; choose native or python")
    return profiler


def _settings(warmup: int, runs: int, run_backward: bool = True) -> RunSettings:
    return RunSettings(warmup=int(warmup), runs=int(runs), run_backward=run_backward)


def _options(profiler: str, settings: RunSettings) -> dict:
    return {"settings": settings.to_dict(), "profiler": check_profiler(profiler), "threads": None}


# ---------------------------------------------------------------------------------------------
# Running and shaping results


def run_specs(specs: Sequence[CaseSpec], profiler: str, settings: RunSettings, isolate: bool = False) -> List[CaseResult]:
    return run_cases(list(specs), EXECUTOR, _options(profiler, settings), isolate=isolate)


def _entries(results: Iterable[CaseResult], raise_on_failure: bool) -> Dict[str, List[dict]]:
    grouped: Dict[str, List[dict]] = {}
    for result in results:
        op = result.spec.params.get("op", result.spec.name)
        if result.status == "ok":
            grouped.setdefault(op, []).append(opperf_entry(result))
        elif raise_on_failure and result.status != "skipped":
            raise RuntimeError(f"{op} {result.spec.params.get('inputs')}: {result.status}: {result.error}")
        else:
            grouped.setdefault(op, []).append({"inputs": result.spec.params.get("inputs"),
                                               "status": result.status, "error": result.error})
    return grouped


def run_performance_test(ops, inputs, run_backward=True, dtype="float32", ctx="cpu", profiler="native",
                         warmup=10, runs=50, isolate=False, seed=41):
    """Benchmark one operator or a list sharing `inputs` (a dict or a list of dicts).

    Returns opperf's shape: `[{op: [one entry per input dict]}]`, one dict per operator in the
    order given. A case that fails raises RuntimeError with MXNet's message.
    """
    ops = list(ops) if isinstance(ops, (list, tuple)) else [ops]
    input_list = [inputs] if isinstance(inputs, dict) else list(inputs or [{}])
    dtype, context = check_dtype(dtype), check_ctx(ctx)
    specs = [spec_from_inputs(operator_name(op), dict(given), dtype, context, run_backward, seed)
             for op in ops for given in input_list]
    results = run_specs(specs, profiler, _settings(warmup, runs, run_backward), isolate)
    _entries(results, raise_on_failure=True)  # raises on the first failed case
    answer = []
    for index, op in enumerate(ops):
        chunk = results[index * len(input_list):(index + 1) * len(input_list)]
        name = operator_name(op)
        answer.append({name: [_renamed(opperf_entry(r), r.spec.params["op"], name) for r in chunk]})
    return answer


def _renamed(entry: dict, ran: str, asked: str) -> dict:
    """Keys under the name the caller used (`add` runs broadcast_add; keys say `add`)."""
    if ran == asked:
        return entry
    renamed = {(key[: -len(ran)] + asked if key.endswith("_" + ran) else key): value for key, value in entry.items()}
    if "missing" in renamed:
        renamed["missing"] = _renamed(renamed["missing"], ran, asked)
    return renamed


def run_cases_for(ops=None, categories=None, ctx="cpu", dtype="float32", profiler="native", int64_tensor="off",
                  warmup=25, runs=100, isolate=False, tiny=False) -> Dict[str, List[dict]]:
    """Every case of some operators/categories → `{op: [entries]}` sorted by op.

    Failed cases stay in the result as entries with `status` and `error` (one broken operator
    must not hide the others); operators with no input rule are not in it (see
    get_operators_with_no_benchmark).
    """
    specs, _skipped = generate_cases(ops=ops, categories=categories, dtype=check_dtype(dtype),
                                     ctx=check_ctx(ctx), int64_tensor=int64_tensor_flag(int64_tensor),
                                     run_backward=True, tiny=tiny)
    results = run_specs(specs, profiler, _settings(warmup, runs), isolate)
    return dict(sorted(_entries(results, raise_on_failure=False).items()))


def _category_runner(category: str) -> Callable:
    def run(ctx="cpu", dtype="float32", profiler="native", int64_tensor="off", warmup=25, runs=100,
            isolate=False, tiny=False):
        return run_cases_for(categories=[category], ctx=ctx, dtype=dtype, profiler=profiler,
                             int64_tensor=int64_tensor, warmup=warmup, runs=runs, isolate=isolate, tiny=tiny)

    run.__name__ = f"run_{category}_benchmarks"
    run.__qualname__ = run.__name__
    run.__doc__ = (f"Benchmark every operator of the '{category}' category with its default inputs; "
                   f"returns {{op: [entries]}} sorted by op.")
    return run


def run_all_mxnet_operator_benchmarks(ctx="cpu", dtype="float32", profiler="native", int64_tensor="off",
                                      warmup=25, runs=100, isolate=False, tiny=False):
    """Every category (opperf's full sweep) → `{op: [entries]}` sorted by op.

    For a long sweep prefer `opbench` on the command line: it isolates each case, checkpoints
    and resumes.
    """
    return run_cases_for(ctx=ctx, dtype=dtype, profiler=profiler, int64_tensor=int64_tensor,
                         warmup=warmup, runs=runs, isolate=isolate, tiny=tiny)


def get_operators_with_no_benchmark(operators_with_benchmark=None) -> List[str]:
    """Selected registered operators absent from `operators_with_benchmark` (names, or a result
    dict/list as returned above); with None, the operators opbench has no input rule for."""
    selected = sorted(info.name for info in registry.scan() if info.selected)
    if operators_with_benchmark is None:
        _specs, skipped = generate_cases(tiny=True)
        return sorted({op for op, _reason in skipped})
    covered = set()
    items = operators_with_benchmark if isinstance(operators_with_benchmark, (list, tuple)) else [operators_with_benchmark]
    for item in items:
        covered |= set(item) if isinstance(item, dict) else {operator_name(item)}
    return [name for name in selected if name not in covered]


# ---------------------------------------------------------------------------------------------
# One operator from mx.nd, mx.np and mx.npx

#: nd name → (mx.np name, mx.npx name); None: no equivalent. Names absent here are looked up
#: under the same name in each module.
FUNCTION_NAMES: Dict[str, tuple] = {
    "BatchNorm": (None, "batch_norm"), "FullyConnected": (None, "fully_connected"),
    "Convolution": (None, "convolution"), "Deconvolution": (None, "deconvolution"),
    "Pooling": (None, "pooling"), "Dropout": (None, "dropout"), "Embedding": (None, "embedding"),
    "LayerNorm": (None, "layer_norm"), "Activation": (None, "activation"), "LeakyReLU": (None, "leaky_relu"),
    "RNN": (None, "rnn"), "SequenceMask": (None, "sequence_mask"),
    "broadcast_add": ("add", None), "broadcast_sub": ("subtract", None), "broadcast_mul": ("multiply", None),
    "broadcast_div": ("divide", None), "broadcast_mod": ("mod", None), "broadcast_power": ("power", None),
    "broadcast_maximum": ("maximum", None), "broadcast_minimum": ("minimum", None),
    "broadcast_hypot": ("hypot", None), "broadcast_equal": ("equal", None),
    "broadcast_not_equal": ("not_equal", None), "broadcast_greater": ("greater", None),
    "broadcast_greater_equal": ("greater_equal", None), "broadcast_lesser": ("less", None),
    "broadcast_lesser_equal": ("less_equal", None), "broadcast_logical_and": ("logical_and", None),
    "broadcast_logical_or": ("logical_or", None), "broadcast_logical_xor": ("logical_xor", None),
    "elemwise_add": ("add", None), "elemwise_sub": ("subtract", None), "elemwise_mul": ("multiply", None),
    "elemwise_div": ("divide", None), "add": ("add", None), "subtract": ("subtract", None),
    "multiply": ("multiply", None), "divide": ("divide", None),
    "concat": ("concatenate", None), "swapaxes": ("swapaxes", None), "SwapAxis": ("swapaxes", None),
}

#: nd argument → candidate names of the same argument in mx.np / mx.npx signatures, in order
ARGUMENT_NAMES: Dict[str, tuple] = {
    "lhs": ("x1", "a", "x", "lhs"), "rhs": ("x2", "b", "rhs"),
    "data": ("data", "a", "x", "arr", "ary", "m"),
}

#: nd arguments that take tensors when the registry does not say (python-level functions)
TENSOR_ARGUMENTS = ("data", "lhs", "rhs", "a", "b", "x", "x1", "x2", "gamma", "beta", "weight", "bias",
                    "moving_mean", "moving_var")


def _signature_names(function) -> List[str]:
    try:
        return [p for p in inspect.signature(function).parameters
                if p not in ("out", "name", "kwargs", "args")]
    except (TypeError, ValueError):
        return []


def _nd_tensor_args(name: str, function) -> List[str]:
    """Every tensor input `name` may take (single tensors; variadic ones are not sized)."""
    info = registry.get(name)
    if info is None:  # a Python-level function (mx.nd.add): no registry entry to ask
        return [a for a in _signature_names(function) if a in TENSOR_ARGUMENTS]
    return [a for a in info.arg_names if info.is_tensor_arg(a) and not info.is_list_arg(a)]


def _expected_inputs(name: str, tensor_args: List[str], params: Dict[str, Any]) -> set:
    """The tensor inputs `name` expects with these parameters.

    An optional input (softmax's `length`, SequenceMask's `sequence_length`, a bias under
    no_bias=True) is an input only when a parameter switches it on; MXNet's symbol for the
    same parameters lists exactly the inputs the operator will expect.
    """
    import mxnet as mx

    if registry.get(name) is None:
        return set(tensor_args)
    if name.startswith("_contrib_"):
        creator = getattr(mx.sym.contrib, name[len("_contrib_"):])
    else:
        creator = getattr(mx.sym, name, None) or getattr(mx.sym._internal, name)
    try:
        symbol = creator(name="opbench", **params)
    except mx.base.MXNetError as exc:
        reason = error_summary(exc).replace("MXNetError: ", "")
        raise UsageError(f"{name}: {reason}; pass its parameters in additional_inputs") from None
    return {input_name[len("opbench_"):] for input_name in symbol.list_inputs()}


def _map_argument(arg: str, target_params: List[str]) -> Optional[str]:
    for candidate in ARGUMENT_NAMES.get(arg, (arg,)):
        if candidate in target_params:
            return candidate
    return arg if "kwargs" in target_params or not target_params else None


def _variant_functions(name: str) -> Dict[str, tuple]:
    """module → (qualified name, function) or (None, reason)."""
    import mxnet as mx

    np_name, npx_name = FUNCTION_NAMES.get(name, (name, name))
    no_numpy = releases.numpy_api()
    found: Dict[str, tuple] = {}
    for label, target in (("nd", name), ("np", np_name), ("npx", npx_name)):
        module = getattr(mx, label, None)
        function = getattr(module, target, None) if target and module else None
        if label != "nd" and no_numpy:
            found[label] = (None, no_numpy)
        elif function is None or not callable(function):
            found[label] = (None, f"mx.{label} has no equivalent of {name}")
        else:
            found[label] = (f"mx.{label}.{target}", function)
    return found


def _variant_workload(label: str, function, tensors: Dict[str, tuple], extra: Dict[str, Any], dtype: str, ctx,
                      run_backward: bool, seed: int) -> Workload:
    import mxnet as mx

    mx.random.seed(seed)
    arrays = {}
    for arg, shape in tensors.items():
        array = mx.nd.random.normal(shape=shape, ctx=ctx).astype(dtype)
        if label != "nd":
            array = array.as_np_ndarray()
        if run_backward:
            array.attach_grad()
        arrays[arg] = array
    kwargs = {**arrays, **extra}

    class Ready:  # what build_workload needs from materialize()
        call = staticmethod(lambda: function(**kwargs))

    return build_workload(Ready, run_backward, device=ctx.device_type)


def run_benchmark_operator(name, size=(128, 128), additional_inputs=None, dtype="float32", run_backward=False,
                           ctx="cpu", warmup=10, runs=50, profiler="native", printer: Optional[Callable] = print,
                           seed=41):
    """The same operator from mx.nd, mx.np and mx.npx, each with `size`-shaped tensor inputs.

    Every tensor input the operator expects with the parameters in `additional_inputs` gets
    `size`, unless a shape (or a value) is given there; optional inputs stay out unless a
    parameter switches them on (softmax's `length` with use_length=True, no bias with
    no_bias=True). A missing required parameter is a UsageError naming it. Names and arguments are mapped between the modules (BatchNorm ↔ npx.batch_norm,
    broadcast_add ↔ np.add, nd lhs/rhs ↔ np x1/x2, data ↔ a/x). Returns
    `{"nd"|"np"|"npx": {"function": qualified name, "result": [entry]} or
    {"function": None, "reason": why}}`; `printer` (print by default, None for silence) gets
    one line per module, as opperf printed.
    """
    import mxnet as mx

    name = operator_name(name)
    dtype, context = check_dtype(dtype), check_ctx(ctx)
    settings = _settings(warmup, runs, run_backward)
    check_profiler(profiler)
    ctx_obj = mx.Context(context.split("(")[0], int(context.split("(")[1].rstrip(")")))
    additional = dict(additional_inputs or {})
    variants = _variant_functions(name)
    if variants["nd"][0] is None:
        raise UsageError(f"mx.nd has no operator {name!r}; pass an mx.nd operator name such as BatchNorm")
    tensor_args = _nd_tensor_args(name, variants["nd"][1])
    shapes = {arg: tuple(additional.pop(arg)) for arg in tensor_args if _is_shape(additional.get(arg))}
    expected = _expected_inputs(name, tensor_args, {k: v for k, v in additional.items() if k not in tensor_args})
    # given shapes as given; the other expected inputs get `size` (unless passed as a value)
    nd_tensors = {arg: shapes.get(arg, tuple(size)) for arg in tensor_args
                  if arg in shapes or (arg in expected and arg not in additional)}
    results: Dict[str, dict] = {}
    for label, (qualified, function) in variants.items():
        if qualified is None:
            results[label] = {"function": None, "reason": function}
            continue
        params = _signature_names(function) + (["kwargs"] if _takes_kwargs(function) else [])
        tensors, missing = {}, []
        for arg, shape in nd_tensors.items():
            target = arg if label == "nd" else _map_argument(arg, params)
            if target is None:
                missing.append(arg)
            else:
                tensors[target] = shape
        if missing:
            results[label] = {"function": None, "reason": f"{qualified} takes no argument for nd {', '.join(missing)}"}
            continue
        extra = {(k if label == "nd" else (_map_argument(k, params) or k)): v for k, v in additional.items()}
        try:
            with _np_mode(label != "nd"):
                workload = _variant_workload(label, function, tensors, extra, dtype, ctx_obj, run_backward, seed)
                metrics = measure(workload, settings, profiler, qualified.rsplit(".", 1)[1], ctx_obj,
                                  None if run_backward else "backward not requested")
        except mx.base.MXNetError as exc:
            results[label] = {"function": qualified, "error": error_summary(exc)}
            continue
        metrics["inputs"] = {**{k: list(v) for k, v in tensors.items()}, **extra}
        entry = opperf_entry(CaseResult(CaseSpec("opbench", qualified, {"op": qualified.rsplit(".", 1)[1]}), "ok", metrics))
        results[label] = {"function": qualified, "result": [entry]}
    if printer is not None:
        for label, value in results.items():
            printer(f"{value.get('function') or 'mx.' + label}: {value.get('result') or value.get('error') or value.get('reason')}")
    return results


def _is_shape(value) -> bool:
    return isinstance(value, (tuple, list)) and bool(value) and all(isinstance(v, int) for v in value)


def _takes_kwargs(function) -> bool:
    try:
        return any(p.kind == p.VAR_KEYWORD for p in inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False


class _np_mode:
    """NumPy semantics (shapes and array type) for mx.np / mx.npx calls, restored afterwards."""

    def __init__(self, on: bool):
        self.on = on
        self._contexts = []

    def __enter__(self):
        if self.on:
            import mxnet as mx

            self._contexts = [mx.util.np_shape(True), mx.util.np_array(True)]
            for context in self._contexts:
                context.__enter__()
        return self

    def __exit__(self, *exc):
        for context in reversed(self._contexts):
            context.__exit__(*exc)
        return False


# ---------------------------------------------------------------------------------------------
# run_<category>_benchmarks, generated


def _install_category_runners() -> List[str]:
    names = []
    for category in CATEGORIES:
        runner = _category_runner(category)
        globals()[runner.__name__] = runner
        names.append(runner.__name__)
    for alias, category in OPPERF_FUNCTION_NAMES.items():
        if category in CATEGORIES:
            globals()[alias] = globals()[f"run_{category}_benchmarks"]
            names.append(alias)
    return names


#: opperf's function names → our category
OPPERF_FUNCTION_NAMES = {
    "run_mx_unary_operators_benchmarks": "unary",
    "run_mx_binary_broadcast_operators_benchmarks": "binary_broadcast",
    "run_mx_binary_element_wise_operators_benchmarks": "binary_elemwise",
    "run_mx_binary_misc_operators_benchmarks": "binary_misc",
    "run_gemm_operators_benchmarks": "gemm",
    "run_mx_random_sampling_operators_benchmarks": "random",
    "run_mx_reduction_operators_benchmarks": "reduction",
    "run_sorting_searching_operators_benchmarks": "sorting_searching",
    "run_indexing_operators_benchmarks": "indexing",
    "run_rearrange_operators_benchmarks": "rearrange",
    "run_shape_operators_benchmarks": "shape",
    "run_expanding_operators_benchmarks": "expanding",
    "run_rounding_operators_benchmarks": "rounding",
    "run_join_split_operators_benchmarks": "join_split",
    "run_nn_basic_operators_benchmarks": "nn_basic",
    "run_activation_operators_benchmarks": "activation",
    "run_pooling_operators_benchmarks": "pooling",
    "run_convolution_operators_benchmarks": "convolution",
    "run_transpose_convolution_operators_benchmarks": "transpose_convolution",
    "run_optimizer_operators_benchmarks": "optimizer",
    "run_loss_operators_benchmarks": "loss",
    "run_mx_misc_operators_benchmarks": "misc",
    "run_linalg_operators_benchmarks": "linalg",
}

CATEGORY_RUNNERS = _install_category_runners()

__all__ = ["run_performance_test", "run_benchmark_operator", "run_all_mxnet_operator_benchmarks",
           "get_operators_with_no_benchmark"] + list(CATEGORY_RUNNERS)
