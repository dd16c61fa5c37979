"""Discovery: OpInfo's op_db → manifest entries, in a process of its own.

This is the only module that imports torch.testing._internal, and it runs only as its own
process (`python -m opbench.backends.torch.discover`, started by opbench.backends.torch.manifest),
never in a timing worker nor in the CLI: importing it disables torch.backends' global flag
setters, wraps TorchScript calls in a profiling wrapper and imports dynamo, inductor, scipy and
pytest (about 1,500 modules), all of which would skew what a worker then times.

For every entry (at the asked dtype and device) it picks a sample and a scale:

1. the candidates are the entry's samples, largest first (OpInfo's first sample is often a
   0-dim edge case), or a hand-written sample from opbench.backends.torch.overrides;
2. a candidate is run at k = 1 and k = 2 (see sample.Scale); the largest input or output
   grows as c·k^p, so k = (target / size(1))^(1/p) puts it at about the size target (capped
   per matrix side and work for O(n^3) operators, and halved while one call takes over the
   time budget or holds more than the memory budget);
3. at that k, forward is run, and for an entry with autograd, backward from random gradients
   of the outputs; a candidate that fails is recorded under `tried` with its error, and the
   next is tried (then the same candidates with integer arguments scaled as well).

The first candidate that grows and runs forward and backward wins; else the first that runs
forward (its backward reason kept); else one whose size cannot grow (at its own size). An
entry with none is left out with the reasons. Output: JSON Lines on --progress, one
{"start": [name, variant]} before each entry and one {"entry": …} or {"left_out": …} after,
so the parent can restart past an entry that kills the process.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from typing import Any, Dict, List, Optional, Tuple

from benchcore.measure.memory import peak_rss, reset_peak_rss, resident_bytes

from . import matches, overrides
from .callables import LAMBDA, LAMBDAS, callable_for, resolve
from .categories import category_of
from .executor import sync_for
from .sample import (
    Decoder,
    Scale,
    Unencodable,
    describe_sample,
    descriptors,
    encode_sample,
    load,
    tensors_in,
)

#: one forward plus backward call at the chosen size may take at most this (else k is halved).
#: Far above a typical call (10 ms), so that scales depend on sizes only, not on the machine's
#: speed or load, except for an operator that would otherwise run for minutes.
CALL_BUDGET_S = 2.0
#: ... and may hold at most this much memory above what the process held before it (else k is
#: halved; resident memory, on CUDA the device's: _held_memory): with a worker of up to 1.5 GiB
#: (--memory-limit-gb) and the parent's 0.4 GiB, a sweep stays under 3 GiB (householder_product's
#: backward took 3.2 GiB at k=25)
CALL_MEMORY_BYTES = 2**30
#: the largest input or output may end at most this many times the size target (else k is halved)
OVERSHOOT = 4
#: samples tried per entry (largest first)
MAX_CANDIDATES = 8
#: namespaces searched for an entry's callable, as dotted paths from torch
NAMESPACES = ("", "Tensor", "nn.functional", "linalg", "special", "fft", "signal.windows", "masked", "sparse",
              "functional", "_C._nn", "_C._linalg", "_C._special", "_C._fft", "_refs")


class Failed(Exception):
    """A candidate that does not work, with why (one line)."""


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}".strip()


# --------------------------------------------------------------------------- the callable


def find_call(op) -> Optional[dict]:
    """How a worker reaches op.op: {"path": dotted path from torch} when that path gives the
    very same object, {"lambda": true} for a reviewed LAMBDAS row, else None."""
    if (op.name, op.variant_test_name) in LAMBDAS:
        return {LAMBDA: True}
    target = op.op
    short = op.name[len("torch."):] if op.name.startswith("torch.") else op.name
    guesses = [short] + [f"{space}.{short}" if space else short for space in NAMESPACES]
    guesses += [f"{space}.{op.aten_name}" for space in NAMESPACES if space and op.aten_name]
    guesses += [f"ops.aten.{op.aten_name}", f"ops.aten.{short}", f"ops.{target}"]
    for path in dict.fromkeys(guesses):
        if resolve(path) is target:
            return {"path": path}
    return None


# --------------------------------------------------------------------------- running a candidate


def _size(value) -> int:
    return max((t.numel() for t in tensors_in(value)), default=0)


def _run(fn, tree, data, scale: Scale, device: str, seed: int, backward: bool) -> Tuple[int, float, Optional[str]]:
    """Run forward (and backward) once at `scale`: (largest input/output elements, seconds,
    why backward failed or None)."""
    import torch

    torch.manual_seed(seed)
    first, args, kwargs = Decoder(data, scale, device, seed, grad=backward).sample(tree)
    sync = sync_for(device)
    sync()
    started = time.perf_counter()
    try:
        out = fn(first, *args, **kwargs)
        sync()  # a CUDA call returns once queued: its time is the kernel's only after the sync
    except Exception as exc:
        raise Failed(_error(exc)) from None
    elapsed = time.perf_counter() - started
    size = max(_size([first, args, kwargs]), _size(out))
    why = None
    if backward:
        heads = [t for t in tensors_in(out) if t.requires_grad and t.grad_fn is not None
                 and (t.dtype.is_floating_point or t.dtype.is_complex)]
        if not heads:
            why = ("no output carries a gradient (the operator returns its input or a view of it unchanged)"
                   if any(t.requires_grad for t in tensors_in(out)) else "no output of this sample carries a gradient")
        else:
            grads = [torch.randn_like(h) for h in heads]
            sync()
            started = time.perf_counter()
            try:
                torch.autograd.backward(heads, grads)
                sync()
            except Exception as exc:
                why = f"backward failed: {_error(exc)}"
            elapsed += time.perf_counter() - started
    return size, elapsed, why


def fit(fn, tree, data, ints: bool, cap: Optional[int], device: str, target: int, seed: int,
        backward: bool) -> dict:
    """The scale for one candidate (see the module docstring), checked at that scale."""
    size1, time1, _ = _run(fn, tree, data, Scale(1, ints), device, seed, False)
    size2, time2, _ = _run(fn, tree, data, Scale(2, ints), device, seed, False)
    grows = size2 > size1 > 0
    k = 1
    if grows:
        power = math.log2(size2 / size1)
        k = max(1, min(target, int((target / size1) ** (1 / power))))
        k = min(k, _time_cap(time1, time2))
    if cap:
        largest = max((d for desc in descriptors(tree) for d in desc["shape"]), default=1)
        k = max(1, min(k, cap // max(largest, 1)))
        while k > 1 and _matrix_work(tree, Scale(k, ints)) > overrides.CUBIC_MAX_WORK:
            k -= 1
    while True:
        held = _held_memory(device)
        size, elapsed, why = _run(fn, tree, data, Scale(k, ints), device, seed, backward)
        extra = held()
        if (elapsed <= CALL_BUDGET_S and extra <= CALL_MEMORY_BYTES and size <= OVERSHOOT * max(target, size1)) \
                or k == 1:
            break
        k = max(1, k // 2)
    return {"scale": {"k": k, "ints": ints}, "grows": grows, "elements": size, "call_ms": elapsed * 1e3,
            "backward": backward and why is None, "no_backward_reason": why if backward else None}


def _held_memory(device: str):
    """Start measuring the memory a call holds at its peak; the returned function reads it
    (bytes). On CUDA the allocator's peak on the device, whose memory is the budget that
    matters there (the host's resident memory barely moves); elsewhere the resident peak."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        return lambda: torch.cuda.max_memory_allocated(device) - start
    peak_reset = reset_peak_rss()
    before = resident_bytes()
    return lambda: (peak_rss() or 0) - (before or 0) if peak_reset else 0


def _matrix_work(tree, scale: Scale) -> int:
    """batch x m x n x min(m, n) of the largest matrix input at this scale (an O(n^3) call's work)."""
    work = 0
    for desc in descriptors(tree):
        shape = scale.dims(desc["shape"], desc.get("keep", ()))
        if len(shape) >= 2:
            m, n = shape[-2], shape[-1]
            work = max(work, math.prod(shape[:-2]) * m * n * min(m, n))
    return work


def _time_cap(time1: float, time2: float) -> int:
    """The largest k whose forward, extrapolated from k = 1 and 2, stays under 10x the budget:
    a guard against calls of minutes (a tiled 33x33x33 kernel), not a size rule."""
    power = math.log2(time2 / max(time1, 1e-6)) if time2 > 0 else 0.0
    if time2 < 0.1 or power < 0.5:
        return 2**62
    return max(1, int(2 * (10 * CALL_BUDGET_S / time2) ** (1 / power)))


# --------------------------------------------------------------------------- candidates


def _structured(tree: Any, data: Dict[str, dict]) -> Any:
    """STRUCTURED: square floating-point matrices drawn afresh with the sample's structure."""
    if isinstance(tree, list):
        return [_structured(v, data) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if set(tree) == {"tensor"}:
        desc = tree["tensor"]
        shape = desc["shape"]
        if desc.get("init") == "tile" and len(shape) >= 2 and shape[-1] == shape[-2] > 1 \
                and desc["dtype"].startswith("float"):
            desc = {k: v for k, v in desc.items() if k != "data"}
            desc["init"] = _structure_of(load(data[tree["tensor"]["data"]]))
        return {"tensor": desc}
    return {k: _structured(v, data) for k, v in tree.items()}


def _in_domain(tree: dict, low: float, high: float) -> dict:
    """DOMAINS: every floating-point tensor drawn afresh, uniform in [low, high]."""
    for desc in descriptors(tree):
        if desc["dtype"].startswith(("float", "bfloat")):
            desc.pop("data", None)
            desc.update(init="fresh", low=low, high=high)
    return tree


def _keep(name: str, tree: dict) -> dict:
    """KERNELS and KEEP_SIZES: mark the dimensions that scaling leaves alone."""
    if name in overrides.KERNELS and tree["args"] and isinstance(tree["args"][0], dict) and "tensor" in tree["args"][0]:
        weight = tree["args"][0]["tensor"]
        weight["keep"] = list(range(2, len(weight["shape"])))
    last = overrides.KEEP_LAST.get(name)
    if last is not None and len(tree["args"]) > last and isinstance(tree["args"][last], dict) \
            and "tensor" in tree["args"][last]:
        grid = tree["args"][last]["tensor"]
        grid["keep"] = [len(grid["shape"]) - 1]
    size = overrides.KEEP_SIZES.get(name)
    if size:
        for desc in descriptors(tree):
            desc["keep"] = [i for i, d in enumerate(desc["shape"]) if d == size]
    return tree


def _structure_of(matrix) -> str:
    import torch

    m = matrix.double()
    if torch.equal(m, m.tril()):
        return "tril"
    if torch.equal(m, m.triu()):
        return "triu"
    if torch.allclose(m, m.mT) and bool(torch.linalg.cholesky_ex(m).info.eq(0).all()):
        return "spd"
    return "full_rank"


def candidates(op, dtype, device: str, grad: bool, seed: int, tried: List[dict]):
    """(label, sample index, tree, data) for each candidate, largest sample first."""
    import torch

    key = (op.name, op.variant_test_name)
    if key in overrides.SAMPLES:
        return [("override", None, _with_dtype(overrides.SAMPLES[key], dtype), {})], None
    torch.manual_seed(seed)
    samples = list(op.sample_inputs(device, dtype, requires_grad=grad))
    encoded = []
    for index, sample in enumerate(samples):
        data: Dict[str, dict] = {}
        try:
            tree = encode_sample(sample, data, fresh=op.name in overrides.FRESH)
        except Unencodable as exc:
            tried.append({"sample": index, "reason": str(exc)})
            continue
        if op.name in overrides.STRUCTURED:
            tree = _structured(tree, data)
        if key in overrides.DOMAINS:
            tree = _in_domain(tree, *overrides.DOMAINS[key])
        tree = _keep(op.name, tree)
        size = sum(math.prod(d["shape"]) for d in descriptors(tree))
        encoded.append((-size, index, tree, data))
    encoded.sort(key=lambda item: (item[0], item[1]))
    return [("sample", index, tree, data) for _, index, tree, data in encoded[:MAX_CANDIDATES]], len(samples)


def _with_dtype(tree, dtype) -> dict:
    """A hand-written sample with the run's dtype on every tensor that names none."""
    from .sample import dtype_name

    tree = json.loads(json.dumps(tree))
    for desc in descriptors(tree):
        desc.setdefault("dtype", dtype_name(dtype))
    return tree


def _used(tree, data: Dict[str, dict]) -> Dict[str, dict]:
    return {d["data"]: data[d["data"]] for d in descriptors(tree) if "data" in d}


def discover(op, dtype_name: str, device: str, target: int, seed: int) -> Tuple[str, dict]:
    """("entry", entry) or ("left_out", {name, variant, reason, …}) for one OpInfo entry."""
    import torch

    name, variant = op.name, op.variant_test_name
    kind = type(op).__name__
    base = {"name": name, "variant": variant, "kind": kind, "category": category_of(name, kind),
            "aten_name": op.aten_name}
    dtype = getattr(torch, dtype_name)
    if (name, variant) in overrides.LEFT_OUT:
        return "left_out", dict(base, reason=overrides.LEFT_OUT[(name, variant)])
    if dtype not in op.supported_dtypes(device):
        return "left_out", dict(base, reason=f"OpInfo lists no {dtype_name} support on {device}")
    call = find_call(op)
    if call is None:
        return "left_out", dict(base, reason=f"OpInfo calls a {type(op.op).__name__} ({getattr(op.op, '__qualname__', '?')}) "
                                            "that a worker cannot rebuild without importing torch.testing._internal")
    fn = callable_for(call, name, variant)
    grad = bool(op.supports_autograd) and dtype in op.supported_backward_dtypes(device)
    tried: List[dict] = []
    try:
        found = candidates(op, dtype, device, grad, seed, tried)  # (candidates, number of samples)
    except Exception as exc:
        return "left_out", dict(base, reason=f"sample_inputs failed: {_error(exc)}")
    listed, count = found
    cap = overrides.CUBIC_MAX_N if name in overrides.CUBIC else None
    chosen = _choose(fn, listed, cap, device, target, seed, grad, tried)
    if chosen is None:
        reasons = "; ".join(dict.fromkeys(t["reason"] for t in tried)) or "no sample"
        return "left_out", dict(base, reason=f"no sample runs: {reasons[:500]}", tried=tried)
    label, index, tree, data, fitted = chosen
    if call.get(LAMBDA):
        why = _check_lambda(op, fn, tree, data, device, seed, index)
        if why:
            return "left_out", dict(base, reason=why)
    scale = Scale(**fitted["scale"])
    entry = dict(base, call=call, strategy=label + ("+ints" if scale.ints else ""), sample=index, samples=count,
                 tree=tree, inputs=describe_sample(tree, scale), differentiable=grad, tried=tried, **fitted)
    if not fitted["grows"]:
        entry["note"] = "its size does not grow with the sample's: timed at the sample's own size"
    if not grad:
        entry["no_backward_reason"] = f"OpInfo marks no autograd for {dtype_name} on {device}"
    entry["data"] = _used(tree, data)
    return "entry", entry


def _choose(fn, listed, cap, device, target, seed, grad, tried):
    """The first candidate that grows with forward and backward, else with forward, else any."""
    forward_only = fixed = None
    for ints in (False, True):
        for label, index, tree, data in listed:
            try:
                fitted = fit(fn, tree, data, ints, cap, device, target, seed, grad)
            except Failed as exc:
                tried.append({"sample": index, "ints": ints, "reason": str(exc)})
                continue
            choice = (label, index, tree, data, fitted)
            if fitted["grows"] and (fitted["backward"] or not grad):
                return choice
            if not fitted["grows"]:
                tried.append({"sample": index, "ints": ints, "reason": "size does not grow with k"})
                fixed = fixed or choice
            else:
                tried.append({"sample": index, "ints": ints, "reason": fitted["no_backward_reason"]})
                forward_only = forward_only or choice
    return forward_only or fixed


#: LAMBDAS rows of operators whose outputs are random or uninitialised (compared by form only)
RANDOM_LAMBDAS = ("empty_strided", "new_empty", "new_empty_strided", "svd_lowrank", "pca_lowrank",
                  "nn.functional.multi_head_attention_forward")


def _equal(a, b) -> bool:
    """Equal values (NaN equal to NaN); dtypes without comparison kernels (complex32, sparse)
    are compared densely in complex64."""
    a, b = a.detach(), b.detach()
    if a.layout != b.layout:
        return False
    if a.is_sparse:
        a, b = a.to_dense(), b.to_dense()
    if a.dtype == b.dtype and str(a.dtype) == "torch.complex32":
        import torch

        a, b = a.to(torch.complex64), b.to(torch.complex64)
    return bool(a.shape == b.shape and (a.eq(b) | (a.isnan() & b.isnan())).all())


def _check_lambda(op, fn, tree, data, device, seed, index) -> Optional[str]:
    """A LAMBDAS row must do what OpInfo's lambda does: equal outputs on the same inputs
    (shapes and dtypes for a random operator)."""
    import torch

    def run(call):
        torch.manual_seed(seed)
        first, args, kwargs = Decoder(data, Scale(1), device, seed).sample(tree)
        return tensors_in(call(first, *args, **kwargs))

    try:
        ours, theirs = run(fn), run(op.op)
    except Exception as exc:
        return f"OpInfo's lambda and its public equivalent disagree on sample {index}: {_error(exc)}"
    same_form = len(ours) == len(theirs) and all(a.shape == b.shape and a.dtype == b.dtype for a, b in zip(ours, theirs))
    random = category_of(op.name, type(op).__name__) == "random" or op.name in RANDOM_LAMBDAS
    same = same_form and (random or all(_equal(a, b) for a, b in zip(ours, theirs)))
    return None if same else f"the public equivalent of OpInfo's lambda gives other outputs on sample {index}"


# --------------------------------------------------------------------------- the process


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m opbench.backends.torch.discover")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size-target", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="JSON list of [name, variant] to discover (default: all)")
    parser.add_argument("--skip", default=None, help="JSON list of [name, variant] to pass over")
    parser.add_argument("--names", default=None, help="JSON list of --ops patterns: only the entries they name")
    parser.add_argument("--progress", required=True, help="JSON Lines output")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    from torch.testing._internal.common_methods_invocations import op_db

    only = {tuple(k) for k in json.loads(args.only)} if args.only else None
    skip = {tuple(k) for k in json.loads(args.skip)} if args.skip else set()
    names = json.loads(args.names) if args.names else None
    with open(args.progress, "a") as out:
        for op in op_db:
            key = (op.name, op.variant_test_name)
            if key in skip or (only is not None and key not in only) or (
                    names is not None and not any(matches({"name": key[0], "variant": key[1]}, p) for p in names)):
                continue
            _line(out, {"start": list(key)})
            try:
                kind, record = discover(op, args.dtype, args.device, args.size_target, args.seed)
            except Exception as exc:  # a defect of discovery, not of the operator: say so, go on
                kind, record = "left_out", {"name": key[0], "variant": key[1], "category": None,
                                            "reason": f"discovery failed on it: {_error(exc)}"}
            _line(out, {kind: record})
    return 0


def _line(out, record: dict) -> None:
    out.write(json.dumps(record, allow_nan=False) + "\n")
    out.flush()


if __name__ == "__main__":
    sys.exit(main())
