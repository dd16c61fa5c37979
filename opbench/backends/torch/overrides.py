"""The reviewed exceptions to "tile the largest sample up to the size target".

Tiling OpInfo's samples works for most operators; these are the groups where it does not, each
with what is done instead (lab/notes/torch-backend.md lists them with the reasons):

- FRESH: operators whose work depends on repeated values (a tiled input holds every value
  k^d times: sort meets long runs of equal keys, unique finds few distinct values). Their
  floating-point and integer inputs get fresh uniform values in the sample's range.
- STRUCTURED: linear algebra whose inputs carry structure tiling destroys (a tiled matrix is
  singular: cholesky, inv and solve raise, det is exactly 0). Each square matrix input is
  drawn afresh with the structure the sample's matrix had (symmetric positive definite,
  lower/upper triangular, else full rank), at the scaled size.
- CUBIC: O(n^3) operators, capped at n <= CUBIC_MAX_N per matrix side and at CUBIC_MAX_WORK
  (batch x n^3) per call (at 1024 some take seconds per call) — every STRUCTURED operator,
  and the other decompositions.
- KERNELS, KEEP_SIZES, KEEP_LAST: dimensions scaling must leave alone (a convolution's tiled
  kernel would grow from 3x3 to 33x33; a cross product needs its 3; a grid its 2 coordinates).
- SAMPLES: operators whose OpInfo samples cannot be scaled (a factory operator's sizes are
  arguments; max_unpool's output_size; split sizes of 1), given a hand-written sample that is
  scaled like OpInfo's.
- DOMAINS: operators whose tiled OpInfo values drive them out of their domain or into NaN,
  infinities or subnormals (lab/notes/audit.md): every floating-point tensor of
  the sample gets fresh uniform values in the range given.
- LEFT_OUT: operators not timed here, with the reason.
- NON_NORMAL: operators whose NaN, infinite or subnormal values are their own (the audit marks
  those cases `expected`, with the reason), not our inputs'.
"""

from __future__ import annotations

import math
from typing import Dict, Tuple

from opbench.inputs import tensor

Key = Tuple[str, str]

CUBIC_MAX_N = 512
#: ... and at batch x m x n x min(m, n) <= CUBIC_MAX_WORK for their largest matrix input: a
#: batch of 54 general eigenproblems of 135x135 (the size target's share) took 1.7 s forward
#: and backward on 2 cores; a quarter of that work still times the kernel, four times faster
CUBIC_MAX_WORK = 2**25

FRESH = frozenset({
    "sort", "argsort", "msort", "topk", "kthvalue", "unique", "unique_consecutive", "median", "nanmedian", "mode",
    "quantile", "nanquantile", "masked.median",
    # LU of a tiled rectangular matrix: rank-deficient, so its backward divides by zero pivots (NaN)
    "lu", "linalg.lu", "linalg.lu_factor_ex",
})

STRUCTURED = frozenset({
    "cholesky", "cholesky_inverse", "cholesky_solve", "inverse", "logdet", "lu", "lu_solve", "lu_unpack",
    "triangular_solve", "matrix_exp", "pinverse", "det", "linalg.cholesky", "linalg.cholesky_ex", "linalg.cond",
    "linalg.det", "linalg.eig", "linalg.eigvals", "linalg.eigh", "linalg.eigvalsh", "linalg.inv", "linalg.inv_ex",
    "linalg.ldl_factor", "linalg.ldl_factor_ex", "linalg.ldl_solve", "linalg.lu_factor", "linalg.lu_factor_ex",
    "linalg.lu", "linalg.lu_solve", "linalg.matrix_power", "linalg.matrix_rank", "linalg.pinv", "linalg.slogdet",
    "linalg.solve", "linalg.solve_ex", "linalg.solve_triangular", "linalg.tensorinv", "linalg.tensorsolve",
    "linalg.svd", "linalg.svdvals", "linalg.qr", "linalg.lstsq", "linalg.matrix_norm", "linalg.householder_product",
    "svd", "qr", "geqrf", "ormqr", "svd_lowrank", "pca_lowrank", "linalg.multi_dot", "norm",
})

CUBIC = STRUCTURED

#: convolutions: the weight (the first argument after the input) keeps its kernel size (every
#: dimension from the third on); channels and batch grow with the input
KERNELS = frozenset({
    "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d", "nn.functional.conv_transpose1d",
    "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d",
})

#: operators that need a dimension of one exact size (cross products: 3; view_as_complex's
#: last dimension: 2): dimensions of that size are not scaled, in any input
KEEP_SIZES: Dict[str, int] = {"cross": 3, "linalg.cross": 3, "view_as_complex": 2}

#: operators whose argument args[i] must keep its last dimension (a sampling grid's 2 or 3
#: coordinates): name → i
KEEP_LAST: Dict[str, int] = {"nn.functional.grid_sample": 0, "grid_sampler_2d": 0, "grid_sampler_3d": 0}

#: products: values this close to 1 keep a product of a million of them normal (U(0.5, 1.5)
#: sinks below float32's subnormals within a few thousand; OpInfo's [-9, 9] overflows)
_NEAR_ONE = (0.999, 1.001)
#: (name, variant) → (low, high) of every floating-point input (see the module docstring)
DOMAINS: Dict[Key, Tuple[float, float]] = {
    ("cumprod", ""): _NEAR_ONE, ("masked.cumprod", ""): _NEAR_ONE, ("masked.prod", ""): _NEAR_ONE,
    ("index_reduce", "prod"): _NEAR_ONE, ("scatter_reduce", "prod"): _NEAR_ONE,
    ("__rpow__", ""): (0.5, 2.0),  # a negative base to a fractional power is NaN
    ("igamma", ""): (0.5, 5.0), ("igammac", ""): (0.5, 5.0),  # defined for a > 0, x >= 0
    ("special.zeta", ""): (1.5, 5.0),  # Hurwitz zeta: x > 1, q > 0
    ("special.bessel_y0", ""): (0.5, 9.0), ("special.bessel_y1", ""): (0.5, 9.0),
    ("special.modified_bessel_k0", ""): (0.5, 9.0), ("special.modified_bessel_k1", ""): (0.5, 9.0),
    ("special.scaled_modified_bessel_k0", ""): (0.5, 9.0),
    ("special.scaled_modified_bessel_k1", ""): (0.5, 9.0),  # x > 0
    ("erf", ""): (-3.0, 3.0),  # its gradient exp(-x^2) is 1e-36 at 9: times a head gradient, subnormal
    ("linalg.vander", ""): (0.7, 1.3),  # x^134 of [-9, 9] overflows; of 0.5 it is subnormal
    # the chosen sample holds NaN on purpose (OpInfo tests their NaN handling)
    ("masked.argmax", ""): (-9.0, 9.0), ("masked.argmin", ""): (-9.0, 9.0),
    # reflectors I - tau v v^T with OpInfo's tau and v grow without bound over a product of 90
    ("linalg.householder_product", ""): (0.0, 0.01),
    # scores of [-9, 9] queries and keys saturate the softmax: its gradients are subnormal
    ("nn.functional.scaled_dot_product_attention", ""): (-1.0, 1.0),
}

#: (name, variant) → why it gets no case
LEFT_OUT: Dict[Key, str] = {}

#: (name, variant) → why its non-normal values are inherent to the operator (benchcore.measure.audit's
#: `expected`); a case whose non-normal values come from its inputs gets other inputs instead
_UNINITIALIZED = "uninitialized memory: it holds whatever the allocator hands back, subnormals included"
_MASKED_OUT = "masked-out elements are -inf in log space by definition"
_MASKED_ROW = "OpInfo's mask masks whole rows out, and a row with nothing to normalize is NaN (0/0) by definition"
NON_NORMAL: Dict[Key, str] = {
    ("empty", ""): _UNINITIALIZED, ("empty_like", ""): _UNINITIALIZED, ("empty_strided", ""): _UNINITIALIZED,
    ("masked.log_softmax", ""): f"{_MASKED_OUT}; {_MASKED_ROW}", ("masked.logaddexp", ""): _MASKED_OUT,
    ("masked.softmax", ""): _MASKED_ROW, ("masked.softmin", ""): _MASKED_ROW,
    ("torch.ops.aten._safe_softmax.default", ""): "-inf inputs are its purpose: a row of -inf gives 0, not NaN",
}

def sample_tree(input_, *args, **kwargs) -> dict:
    """A hand-written sample: tensors as opbench.inputs descriptors wrapped as tensor nodes."""
    return {"input": _node(input_), "args": [_node(a) for a in args], "kwargs": {k: _node(v) for k, v in kwargs.items()}}


def _node(value):
    if isinstance(value, dict) and "shape" in value:
        return {"tensor": value}
    if isinstance(value, dict):  # already a node ({"tuple": …}, {"dtype": …})
        return value
    if isinstance(value, tuple):
        return {"tuple": [_node(v) for v in value]}
    if isinstance(value, list):
        return [_node(v) for v in value]
    return value


_WINDOWS = ("hamming", "hann", "bartlett", "blackman", "cosine", "exponential", "gaussian", "kaiser", "general_cosine",
            "general_hamming", "nuttall")


def _factory_samples() -> Dict[Key, dict]:
    """Factory operators: their sizes are integer arguments, so these samples are scaled with
    integer arguments (every integer > 1 times k), to the size target like any other."""
    f32 = {"dtype": {"dtype": "float32"}}
    samples = {
        ("arange", ""): sample_tree(0, 64, **f32),
        ("linspace", ""): sample_tree(0.0, 1.0, steps=64, **f32),
        ("logspace", ""): sample_tree(0.0, 2.0, steps=64, **f32),
        ("eye", ""): sample_tree(16, **f32),
        ("full", ""): sample_tree({"tuple": [16, 16]}, 2.0, **f32),
        ("ones", ""): sample_tree({"tuple": [16, 16]}, **f32),
        ("zeros", ""): sample_tree({"tuple": [16, 16]}, **f32),
        ("empty", ""): sample_tree({"tuple": [16, 16]}, **f32),
        ("randn", ""): sample_tree({"tuple": [16, 16]}, **f32),
        ("triu_indices", ""): sample_tree(16, 16),
        ("tril_indices", ""): sample_tree(16, 16),
    }
    # std and tau as integers, so they scale with the window's length (ints scaling): at a
    # fixed 1.0 a window of a million points is zeros with a few subnormals at its centre
    extra = {"general_cosine": {"a": [0.5, 0.5]}, "general_hamming": {"alpha": 0.54}, "gaussian": {"std": 16},
             "exponential": {"tau": 16}}
    for window in _WINDOWS:
        samples[(f"signal.windows.{window}", "")] = sample_tree(64, **extra.get(window, {}), **f32)
    return samples


def _unpool_samples() -> Dict[Key, dict]:
    """max_unpool: OpInfo's samples pass an output_size, which no scale keeps in the range the
    scaled input allows. Here: kernel 2, stride 2 (the output is twice the input per spatial
    dimension), indices anywhere in each output plane of the sample's size (still valid once
    the planes grow)."""
    samples = {}
    for dims in (1, 2, 3):
        spatial = [4] * dims
        plane = math.prod(2 * d for d in spatial)
        tree = sample_tree(tensor([2, 3, *spatial]), tensor([2, 3, *spatial], "indices", "int64", grad=False,
                                                           low=0, high=plane), 2, 2)
        for variant in ("", "grad"):
            samples[(f"nn.functional.max_unpool{dims}d", variant)] = tree
    return samples


def _split_samples() -> Dict[Key, dict]:
    """split with a list of sizes: the sizes must add up to the dimension, so they are integer
    arguments scaled with it (OpInfo's [1, 3, 1] has sizes of 1, which do not scale)."""
    tree = sample_tree(tensor([6, 4, 4]), [2, 4])
    return {key: tree for key in (("split", "list_args"), ("split_with_sizes", ""), ("split_with_sizes_copy", ""))}


#: (name, variant) → a hand-written sample (opbench.backends.torch.sample's tree), scaled like OpInfo's
SAMPLES: Dict[Key, dict] = {**_factory_samples(), **_unpool_samples(), **_split_samples()}
