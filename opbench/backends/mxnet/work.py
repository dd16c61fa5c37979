"""The work of an MXNet case (benchcore.measure.work): its tensors from the CaseSpec, its outputs'
shapes and dtypes from MXNet's own shape and type inference, and its operator's FLOP family.

Why inference and not a run: the default sweep's cases are large (a run of every case is the
sweep itself), while building the operator's symbol and inferring is a fraction of a
millisecond a case, so `opbench --list`-time planning can state every case's work. Operators
that write their results into their inputs (optimizer updates, reset_arrays) have no symbolic
form with those inputs; their outputs are the arrays they update.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Callable, Dict, List, Optional, Tuple

from benchcore.measure import work as W
from benchcore.measure.case import CaseSpec
from benchcore.measure.work import Flops, Tensor, Work

from . import registry
from .cases import FLOAT_DTYPES, is_tensor


@dataclass(frozen=True)
class Case:
    """A case's tensors: its inputs by argument (a list for a variadic one), its outputs."""

    spec: CaseSpec
    inputs: Dict[str, List[Tensor]]
    outputs: Optional[List[Tensor]]
    #: why the outputs are not known (inference refused the case)
    why_no_outputs: Optional[str] = None

    @property
    def params(self) -> dict:
        return self.spec.params["inputs"]

    def first(self, arg: str) -> Tensor:
        return self.inputs[arg][0]

    @property
    def all_inputs(self) -> List[Tensor]:
        return [t for group in self.inputs.values() for t in group]

    @property
    def out(self) -> Tensor:
        return self.outputs[0]


def _tensor(desc: dict) -> Tensor:
    return W.tensor(desc["shape"], desc["dtype"])


def input_tensors(spec: CaseSpec) -> Dict[str, List[Tensor]]:
    found: Dict[str, List[Tensor]] = {}
    for arg, value in spec.params["inputs"].items():
        if is_tensor(value):
            found[arg] = [_tensor(value)]
        elif isinstance(value, list) and value and all(is_tensor(v) for v in value):
            found[arg] = [_tensor(v) for v in value]
    return found


# ---------------------------------------------------------------- outputs

#: in-place optimizer updates: the inputs they read and do not write (the rest are written)
_READ_ONLY = {"grad", "g", "r1", "r2"}
_MULTI_GROUP = {"multi_sgd_update": 2, "multi_sgd_mom_update": 3, "multi_mp_sgd_update": 3,
                "multi_mp_sgd_mom_update": 4}


def _updated(spec: CaseSpec, inputs: Dict[str, List[Tensor]]) -> Optional[List[Tensor]]:
    """The arrays an in-place operator writes (None: the operator is not one of those)."""
    name = spec.params["op"]
    if name == "reset_arrays":
        return list(inputs["data"])
    base = name[len("preloaded_"):] if name.startswith("preloaded_") else name
    if base in _MULTI_GROUP:
        data = inputs["data"][:len(inputs["data"]) - (2 if base != name else 0)]
        group = _MULTI_GROUP[base]
        return [t for i, t in enumerate(data) if i % group != 1]  # every group's gradient is read only
    if spec.params.get("category") == "optimizer" or name.endswith("_update") or "_update_phase" in name:
        return [t for arg, group in inputs.items() if arg not in _READ_ONLY for t in group]
    return None


def _symbol(spec: CaseSpec):
    """The operator as a symbol over one variable per input tensor, and those variables' shapes
    and dtypes (named arg, or arg0, arg1 … for a variadic input)."""
    import mxnet as mx

    info = registry.get(spec.params["op"])
    shapes: Dict[str, tuple] = {}
    dtypes: Dict[str, str] = {}
    values: Dict[str, object] = {}
    for arg, value in spec.params["inputs"].items():
        descs = [value] if is_tensor(value) else value if isinstance(value, list) and value and all(
            is_tensor(v) for v in value) else None
        if descs is None:
            values[arg] = tuple(value) if isinstance(value, list) else value
            continue
        names = [arg] if is_tensor(value) else [f"{arg}{i}" for i in range(len(descs))]
        for name, desc in zip(names, descs):
            shapes[name], dtypes[name] = tuple(desc["shape"]), desc["dtype"]
        variables = [mx.sym.var(n) for n in names]
        values[arg] = variables[0] if is_tensor(value) else variables
    listed = [a for a in values if info.is_list_arg(a)]
    variadic = values.pop(listed[0]) if listed else []
    args = list(variadic) if isinstance(variadic, list) else [variadic]
    op = getattr(mx.sym, spec.params["op"], None) or getattr(mx.sym._internal, spec.params["op"])
    values.pop("out", None)
    return op(*args, **values), shapes, dtypes


def output_tensors(spec: CaseSpec, inputs: Dict[str, List[Tensor]]) -> Tuple[Optional[List[Tensor]], Optional[str]]:
    """The case's outputs, or None and why MXNet could not infer them."""
    updated = _updated(spec, inputs)
    if updated is not None:
        return updated, None
    if spec.params["op"] == "Custom":  # the suite's custom operator is an identity
        return list(inputs["data"]), None
    if spec.params["op"] == "fill_element_0index":  # a copy of lhs with one element a row replaced
        return list(inputs["lhs"]), None
    try:
        symbol, shapes, dtypes = _symbol(spec)
        _, out_shapes, _ = symbol.infer_shape(**shapes)
        _, out_types, _ = symbol.infer_type(**dtypes)
    except Exception as error:  # MXNet raises MXNetError, TypeError or ValueError for a refused call
        return None, f"outputs not inferred: {type(error).__name__}: {str(error).splitlines()[0][:120]}"
    if not out_shapes or any(s is None for s in out_shapes):
        return None, "outputs not inferred: MXNet's inference left a shape unknown"
    return [W.tensor(s, _dtype_name(t)) for s, t in zip(out_shapes, out_types)], None


def _dtype_name(dtype) -> str:
    import numpy as np

    return np.dtype(dtype).name


def case_of(spec: CaseSpec) -> Case:
    inputs = input_tensors(spec)
    outputs, why = output_tensors(spec, inputs)
    return Case(spec, inputs, outputs, why)


# ---------------------------------------------------------------- gradients

def gradient_tensors(spec: CaseSpec) -> List[Tensor]:
    """The inputs the backward writes a gradient for, as opbench.backends.mxnet.arrays attaches
    them: floating-point, not indices, not marked grad False; else every floating-point input."""
    marked: List[Tensor] = []
    floating: List[Tensor] = []
    for arg, value in spec.params["inputs"].items():
        descs = [value] if is_tensor(value) else value if isinstance(value, list) else []
        for desc in (d for d in descs if is_tensor(d)):
            if desc.get("dtype") in FLOAT_DTYPES and arg != "out":
                floating.append(_tensor(desc))
                if desc.get("grad", True) and desc.get("init") != "indices":
                    marked.append(_tensor(desc))
    return marked or floating


# ---------------------------------------------------------------- FLOP families

def _matmul_k(case: Case, a: str, transposed: bool, axis: int = -1) -> int:
    shape = case.first(a).shape
    return shape[axis - 1] if transposed else shape[axis]


def _dot(case: Case) -> Flops:
    k = case.first("lhs").shape[0 if case.params.get("transpose_a") else -1]
    return W.gemm(case.out.elements, 1, k)


def _batch_dot(case: Case) -> Flops:
    return W.gemm(case.out.elements, 1, _matmul_k(case, "lhs", bool(case.params.get("transpose_a"))))


def _linalg_gemm(case: Case) -> Flops:
    if int(case.params.get("axis", -2)) != -2:
        return W.no_formula("no FLOP formula for linalg gemm with matrices along another axis than -2")
    return W.gemm(case.out.elements, 1, _matmul_k(case, "A", bool(case.params.get("transpose_a"))))


def _fully_connected(case: Case) -> Flops:
    data = case.first("data").shape
    k = prod(data[1:]) if case.params.get("flatten", True) else data[-1]
    return W.gemm(case.out.elements, 1, k)


def _convolution(case: Case) -> Flops:
    weight = case.first("weight").shape
    spatial = case.out.shape[2:]
    return W.convolution(case.first("data").shape[0], weight, spatial)


def _deconvolution(case: Case) -> Flops:
    data = case.first("data").shape
    return W.convolution(data[0], case.first("weight").shape, data[2:])


def _rnn(case: Case) -> Flops:
    seq, batch, size = case.first("data").shape
    directions = 2 if case.params.get("bidirectional") else 1
    return W.recurrent(case.params["mode"], seq, batch, size, int(case.params["state_size"]),
                       int(case.params.get("num_layers", 1)), directions)


def _square(case: Case, arg: str = "A") -> Tuple[int, int]:
    shape = case.first(arg).shape
    return shape[-1], prod(shape[:-2])


def _triangular(case: Case) -> Flops:
    m, batch = _square(case)
    return W.triangular(m, case.first("B").elements // (batch * m), batch)


def _syrk(case: Case) -> Flops:
    shape = case.first("A").shape
    n, k = (shape[-1], shape[-2]) if case.params.get("transpose") else (shape[-2], shape[-1])
    return W.rank_k_update(n, k, prod(shape[:-2]))


def _gelqf(case: Case) -> Flops:
    shape = case.first("A").shape
    return W.lq(shape[-2], shape[-1], prod(shape[:-2]))


def _pooling(case: Case) -> Flops:
    data = case.first("data").shape
    window = prod(data[2:]) if case.params.get("global_pool") else prod(case.params["kernel"])
    return W.pooling(case.out.elements, window)


def _sort(case: Case) -> Flops:
    data = case.first("data").shape
    axis = case.params.get("axis", -1)
    return W.comparison_sort(prod(data), prod(data) if axis is None else data[axis])


def _pointwise(ops: int = 1) -> Callable[[Case], Flops]:
    return lambda case: W.pointwise(case.out.elements, ops, max(1, len(gradient_tensors(case.spec))))


def _of_input(family: Callable[[int], Flops], arg: str = "data") -> Callable[[Case], Flops]:
    return lambda case: family(case.first(arg).elements if arg in case.inputs else case.all_inputs[0].elements)


def _add_n(case: Case) -> Flops:
    terms = len(case.all_inputs)
    return W.pointwise(case.out.elements, max(1, terms - 1), terms)


#: per-element operations of an optimizer update, read off its update rule (MXNet's docs):
#: rescale and clip the gradient, add weight decay, then the rule's own moments and step
_UPDATE_OPS = {"sgd_update": 5, "sgd_mom_update": 7, "mp_sgd_update": 6, "mp_sgd_mom_update": 8,
               "nag_mom_update": 9, "mp_nag_mom_update": 10, "adam_update": 14, "rmsprop_update": 10,
               "rmspropalex_update": 15, "ftrl_update": 14, "ftml_update": 17, "signsgd_update": 4,
               "signum_update": 7, "lamb_update_phase1": 16, "lamb_update_phase2": 4,
               "mp_lamb_update_phase1": 17, "mp_lamb_update_phase2": 5}


def _update(case: Case) -> Flops:
    """The rule's operations for every gradient element (each is read once)."""
    base = case.spec.params["op"].replace("preloaded_", "").replace("multi_", "")
    if base not in _UPDATE_OPS:
        return W.no_formula(f"no FLOP formula for the update {case.spec.params['op']}")
    grads = [t for arg in _READ_ONLY & set(case.inputs) - {"r1", "r2"} for t in case.inputs[arg]]
    if "data" in case.inputs:
        group = _MULTI_GROUP[case.spec.params["op"].replace("preloaded_", "")]
        grads = case.inputs["data"][1::group][:int(case.params["num_weights"])]
    return W.Flops(_UPDATE_OPS[base] * sum(t.elements for t in grads), None, "an update has no backward")


_LINALG: Dict[str, Callable[[Case], Flops]] = {
    "linalg_gemm": _linalg_gemm, "linalg_gemm2": _linalg_gemm,
    "linalg_potrf": lambda c: W.cholesky(*_square(c)), "linalg_potri": lambda c: W.cholesky_inverse(*_square(c)),
    "linalg_trsm": _triangular, "linalg_trmm": _triangular, "linalg_syrk": _syrk, "linalg_gelqf": _gelqf,
    "linalg_inverse": lambda c: W.lu_based(*_square(c), inverse=True),
    "linalg_det": lambda c: W.lu_based(*_square(c)), "linalg_slogdet": lambda c: W.lu_based(*_square(c)),
    "linalg_sumlogdiag": lambda c: W.reduction(_square(c)[0] * max(1, _square(c)[1])),
}

_SOFTMAX = ("softmax", "log_softmax", "softmin", "Softmax", "SoftmaxOutput", "SoftmaxActivation",
            "softmax_cross_entropy")
_NORMS = ("BatchNorm", "BatchNorm_v1", "LayerNorm", "InstanceNorm", "GroupNorm", "L2Normalization")
_REDUCTIONS = ("sum", "mean", "prod", "max", "min", "nansum", "nanprod", "norm", "sum_axis", "max_axis", "min_axis",
               "argmax", "argmin", "argmax_channel", "multi_sum_sq", "all_finite", "multi_all_finite", "moments",
               "cumsum")
_POINTWISE_CATEGORIES = ("unary", "rounding", "binary_broadcast", "binary_elemwise", "activation")
_POINTWISE = ("clip", "smooth_l1", "hard_sigmoid", "LinearRegressionOutput", "LogisticRegressionOutput",
              "MAERegressionOutput", "SVMOutput", "SequenceMask", "khatri_rao",
              "IdentityAttachKLSparseReg", "multi_lars", "choose_element_0index", "LRN")
#: derivatives that read nothing but the head gradient
_CONSTANT_DERIVATIVE = ("broadcast_add", "broadcast_plus", "broadcast_sub", "broadcast_minus", "elemwise_add",
                        "elemwise_sub", "sum", "mean", "nansum", "sum_axis", "add_n", "ElementWiseSum", "negative")

FAMILIES: Dict[str, Callable[[Case], Flops]] = {
    "dot": _dot, "batch_dot": _batch_dot, "FullyConnected": _fully_connected,
    "Convolution": _convolution, "Deconvolution": _deconvolution, "RNN": _rnn, "Pooling": _pooling,
    "sort": _sort, "argsort": _sort, "topk": _sort, "add_n": _add_n, "ElementWiseSum": _add_n,
    **_LINALG,
    **{name: _of_input(W.softmax) for name in _SOFTMAX},
    **{name: _of_input(W.normalization) for name in _NORMS},
    **{name: _of_input(W.reduction) for name in _REDUCTIONS},
    **{name: _pointwise() for name in _POINTWISE},
    **{name: _update for name in _UPDATE_OPS},
    **{name: _pointwise() for name in registry.all_names() if name.startswith("random_pdf_")},
    **{f"{prefix}{name}": _update for prefix in ("", "preloaded_") for name in _MULTI_GROUP},
}

MOVEMENT = "data movement: no arithmetic; bytes are its measure"
#: operators of other categories that move data (copies, gathers, layouts) or whose arithmetic
#: has no formula here, and why
NO_FORMULA_OPS = {
    **{name: MOVEMENT for name in ("Custom", "MakeLoss", "squeeze", "SequenceLast", "SequenceReverse", "cast_storage",
                                   "reset_arrays", "fill_element_0index", "where", "im2col", "col2im", "Embedding", "scatter_nd",
                                   "linalg_extractdiag", "linalg_extracttrian", "linalg_makediag", "linalg_maketrian")},
    **{name: "interpolation: no FLOP formula for its sampling grid" for name in
       ("BilinearSampler", "GridGenerator", "SpatialTransformer", "UpSampling", "ROIPooling")},
    "Correlation": "patch correlation over displacements: no FLOP formula",
    "Dropout": "a random draw per element: the generator's arithmetic is not counted",
    "unravel_index": "integer index arithmetic: no floating-point operations",
    "CTCLoss": "dynamic programming over label alignments: no FLOP formula", "ctc_loss":
        "dynamic programming over label alignments: no FLOP formula",
}
NO_FORMULA = {
    "random": "random sampling: the generator's arithmetic is not counted; bytes are its measure",
    **{category: MOVEMENT for category in ("shape", "rearrange", "expanding", "join_split", "indexing")},
}


def flops_of(case: Case) -> Flops:
    """The operator's family's FLOPs, or no formula with the reason."""
    name, category = case.spec.params["op"], case.spec.params.get("category")
    family = FAMILIES.get(name) or (_pointwise() if category in _POINTWISE_CATEGORIES else None)
    if family is None:
        return W.no_formula(NO_FORMULA_OPS.get(name) or NO_FORMULA.get(category)
                            or f"no FLOP formula for {name} (category {category})")
    if case.outputs is None:
        return W.no_formula(case.why_no_outputs or "outputs unknown")
    try:
        return family(case)
    except (IndexError, KeyError, TypeError, ValueError) as error:  # a case the family's reading does not fit
        return W.no_formula(f"no FLOP formula for this case of {name} ({type(error).__name__}: {error})")


#: operators with a FLOP formula that read only what they pick (the rest of data movement is
#: known by its reason, MOVEMENT)
_GATHERS = ("choose_element_0index",)
#: operators that read only their inputs' diagonals
_DIAGONAL = ("linalg_sumlogdiag",)
#: operators that write their outputs without reading an input's data (reset_arrays zeroes
#: its arrays)
_WRITE_ONLY = ("reset_arrays",)
#: operators whose gradient is a constant the head gradient does not enter (a loss's scale)
_HEAD_UNREAD = ("MakeLoss", "make_loss")


def _moves_data(case: Case, flops: Flops) -> bool:
    return flops.reason == MOVEMENT or case.spec.params["op"] in _GATHERS


def forward_reads(case: Case, flops: Flops) -> List[Tensor]:
    """What the forward reads at least: every input, except where an operator moves data
    (W.gathered), reads only diagonals, or only writes."""
    name = case.spec.params["op"]
    if name in _WRITE_ONLY:
        return []
    if name in _DIAGONAL:
        return [W.tensor((*t.shape[:-2], min(t.shape[-2:])), t.dtype) for t in case.all_inputs]
    if _moves_data(case, flops):
        return W.gathered(case.all_inputs, case.outputs)
    return case.all_inputs


def backward_reads(case: Case, flops: Flops) -> List[Tensor]:
    """What the derivative reads besides the head gradients (a lower bound: nothing where it
    is a constant or moves the head's data, the outputs where it is written in them)."""
    name = case.spec.params["op"]
    if name in _CONSTANT_DERIVATIVE or name in _HEAD_UNREAD or _moves_data(case, flops):
        return []
    if name in _SOFTMAX or name in ("exp", "sigmoid", "tanh", "relu", "sqrt"):
        return list(case.outputs or [])
    return case.all_inputs


def heads_read(case: Case, flops: Flops, gradients: List[Tensor]) -> List[Tensor]:
    """The head gradients the backward reads: none where the gradient is a constant of its
    own, no more than it writes where it moves data (a diagonal's backward)."""
    if case.spec.params["op"] in _HEAD_UNREAD:
        return []
    heads = list(case.outputs or [])
    return W.gathered(heads, gradients) if _moves_data(case, flops) else heads


def work(spec: CaseSpec) -> Dict[str, Work]:
    """The case's work per timed phase: forward always, backward where the case times one."""
    case = case_of(spec)
    flops = flops_of(case)
    if case.outputs is None:
        missing = Work(W.FORWARD, None, flops.forward, f"bytes unknown: {case.why_no_outputs}")
        phases = {W.FORWARD: missing}
    else:
        phases = {W.FORWARD: W.forward_work(forward_reads(case, flops), case.outputs, flops)}
    if spec.params.get("run_backward"):
        gradients = gradient_tensors(spec)
        phases[W.BACKWARD] = W.backward_work(heads_read(case, flops, gradients), backward_reads(case, flops), gradients,
                                             flops) if case.outputs is not None else \
            Work(W.BACKWARD, None, flops.backward, f"bytes unknown: {case.why_no_outputs}")
    return phases
