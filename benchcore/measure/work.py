"""Work: what one phase of a case must do at least — the bytes it must move and the floating-point
operations it must compute — from the shapes and dtypes of its tensors.

Why: a time alone says how long, not how far from what the machine can do. Dividing the bytes
and FLOPs of a phase by its time gives the achieved bandwidth and FLOP rate that the machine's
measured roofs (benchcore.measure.roofs) bound.

The bytes are the compulsory traffic, a lower bound: every input read once and every output
written once (forward); the head gradient read, what the backward formula needs of the inputs
or outputs read once, and every gradient written once (backward). Caches that miss, temporaries
and write-allocate reads only add to it.

The FLOPs come from formula families, each counting what its literature counts: a multiply-add
is two operations (torch.utils.flop_counter's convention, which the tests hold the matrix
families to); pointwise, reduction, softmax and normalisation families count the arithmetic of
each element by the constants below. A family without a formula for a phase says so: flops None
with the reason, never 0; 0 is a phase known to compute nothing (a view), with its reason. The suites map their operators to these families
(opbench.backends.*.work, rnnbench.work); nothing here knows a framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import log2, prod
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

FORWARD, BACKWARD = "forward", "backward"

#: bytes per element of the dtypes the suites use, by numpy/torch name
ITEMSIZE: Dict[str, int] = {
    "bool": 1, "int8": 1, "uint8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "float32": 4, "complex32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "complex64": 8, "complex128": 16,
}

#: operations per element of the elementwise families (the convention every suite shares):
#: a softmax takes the maximum, subtracts it, exponentiates, sums and divides (5); its backward
#: multiplies, sums, subtracts and multiplies (4); a normalisation takes the mean (1), the
#: variance (3), normalises (2) and scales and shifts (2), and its backward about half again
SOFTMAX_OPS = (5, 4)
NORMALIZATION_OPS = (8, 12)
#: a pointwise backward multiplies the head gradient by the derivative, per gradient element
POINTWISE_BACKWARD_OPS = 2


@dataclass(frozen=True)
class Tensor:
    shape: Tuple[int, ...]
    dtype: str

    @property
    def elements(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> Optional[int]:
        """None for a dtype whose size is unknown here (the bytes are then not stated)."""
        size = ITEMSIZE.get(self.dtype)
        return None if size is None else size * self.elements


def tensor(shape: Iterable[int], dtype: str) -> Tensor:
    return Tensor(tuple(int(d) for d in shape), str(dtype))


@dataclass(frozen=True)
class Flops:
    """A family's operations for the forward and the backward, each None with `reason` where
    the family has no formula for that phase."""

    forward: Optional[int]
    backward: Optional[int] = None
    reason: Optional[str] = None


def no_formula(reason: str) -> Flops:
    return Flops(None, None, reason)


def no_arithmetic(reason: str) -> Flops:
    """A phase known to compute nothing (a view, a zero derivative): 0 FLOPs, and why."""
    return Flops(0, 0, reason)


@dataclass(frozen=True)
class Work:
    """One phase's compulsory bytes (a lower bound) and FLOPs; `reason` says why either is None."""

    phase: str
    bytes: Optional[int]
    flops: Optional[int]
    reason: Optional[str] = None

    @property
    def intensity(self) -> Optional[float]:
        """FLOPs per byte: where the phase sits under the roofline."""
        return self.flops / self.bytes if self.flops is not None and self.bytes else None

    def to_dict(self) -> dict:
        return {"phase": self.phase, "bytes": self.bytes, "flops": self.flops, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict) -> "Work":
        return cls(data["phase"], data.get("bytes"), data.get("flops"), data.get("reason"))


def traffic(*groups: Iterable[Tensor]) -> Optional[int]:
    """The bytes of every tensor of the groups, each counted once; None where a size is unknown."""
    sizes = [t.nbytes for group in groups for t in group]
    return None if any(size is None for size in sizes) else sum(sizes)


def _reason(bytes_: Optional[int], flops: Optional[int], tensors: Sequence[Tensor], why: Optional[str]) -> Optional[str]:
    parts = []
    if bytes_ is None:
        unknown = sorted({t.dtype for t in tensors if t.nbytes is None})
        parts.append(f"bytes unknown: no element size for dtype {', '.join(unknown)}")
    if flops is None:
        parts.append(why or "no FLOP formula")
    elif flops == 0 and why:  # no arithmetic, and why (a view; a zero derivative)
        parts.append(why)
    return "; ".join(parts) or None


def gathered(read: Sequence[Tensor], written: Sequence[Tensor]) -> List[Tensor]:
    """The least an operator that moves data (a gather, a slice, a diagonal, a layout) reads of
    `read`: each element it writes comes from one element read, so of each tensor no more
    elements than it writes in all (the whole of a smaller one). Counting every input whole would
    not be a lower bound for these: a diagonal of a matrix reads one row's worth of it."""
    elements = sum(t.elements for t in written)
    return [t if t.elements <= elements else Tensor((elements,), t.dtype) for t in read]


def forward_work(inputs: Sequence[Tensor], outputs: Sequence[Tensor], flops: Flops) -> Work:
    """The forward: every input read and every output written once."""
    moved = traffic(inputs, outputs)
    return Work(FORWARD, moved, flops.forward, _reason(moved, flops.forward, [*inputs, *outputs], flops.reason))


def backward_work(heads: Sequence[Tensor], read: Sequence[Tensor], gradients: Sequence[Tensor], flops: Flops) -> Work:
    """The backward: the head gradients (one per output) and what the derivative needs (`read`:
    inputs or outputs) read once, every gradient written once."""
    moved = traffic(heads, read, gradients)
    return Work(BACKWARD, moved, flops.backward, _reason(moved, flops.backward, [*heads, *read, *gradients], flops.reason))


# ---------------------------------------------------------------- matrix families

def gemm(m: int, n: int, k: int, batch: int = 1, gradients: int = 2) -> Flops:
    """C[m,n] = A[m,k] B[k,n], `batch` times: 2mnk; each operand's gradient is one more such
    product (torch.utils.flop_counter counts mm's backward the same)."""
    forward = 2 * batch * m * n * k
    return Flops(forward, forward * gradients)


def convolution(batch: int, weight: Sequence[int], spatial: Sequence[int], gradients: int = 2) -> Flops:
    """2 x batch x every weight element x every position it is applied at: the output's spatial
    positions (the input's for a transposed convolution, whose weight is (in, out/groups, ...)).
    The data and the weight gradients are one forward's work each; a bias adds nothing counted."""
    forward = 2 * batch * prod(weight) * prod(spatial)
    return Flops(forward, forward * gradients)


RNN_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def recurrent(mode: str, seq: int, batch: int, input_size: int, hidden: int, layers: int = 1,
              directions: int = 1) -> Flops:
    """A recurrent network's matrix products: each layer, direction and step multiplies the
    batch's input (the layer below's output for upper layers) and the previous hidden state by
    the gate weights. The gates' pointwise arithmetic (a few operations per hidden unit, under 1%
    at fastrnns' sizes) is left out, as torch.utils.flop_counter leaves it out; the backward is
    twice the forward, as for any product."""
    gates = RNN_GATES.get(mode)
    if gates is None:
        return no_formula(f"no FLOP formula for recurrent mode {mode!r}")
    total = 0
    for layer in range(layers):
        size = input_size if layer == 0 else hidden * directions
        total += directions * gemm(batch, gates * hidden, size + hidden, seq, 0).forward
    return Flops(total, 2 * total)


LINALG_BACKWARD = "no backward formula for this factorisation"


def cholesky(n: int, batch: int = 1) -> Flops:
    """n^3/3; the backward of A = L L^T is one product with L (2n^3, as a full product) and
    two triangular solves of n columns (n^3 each)."""
    return Flops(batch * n ** 3 // 3, batch * 4 * n ** 3)


def cholesky_inverse(n: int, batch: int = 1) -> Flops:
    """potri: the inverse from a Cholesky factor, 2n^3/3."""
    return Flops(batch * 2 * n ** 3 // 3, None, LINALG_BACKWARD)


def triangular(m: int, n: int, batch: int = 1) -> Flops:
    """trsm or trmm with an m x m triangle applied to n columns: m^2 n; backward: the
    right-hand side's gradient (the same again) and the triangle's (a product, 2 m^2 n)."""
    forward = batch * m * m * n
    return Flops(forward, 3 * forward)


def rank_k_update(n: int, k: int, batch: int = 1) -> Flops:
    """syrk, C[n,n] = A A^T with A[n,k]: one triangle of the product, n(n+1)k; backward: A's
    gradient, a full product 2 n^2 k."""
    forward = batch * n * (n + 1) * k
    return Flops(forward, batch * 2 * n * n * k)


def lu(n: int, batch: int = 1) -> Flops:
    """An LU factorisation with partial pivoting: 2n^3/3."""
    return Flops(batch * 2 * n ** 3 // 3, None, LINALG_BACKWARD)


def lu_based(n: int, batch: int = 1, inverse: bool = False) -> Flops:
    """A determinant from an LU factorisation (2n^3/3); an inverse adds the solves (2n^3 in all).
    Backward: a determinant's gradient is det x A^-T, two triangular solves of n columns with
    the forward's factors (2n^3); an inverse's is -A^-T G A^-T, two products (4n^3)."""
    if inverse:
        return Flops(batch * 2 * n ** 3, batch * 4 * n ** 3)
    return Flops(batch * 2 * n ** 3 // 3, batch * 2 * n ** 3)


def lq(m: int, n: int, batch: int = 1) -> Flops:
    """gelqf of an m x n matrix (m <= n), Householder: 2 m^2 n - 2 m^3 / 3."""
    return Flops(batch * (2 * m * m * n - 2 * m ** 3 // 3), None, LINALG_BACKWARD)


def solve(n: int, columns: int, batch: int = 1) -> Flops:
    """A general solve: an LU factorisation (2n^3/3) and two triangular solves (2 n^2 k); its
    backward solves the transposed system with the same factors (2 n^2 k) and takes the
    matrix's gradient as a product (2 n^2 k)."""
    return Flops(batch * (2 * n ** 3 // 3 + 2 * n * n * columns), batch * 4 * n * n * columns)


def eigen(n: int, batch: int = 1, symmetric: bool = True, vectors: bool = True) -> Flops:
    """Eigenvalues by the QR algorithm, Golub and Van Loan's counts: symmetric 4n^3/3, with
    vectors 9n^3; general 10n^3, with vectors 25n^3."""
    per = (9 * n ** 3 if vectors else 4 * n ** 3 // 3) if symmetric else (25 if vectors else 10) * n ** 3
    return Flops(batch * per, None, LINALG_BACKWARD)


def svd(m: int, n: int, batch: int = 1, vectors: bool = True) -> Flops:
    """Golub-Kahan SVD of m x n (m >= n), Golub and Van Loan's counts: values 4mn^2 - 4n^3/3,
    with both sets of vectors 4m^2 n + 8mn^2 + 9n^3."""
    m, n = max(m, n), min(m, n)
    per = 4 * m * m * n + 8 * m * n * n + 9 * n ** 3 if vectors else 4 * m * n * n - 4 * n ** 3 // 3
    return Flops(batch * per, None, LINALG_BACKWARD)


# ---------------------------------------------------------------- elementwise families

def pointwise(elements: int, ops: int = 1, gradients: int = 1) -> Flops:
    """`ops` operations per output element; the backward multiplies each gradient element's head
    by the derivative (POINTWISE_BACKWARD_OPS)."""
    return Flops(ops * elements, POINTWISE_BACKWARD_OPS * elements * gradients)


def reduction(elements: int) -> Flops:
    """One operation per input element; the backward spreads the head over the input (one each)."""
    return Flops(elements, elements)


def fft(points: int, length: int, real: bool = False) -> Flops:
    """A fast Fourier transform of `points` points in transforms of `length`: 5 N log2 L for a
    complex transform, half that for a real one (the count FFT libraries report); its backward
    is the adjoint transform, the same again."""
    forward = int(points * 5 * max(1.0, log2(length)) / (2 if real else 1))
    return Flops(forward, forward)


def comparison_sort(elements: int, length: int) -> Flops:
    """A comparison sort of rows of `length`: about log2(length) comparisons an element; its
    backward scatters the head gradient back by the sort's indices: data movement, no arithmetic."""
    return Flops(int(elements * max(1.0, log2(length))), 0, SORT_BACKWARD)


SORT_BACKWARD = "a sort's backward scatters the head gradient back: data movement, no arithmetic"


def interpolation(output_elements: int, taps: int) -> Flops:
    """Each output a weighted sum of `taps` inputs (a multiply and an add each); the backward
    spreads each head gradient back over the same taps with the same weights."""
    return Flops(2 * taps * output_elements, 2 * taps * output_elements)


def pooling(output_elements: int, window: int) -> Flops:
    """One comparison or addition per window element per output; the backward puts each
    output's head gradient back into its window (one operation per window element)."""
    return Flops(output_elements * window, output_elements * window)


def softmax(elements: int) -> Flops:
    return Flops(SOFTMAX_OPS[0] * elements, SOFTMAX_OPS[1] * elements)


def normalization(elements: int) -> Flops:
    return Flops(NORMALIZATION_OPS[0] * elements, NORMALIZATION_OPS[1] * elements)
