"""The audit of one PyTorch case (benchcore.measure.audit): its inputs, outputs and input gradients.

Run once per case, untimed, from the last timed call (executor.execute sets counter() as the
measured Workload's last_call, which benchcore.measure.runner calls right after it): the inputs
as the timed runs left them (in-place operators included), the outputs of the last timed
forward, and, when backward is timed, the input gradients of the last timed backward (its
seeded head gradients). The runner resets every input gradient to None before the next
forward, never inside a timed call, so no backward times an accumulation; after the last
iteration it resets them once the audit has taken them. They are counted after the case's
memory figures are read (LastCall's `deferred`): counting a CUDA tensor copies it to the host a
chunk at a time and may make it contiguous or dense on the device first, which must not show
in the case's device memory peak. No forward or backward runs for the audit, except under the instruction
engine (its own loop hands no call over: benchcore.measure.audit.one_more_call).

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

import functools
from typing import Any, Dict, Optional

from benchcore.measure import audit


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


def take_case(output, first, args, kwargs, with_backward: bool, expected: Optional[str] = None):
    """What the case's audit counts, taken while it is there (the runner resets the gradients
    right after): the inputs, `output` and the input gradients; returns the function that
    counts them into the audit block (its `elapsed_ms` is benchcore.measure.audit.LastCall's)."""
    from .sample import tensors_in

    inputs = {**named_tensors(first, "input"), **named_tensors(list(args), "args"), **named_tensors(kwargs, "kwargs")}
    groups = {"inputs": inputs, "outputs": {str(index): t for index, t in enumerate(tensors_in(output))}}
    if with_backward:
        groups["gradients"] = {name: t.grad for name, t in inputs.items() if t.grad is not None}

    def count_block() -> dict:
        return audit.summarize_tensors({group: {name: count_tensor(t) for name, t in named.items()}
                                        for group, named in groups.items()}, expected)

    return count_block


def counter(sample: tuple, with_backward: bool, expected: Optional[str]) -> audit.LastCall:
    """The case's audit, to be the measured Workload's last_call: the last timed forward's
    output and the last timed backward's gradients, taken then and counted once the case's
    device memory peak is read (deferred: counting a GPU tensor can allocate, see take_case's
    count_tensor)."""
    first, args, kwargs = sample
    return audit.LastCall(functools.partial(take_case, first=first, args=args, kwargs=kwargs,
                                            with_backward=with_backward, expected=expected), deferred=True)
