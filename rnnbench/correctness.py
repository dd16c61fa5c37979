"""Check LSTM runners against a PyTorch reference built from the same seed.

For each runner: its inputs and parameters must equal the reference's exactly (both come from
`factory.lstm_data` with the same seed, so a difference means the creator did not use them);
then the forward output and final (h, c) must agree within tolerance; then, after a backward
with the same seeded grad_outputs on both sides, every parameter's gradient. References:
`nn.LSTM` (packed for variable-length runners, bidirectional for bidirectional ones) and, for
the layer-norm LSTM, which nn.LSTM cannot express, the direct eager formula below.

Gradients are sums over batch and time, so their size — and with it float32's resolution —
grows with the problem: at fastrnns' default sizes the layer-norm LSTM's gradients reach 4·10⁴,
where one float32 step is 4·10⁻³ and two correct float32 implementations differ by ~10 (both
are that far from a float64 computation). An absolute 1e-3 is then unreachable, so by default
(scale_grads=True) a gradient is compared after dividing both sides by max(1, max|reference|):
the tolerance is absolute for gradients up to 1 and relative to the tensor's largest value
beyond. Outputs and states are bounded (|h| < 1) and compared as given. A wrong cell still
misses by the gradient's own order of magnitude.

Both sides run in IEEE float32: TF32 is switched off for the check (see runners.ieee_float32),
since cuDNN's LSTM would otherwise use it on recent GPUs and the hand-written runners would not.

Each checked runner's inputs, outputs, final states and parameter gradients are audited
(rnnbench.audit: NaN, Inf, subnormal counts) after its backward; the table shows what was found.
Finding some does not fail the check, which is about agreement with the reference.

A mismatch or an error is a failed CheckResult with a message — never an exception or a
debugger prompt (fastrnns' test.py dropped into pdb). Only the caller's own mistakes (unknown
runner, CNN runner, bad size or device) raise UsageError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F
from tabulate import tabulate

from benchcore.errors import UsageError, error_summary
from benchcore.measure.audit import findings
from rnnbench import factory
from rnnbench.audit import audit_model
from rnnbench.runners import Runner, get_runners, ieee_float32, lstm_runner_names

DEFAULT_SIZES = dict(seqLength=100, numLayers=1, inputSize=512, hiddenSize=512, miniBatch=64)
DEFAULT_SEED = 17


@dataclass
class CheckResult:
    """One runner's verdict.

    max_abs_diff: {"output": float | None, "h": float, "c": float, "grads": {param: float}};
    a quantity that was not compared (the simple variant has no output; a failure before that
    stage) is None or absent. options: creator options the check applied (e.g. dropout 0).
    grad_scale: per parameter, the divisor applied before comparing its gradient (1 when
    gradients are compared as given).
    """

    runner: str
    passed: bool
    max_abs_diff: Dict[str, Any] = field(default_factory=dict)
    message: str = ""
    options: dict = field(default_factory=dict)
    grad_scale: Dict[str, float] = field(default_factory=dict)
    #: the runner's inputs, outputs, final states and parameter gradients audited
    #: (rnnbench.audit); None when the check failed before its backward
    audit: Optional[dict] = None

    def to_dict(self) -> dict:
        return {"runner": self.runner, "passed": self.passed, "max_abs_diff": self.max_abs_diff,
                "message": self.message, "options": self.options, "grad_scale": self.grad_scale,
                "audit": self.audit}


@dataclass(frozen=True)
class Tolerance:
    """|runner − reference| ≤ atol + rtol·|reference| elementwise; gradients first divided by
    max(1, max|reference gradient|) when scale_grads (see the module docstring)."""

    atol: float = 1e-3
    rtol: float = 0.0
    scale_grads: bool = True

    def __str__(self) -> str:
        return (f"atol={self.atol:g}, rtol={self.rtol:g}"
                + (", gradients scaled" if self.scale_grads else ""))


@dataclass
class _Outputs:
    """Normalised forward results: output as a list of tensors (one per sequence for
    variable-length batches, else one) or None; final states h and c."""

    output: Optional[List[torch.Tensor]]
    h: torch.Tensor
    c: torch.Tensor


class _Mismatch(Exception):
    """Internal: a stage failed; the message goes into the CheckResult."""


# ----------------------------------------------------------------------------- references

def _layernorm_reference(data: factory.LSTMData, eps: float):
    """The layer-norm LSTM written out step by step with F.layer_norm, straight from the
    formula (LN on both gate projections and on the new cell state, no gate biases)."""
    x, params = data.x, data.params
    hs, cs = [], []
    for layer in range(data.hx.size(0)):
        w_ih, w_hh, gi, bi, gh, bh, gc, bc = params[8 * layer:8 * layer + 8]
        h, c = data.hx[layer], data.cx[layer]
        outputs = []
        for t in range(x.size(0)):
            gates = (F.layer_norm(x[t] @ w_ih.t(), gi.shape, gi, bi, eps)
                     + F.layer_norm(h @ w_hh.t(), gh.shape, gh, bh, eps))
            i, f, g, o = gates.chunk(4, 1)
            c = F.layer_norm(f.sigmoid() * c + i.sigmoid() * g.tanh(), gc.shape, gc, bc, eps)
            h = o.sigmoid() * c.tanh()
            outputs.append(h)
        x = torch.stack(outputs)
        hs.append(h)
        cs.append(c)
    return x, (torch.stack(hs), torch.stack(cs))


def _build_reference(kind: str, sizes: dict, device: str, seed: int):
    """(data, forward result, named params) of the reference for a runner's kind."""
    common = dict(sizes, device=device, seed=seed)
    if kind == "layernorm":
        data = factory.lstm_data(**common, layernorm=True)
        return data, _layernorm_reference(data, factory.LAYERNORM_EPS), \
            list(zip(data.names, data.params))
    data = factory.lstm_data(**common, variable_length=(kind == "varlen"),
                             directions=2 if kind == "bidirectional" else 1)
    module = factory.build_nn_lstm(data, sizes["inputSize"], sizes["hiddenSize"],
                                   sizes["numLayers"], bidirectional=(kind == "bidirectional"))
    if kind == "varlen":
        rnn_utils = torch.nn.utils.rnn
        packed = rnn_utils.pack_sequence(data.x, enforce_sorted=False)
        out, state = module(packed, (data.hx, data.cx))
        result = (rnn_utils.pad_packed_sequence(out)[0], state)
    else:
        result = module(data.x, (data.hx, data.cx))
    return data, result, list(module.named_parameters())


def _normalise(result: Any, lengths: Optional[List[int]]) -> _Outputs:
    """Bring any LSTM runner's forward result to one shape (see _Outputs)."""
    output, (h, c) = result
    if output is None:
        outs = None
    elif isinstance(output, (list, tuple)):
        outs = list(output)
    elif lengths is not None:  # padded (T_max, B, H) → one (T_i, H) per sequence
        outs = [output[:n, i] for i, n in enumerate(lengths)]
    else:
        outs = [output]
    return _Outputs(outs, h, c)


# ---------------------------------------------------------------------------- comparisons

def _max_diff(a: torch.Tensor, b: torch.Tensor, what: str) -> float:
    if tuple(a.shape) != tuple(b.shape):
        raise _Mismatch(f"{what}: shape {tuple(a.shape)} != reference {tuple(b.shape)}")
    if a.numel() == 0:
        return 0.0
    return float((a.detach().float() - b.detach().float()).abs().max())


def _within(a: torch.Tensor, b: torch.Tensor, tol: Tolerance, scale: float = 1.0) -> bool:
    a, b = a.detach().double() / scale, b.detach().double() / scale
    return bool(((a - b).abs() <= tol.atol + tol.rtol * b.abs()).all())


def _compare(pairs: Sequence[tuple], what: str, tol: Tolerance) -> tuple:
    """(max abs diff over all pairs, all within tolerance?)."""
    if len(pairs) == 0:
        return 0.0, True
    diffs = [_max_diff(a, b, what) for a, b in pairs]
    ok = all(_within(a, b, tol) for a, b in pairs)
    return max(diffs), ok and not any(math.isnan(d) for d in diffs)


def grad_scale(reference_grad: torch.Tensor, tol: Tolerance) -> float:
    """The divisor applied to a gradient pair before comparing (see the module docstring)."""
    if not tol.scale_grads or reference_grad.numel() == 0:
        return 1.0
    return max(1.0, float(reference_grad.detach().abs().max()))


def grads_close(grad: torch.Tensor, reference_grad: torch.Tensor, tol: Tolerance) -> bool:
    """Whether a gradient agrees with the reference's under `tol`."""
    if tuple(grad.shape) != tuple(reference_grad.shape):
        return False
    diff = _max_diff(grad, reference_grad, "gradient")
    return not math.isnan(diff) and _within(grad, reference_grad, tol,
                                            grad_scale(reference_grad, tol))


def _as_list(x: Any) -> List[torch.Tensor]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _check_same_data(md: factory.ModelDef, data: factory.LSTMData,
                     ref_params: List[tuple]) -> None:
    """Inputs and parameters must be identical, or every later comparison is meaningless."""
    if len(md.inputs) < 3:
        raise _Mismatch(f"expected inputs (x, hx, cx), got {len(md.inputs)} inputs")
    for label, got, want in zip(("x", "hx", "cx"), md.inputs[:3], data.inputs):
        got, want = _as_list(got), _as_list(want)
        if len(got) != len(want):
            raise _Mismatch(f"input {label}: {len(got)} sequences != reference {len(want)}")
        diff = max(_max_diff(a, b, f"input {label}") for a, b in zip(got, want))
        if diff != 0.0:
            raise _Mismatch(f"input {label} differs from the seeded reference by {diff:.3g}")
    if len(md.params) != len(ref_params):
        raise _Mismatch(f"{len(md.params)} parameters != reference {len(ref_params)}")
    for param, (name, ref) in zip(md.params, ref_params):
        diff = _max_diff(param, ref, f"parameter {name}")
        if diff != 0.0:
            raise _Mismatch(f"parameter {name} differs from the seeded reference by {diff:.3g}")


def _grad_terms(outs: _Outputs, grads: dict, use_output: bool) -> tuple:
    tensors, tgrads = [outs.h, outs.c], [grads["h"], grads["c"]]
    if use_output:
        tensors += outs.output
        tgrads += grads["output"]
    return tensors, tgrads


def _draw_grads(ref: _Outputs, device: torch.device, seed: int) -> dict:
    """Seeded grad_outputs shaped like the reference's outputs; both sides get these."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + 2)

    def draw(t):
        return torch.randn(t.shape, generator=gen, device=device, dtype=t.dtype)

    return {"output": [draw(t) for t in ref.output], "h": draw(ref.h), "c": draw(ref.c)}


# ------------------------------------------------------------------------------- checking

def _run_check(runner: Runner, sizes: dict, device: str, seed: int, tol: Tolerance,
               diffs: dict, scales: dict, audited: dict) -> List[str]:
    """Fill diffs stage by stage, and `audited` with the runner's audit after its backward;
    return the names of quantities out of tolerance."""
    failures = []
    data, ref_result, ref_params = _build_reference(runner.reference, sizes, device, seed)
    lengths = [len(s) for s in data.x] if runner.reference == "varlen" else None
    ref = _normalise(ref_result, lengths)
    with runner.context():
        md = runner.creator(**sizes, device=device, seed=seed, **runner.check_options)
        _check_same_data(md, data, ref_params)
        for param in md.params:
            param.grad = None
        result = md.forward(*md.inputs)
        outs = _normalise(result, lengths)
        use_output = outs.output is not None
        if use_output:
            if len(outs.output) != len(ref.output):
                raise _Mismatch(f"output: {len(outs.output)} sequences != {len(ref.output)}")
            diffs["output"], ok = _compare(list(zip(outs.output, ref.output)), "output", tol)
            failures += [] if ok else ["output"]
        for key in ("h", "c"):
            diffs[key], ok = _compare([(getattr(outs, key), getattr(ref, key))], key, tol)
            failures += [] if ok else [key]
        grads = _draw_grads(ref, data.hx.device, seed)
        torch.autograd.backward(*_grad_terms(outs, grads, use_output))
        audited.update(audit_model(md.inputs, result, md.params, md.param_names or [name for name, _ in ref_params]))
    torch.autograd.backward(*_grad_terms(ref, grads, use_output))
    diffs["grads"] = {}
    for param, (name, ref_param) in zip(md.params, ref_params):
        if param.grad is None:
            raise _Mismatch(f"parameter {name} got no gradient")
        diffs["grads"][name] = _max_diff(param.grad, ref_param.grad, f"grad {name}")
        scales[name] = grad_scale(ref_param.grad, tol)
        if not grads_close(param.grad, ref_param.grad, tol):
            failures.append(f"grad {name}")
    return failures


def check_runner(name: str, seqLength: int = 100, numLayers: int = 1, inputSize: int = 512,
                 hiddenSize: int = 512, miniBatch: int = 64, device: str = "cpu",
                 seed: int = DEFAULT_SEED, atol: float = 1e-3, rtol: float = 0.0,
                 scale_grads: bool = True) -> CheckResult:
    """Compare one LSTM runner with its reference; see the module docstring.

    A value passes when |runner − reference| ≤ atol + rtol·|reference| everywhere (gradients
    first divided by max(1, max|reference gradient|) unless scale_grads is False).
    """
    tol = Tolerance(atol, rtol, scale_grads)
    runner = _lstm_runners([name])[0]
    sizes = dict(seqLength=seqLength, numLayers=numLayers, inputSize=inputSize,
                 hiddenSize=hiddenSize, miniBatch=miniBatch)
    factory.check_sizes(**sizes)
    factory.resolve_device(device)
    diffs: Dict[str, Any] = {"output": None, "h": None, "c": None, "grads": {}}
    scales: Dict[str, float] = {}
    audited: Dict[str, Any] = {}
    options = dict(runner.check_options)
    note = f" (checked with {_fmt_options(options)})" if options else ""
    try:
        with ieee_float32():
            failures = _run_check(runner, sizes, device, seed, tol, diffs, scales, audited)
    except _Mismatch as exc:
        return CheckResult(name, False, diffs, f"{exc}{note}", options, scales, audited or None)
    except Exception as exc:  # the runner itself broke: a failed check, not a crash
        return CheckResult(name, False, diffs, f"error: {error_summary(exc)}{note}", options, scales, audited or None)
    if failures:
        message = f"out of tolerance ({tol}): {', '.join(failures)}"
        return CheckResult(name, False, diffs, message + note, options, scales, audited)
    return CheckResult(name, True, diffs, "ok" + note, options, scales, audited)


def check_runners(names: Optional[Sequence[str]] = None, seqLength: int = 100,
                  numLayers: int = 1, inputSize: int = 512, hiddenSize: int = 512,
                  miniBatch: int = 64, device: str = "cpu", seed: int = DEFAULT_SEED,
                  atol: float = 1e-3, rtol: float = 0.0,
                  scale_grads: bool = True) -> List[CheckResult]:
    """check_runner for each name (default: every LSTM runner), names validated up front."""
    names = list(names) if names else default_check_runners()
    _lstm_runners(names)
    return [check_runner(name, seqLength, numLayers, inputSize, hiddenSize, miniBatch,
                         device, seed, atol, rtol, scale_grads) for name in names]


def default_check_runners() -> List[str]:
    """All LSTM runners (every registered runner but the CNNs)."""
    return lstm_runner_names()


def _lstm_runners(names: Sequence[str]) -> List[Runner]:
    found = get_runners(list(names))
    cnns = [r.name for r in found if not r.is_lstm]
    if cnns:
        raise UsageError(f"correctness checks cover LSTM runners only; {', '.join(cnns)} "
                         f"{'is a CNN runner' if len(cnns) == 1 else 'are CNN runners'}")
    return found


# ------------------------------------------------------------------------------- display

def _fmt(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2e}"


def _fmt_options(options: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(options.items()))


def _audit_cell(block: Optional[dict]) -> str:
    """The table's non-normal column: none, or the flagged tensors (rnnbench.audit)."""
    if not block:
        return "-"
    return findings(block) if block.get("flagged") else "none"


def format_results(results: Sequence[CheckResult], tablefmt: str = "simple") -> str:
    """A per-runner table: verdict, largest output/h/c differences, the worst gradient (the
    largest difference relative to its scale), its scale and parameter, and the message."""
    rows = []
    for res in results:
        grads = res.max_abs_diff.get("grads") or {}
        scale = res.grad_scale or {}
        worst = max(grads, key=lambda k: grads[k] / scale.get(k, 1.0)) if grads else None
        rows.append([res.runner, "PASS" if res.passed else "FAIL",
                     _fmt(res.max_abs_diff.get("output")), _fmt(res.max_abs_diff.get("h")),
                     _fmt(res.max_abs_diff.get("c")),
                     _fmt(grads[worst]) if worst else "-",
                     _fmt(scale.get(worst)) if worst in scale else "-", worst or "-",
                     _audit_cell(res.audit), res.message])
    headers = ["runner", "result", "output", "h", "c", "grad", "grad scale", "param", "non-normal", "message"]
    return tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)
