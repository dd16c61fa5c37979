"""The audit of one PyTorch case (benchcore.measure.audit): its inputs, outputs and input gradients.

Run once per case, untimed, after the timed runs (executor.execute): the inputs as the timed
runs left them (in-place operators included), the outputs of one more forward, and, when
backward is timed, the input gradients of one more backward from the case's seeded head
gradients. One more backward is needed here (MXNet's audit reads the last timed one's): the
timed loop resets every input gradient to None after each iteration, so that backward never
times an accumulation, and nothing of the timed backwards is left to read. The gradients are
reset afterwards, as after every timed backward.

benchcore.measure.audit counts numpy arrays; a tensor reaches it as follows: a CPU tensor as a view of
its own buffer (no copy); a CUDA one a chunk at a time (TRANSFER_VALUES, so it is not copied to
the host whole); bfloat16 widened to float32, which is exact and keeps every class (bfloat16 is
float32's upper half: same exponent, so the same NaN, infinities and subnormals), and judged as
float32; complex as its
real and imaginary parts; a sparse tensor as its dense values; a ZeroTensor (autograd's
zeros, never materialized) as zeros.

The reason a case's non-normal values are inherent to its operator is the override table's
(overrides.NON_NORMAL), looked up by (name, variant).
"""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

from benchcore.errors import error_summary
from benchcore.measure import audit
from benchcore.measure.case import Workload


def count_tensor(tensor) -> dict:
    """benchcore.measure.audit's counts of one tensor (see the module docstring for the conversions)."""
    import torch

    t = tensor.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    widened = t.dtype == torch.bfloat16
    flat = t.reshape(-1).float() if widened else t.reshape(-1)
    # numpy(force=True): also a conjugated, negated or ZeroTensor view (sgn's gradient), and a CUDA one;
    # a plain CPU tensor's is a view of its own buffer, counted in place
    if flat.device.type == "cpu":
        counts = audit.count(flat.numpy(force=True))
    else:  # one (empty) chunk for an empty tensor, so its counts carry its dtype
        step = audit.TRANSFER_VALUES
        counts = audit.count_many(flat[start:start + step].numpy(force=True)
                                  for start in range(0, max(flat.numel(), 1), step))
    return dict(counts, dtype="bfloat16") if widened else counts


def named_tensors(value: Any, name: str) -> Dict[str, Any]:
    """Every tensor in a nested value by where it sits: "input", "args[1]", "args[0][2]",
    "kwargs.weight" (a report names a flagged tensor by the argument that holds it)."""
    import torch

    if isinstance(value, torch.Tensor):
        return {name: value}
    if isinstance(value, (list, tuple)):
        items = [(f"{name}[{index}]", item) for index, item in enumerate(value)]
    elif isinstance(value, dict):
        items = [(f"{name}.{key}", item) for key, item in value.items()]
    else:
        return {}
    return {path: tensor for item_name, item in items for path, tensor in named_tensors(item, item_name).items()}


def audit_case(workload: Workload, first, args, kwargs, expected: Optional[str] = None) -> dict:
    """The case's audit block (see the module docstring): inputs, outputs, input gradients."""
    from .sample import tensors_in

    started = time.perf_counter()
    inputs = {**named_tensors(first, "input"), **named_tensors(list(args), "args"), **named_tensors(kwargs, "kwargs")}
    groups = {"inputs": {name: count_tensor(t) for name, t in inputs.items()}}
    output = workload.forward()
    groups["outputs"] = {str(index): count_tensor(t) for index, t in enumerate(tensors_in(output))}
    if workload.backward:
        workload.backward(workload.backward_setup(output))
        groups["gradients"] = {name: count_tensor(t.grad) for name, t in inputs.items() if t.grad is not None}
        workload.zero_grad()
    workload.sync()
    block = audit.summarize_tensors(groups, expected)
    block["elapsed_ms"] = (time.perf_counter() - started) * 1e3
    return block


def add_audit(metrics: dict, options: dict, workload: Workload, sample: tuple, expected: Optional[str]) -> None:
    """metrics["audit"], or null with the reason under `missing`: --no-audit, or the audit pass
    itself failed (the timed figures are kept either way); none when an earlier round audited
    the case (benchcore.measure.audit.wanted)."""
    if not audit.wanted(metrics, options):
        return
    try:
        metrics["audit"] = audit_case(workload, *sample, expected=expected)
    except Exception as exc:  # an operator that cannot run once more must not lose the timings
        metrics["audit"] = None
        metrics["missing"]["audit"] = f"the audit pass failed: {error_summary(exc)}"
