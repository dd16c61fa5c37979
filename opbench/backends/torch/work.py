"""The work of a torch case (benchcore.measure.work): its tensors and outputs from the call run
on meta tensors (shapes and dtypes without data or arithmetic), and its operator's FLOP family.

Why meta tensors: the case's inputs are large and its call is the thing timed; on the meta
device torch computes only the output's shape and dtype. An operator whose output shape
depends on the values (nonzero, unique, masked_select) has no meta answer: it runs once on its
real inputs instead. The families' FLOPs equal torch.utils.flop_counter wherever that has a
formula (the tests hold them equal on real calls).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from math import prod
from typing import Any, Callable, Dict, List, Optional, Tuple

from benchcore.measure import work as W
from benchcore.measure.case import CaseSpec
from benchcore.measure.work import Flops, Tensor, Work

from .sample import Decoder, Scale, dtype_name, tensors_in


@dataclass
class MetaDecoder(Decoder):
    """The sample's tensors on the meta device: shapes, dtypes and gradients, no values."""

    def _tensor(self, desc: dict):
        import torch

        from .sample import torch_dtype

        t = torch.empty(self.scale.dims(desc["shape"], desc.get("keep", ())), dtype=torch_dtype(desc["dtype"]),
                        device="meta")
        if self.grad and desc.get("grad", True) and (t.dtype.is_floating_point or t.dtype.is_complex):
            t.requires_grad_(True)
        return t


@dataclass(frozen=True)
class Call:
    """A case's call, decoded: the function's name (OpInfo's or a path), first argument, the
    rest, and its results."""

    name: str
    category: Optional[str]
    first: Any
    args: list
    kwargs: dict
    result: Any

    def arg(self, index: int, key: str, default: Any = None) -> Any:
        """A parameter given by position (after the first) or by keyword."""
        return self.args[index] if len(self.args) > index else self.kwargs.get(key, default)

    @property
    def inputs(self) -> list:
        return tensors_in([self.first, self.args, self.kwargs])

    @property
    def outputs(self) -> list:
        return tensors_in(self.result)

    @property
    def out(self):
        return self.outputs[0]


def decoded(entry: dict, data: dict, fn: Callable, grad: bool, seed: int = 0) -> Tuple[Optional[tuple], Optional[str]]:
    """(first, args, kwargs, result) on the meta device, else on real inputs; None and why
    where neither runs."""
    import torch

    scale = Scale(**entry["scale"])
    try:
        first, args, kwargs = MetaDecoder(data, scale, "cpu", seed, grad=grad).sample(entry["tree"])
        return (first, args, kwargs, fn(first, *args, **kwargs)), None
    except Exception:  # noqa: BLE001 - no meta kernel, or a value-dependent shape: run it for real
        pass
    try:
        torch.manual_seed(seed)
        first, args, kwargs = Decoder(data, scale, "cpu", seed, grad=grad).sample(entry["tree"])
        return (first, args, kwargs, fn(first, *args, **kwargs)), None
    except Exception as error:  # noqa: BLE001 - the sweep records such a case's error itself
        return None, f"outputs unknown: the call failed ({type(error).__name__}: {str(error).splitlines()[0][:120]})"


def as_tensors(values: list) -> List[Tensor]:
    return [W.tensor(t.shape, dtype_name(t.dtype)) for t in values]


# ---------------------------------------------------------------- FLOP families

_MATRIX_FIRST = {"mm": 0, "matmul": 0, "bmm": 0, "linear": 0, "nn.functional.linear": 0, "inner": 0, "dot": 0,
                 "vdot": 0, "mv": 0, "addmm": 1, "baddbmm": 1, "addmv": 1}


def _operands(call: Call) -> list:
    return [call.first, *call.args]


def _gemm(call: Call) -> Flops:
    """2 x each output element x the contraction length (the first matrix operand's last axis)."""
    operands = _operands(call)
    index = _MATRIX_FIRST[call.name]
    matrix = operands[index]
    other = operands[index + 1] if len(operands) > index + 1 else call.kwargs.get("weight")
    gradients = sum(bool(getattr(t, "requires_grad", False)) for t in (matrix, other))
    return W.gemm(call.out.numel(), 1, matrix.shape[-1] if matrix.dim() else 1, gradients=gradients)


def _convolution(call: Call) -> Flops:
    weight = call.arg(0, "weight")
    transposed = "transpose" in call.name
    spatial = call.first.shape[2:] if transposed else call.out.shape[2:]
    gradients = sum(bool(t.requires_grad) for t in (call.first, weight))
    return W.convolution(call.first.shape[0], tuple(weight.shape), tuple(spatial), gradients)


def _recurrent(call: Call) -> Flops:
    """torch.lstm/gru/rnn_* (input, hx, params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first): opbench crossframe's torch side of MXNet's RNN."""
    mode = call.name
    seq, batch, size = call.first.shape
    states = call.args[0][0] if isinstance(call.args[0], (list, tuple)) else call.args[0]
    directions = 2 if call.args[6] else 1
    return W.recurrent(mode, seq, batch, size, states.shape[-1], int(call.args[3]), directions)


def _pooling(call: Call) -> Flops:
    kernel = call.arg(0, "kernel_size")
    dims = call.first.dim() - 2 if call.first.dim() > 2 else 1
    if "adaptive" in call.name or kernel is None:
        window = call.first.numel() // max(1, call.out.numel())
    else:
        window = prod(kernel) if isinstance(kernel, (list, tuple)) else kernel ** dims
    return W.pooling(call.out.numel(), window)


def _sort(call: Call) -> Flops:
    """Rows along the sorted dimension (topk's comes after k, msort's is the first)."""
    dim = 0 if call.name == "msort" else call.arg(1 if call.name == "topk" else 0, "dim", -1)
    dim = dim if isinstance(dim, int) and not isinstance(dim, bool) else -1
    shape = call.first.shape
    return W.comparison_sort(call.first.numel(), shape[dim] if shape else 1)


def _fft(call: Call) -> Flops:
    """torch.fft.*: the output's points in transforms along `n`/`s` (or the transformed dims)."""
    kind = call.name.split(".")[-1]
    sizes = call.kwargs.get("s") or ([call.kwargs["n"]] if call.kwargs.get("n") else None)
    if sizes is None:
        dims = call.kwargs.get("dim")
        dims = [dims] if isinstance(dims, int) else dims or (
            range(-2, 0) if kind.endswith("2") else range(call.out.dim()) if kind.endswith("n") else [-1])
        sizes = [call.out.shape[d] for d in dims]
    return W.fft(call.out.numel(), prod(sizes), real=kind.lstrip("i").startswith(("rfft", "hfft")))


def _einsum(call: Call) -> Flops:
    """Two operands contracted: 2 x the product of every index's size (no ellipsis)."""
    operands, equation = (call.first, call.args[0]) if isinstance(call.first, list) else (call.args, call.first)
    inputs = equation.replace(" ", "").split("->")[0].split(",")
    if len(inputs) != 2 or "." in equation:
        return W.no_formula("no FLOP formula for an einsum of other than two operands without ellipsis")
    sizes = {letter: size for term, t in zip(inputs, operands) for letter, size in zip(term, t.shape)}
    gradients = sum(bool(t.requires_grad) for t in operands)
    return W.gemm(prod(sizes.values()), 1, 1, gradients=gradients)


def _tensordot(call: Call) -> Flops:
    dims = call.arg(1, "dims", 2)
    if not isinstance(dims, int):
        return W.no_formula("no FLOP formula for tensordot over listed dimensions")
    other = call.args[0]
    contracted = prod(call.first.shape[call.first.dim() - dims:])
    return W.gemm(call.out.numel(), 1, contracted, gradients=sum(bool(t.requires_grad) for t in (call.first, other)))


def _addbmm(call: Call) -> Flops:
    batch, n, k = call.args[0].shape
    return W.gemm(n, call.args[1].shape[-1], k, batch)


def _bilinear(call: Call) -> Flops:
    """x1 W x2 per output feature: 2 x batch x out x in1 x in2."""
    weight = call.args[1]
    return W.gemm(call.first.shape[0] * weight.shape[0], 1, weight.shape[1] * weight.shape[2])


def _norm(call: Call) -> Flops:
    """A vector norm: a power and a sum an element (a nuclear norm is an SVD: no formula)."""
    if "nuc" in [a for a in [*call.args, *call.kwargs.values()] if isinstance(a, str)]:
        return W.no_formula("a nuclear norm is an SVD: no FLOP formula")
    return _pointwise(call, 2, call.first.numel())


def _cdist(call: Call) -> Flops:
    """Every pair of rows: a difference, a power and a sum per feature."""
    rows, other = call.first.shape, call.args[0].shape
    return _pointwise(call, 3, prod(rows[:-1]) * other[-2] * rows[-1])


def _pdist(call: Call) -> Flops:
    n, features = call.first.shape
    return _pointwise(call, 3, n * (n - 1) // 2 * features)


def _covariance(call: Call) -> Flops:
    """The variables' products over the observations: X X^T."""
    variables, observations = call.first.shape if call.first.dim() == 2 else (1, call.first.shape[0])
    return W.gemm(variables, variables, observations, gradients=1)


def _rectangle(call: Call) -> Tuple[int, int, int]:
    shape = call.first.shape
    return shape[-2], shape[-1], prod(shape[:-2])


def _solve(call: Call, solves: int = 1) -> Flops:
    """Triangular solves of the right-hand side's columns (`solves` of them: two for an LU or
    Cholesky factor), each with its backward (benchcore.measure.work.triangular); the matrix is
    the first argument's or the second's, whichever is square."""
    a, b = (call.first, call.args[0]) if call.first.shape[-1] == call.first.shape[-2] else (call.args[0], call.first)
    n = a.shape[-1]
    columns = b.numel() // max(1, n * prod(a.shape[:-2]))
    found = W.triangular(n, columns, prod(a.shape[:-2]))
    return Flops(solves * found.forward, solves * found.backward)


def _qr(call: Call) -> Flops:
    """Householder QR of m x n is the LQ of its transpose."""
    rows, columns, batch = _rectangle(call)
    return W.lq(min(rows, columns), max(rows, columns), batch)


def _matrix_power(call: Call) -> Flops:
    power = abs(int(call.arg(0, "n", 1)))
    n, batch = _square(call)
    products = max(0, power.bit_length() - 1 + bin(power).count("1") - 1)
    return W.gemm(n, n, n, batch * products)


#: inputs each output of an interpolation mode weighs, per spatial dimension
TAPS = {"linear": 2, "bilinear": 2, "trilinear": 2, "bicubic": 4}


def _interpolate(call: Call) -> Flops:
    """Linear modes weigh 2 inputs per dimension, cubic 4; area is an adaptive average pooling;
    nearest copies one input: data movement."""
    mode = call.kwargs.get("mode", "bilinear" if call.name.endswith("bilinear") else "nearest")
    dims = call.first.dim() - 2
    if mode == "area":
        return W.pooling(call.out.numel(), call.first.numel() // max(1, call.out.numel()))
    if mode not in TAPS:
        return W.no_formula(MOVEMENT)
    return W.interpolation(call.out.numel(), TAPS[mode] ** dims)


def _square(call: Call) -> Tuple[int, int]:
    shape = call.first.shape
    return shape[-1], prod(shape[:-2])


def _pointwise(call: Call, ops: int = 1, elements: Optional[int] = None) -> Flops:
    gradients = sum(bool(getattr(t, "requires_grad", False)) for t in call.inputs)
    return W.pointwise(call.out.numel() if elements is None else elements, ops, max(1, gradients))


def _loss(call: Call) -> Flops:
    """A loss: an elementwise term and its reduction, LOSS_OPS operations an input element."""
    return _pointwise(call, LOSS_OPS, call.first.numel())


#: operations per element of a loss's elementwise term and reduction (the convention both
#: suites' losses share)
LOSS_OPS = 2
#: pointwise operators of several operations an element outside the ufunc categories
POINTWISE_OPS = {"addcmul": 2, "addcdiv": 2, "lerp": 2, "logaddexp2": 3, "clamp": 1, "outer": 1, "kron": 1, "addr": 2}


SOFTMAX = ("softmax", "log_softmax", "nn.functional.softmin", "nn.functional.softmax", "nn.functional.log_softmax")
FAMILIES: Dict[str, Callable[[Call], Flops]] = {
    **{name: _gemm for name in _MATRIX_FIRST},
    **{f"nn.functional.conv{kind}{d}d": _convolution for kind in ("", "_transpose") for d in (1, 2, 3)},
    **{mode: _recurrent for mode in ("lstm", "gru", "rnn_tanh", "rnn_relu")},
    **{name: lambda c: W.softmax(c.first.numel()) for name in SOFTMAX},
    **{name: lambda c: W.cholesky(*_square(c)) for name in ("cholesky", "linalg.cholesky")},
    "cholesky_inverse": lambda c: W.cholesky_inverse(*_square(c)),
    **{name: lambda c: W.lu(*_square(c)) for name in ("lu", "linalg.lu", "linalg.lu_factor", "linalg.lu_factor_ex")},
    "linalg.cholesky_ex": lambda c: W.cholesky(*_square(c)),
    **{name: lambda c: W.Flops(W.cholesky(*_square(c)).forward, None, W.LINALG_BACKWARD)
       for name in ("linalg.ldl_factor", "linalg.ldl_factor_ex")},
    "linalg.inv_ex": lambda c: W.lu_based(*_square(c), inverse=True),
    **{name: lambda c: W.solve(c.first.shape[-1], c.args[0].numel() // max(1, c.first.shape[-1] * _square(c)[1]),
                               _square(c)[1]) for name in ("linalg.solve", "linalg.solve_ex")},
    **{name: _solve for name in ("triangular_solve", "linalg.solve_triangular")},
    **{name: partial(_solve, solves=2) for name in ("cholesky_solve", "lu_solve", "linalg.lu_solve", "linalg.ldl_solve")},
    **{name: _qr for name in ("qr", "linalg.qr", "geqrf")},
    "linalg.eigh": lambda c: W.eigen(*_square(c)), "linalg.eigvalsh": lambda c: W.eigen(*_square(c), vectors=False),
    "linalg.eig": lambda c: W.eigen(*_square(c), symmetric=False),
    "linalg.eigvals": lambda c: W.eigen(*_square(c), symmetric=False, vectors=False),
    **{name: lambda c: W.svd(*_rectangle(c)) for name in ("svd", "linalg.svd")},
    "linalg.svdvals": lambda c: W.svd(*_rectangle(c), vectors=False),
    "linalg.matrix_power": _matrix_power,
    **{name: _interpolate for name in ("nn.functional.interpolate", "nn.functional.upsample_bilinear",
                                       "nn.functional.upsample_nearest")},
    **{name: _sort for name in ("sort", "argsort", "msort", "topk")},
    **{name: lambda c: W.reduction(c.first.numel()) for name in ("argmax", "argmin", "amax", "amin")},
    **{name: partial(_pointwise, ops=ops) for name, ops in POINTWISE_OPS.items()},
    **{f"fft.{kind}{suffix}": _fft for kind in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft") for suffix in ("", "2", "n")},
    "einsum": _einsum, "tensordot": _tensordot, "addbmm": _addbmm, "nn.functional.bilinear": _bilinear,
    "__rmatmul__": lambda c: W.gemm(c.out.numel(), 1, c.first.shape[-2]),
    "trace": lambda c: W.reduction(min(c.first.shape)),
    **{f"masked.{name}": lambda c: W.softmax(c.first.numel()) for name in ("softmax", "log_softmax", "softmin")},
    "masked.normalize": lambda c: W.normalization(c.first.numel()),
    **{name: _sort for name in ("masked.median", "median", "nanmedian", "kthvalue", "mode", "quantile", "nanquantile")},
    **{name: _norm for name in ("norm", "linalg.norm", "linalg.matrix_norm", "linalg.vector_norm", "renorm", "dist",
                                "nn.functional.pairwise_distance", "linalg.vecdot")},
    "nn.functional.cosine_similarity": lambda c: _pointwise(c, 6, c.first.numel()),
    **{name: lambda c: _pointwise(c, 3) for name in ("cross", "linalg.cross")},
    "cdist": _cdist, "nn.functional.pdist": _pdist, "corrcoef": _covariance, "cov": _covariance,
    "nn.functional.kl_div": _loss,
    "nn.functional.cross_entropy": lambda c: W.softmax(c.first.numel()),
    **{name: lambda c: W.lu_based(*_square(c), inverse=True) for name in ("linalg.inv", "inverse")},
    **{name: lambda c: W.lu_based(*_square(c)) for name in ("linalg.det", "det", "logdet", "linalg.slogdet")},
}
CATEGORY_FAMILIES: Dict[str, Callable[[Call], Flops]] = {
    "pooling": _pooling, "masked": lambda c: W.reduction(c.first.numel()), "loss": _loss,
    "normalization": lambda c: W.normalization(c.first.numel()), "reduction": lambda c: W.reduction(c.first.numel()),
    "unary_ufunc": _pointwise, "binary_ufunc": _pointwise, "activation": _pointwise,
}
MOVEMENT = "data movement: no arithmetic; bytes are its measure"
VIEW = "a view of its input: no data moved, no arithmetic"
HEAD_VIEWS = "its gradients are views of the head gradient (as autograd returns them): no data moved, no arithmetic"
ZERO_TENSORS = "its gradients are torch's efficient zero tensors (no data behind them): nothing written, no arithmetic"
NO_FORMULA_OPS = {
    **{name: MOVEMENT for name in ("diag", "diag_embed", "diagflat", "diagonal", "linalg.diagonal", "tril", "triu",
                                   "block_diag")},
    **{f"nn.functional.max_unpool{d}d": "unpooling writes each input where its index says: data movement"
       for d in (1, 2, 3)},
    "nn.functional.ctc_loss": "dynamic programming over label alignments: no FLOP formula",
    "nn.functional.linear_cross_entropy": "a product and a softmax fused: no FLOP formula yet",
}
NO_FORMULA = {"shape": MOVEMENT, "indexing": MOVEMENT, "cast": MOVEMENT, "factory": "a factory reads nothing",
              "random": "random sampling: the generator's arithmetic is not counted; bytes are its measure"}


def family(name: str, category: Optional[str]) -> Optional[Callable[[Call], Flops]]:
    if name in NO_FORMULA_OPS:
        return None
    if name in FAMILIES:
        return FAMILIES[name]
    return (_pooling if "pool" in name else None) or CATEGORY_FAMILIES.get(category or "")


def flops_of(call: Call) -> Flops:
    found = family(call.name, call.category)
    if found is None:
        return W.no_formula(NO_FORMULA_OPS.get(call.name) or NO_FORMULA.get(call.category or "")
                            or f"no FLOP formula for {call.name} "
                            f"(category {call.category})")
    if not call.outputs:
        return W.no_formula(f"{call.name} returned no tensor")
    try:
        flops = found(call)
    except (IndexError, TypeError, ValueError, AttributeError) as error:  # a call the family's reading does not fit
        return W.no_formula(f"no FLOP formula for this call of {call.name} ({type(error).__name__}: {error})")
    odd = [type(v).__name__ for v in (flops.forward, flops.backward) if v is not None and not isinstance(v, int)]
    if odd:  # a family that read a tensor argument as a size: never a figure, and never the report's end
        return W.no_formula(f"no FLOP formula for this call of {call.name} (its family's reading gave a {odd[0]})")
    return flops


#: factories that allocate without writing a value
UNWRITTEN = ("empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided")
#: operators that may stop at the first element that decides (equal), or once they have found
#: what they were asked for (nonzero_static): what they must read is not known without the values
EARLY_EXIT = ("equal", "nonzero_static")
#: operators whose derivative is zero: the backward writes zeros, reading nothing
ZERO_DERIVATIVE = ("sign", "round", "floor", "ceil", "trunc", "fix")


def _storage(t) -> Optional[int]:
    """The tensor's storage's identity; None for one without a plain storage (sparse, nested)."""
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


def unaliased(tensors: list, sources: list) -> list:
    """The tensors that are not views of (or the same as) one of `sources`: those whose data is
    written. A view writes nothing and reads nothing: torch returns it without touching data."""
    shared = {_storage(t) for t in sources} - {None}
    return [t for t in tensors if _storage(t) not in shared]


#: indexing operators that search their input (every element read, however few they write)
SEARCHES = ("nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "bincount", "histc")


def moves_data(call: Call, flops: Flops) -> bool:
    """The call gathers or lays out data: it reads no more elements than it writes."""
    return (flops.reason == MOVEMENT or call.category in ("shape", "indexing")) and call.name not in SEARCHES


def forward_reads(call: Call, written: list, flops: Flops) -> List[Tensor]:
    """What the forward reads at least: every input, except where the call moves data (no more
    than it writes: W.gathered), makes its output from nothing (factories, and isreal of a real
    tensor), may stop early, or reads a diagonal (trace)."""
    real = not any(t.dtype.is_complex for t in call.inputs)
    views_only = bool(call.outputs) and not written  # every output a view of an input: nothing read
    if views_only or call.category == "factory" or call.name in EARLY_EXIT or (call.name == "isreal" and real):
        return []
    if call.name == "trace":
        return [W.tensor((min(call.first.shape),), dtype_name(call.first.dtype))]
    inputs = as_tensors(call.inputs)
    return W.gathered(inputs, as_tensors(written)) if moves_data(call, flops) else inputs


def backward_reads(call: Call, flops: Flops) -> list:
    """What the derivative reads besides the head (a lower bound)."""
    if call.name in ("add", "sub", "sum", "mean", "neg", "nn.functional.pad", "clone") or moves_data(call, flops):
        return []
    if call.name in SOFTMAX or call.name in ("exp", "sigmoid", "tanh"):
        return call.outputs
    return call.inputs


def written_gradients(call: Call) -> Tuple[list, list]:
    """(the head gradients, the gradients the backward writes): the backward run on the call's
    own tensors (meta ones: no arithmetic) with a fresh head per output, less the gradients that
    are new views of a head (a reshape's, a transpose's, a concatenation's pieces: autograd
    hands them to the leaves as they are), and those of inputs the call returned themselves. A
    gradient that is a head itself (an add's) counts: the timed backward's heads are held by its
    caller, so the leaf gets a copy. Where no backward runs there, every gradient counts."""
    import torch

    inputs = [t for t in call.inputs if t.requires_grad]
    outputs = [t for t in call.outputs if t.requires_grad]
    heads = [torch.empty_like(t) for t in outputs]
    try:
        found = torch.autograd.grad(outputs, inputs, heads, allow_unused=True)
    except Exception:  # noqa: BLE001 - no backward on these tensors: the formula's bound stands
        return heads, inputs
    # an input the call returned itself (atleast_1d of a vector) gets its head untouched
    gradients = [g if g is not None else t for g, t in zip(found, inputs) if not any(t is o for o in outputs)]
    views = unaliased(gradients, heads)
    return heads, [g for g in gradients if any(g is v for v in views) or any(g is h for h in heads)]


def lazy_zeros(gradients: list) -> list:
    """The gradients that are torch's efficient zero tensors (sgn's of a real input): a tensor
    with no data behind it, so the backward writes none (its timed backward wrote 4 MB of
    "zeros" at 262 GB/s, above every bandwidth roof, while counted as written)."""
    return [g for g in gradients if g._is_zerotensor()]


def work_of(entry: dict, data: dict, fn: Callable, name: str, category: Optional[str],
            run_backward: bool) -> Dict[str, Work]:
    """A decoded entry's work per timed phase: what it reads at least and what it writes, less
    the outputs that are views of its inputs (and gradients that are views of the heads)."""
    found, why = decoded(entry, data, fn, run_backward)
    phases = (W.FORWARD, W.BACKWARD) if run_backward else (W.FORWARD,)
    if found is None:
        return {phase: Work(phase, None, None, why) for phase in phases}
    call = Call(name, category, *found)
    written = [] if name in UNWRITTEN else unaliased(call.outputs, call.inputs)
    flops = flops_of(call)
    if call.outputs and not written:  # a view: an arithmetic family's call computed nothing (0); movement's stays None
        flops = W.no_arithmetic(VIEW) if flops.forward is not None else W.no_formula(VIEW)
    result = {W.FORWARD: W.forward_work(forward_reads(call, written, flops), as_tensors(written), flops)}
    if run_backward:
        heads, gradients = written_gradients(call)
        lazy = lazy_zeros(gradients)
        gradients = [g for g in gradients if not any(g is z for z in lazy)]
        grads = as_tensors(gradients)
        if not gradients:  # views of the heads, or zero tensors: nothing read, written or computed
            read_heads, reads, flops = [], [], W.no_arithmetic(ZERO_TENSORS if lazy else HEAD_VIEWS)
        elif name in ZERO_DERIVATIVE:  # zeros written: nothing read, nothing computed
            read_heads, reads, flops = [], [], W.Flops(flops.forward, 0, "a zero derivative: zeros written")
        else:
            read_heads = W.gathered(as_tensors(heads), grads) if moves_data(call, flops) else as_tensors(heads)
            reads = as_tensors(backward_reads(call, flops)) if written else []  # a view's: the head alone
        result[W.BACKWARD] = W.backward_work(read_heads, reads, grads, flops)
    return result


#: the OpInfo class an MXNet category's operators have in torch (crossframe's torch side)
_KIND_OF_MXNET = {"unary": "UnaryUfuncInfo", "rounding": "UnaryUfuncInfo", "activation": "UnaryUfuncInfo", "binary_broadcast": "BinaryUfuncInfo",
                  "binary_elemwise": "BinaryUfuncInfo", "reduction": "ReductionOpInfo"}


def category(spec: CaseSpec) -> Optional[str]:
    """A torch case's category: the manifest's, or for crossframe's torch side (which carries
    the MXNet case's) the category torch's table gives its function."""
    from .categories import category_of

    params = spec.params
    if "crossframe" not in params:
        return params.get("category")
    return category_of(params["op"], _KIND_OF_MXNET.get(params.get("category") or "", "OpInfo"))


def work(spec: CaseSpec, options: dict) -> Dict[str, Work]:
    """A torch case's work: its manifest entry (options: the sweep's `manifest` and its
    sha256), or the call crossframe's spec carries."""
    from .callables import callable_for
    from .executor import _entry

    params = spec.params
    entry, data = _entry(spec, options)
    name = params["op"]
    fn = callable_for(entry["call"], name, params.get("variant") or "")
    return work_of(entry, data, fn, name, category(spec), bool(params.get("run_backward")))
