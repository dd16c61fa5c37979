"""Default inputs for every operator: valid values, opperf's shapes, one case per combination.

A rule is a function of a size Profile ("standard" = opperf's default shapes, "large" = the
int64 large-tensor set, "tiny" = the same structure at toy sizes for tests, "count" = the
instruction engine's shapes, see Profile) that returns the
list of input combinations (variants) for one operator. Each variant is a dict from MXNet
argument name to a JSON description:

- a tensor:   {"shape": [...], "init": ..., bounds..., optional "dtype", optional "grad": false}
- a list of tensors (variadic inputs such as add_n's `args`): a list of tensor dicts
- a scalar or tuple parameter: the plain JSON value (tuples become lists)

Rules are functions rather than tables because shapes depend on each other (a convolution's
weight on its data's channels, an index's bound on the indexed axis): that is exactly where
opperf's tables went wrong (random normals as indices, 1x2 stand-ins for list inputs, unequal
lists collapsed to their first element). Nothing here imports MXNet.

Initialisers ("init"), materialised by opbench.backends.mxnet.arrays:
  normal (loc, scale) | uniform (low, high) | indices (integers in [low, high); `high` may be a
  list giving one bound per row, `unique` draws without replacement) | spd (symmetric positive
  definite) | near_identity (I + small noise: det near 1) | tril (lower triangular, diagonal in
  [1, 2]: a well-conditioned Cholesky factor) | simplex (positive, sums to 1 on the last axis) |
  rois (valid [batch, x1, y1, x2, y2] boxes) | affine (near-identity 2x3 transforms) |
  sparse (normal with a `density` fraction non-zero) | fill (constant `value`) |
  reciprocal_pairs (exp(u) then exp(-u) along `axis`, u ~ U(-log_bound, log_bound): every
  partial product along it stays near 1) | given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from opbench.inputs import tensor as T

Shape = Tuple[int, ...]
Variant = Tuple[Optional[str], Dict[str, Any]]
Rule = Callable[["Profile", str], List[Variant]]

# A rule value of DTYPE is replaced by the case's dtype when the case is built (for operators
# that take their output dtype as a parameter, e.g. random_normal).
DTYPE = "@dtype"

# A variant whose inputs hold this key is run forward only; its value is the reason.
NO_BACKWARD = "@no_backward"

# A variant whose inputs hold this key computes on NaN, Inf or subnormal values by the
# operator's nature, not by a choice of inputs: the audit (benchcore.measure.audit) marks it expected
# instead of a defect. Its value is the reason, or {dtype: reason} where only some dtypes do.
NON_NORMAL = "@non_normal"
FLOAT16_MAX = 65504


@dataclass(frozen=True)
class Profile:
    """Which size set a rule builds: "standard", "large", "tiny" or "count".

    "count" is the instruction engine's (docs/INSTRUCTIONS.md, Cost and shapes): under valgrind
    a call costs ~100x its native time, and at tiny shapes a call is mostly MXNet's Python and
    dispatch (~140,000 instructions) whose count varies by a few hundred instructions from one
    repeat to the next (allocator and hash-table paths). Its shapes make an operator's own work
    about 1M instructions or more (2^17 elements in the shared 2-D slots), so that jitter stays
    under 0.1%, while a native call stays well under a few milliseconds. Every rule of the
    default sweep gives count values (tests/opbench/test_count_profile.py checks that no case
    keeps its tiny inputs); a rule that gives none keeps its tiny one, its counts then mostly
    call overhead, judged with their own spread where it shows.

    Where the count shapes cannot make the operator's own work ~1M instructions: operators whose
    work is inherently dispatch or metadata (shape_array, size_array; squeeze, reshape,
    expand_dims and the like are a copy at most), and the random samplers (sample_*,
    random_pdf_dirichlet), kept at 2^13-2^14 values because a draw costs hundreds of
    instructions (a native call of 131,072 negative-binomial draws took 36 ms): their counts are
    non-repeatable whatever the size, and judged with their own spread.
    """

    name: str = "standard"

    def pick(self, standard: Any, tiny: Any, large: Any = None, count: Any = None) -> Any:
        """Choose per profile; without a large value the large set keeps the standard one, and
        without a count value the count set keeps the tiny one."""
        if self.name == "count":
            return tiny if count is None else count
        if self.name == "tiny":
            return tiny
        if self.name == "large" and large is not None:
            return large
        return standard


STANDARD, LARGE, TINY, COUNT = Profile("standard"), Profile("large"), Profile("tiny"), Profile("count")
PROFILES = {p.name: p for p in (STANDARD, LARGE, TINY, COUNT)}


# ---------------------------------------------------------------- tensor descriptions
# T (opbench.inputs.tensor) describes a tensor; the helpers below are the kinds the rules use.

def U(shape: Sequence[int], low: float, high: float, **kw: Any) -> Dict[str, Any]:
    """A uniform tensor: the way to keep a domain-restricted input inside its domain."""
    return T(shape, "uniform", low=low, high=high, **kw)


def I(shape: Sequence[int], high: Any, low: int = 0, dtype: Optional[str] = None,
      unique: bool = False) -> Dict[str, Any]:
    """Valid integer indices in [low, high) — never random normals (an opperf defect)."""
    extra: Dict[str, Any] = {"low": low, "high": high}
    if unique:
        extra["unique"] = True
    return T(shape, "indices", dtype=dtype, grad=False, **extra)


# ---------------------------------------------------------------- shared size slots

def data_shapes(p: Profile) -> List[Shape]:
    """opperf's generic `data`: a square matrix, a long column, a tall matrix."""
    return p.pick([(1024, 1024), (10000, 1), (10000, 100)],
                  [(4, 6), (8, 1), (8, 3)],
                  [(2 ** 16, 2 ** 16), (2 ** 32, 1), (2 ** 28, 2 ** 4)],
                  [(256, 512), (2 ** 17, 1), (2048, 64)])


def lhs_shapes(p: Profile) -> List[Shape]:
    return p.pick([(1024, 1024), (10000, 10), (10000, 1)],
                  [(4, 6), (8, 2), (8, 1)],
                  [(2 ** 16, 2 ** 16), (2 ** 28, 2 ** 4), (2 ** 32, 1)],
                  [(256, 512), (2 ** 14, 8), (2 ** 17, 1)])


def nn4d_shapes(p: Profile) -> List[Shape]:
    """opperf's NN 4-D inputs (N, C, H, W)."""
    return p.pick([(32, 3, 256, 256), (32, 3, 10000, 10)],
                  [(2, 3, 6, 6), (2, 3, 8, 4)],
                  [(2 ** 14, 3, 2 ** 8, 2 ** 8 + 2)],
                  [(4, 3, 64, 64), (4, 3, 1024, 10)])


def rearrange4d_shapes(p: Profile) -> List[Shape]:
    return p.pick([(1, 4, 2, 4), (10, 25, 10, 100)],
                  [(1, 4, 2, 4), (2, 3, 2, 6)],
                  [(1, 4, 2 ** 15, 2 ** 15 + 2)],
                  [(4, 16, 64, 64), (8, 16, 16, 128)])


def linalg_n(p: Profile) -> int:
    return p.pick(1024, 4, count=64)


SCALARS_3 = [0.1, 0.5, 0.9]  # opperf's lr / wd / momentum values

RULES: Dict[str, Rule] = {}

# Operators that cannot be benchmarked from a registry rule, with the reason.
NO_RULE: Dict[str, str] = {}

# Operators MXNet 1.9.1 refuses on CPU at an integer dtype, each with MXNet's own message. At
# --dtype int32/int64 every case of theirs would only fail, so they get none and the report
# gives this reason. A stored probe answer, like registry.NOT_DIFFERENTIABLE:
# tests/opbench/test_integer_dtypes.py runs every operator at int32 and int64 and asserts that
# exactly these fail, with these messages.
_REAL_ONLY = "This operation only support floating point types"
_LINALG_ONLY = "This operation only supports 32-bit and 64-bit floating point"
_RANDOM_DTYPE = "valid values are: {'None', 'float16', 'float32', 'float64'}"
_FLOAT_BLOB = "data type do not match specified type"  # float internals under an int kernel
INTEGER_UNSUPPORTED: Dict[str, str] = {
    **{op: _REAL_ONLY for op in (
        "Activation", "BatchNorm", "BilinearSampler", "Convolution", "Correlation",
        "Deconvolution", "Dropout", "GroupNorm", "L2Normalization", "LayerNorm", "LeakyReLU",
        "LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput", "MakeLoss",
        "Pooling", "RNN", "ROIPooling", "SVMOutput", "Softmax", "SoftmaxOutput",
        "SpatialTransformer", "UpSampling", "adam_update", "all_finite", "col2im", "ftml_update",
        "ftrl_update", "hard_sigmoid", "im2col", "lamb_update_phase1", "lamb_update_phase2",
        "log_softmax", "multi_all_finite", "multi_sgd_mom_update", "multi_sgd_update",
        "multi_sum_sq", "nag_mom_update", "pad", "preloaded_multi_sgd_mom_update",
        "preloaded_multi_sgd_update", "random_pdf_dirichlet", "random_pdf_exponential",
        "random_pdf_gamma", "random_pdf_generalized_negative_binomial",
        "random_pdf_negative_binomial", "random_pdf_normal", "random_pdf_poisson",
        "random_pdf_uniform", "reset_arrays", "rmsprop_update", "rmspropalex_update",
        "sample_multinomial", "sgd_mom_update", "sgd_update", "signsgd_update", "signum_update",
        "softmax", "softmax_cross_entropy", "softmin")},
    **{op: _LINALG_ONLY for op in (
        "linalg_det", "linalg_extractdiag", "linalg_extracttrian", "linalg_gelqf", "linalg_gemm",
        "linalg_gemm2", "linalg_inverse", "linalg_makediag", "linalg_maketrian", "linalg_potrf",
        "linalg_potri", "linalg_slogdet", "linalg_sumlogdiag", "linalg_syrk", "linalg_trmm",
        "linalg_trsm")},
    **{op: _RANDOM_DTYPE for op in (
        "random_exponential", "random_gamma", "random_generalized_negative_binomial",
        "random_negative_binomial", "random_normal", "random_poisson", "random_uniform",
        "sample_exponential", "sample_gamma", "sample_normal", "sample_uniform")},
    **{op: _FLOAT_BLOB for op in (
        "BatchNorm_v1", "CTCLoss", "LRN", "SoftmaxActivation", "ctc_loss", "fill_element_0index")},
    "dot": "dot only supports float32/float64",
    "batch_dot": "dot only supports float32/float64",
    "khatri_rao": "Not implmented!",  # sic
    "multi_lars": "MultiLARS only support float",
    "FullyConnected": "Unsupported type",
    "GridGenerator": "Other DTypes are not supported!",
    "IdentityAttachKLSparseReg": "Unsupported data type",
    "InstanceNorm": "Unsupported data type",
}


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for name in names:
            RULES[name] = fn
        return fn
    return register


def fmt_shape(shape: Sequence[int]) -> str:
    """Compact shape label: (1024,1024), (3,)."""
    dims = [str(d) for d in shape]
    return "(" + ",".join(dims) + ("," if len(dims) == 1 else "") + ")"


# ---------------------------------------------------------------- unary, rounding, shape-of

# Input domains (uniform bounds) for operators undefined or singular on part of the reals.
DOMAINS: Dict[str, Tuple[float, float]] = {
    **{op: (0.1, 10.0) for op in ("log", "log10", "log2", "log1p", "sqrt", "rsqrt", "rcbrt",
                                  "reciprocal", "gammaln")},
    # gamma(10) = 362880 and its gradient pass float16's largest value (65504); gamma(8) = 5040
    "gamma": (0.1, 8.0),
    # tan has poles at ±pi/2, where N(0, 1) draws land now and then: its gradient, 1 + tan^2,
    # then passes float16's range (1800 infinities in a million values)
    "tan": (-1.5, 1.5),
    **{op: (-0.9, 0.9) for op in ("arcsin", "arccos", "arctanh", "erfinv")},
    "arccosh": (1.1, 10.0),
    # cbrt is defined everywhere but its gradient, 1 / (3 cbrt(x)^2), is infinite at 0, and
    # float32 normal draws hold an exact 0 about once in a million values
    "cbrt": (0.1, 10.0),
}

UNARY = (
    "BlockGrad", "abs", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh",
    "argmax_channel", "cbrt", "ceil", "cos", "cosh", "degrees", "erf", "erfinv", "exp", "expm1",
    "fix", "flatten", "floor", "gamma", "gammaln", "identity", "log", "log10", "log1p", "log2",
    "logical_not", "make_loss", "negative", "ones_like", "radians", "rcbrt", "reciprocal",
    "relu", "rint", "round", "rsqrt", "shape_array", "shuffle", "sigmoid", "sign", "sin", "sinh",
    "size_array", "softsign", "sqrt", "square", "stop_gradient", "tan", "tanh", "trunc",
    "zeros_like", "MakeLoss", "hard_sigmoid", "softmin", "softmax", "log_softmax",
    "SoftmaxActivation", "smooth_l1", "all_finite",
)


def domain_tensor(op: str, shape: Sequence[int], **kw: Any) -> Dict[str, Any]:
    if op in DOMAINS:
        low, high = DOMAINS[op]
        return U(shape, low, high, **kw)
    return T(shape, **kw)


@rule(*UNARY)
def _unary(p: Profile, op: str) -> List[Variant]:
    extra: Dict[str, Any] = {}
    if op in ("softmin", "softmax", "log_softmax"):
        extra = {"axis": -1}
    elif op == "smooth_l1":
        extra = {"scalar": 1.0}
    elif op == "all_finite":
        extra = {"init_output": True}
    if op in ("softmin", "softmax"):
        extra[NON_NORMAL] = {"float16": (
            "with a head gradient of ones the input gradient is y * (1 - sum(y)) = 0 up to rounding, and "
            "float16's rounding residues are subnormal; over 1024 classes the smallest probabilities are "
            "below float16's normal range (6.1e-5) too")}
    return [(None, {"data": domain_tensor(op, s), **extra}) for s in data_shapes(p)]


@rule("cast")
def _cast(p: Profile, op: str) -> List[Variant]:
    targets = ["float16", "int32", "float64"]
    return [(f"{fmt_shape(s)}-to-{t}", {"data": T(s), "dtype": t})
            for s, t in zip(data_shapes(p), targets)]


@rule("amp_cast")
def _amp_cast(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "dtype": "float16"}) for s in data_shapes(p)]


@rule("amp_multicast")
def _amp_multicast(p: Profile, op: str) -> List[Variant]:
    # MKLDNN (the CPU backend) accepts only float32 here, so both inputs share the case dtype.
    return [(None, {"data": [T(s), T(s)], "num_outputs": 2}) for s in data_shapes(p)]


# ---------------------------------------------------------------- binary

# Division-like operators and their divisor (modulus) input, drawn in [0.5, 2): never zero,
# also at an integer dtype (integers 1 and 2), where a zero divisor is an integer division by
# zero that kills the process with SIGFPE.
DIVISORS: Dict[str, str] = {
    **{op: "rhs" for op in ("broadcast_div", "broadcast_mod", "elemwise_div", "_div", "_Div",
                            "_mod", "_Mod", "_npi_mod", "_npi_true_divide",
                            "_scatter_elemwise_div", "_sparse_broadcast_div",
                            "_sparse_elemwise_div")},
    **{op: "data" for op in ("_rdiv_scalar", "_RDivScalar", "_rmod_scalar", "_RModScalar",
                             "_npi_rmod_scalar", "_npi_rtrue_divide_scalar")},
}


def divisor(shape: Sequence[int]) -> Dict[str, Any]:
    return U(shape, 0.5, 2.0)


@rule("broadcast_add", "broadcast_div", "broadcast_equal", "broadcast_greater",
      "broadcast_greater_equal", "broadcast_hypot", "broadcast_lesser", "broadcast_lesser_equal",
      "broadcast_logical_and", "broadcast_logical_or", "broadcast_logical_xor",
      "broadcast_maximum", "broadcast_minimum", "broadcast_minus", "broadcast_mod",
      "broadcast_mul", "broadcast_not_equal", "broadcast_plus", "broadcast_power",
      "broadcast_sub", "elemwise_add", "elemwise_div", "elemwise_mul", "elemwise_sub")
def _binary(p: Profile, op: str) -> List[Variant]:
    """opperf's same-shape pairs, plus, for broadcast_*, a row and a column broadcast of the
    first shape: with equal shapes MXNet runs its plain element-wise kernel, and the real
    cost of broadcasting (a strided forward, a reducing backward: 15x at (1024,1024)) is never
    seen."""
    pairs = [(s, s) for s in lhs_shapes(p)]
    if op.startswith("broadcast_"):
        rows, cols = lhs_shapes(p)[0]
        pairs += [((rows, cols), (1, cols)), ((rows, cols), (rows, 1))]
    out = []
    for lhs_shape, rhs_shape in pairs:
        lhs = U(lhs_shape, 0.5, 2.0) if op == "broadcast_power" else T(lhs_shape)
        rhs = divisor(rhs_shape) if op in DIVISORS else (
            U(rhs_shape, -2.0, 2.0) if op == "broadcast_power" else T(rhs_shape))
        out.append((None, {"lhs": lhs, "rhs": rhs}))
    return out


@rule("ElementWiseSum", "add_n")
def _sum_n(p: Profile, op: str) -> List[Variant]:
    count = 2 if op == "ElementWiseSum" else 3
    return [(f"{count}x{fmt_shape(s)}", {"args": [T(s) for _ in range(count)]})
            for s in lhs_shapes(p)]


@rule("choose_element_0index")
def _choose(p: Profile, op: str) -> List[Variant]:
    # Its work is one pick per row: the count shapes need many rows (data_shapes' (256,512)
    # picked 256 values, a call of ~470,000 instructions that was nearly all dispatch).
    shapes = p.pick(data_shapes(p), data_shapes(p), data_shapes(p),
                    [(2 ** 15, 16), (2 ** 17, 1), (2 ** 16, 4)])
    return [(None, {"data": T(s), "index": I((s[0],), high=s[1])}) for s in shapes]


@rule("reshape_like")
def _reshape_like(p: Profile, op: str) -> List[Variant]:
    return [(None, {"lhs": T(s), "rhs": T((s[1], s[0]), grad=False)}) for s in lhs_shapes(p)]


# ---------------------------------------------------------------- gemm

@rule("dot")
def _dot(p: Profile, op: str) -> List[Variant]:
    n = p.pick(1024, 4, count=128)
    m, k = p.pick((1000, 10), (5, 2), count=(256, 16))
    return [
        (None, {"lhs": T((n, n)), "rhs": T((n, n))}),
        (None, {"lhs": T((m, k)), "rhs": T((k, m))}),
        ("transpose_b", {"lhs": T((n, n)), "rhs": T((n, n)), "transpose_b": True}),
    ]


@rule("batch_dot")
def _batch_dot(p: Profile, op: str) -> List[Variant]:
    b, n = p.pick((32, 128), (2, 4), count=(4, 64))
    m, k = p.pick((256, 32), (5, 3), count=(64, 16))
    return [
        (None, {"lhs": T((b, n, n)), "rhs": T((b, n, n))}),
        (None, {"lhs": T((b, m, k)), "rhs": T((b, k, m))}),
        ("transpose_a", {"lhs": T((b, k, m)), "rhs": T((b, k, m)), "transpose_a": True}),
    ]


@rule("khatri_rao")
def _khatri_rao(p: Profile, op: str) -> List[Variant]:
    pairs = p.pick([((100, 10), (100, 10)), ((64, 32), (16, 32))],
                   [((4, 3), (5, 3)), ((2, 4), (3, 4))],
                   count=[((64, 32), (32, 32)), ((128, 16), (64, 16))])
    return [(None, {"args": [T(a), T(b)]}) for a, b in pairs]


# ---------------------------------------------------------------- random sampling

_RANDOM_PARAMS: Dict[str, List[Dict[str, Any]]] = {
    "random_exponential": [{"lam": v} for v in (4.0, 1.0, 0.5)],
    "random_gamma": [{"alpha": a, "beta": b} for a, b in ((9.0, 0.5), (2.0, 1.0), (1.0, 2.0))],
    "random_generalized_negative_binomial": [{"mu": m, "alpha": a}
                                             for m, a in ((2.0, 0.3), (1.0, 1.0), (5.0, 0.5))],
    "random_negative_binomial": [{"k": k, "p": q} for k, q in ((20, 0.4), (5, 0.5), (1, 0.9))],
    "random_normal": [{"loc": l, "scale": s} for l, s in ((0.0, 1.0), (-1.0, 2.0), (10.0, 0.5))],
    "random_poisson": [{"lam": v} for v in (4.0, 1.0, 10.0)],
    "random_randint": [{"low": lo, "high": hi} for lo, hi in ((0, 10), (-100, 100), (0, 2))],
    "random_uniform": [{"low": lo, "high": hi} for lo, hi in ((0.0, 1.0), (-10.0, 10.0), (1.0, 2.0))],
}


@rule(*_RANDOM_PARAMS)
def _random(p: Profile, op: str) -> List[Variant]:
    out = []
    for s, params in zip(data_shapes(p), _RANDOM_PARAMS[op]):
        inputs = {**params, "shape": list(s)}
        if op != "random_randint":
            inputs["dtype"] = DTYPE
        out.append((fmt_shape(s), inputs))
    return out


def _pdf_params(op: str, shape: Sequence[int]) -> Dict[str, Any]:
    """Distribution parameters in their domain, and a sample inside the support."""
    pos = lambda: U(shape, 0.5, 2.0)  # noqa: E731 - tiny local factory
    if op == "random_pdf_normal":
        # sigma >= 1: with sigma down to 0.5, samples 4-5 sigma from mu gave densities in
        # float16's subnormal range in 1% of the values
        return {"mu": T(shape), "sigma": U(shape, 1.0, 2.0)}
    if op == "random_pdf_uniform":
        return {"low": U(shape, -2.0, -1.0), "high": U(shape, 1.0, 2.0)}
    if op in ("random_pdf_exponential", "random_pdf_poisson"):
        return {"lam": pos()}
    if op == "random_pdf_gamma":
        return {"alpha": pos(), "beta": pos()}
    if op == "random_pdf_negative_binomial":
        return {"k": U(shape, 1.0, 10.0), "p": U(shape, 0.2, 0.8)}
    if op == "random_pdf_generalized_negative_binomial":
        return {"mu": pos(), "alpha": pos()}
    raise KeyError(op)


_PDF_SAMPLE = {
    "random_pdf_normal": lambda s: T(s),
    "random_pdf_uniform": lambda s: U(s, -1.0, 1.0),
    "random_pdf_exponential": lambda s: U(s, 0.0, 5.0),
    "random_pdf_gamma": lambda s: U(s, 0.1, 5.0),
    "random_pdf_poisson": lambda s: I(s, high=10),
    "random_pdf_negative_binomial": lambda s: I(s, high=10),
    "random_pdf_generalized_negative_binomial": lambda s: I(s, high=10),
}


#: under the count profile, the uniform density at 4x the shared slots: at 2^17 values its call
#: counted 425,440 instructions, half of it the call itself, so a 1% larger input added 0.52%
#: (below the verdicts' absolute floor of 2,500) and the planted change of figure (b) went unseen
_PDF_COUNT_SCALE = {"random_pdf_uniform": 4}


@rule(*_PDF_SAMPLE)
def _random_pdf(p: Profile, op: str) -> List[Variant]:
    shapes = data_shapes(p)
    if p.name == "count" and op in _PDF_COUNT_SCALE:
        shapes = [(s[0] * _PDF_COUNT_SCALE[op], *s[1:]) for s in shapes]
    return [(None, {"sample": _PDF_SAMPLE[op](s), **_pdf_params(op, s[:-1]), "is_log": False})
            for s in shapes]


@rule("random_pdf_dirichlet")
def _pdf_dirichlet(p: Profile, op: str) -> List[Variant]:
    shapes = p.pick([(1024, 100, 10), (10000, 10, 10)], [(2, 3, 4), (3, 2, 2)],
                    count=[(64, 32, 8), (512, 4, 8)])
    return [(None, {"sample": T(s, "simplex"), "alpha": U((s[0], s[2]), 0.5, 2.0), "is_log": False,
                    NON_NORMAL: {"float16": "a Dirichlet density over 10 categories is about 9! = 362880 "
                                            "(92% of these values exceed 65504): past float16's range"}})
            for s in shapes]


def _sample_params(op: str, shape: Sequence[int]) -> Dict[str, Any]:
    pos = lambda: U(shape, 0.5, 2.0)  # noqa: E731
    return {
        "sample_exponential": lambda: {"lam": pos()},
        "sample_poisson": lambda: {"lam": pos()},
        "sample_gamma": lambda: {"alpha": pos(), "beta": pos()},
        "sample_generalized_negative_binomial": lambda: {"mu": pos(), "alpha": pos()},
        "sample_negative_binomial": lambda: {"k": U(shape, 1.0, 10.0), "p": U(shape, 0.2, 0.8)},
        "sample_normal": lambda: {"mu": T(shape), "sigma": pos()},
        "sample_uniform": lambda: {"low": U(shape, -2.0, -1.0), "high": U(shape, 1.0, 2.0)},
    }[op]()


@rule("sample_exponential", "sample_poisson", "sample_gamma",
      "sample_generalized_negative_binomial", "sample_negative_binomial", "sample_normal",
      "sample_uniform")
def _sample(p: Profile, op: str) -> List[Variant]:
    # (parameter count, draws per parameter): about a million samples each.
    pairs = p.pick([((1024,), (1024,)), ((10000,), (100,)), ((100,), (10000,))],
                   [((4,), (3,)), ((5,), (2,)), ((2,), (5,))],
                   [((2 ** 16,), (2 ** 16,)), ((2 ** 32,), (1,))],
                   [((128,), (64,)), ((512,), (16,)), ((16,), (512,))])
    out = []
    for params_shape, draws in pairs:
        inputs = {**_sample_params(op, params_shape), "shape": list(draws)}
        if op not in ("sample_poisson", "sample_negative_binomial",
                      "sample_generalized_negative_binomial"):
            inputs["dtype"] = DTYPE
        out.append((f"{fmt_shape(params_shape)}x{fmt_shape(draws)}", inputs))
    return out


@rule("sample_multinomial")
def _multinomial(p: Profile, op: str) -> List[Variant]:
    pairs = p.pick([((1024, 10), (1024,)), ((10000, 100), (10,))], [((3, 4), (5,)), ((4, 6), (2,))],
                   count=[((256, 8), (64,)), ((1024, 32), (8,))])
    return [(f"{fmt_shape(s)}x{fmt_shape(d)}",
             {"data": T(s, "simplex"), "shape": list(d), "get_prob": True}) for s, d in pairs]


@rule("GridGenerator")
def _grid_generator(p: Profile, op: str) -> List[Variant]:
    n, h, w = p.pick((32, 256, 256), (2, 4, 5), count=(8, 64, 64))
    return [
        ("affine", {"data": T((n, 6), "affine"), "transform_type": "affine", "target_shape": [h, w]}),
        ("warp", {"data": T((n, 2, h, w)), "transform_type": "warp"}),
    ]


@rule("BilinearSampler")
def _bilinear_sampler(p: Profile, op: str) -> List[Variant]:
    pairs = p.pick([((32, 3, 256, 256), (256, 256)), ((32, 3, 64, 64), (128, 128))],
                   [((2, 3, 4, 4), (3, 5)), ((2, 3, 3, 3), (6, 6))],
                   count=[((4, 3, 64, 64), (64, 64)), ((4, 3, 32, 32), (64, 64))])
    return [(None, {"data": T(s), "grid": U((s[0], 2) + tuple(g), -1.0, 1.0)}) for s, g in pairs]


# ---------------------------------------------------------------- reduction, sorting

_REDUCE_AXES = [None, 0, 1]


@rule("max", "max_axis", "mean", "min", "min_axis", "nanprod", "nansum", "prod", "sum", "sum_axis")
def _reduce(p: Profile, op: str) -> List[Variant]:
    out = []
    for s, axis in zip(data_shapes(p), _REDUCE_AXES):
        # Products of normals over/underflow. Independent values near 1 are not enough either:
        # U(0.5, 1.5) drifted to a subnormal product (1e-45 after 10,000 values), where the
        # reduction ran 3x slower than on normal numbers. Reciprocal pairs keep every partial
        # product within e^±0.1 of 1 at any length (opbench.backends.mxnet.arrays._reciprocal_pairs).
        data = T(s, "reciprocal_pairs", log_bound=0.1, axis=axis) if op in ("prod", "nanprod") else T(s)
        out.append((f"{fmt_shape(s)}-axis{axis}", {"data": data, "axis": axis}))
    return out


@rule("norm")
def _norm(p: Profile, op: str) -> List[Variant]:
    return [(f"{fmt_shape(s)}-ord{o}-axis{a}", {"data": T(s), "ord": o, "axis": a})
            for s, o, a in zip(data_shapes(p), [2, 1, 2], _REDUCE_AXES)]


@rule("sort", "argsort")
def _sort(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "axis": -1}) for s in data_shapes(p)]


@rule("argmax", "argmin")
def _argmax(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "axis": 0}) for s in data_shapes(p)]


@rule("topk")
def _topk(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "axis": -1, "k": min(10, s[-1]), "ret_typ": "value"})
            for s in data_shapes(p)]


# ---------------------------------------------------------------- indexing

@rule("slice")
def _slice(p: Profile, op: str) -> List[Variant]:
    out = []
    for s in data_shapes(p):
        begin = [d // 4 for d in s]
        end = [max(b + 1, 3 * d // 4) for b, d in zip(begin, s)]
        out.append((None, {"data": T(s), "begin": begin, "end": end}))
    return out


@rule("slice_axis")
def _slice_axis(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "axis": 0, "begin": s[0] // 4,
                    "end": max(s[0] // 4 + 1, 3 * s[0] // 4)}) for s in data_shapes(p)]


@rule("slice_like")
def _slice_like(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "shape_like": T([max(1, d // 2) for d in s], grad=False)})
            for s in data_shapes(p)]


@rule("take")
def _take(p: Profile, op: str) -> List[Variant]:
    return [(None, {"a": T(s), "indices": I((s[0],), high=s[0]), "axis": 0})
            for s in data_shapes(p)]


@rule("one_hot")
def _one_hot(p: Profile, op: str) -> List[Variant]:
    pairs = p.pick([((1024,), 1024), ((10000,), 100), ((1000, 10), 100)],
                   [((5,), 4), ((6,), 3), ((2, 3), 3)],
                   [((2 ** 16,), 2 ** 16 + 1), ((2 ** 28,), 2 ** 4 + 1), ((2 ** 12, 2 ** 8), 2 ** 12 + 1)],
                   [((2048,), 256), ((8192,), 64), ((512, 4), 256)])
    return [(f"{fmt_shape(s)}-depth{d}", {"indices": I(s, high=d), "depth": d}) for s, d in pairs]


@rule("where")
def _where(p: Profile, op: str) -> List[Variant]:
    return [(None, {"condition": I(s, high=2), "x": T(s), "y": T(s)}) for s in data_shapes(p)]


#: (shape, index count) per profile (standard, tiny, large, count) for ravel_multi_index and unravel_index
INDEX_SHAPES = ([((1024, 1024), 1024 * 1024), ((100, 100, 100), 10000)],
                [((3, 4), 5), ((2, 3, 4), 6)],
                [((2 ** 16, 2 ** 16 + 1), 2 ** 20), ((2 ** 11, 2 ** 11, 2 ** 10 + 1), 2 ** 20)],
                [((256, 512), 2 ** 16), ((64, 64, 32), 2 ** 15)])


@rule("ravel_multi_index")
def _ravel(p: Profile, op: str) -> List[Variant]:
    pairs = p.pick(*INDEX_SHAPES)
    return [(f"{fmt_shape(shape)}-n{n}",
             {"data": I((len(shape), n), high=list(shape)), "shape": list(shape)})
            for shape, n in pairs]


@rule("unravel_index")
def _unravel(p: Profile, op: str) -> List[Variant]:
    pairs = p.pick(*INDEX_SHAPES)
    return [(f"{fmt_shape(shape)}-n{n}",
             {"data": I((n,), high=math.prod(shape)), "shape": list(shape)})
            for shape, n in pairs]


@rule("gather_nd")
def _gather_nd(p: Profile, op: str) -> List[Variant]:
    n = p.pick(10000, 5, count=2 ** 14)  # the count profile: its work is one gather per index
    return [(None, {"data": T(s), "indices": I((2, n), high=list(s))}) for s in data_shapes(p)]


@rule("scatter_nd")
def _scatter_nd(p: Profile, op: str) -> List[Variant]:
    pairs = p.pick([((1024, 1024), 10000), ((10000, 100), 100000)], [((3, 4), 5), ((6, 2), 4)],
                   [((2 ** 16, 2 ** 16 + 1), 2 ** 20), ((2 ** 32 + 1, 1), 2 ** 20)],
                   [((256, 512), 2 ** 14), ((2048, 64), 2 ** 16)])
    # Unique positions: with duplicates the result is undefined (last writer wins at random).
    return [(f"{fmt_shape(shape)}-n{n}",
             {"data": T((n,)), "indices": I((2, n), high=list(shape), unique=True),
              "shape": list(shape)}) for shape, n in pairs]


@rule("pick")
def _pick(p: Profile, op: str) -> List[Variant]:
    # one pick per row, like choose_element_0index: the count shapes need many rows
    shapes = p.pick(data_shapes(p), data_shapes(p), data_shapes(p),
                    [(2 ** 15, 16), (2 ** 17, 1), (2 ** 16, 4)])
    return [(None, {"data": T(s), "index": I((s[0],), high=s[1]), "axis": -1}) for s in shapes]


# ---------------------------------------------------------------- rearrange, shape, expanding

@rule("transpose")
def _transpose(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "axes": [0, 2, 3, 1]}) for s in rearrange4d_shapes(p)]


@rule("swapaxes", "SwapAxis")
def _swapaxes(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "dim1": 0, "dim2": 2}) for s in rearrange4d_shapes(p)]


@rule("flip", "reverse")
def _flip(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "axis": [1]}) for s in rearrange4d_shapes(p)]


@rule("depth_to_space")
def _depth_to_space(p: Profile, op: str) -> List[Variant]:
    # channels must divide by block_size**2 (opperf's (10,25,10,100) would not)
    shapes = p.pick([(1, 4, 2, 4), (10, 100, 10, 10)], [(1, 4, 2, 4), (2, 8, 2, 3)],
                    [(1, 4, 2 ** 15, 2 ** 15 + 2), (2, 4, 2 ** 15, 2 ** 14 + 2)],
                    [(2, 16, 32, 32), (2, 64, 16, 16)])
    return [(None, {"data": T(s), "block_size": 2}) for s in shapes]


@rule("space_to_depth")
def _space_to_depth(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "block_size": 2}) for s in rearrange4d_shapes(p)]


@rule("split")
def _split(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "num_outputs": 2, "axis": 0}) for s in data_shapes(p)]


@rule("diag")
def _diag(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "k": 0}) for s in data_shapes(p)]


@rule("reshape")
def _reshape(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "shape": [s[0] // 2, s[1] * 2]}) for s in data_shapes(p)]


_EXPAND = [((1024, 1), 1, 1024), ((10000, 1), 1, 100), ((1, 1024), 0, 1024)]
_EXPAND_TINY = [((4, 1), 1, 3), ((5, 1), 1, 2), ((1, 5), 0, 2)]
_EXPAND_LARGE = [((2 ** 16, 1), 1, 2 ** 16 + 1), ((2 ** 32, 1), 1, 2), ((1, 2 ** 16), 0, 2 ** 16 + 1)]
_EXPAND_COUNT = [((512, 1), 1, 512), ((4096, 1), 1, 64), ((1, 1024), 0, 256)]  # 2^18 outputs


@rule("broadcast_axes", "broadcast_axis")
def _broadcast_axis(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "axis": [a], "size": [n]})
            for s, a, n in p.pick(_EXPAND, _EXPAND_TINY, _EXPAND_LARGE, _EXPAND_COUNT)]


def _expanded(s: Shape, axis: int, n: int) -> List[int]:
    return [n if i == axis else d for i, d in enumerate(s)]


@rule("broadcast_to")
def _broadcast_to(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "shape": _expanded(s, a, n)})
            for s, a, n in p.pick(_EXPAND, _EXPAND_TINY, _EXPAND_LARGE, _EXPAND_COUNT)]


@rule("broadcast_like")
def _broadcast_like(p: Profile, op: str) -> List[Variant]:
    return [(None, {"lhs": T(s), "rhs": T(_expanded(s, a, n), grad=False)})
            for s, a, n in p.pick(_EXPAND, _EXPAND_TINY, _EXPAND_LARGE, _EXPAND_COUNT)]


@rule("repeat")
def _repeat(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "repeats": 2, "axis": 0}) for s in data_shapes(p)]


@rule("tile")
def _tile(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "reps": [2, 2]}) for s in data_shapes(p)]


@rule("expand_dims")
def _expand_dims(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "axis": 0}) for s in data_shapes(p)]


@rule("pad")
def _pad(p: Profile, op: str) -> List[Variant]:
    return [(f"{mode}-{fmt_shape(s)}",
             {"data": T(s), "mode": mode, "pad_width": [0, 0, 0, 0, 1, 1, 1, 1]})
            for mode in ("constant", "edge", "reflect") for s in nn4d_shapes(p)]


# ---------------------------------------------------------------- join & split

@rule("concat", "stack")
def _concat(p: Profile, op: str) -> List[Variant]:
    groups = p.pick([(3, (100, 100)), (2, (1024, 1024))], [(3, (2, 3)), (2, (4, 4))],
                    [(3, (2 ** 15, 2 ** 15 + 1)), (2, (2 ** 16, 2 ** 15 + 1))],
                    [(3, (512, 512)), (2, (1024, 512))])
    key = "dim" if op == "concat" else "axis"
    return [(f"{n}x{fmt_shape(s)}", {"data": [T(s) for _ in range(n)], "num_args": n,
                                     key: 1 if op == "concat" else 0}) for n, s in groups]


# ---------------------------------------------------------------- NN basic

_RNN_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


@rule("RNN")
def _rnn(p: Profile, op: str) -> List[Variant]:
    seq, batch, feat, hidden = p.pick((50, 32, 128, 256), (3, 2, 4, 5), count=(16, 16, 64, 64))
    out = []
    for mode, gates in _RNN_GATES.items():
        # one layer, one direction: W_i2h, W_h2h, b_i2h, b_h2h
        n_params = gates * hidden * (feat + hidden) + 2 * gates * hidden
        inputs: Dict[str, Any] = {
            "data": T((seq, batch, feat)),
            "parameters": U((n_params,), -0.1, 0.1),
            "state": T((1, batch, hidden)),
            "state_size": hidden, "num_layers": 1, "mode": mode, "p": 0.0,
        }
        if mode == "lstm":
            inputs["state_cell"] = T((1, batch, hidden))
        out.append((f"{mode}-{fmt_shape((seq, batch, feat))}-h{hidden}", inputs))
    return out


@rule("FullyConnected")
def _fully_connected(p: Profile, op: str) -> List[Variant]:
    hidden = p.pick(64, 5)
    return [(None, {"data": T(s), "weight": T((hidden, math.prod(s[1:]))),
                    "bias": T((hidden,)), "num_hidden": hidden, "flatten": True})
            for s in nn4d_shapes(p)]


@rule("Dropout")
def _dropout(p: Profile, op: str) -> List[Variant]:
    # mode "always": drop outside training too, so the timed forward really drops (opperf: p=1).
    return [(None, {"data": T(s), "p": 0.5, "mode": "always"}) for s in nn4d_shapes(p)]


@rule("BatchNorm")
def _batch_norm(p: Profile, op: str) -> List[Variant]:
    shapes = p.pick([(32, 3, 256, 256), (32, 3, 10000, 10), (1024, 1024)],
                    [(2, 3, 4, 4), (2, 3, 5, 2), (4, 6)],
                    count=[(4, 3, 64, 64), (4, 3, 1024, 10), (256, 512)])
    out = []
    for s in shapes:
        c = (s[1],)
        out.append((None, {"data": T(s), "gamma": U(c, 0.5, 1.5), "beta": T(c),
                           "moving_mean": T(c, grad=False),
                           "moving_var": U(c, 0.5, 1.5, grad=False), "fix_gamma": False}))
    return out


@rule("BatchNorm_v1")
def _batch_norm_v1(p: Profile, op: str) -> List[Variant]:
    # moving_mean/moving_var are auxiliary states its generated function cannot pass.
    return [(None, {"data": T(s), "gamma": U((s[1],), 0.5, 1.5), "beta": T((s[1],)),
                    "moving_mean": T((s[1],), grad=False),
                    "moving_var": U((s[1],), 0.5, 1.5, grad=False), "fix_gamma": False})
            for s in nn4d_shapes(p)]


@rule("L2Normalization")
def _l2norm(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "mode": "instance"}) for s in nn4d_shapes(p)]


@rule("LayerNorm")
def _layer_norm(p: Profile, op: str) -> List[Variant]:
    out = []
    for s in nn4d_shapes(p):
        inputs = {"data": T(s), "gamma": U((s[-1],), 0.5, 1.5), "beta": T((s[-1],)), "axis": -1}
        if math.prod(s[:-1]) > FLOAT16_MAX:
            inputs[NON_NORMAL] = {"float16": f"beta's gradient sums the head gradient (ones) over "
                                             f"{math.prod(s[:-1])} rows: past float16's range (65504)"}
        out.append((None, inputs))
    return out


@rule("InstanceNorm")
def _instance_norm(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "gamma": U((s[1],), 0.5, 1.5), "beta": T((s[1],))})
            for s in nn4d_shapes(p)]


@rule("GroupNorm")
def _group_norm(p: Profile, op: str) -> List[Variant]:
    # In mxnet 1.x gamma/beta hold one value per group, not per channel.
    groups = 3
    out = []
    for s in nn4d_shapes(p):
        inputs = {"data": T(s), "gamma": U((groups,), 0.5, 1.5), "beta": T((groups,)), "num_groups": groups}
        size = math.prod(s[1:]) // groups
        if size > FLOAT16_MAX:
            inputs[NON_NORMAL] = {"float16": (
                f"MXNet's CPU GroupNorm sums each group's squares in float16: {size} values of unit variance "
                "pass its range (65504), so the statistics are infinite and the outputs NaN")}
        out.append((None, inputs))
    return out


@rule("LRN")
def _lrn(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "nsize": 3}) for s in nn4d_shapes(p)]


@rule("Embedding")
def _embedding(p: Profile, op: str) -> List[Variant]:
    cases = p.pick([((32, 1000), 10000, 128), ((1024,), 1000, 512)],
                   [((2, 3), 5, 4), ((6,), 7, 3)],
                   [((32, 1000), 2 ** 16 + 1, 2 ** 16), ((2 ** 16,), 2 ** 16, 2 ** 16 + 1)],
                   [((128, 128), 1000, 64), ((4096,), 512, 128)])
    return [(f"{fmt_shape(s)}-vocab{v}-dim{d}",
             {"data": I(s, high=v), "weight": T((v, d)), "input_dim": v, "output_dim": d})
            for s, v, d in cases]


@rule("Correlation")
def _correlation(p: Profile, op: str) -> List[Variant]:
    # MXNet's CPU Correlation is a naive loop (about 10 s forward+backward at (32,3,256,256)
    # with 25 displacements), so a smaller batch and a 3x3 displacement window.
    shapes = p.pick([(8, 3, 256, 256), (8, 3, 10000, 10)], [(2, 3, 5, 5), (2, 3, 7, 3)],
                    count=[(2, 3, 32, 32), (2, 3, 128, 8)])
    return [(None, {"data1": T(s), "data2": T(s), "kernel_size": 1, "max_displacement": 1,
                    "stride1": 1, "stride2": 1, "pad_size": 1}) for s in shapes]


@rule("SpatialTransformer")
def _spatial_transformer(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "loc": T((s[0], 6), "affine"), "target_shape": list(s[2:]),
                    "transform_type": "affine", "sampler_type": "bilinear"})
            for s in nn4d_shapes(p)]


def _im2col_geometry(p: Profile) -> List[Tuple[Shape, int, int]]:
    """(data shape, stride, output positions) for a 3x3 kernel with padding 1."""
    shapes = p.pick([((32, 3, 256, 256), 2), ((32, 3, 64, 64), 1)],
                    [((2, 3, 6, 6), 2), ((2, 3, 4, 4), 1)],
                    count=[((4, 3, 64, 64), 2), ((4, 3, 32, 32), 1)])
    out = []
    for s, stride in shapes:
        oh = (s[2] + 2 - 3) // stride + 1
        ow = (s[3] + 2 - 3) // stride + 1
        out.append((s, stride, oh * ow))
    return out


@rule("im2col")
def _im2col(p: Profile, op: str) -> List[Variant]:
    return [(f"{fmt_shape(s)}-stride{st}",
             {"data": T(s), "kernel": [3, 3], "stride": [st, st], "pad": [1, 1]})
            for s, st, _ in _im2col_geometry(p)]


@rule("col2im")
def _col2im(p: Profile, op: str) -> List[Variant]:
    return [(f"{fmt_shape(s)}-stride{st}",
             {"data": T((s[0], s[1] * 9, positions)), "output_size": list(s[2:]),
              "kernel": [3, 3], "stride": [st, st], "pad": [1, 1]})
            for s, st, positions in _im2col_geometry(p)]


# ---------------------------------------------------------------- activation

@rule("Softmax", "SoftmaxOutput", "SVMOutput", "softmax_cross_entropy")
def _softmax_output(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "label": I((s[0],), high=s[1])}) for s in data_shapes(p)]


@rule("Activation")
def _activation(p: Profile, op: str) -> List[Variant]:
    s = data_shapes(p)[0]
    return [(f"{act}-{fmt_shape(s)}", {"data": T(s), "act_type": act})
            for act in ("relu", "sigmoid", "tanh", "softrelu", "softsign")]


@rule("LeakyReLU")
def _leaky_relu(p: Profile, op: str) -> List[Variant]:
    s = data_shapes(p)[0]
    out = []
    for act in ("leaky", "elu", "selu", "gelu", "prelu", "rrelu"):
        inputs: Dict[str, Any] = {"data": T(s), "act_type": act}
        if act == "prelu":
            inputs["gamma"] = U((s[1],), 0.1, 0.3)
        if act == "rrelu":
            inputs[NO_BACKWARD] = ("rrelu in training mode (needed for backward) crashes "
                                   "mxnet 1.9.1 on CPU with a segfault")
            inputs[NON_NORMAL] = ("rrelu outside training mode leaves its second output (the mask) "
                                  "unwritten: it holds whatever the memory held, now and then NaN or "
                                  "subnormal bits")
        out.append((f"{act}-{fmt_shape(s)}", inputs))
    return out


# ---------------------------------------------------------------- pooling, convolution

def _conv_shapes(p: Profile) -> List[Shape]:
    return p.pick([(32, 3, 256), (32, 3, 64), (32, 3, 256, 256), (32, 3, 64, 64)],
                  [(2, 3, 8), (2, 3, 6), (2, 3, 8, 8), (2, 3, 6, 6)],
                  [(2 ** 24, 3, 2 ** 8 + 2), (2 ** 14, 3, 2 ** 8, 2 ** 8 + 2)],
                  [(8, 3, 1024), (8, 3, 256), (4, 3, 64, 64), (4, 3, 32, 32)])


@rule("Pooling")
def _pooling(p: Profile, op: str) -> List[Variant]:
    out = []
    for pool_type in ("avg", "max", "sum"):
        for global_pool in (0, 1):
            for s in _conv_shapes(p):
                k = [3] * (len(s) - 2)
                inputs = {"data": T(s), "kernel": k, "pool_type": pool_type, "global_pool": bool(global_pool),
                          "stride": [1] * len(k), "pad": [0] * len(k)}
                if pool_type == "avg" and global_pool:
                    inputs[NON_NORMAL] = {"float16": (
                        "a global average of zero-mean values is near 0, below float16's normal range (6.1e-5) "
                        "now and then, and its gradient gives each input 1/window (1/65536 at 256x256)")}
                out.append((f"{pool_type}-global{global_pool}-{fmt_shape(s)}", inputs))
    return out


@rule("ROIPooling")
def _roi_pooling(p: Profile, op: str) -> List[Variant]:
    s, n_rois = p.pick(((32, 3, 256, 256), 256), ((2, 3, 8, 8), 3), count=((4, 3, 64, 64), 128))
    return [(None, {"data": T(s), "rois": T((n_rois, 5), "rois", grad=False, batch=s[0],
                                            height=s[2], width=s[3]),
                    "pooled_size": p.pick([7, 7], [2, 2], count=[7, 7]),
                    "spatial_scale": 1.0})]


@rule("Convolution", "Deconvolution")
def _convolution(p: Profile, op: str) -> List[Variant]:
    filters = p.pick(64, 4)
    out = []
    for s in _conv_shapes(p):
        k = [3] * (len(s) - 2)
        wshape = (filters, s[1], *k) if op == "Convolution" else (s[1], filters, *k)
        out.append((f"{len(k)}d-{fmt_shape(s)}",
                    {"data": T(s), "weight": T(wshape), "bias": T((filters,)), "kernel": k,
                     "stride": [1] * len(k), "pad": [0] * len(k), "num_filter": filters,
                     "no_bias": False,
                     "layout": "NCW" if len(k) == 1 else "NCHW"}))
    return out


@rule("UpSampling")
def _upsampling(p: Profile, op: str) -> List[Variant]:
    out = [(f"nearest-{fmt_shape(s)}", {"data": [T(s)], "scale": 2, "sample_type": "nearest",
                                          "num_args": 1}) for s in nn4d_shapes(p)]
    s = p.pick((8, 3, 128, 128), (2, 3, 4, 4), count=(2, 3, 32, 32))
    # bilinear upsampling is a grouped deconvolution (its weight is the second input), about
    # 10 s forward+backward on CPU at (32,3,256,256): a smaller input keeps sweeps short.
    out.append((f"bilinear-{fmt_shape(s)}",
                {"data": [T(s), T((s[1], 1, 4, 4))], "scale": 2, "sample_type": "bilinear",
                 "num_filter": s[1], "num_args": 2}))
    return out


# ---------------------------------------------------------------- optimizers

def _opt_tensors(op: str, s: Shape) -> Dict[str, Any]:
    """State tensors of an update operator; multi-precision ones hold fp16 weights."""
    mp = op.startswith("mp_")
    half = "float16" if mp else None
    full = "float32" if mp else None
    nonneg = lambda: U(s, 0.0, 1.0, dtype=full)  # noqa: E731 - second moments are >= 0
    base = {"weight": T(s, dtype=half), "grad": T(s, dtype=half)}
    name = op[3:] if mp else op
    extra = {
        "sgd_update": {},
        "sgd_mom_update": {"mom": T(s, dtype=full)},
        "nag_mom_update": {"mom": T(s, dtype=full)},
        "signum_update": {"mom": T(s)},
        "signsgd_update": {},
        "adam_update": {"mean": T(s), "var": nonneg()},
        "ftml_update": {"d": nonneg(), "v": nonneg(), "z": T(s)},
        "ftrl_update": {"z": T(s), "n": nonneg()},
        "rmsprop_update": {"n": nonneg()},
        "rmspropalex_update": {"n": U(s, 1.0, 2.0), "g": U(s, -0.1, 0.1), "delta": T(s)},
        "lamb_update_phase1": {"mean": T(s, dtype=full), "var": nonneg()},
        "lamb_update_phase2": {},
    }[name]
    if name == "lamb_update_phase2":
        base = {"weight": T(s, dtype=half), "g": T(s, dtype=full),
                "r1": U((1,), 0.5, 2.0, dtype=full), "r2": U((1,), 0.5, 2.0, dtype=full)}
    tensors = {**base, **extra}
    if mp:
        tensors["weight32"] = T(s, dtype="float32")
    return {k: {**v, "grad": False} for k, v in tensors.items()}


_OPT_SCALARS = {
    "sgd_update": ("lr", "wd"),
    "sgd_mom_update": ("lr", "momentum", "wd"),
    "nag_mom_update": ("lr", "momentum", "wd"),
    "signum_update": ("lr", "momentum", "wd"),
    "signsgd_update": ("lr", "wd"),
    "adam_update": ("lr", "wd"),
    "ftml_update": ("lr", "wd"),
    "ftrl_update": ("lr", "wd"),
    "rmsprop_update": ("lr", "wd"),
    "rmspropalex_update": ("lr", "wd"),
    "lamb_update_phase1": ("wd",),
    "lamb_update_phase2": ("lr",),
}

_OPT_FIXED = {
    "ftml_update": {"t": 1},
    "lamb_update_phase1": {"t": 1},
}


@rule(*_OPT_SCALARS, *("mp_" + n for n in ("sgd_update", "sgd_mom_update", "nag_mom_update",
                                            "lamb_update_phase1", "lamb_update_phase2")))
def _optimizer(p: Profile, op: str) -> List[Variant]:
    name = op[3:] if op.startswith("mp_") else op
    out = []
    for i, s in enumerate(data_shapes(p)):
        scalars = {k: SCALARS_3[i] for k in _OPT_SCALARS[name]}
        out.append((None, {**_opt_tensors(op, s), **scalars, **_OPT_FIXED.get(name, {})}))
    return out


# Per-weight tensors each multi-tensor update takes, in the order MXNet expects them.
_MULTI_LAYOUT = {
    "multi_sgd_update": ("weight", "grad"),
    "multi_sgd_mom_update": ("weight", "grad", "mom"),
    "multi_mp_sgd_update": ("weight16", "grad16", "weight32"),
    "multi_mp_sgd_mom_update": ("weight16", "grad16", "mom", "weight32"),
}


def _multi_group(role: str, s: Shape) -> Dict[str, Any]:
    if role.endswith("16"):
        return T(s, dtype="float16", grad=False)
    if role in ("weight32", "mom"):
        return T(s, dtype="float32", grad=False)
    return T(s, grad=False)


@rule(*_MULTI_LAYOUT, *("preloaded_" + n for n in _MULTI_LAYOUT))
def _multi_update(p: Profile, op: str) -> List[Variant]:
    preloaded = op.startswith("preloaded_")
    layout = _MULTI_LAYOUT[op[len("preloaded_"):] if preloaded else op]
    mp = "_mp_" in op
    n_weights = 2
    out = []
    for i, s in enumerate(data_shapes(p)):
        data = []
        for _ in range(n_weights):
            for role in layout:
                if not mp and role == "mom":
                    data.append(T(s, grad=False))
                else:
                    data.append(_multi_group(role, s))
        inputs: Dict[str, Any] = {"num_weights": n_weights}
        if preloaded:
            data += [U((n_weights,), 0.01, 0.1, dtype="float32", grad=False),
                     U((n_weights,), 0.0, 0.01, dtype="float32", grad=False)]
        else:
            inputs["lrs"] = [SCALARS_3[i]] * n_weights
            inputs["wds"] = [0.0] * n_weights
        if "mom" in layout:
            inputs["momentum"] = 0.9
        inputs["data"] = data
        out.append((f"{n_weights}x{fmt_shape(s)}", inputs))
    return out


@rule("multi_lars")
def _multi_lars(p: Profile, op: str) -> List[Variant]:
    return [(f"({n},)", {"lrs": U((n,), 0.01, 0.1, grad=False),
                         "weights_sum_sq": U((n,), 0.5, 2.0, grad=False),
                         "grads_sum_sq": U((n,), 0.5, 2.0, grad=False),
                         "wds": U((n,), 0.0, 0.01, grad=False),
                         "eta": 0.001, "eps": 1e-8, "rescale_grad": 1.0})
            for n in p.pick([1024, 10000], [5, 7], [2 ** 32 + 1, 2 ** 31], [2 ** 16, 2 ** 17])]


# ---------------------------------------------------------------- loss and misc

@rule("ctc_loss", "CTCLoss")
def _ctc(p: Profile, op: str) -> List[Variant]:
    cases = p.pick([(100, 32, 20, 10), (200, 64, 50, 20)], [(6, 2, 4, 2), (8, 3, 5, 3)],
                   count=[(50, 8, 20, 10), (100, 4, 50, 20)])
    # blank is label 0 ("first"), so real labels are 1..alphabet-1
    return [(f"T{t}-N{n}-A{a}-L{l}",
             {"data": T((t, n, a)), "label": I((n, l), high=a, low=1)})
            for t, n, a, l in cases]


_PER_OUTPUT_GRADIENT = {"float16": "the input gradient is (output - label) divided by the outputs per row "
                                   "(1024 or 100): its small values fall below float16's normal range (6.1e-5)"}


@rule("LinearRegressionOutput", "MAERegressionOutput")
def _regression(p: Profile, op: str) -> List[Variant]:
    extra = {NON_NORMAL: _PER_OUTPUT_GRADIENT} if op == "LinearRegressionOutput" else {}
    return [(None, {"data": T(s), "label": T(s, grad=False), **extra}) for s in data_shapes(p)]


@rule("LogisticRegressionOutput")
def _logistic(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "label": U(s, 0.0, 1.0, grad=False), NON_NORMAL: _PER_OUTPUT_GRADIENT})
            for s in data_shapes(p)]



@rule("IdentityAttachKLSparseReg")
def _kl_sparse(p: Profile, op: str) -> List[Variant]:
    # moving_avg is an auxiliary state the generated nd function cannot pass: cases.py invokes
    # such operators directly with it appended to the inputs.
    return [(None, {"data": U(s, 0.01, 0.99), "moving_avg": U((s[1],), 0.05, 0.2, grad=False)})
            for s in data_shapes(p)]


@rule("squeeze")
def _squeeze(p: Profile, op: str) -> List[Variant]:
    shapes = p.pick([(1024, 1, 1024), (10000, 1), (1, 10000, 100)], [(4, 1, 3), (5, 1), (1, 3, 2)],
                    [(2 ** 16, 1, 2 ** 16 + 1), (2 ** 32 + 1, 1), (1, 2 ** 28, 2 ** 4 + 1)],
                    [(512, 1, 512), (2 ** 18, 1), (1, 4096, 64)])
    return [(None, {"data": T(s)}) for s in shapes]


@rule("clip")
def _clip(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "a_min": -0.5, "a_max": 0.5}) for s in data_shapes(p)]


@rule("SequenceReverse", "SequenceLast", "SequenceMask")
def _sequence(p: Profile, op: str) -> List[Variant]:
    shapes = p.pick([(100, 32, 128), (1000, 32, 10)], [(4, 3, 2), (6, 2, 3)],
                    [(2 ** 16, 2 ** 8, 2 ** 8 + 1), (2 ** 24, 2 ** 4, 2 ** 4 + 1)],
                    [(16, 128, 128), (128, 64, 32)])
    if op == "SequenceLast" and p.name == "count":
        # its work is one step of batch x features: (128,64,32) gave 2048 values, ~190,000 instructions
        shapes = [(4, 256, 256), (8, 256, 128)]
    out = []
    for s in shapes:
        full: Dict[str, Any] = {"data": T(s), "use_sequence_length": False}
        if op == "SequenceLast":
            full[NO_BACKWARD] = ("SequenceLast's backward without sequence lengths corrupts memory on "
                                 "mxnet 1.9.1 CPU (zero gradient, then a double free)")
        out.append((f"{fmt_shape(s)}-full", full))
        out.append((f"{fmt_shape(s)}-lengths",
                    {"data": T(s), "sequence_length": I((s[1],), high=s[0] + 1, low=1),
                     "use_sequence_length": True}))
    return out


@rule("cast_storage")
def _cast_storage(p: Profile, op: str) -> List[Variant]:
    return [(f"{stype}-{fmt_shape(s)}",
             {"data": T(s, "sparse", density=0.1, grad=False), "stype": stype})
            for stype in ("csr", "row_sparse") for s in data_shapes(p)]


@rule("cumsum")
def _cumsum(p: Profile, op: str) -> List[Variant]:
    return [(None, {"a": T(s), "axis": 0}) for s in data_shapes(p)]


@rule("fill_element_0index")
def _fill_element(p: Profile, op: str) -> List[Variant]:
    return [(None, {"lhs": T(s, grad=False), "mhs": T((s[0],), grad=False),
                    "rhs": I((s[0],), high=s[1])}) for s in data_shapes(p)]


@rule("reset_arrays", "multi_all_finite", "multi_sum_sq")
def _multi_arrays(p: Profile, op: str) -> List[Variant]:
    out = []
    for s in data_shapes(p):
        inputs: Dict[str, Any] = {"data": [T(s, grad=False), T(s, grad=False)], "num_arrays": 2}
        if op == "multi_all_finite":
            inputs["init_output"] = True
        out.append((f"2x{fmt_shape(s)}", inputs))
    return out


@rule("Custom")
def _custom(p: Profile, op: str) -> List[Variant]:
    # cases.py registers this identity operator, so Custom's dispatch overhead is measurable.
    return [(None, {"data": [T(s)], "op_type": "opbench_identity"}) for s in data_shapes(p)]


# ---------------------------------------------------------------- linalg

_LINALG_A = {
    "linalg_potrf": "spd",
    "linalg_potri": "tril",
    "linalg_sumlogdiag": "spd",
    "linalg_inverse": "spd",
    "linalg_det": "near_identity",
    "linalg_slogdet": "spd",
    "linalg_syrk": "normal",
    "linalg_gelqf": "normal",
    "linalg_extractdiag": "normal",
    "linalg_extracttrian": "normal",
}


@rule(*_LINALG_A)
def _linalg_square(p: Profile, op: str) -> List[Variant]:
    n = linalg_n(p)
    return [(None, {"A": T((n, n), _LINALG_A[op])})]


@rule("linalg_gemm", "linalg_gemm2")
def _linalg_gemm(p: Profile, op: str) -> List[Variant]:
    n = linalg_n(p)
    inputs = {"A": T((n, n)), "B": T((n, n))}
    if op == "linalg_gemm":
        inputs["C"] = T((n, n))
    return [(None, inputs)]


@rule("linalg_trmm", "linalg_trsm")
def _linalg_triangular(p: Profile, op: str) -> List[Variant]:
    n = linalg_n(p)
    return [(None, {"A": T((n, n), "tril"), "B": T((n, n))})]


@rule("linalg_makediag")
def _makediag(p: Profile, op: str) -> List[Variant]:
    return [(None, {"A": T((linalg_n(p),))})]


@rule("linalg_maketrian")
def _maketrian(p: Profile, op: str) -> List[Variant]:
    n = linalg_n(p)
    return [(f"n{n}", {"A": T((n * (n + 1) // 2,))})]


@rule("moments")
def _moments(p: Profile, op: str) -> List[Variant]:
    return [(None, {"data": T(s), "axes": [0]}) for s in data_shapes(p)]


# ---------------------------------------------------------------- internal operators

@rule("_copyto")
def _copyto(p: Profile, op: str) -> List[Variant]:
    # _copyto has no output shape inference: it writes into `out`.
    return [(None, {"data": T(s), "out": T(s, "fill", value=0.0, grad=False)})
            for s in data_shapes(p)]


# Arguments a registry-driven fallback can fill for operators without a hand-written rule
# (internal ones named explicitly, e.g. _plus_scalar): same defaults as the generic slots.
GENERIC_TENSOR_ARGS = ("data", "lhs", "rhs")


def generic_rule(arg_names: Sequence[str], tensor_args: Sequence[str],
                 required: Sequence[str]) -> Optional[Rule]:
    """A fallback rule when every input is a generic tensor and no parameter is required."""
    if not tensor_args or any(a not in GENERIC_TENSOR_ARGS for a in tensor_args):
        return None
    if any(a not in tensor_args for a in required):
        return None

    def _generic(p: Profile, op: str) -> List[Variant]:
        shapes = lhs_shapes(p) if "lhs" in tensor_args else data_shapes(p)
        return [(None, {a: divisor(s) if DIVISORS.get(op) == a else domain_tensor(op, s)
                        for a in tensor_args}) for s in shapes]

    return _generic


def variants(op: str, profile: Profile = STANDARD) -> Optional[List[Variant]]:
    """The input combinations for `op`, or None when it has no hand-written rule."""
    fn = RULES.get(op)
    if fn is None:
        return None
    return fn(profile, op)
