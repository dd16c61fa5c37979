"""The audit of one runner (benchcore.measure.audit): inputs, outputs, final states, parameter gradients.

`bench` audits each runner once per case (in one of its rounds), untimed, from what its last
timed forward and backward produced (counter: no call is added for the audit); `test` audits the
runner it checked. A forward result is what a ModelDef returns: an LSTM's (output, (h, c)),
with output None for the simple variant and a list of sequences for a variable-length batch,
or a CNN's logits. A list (sequences, variable-length inputs) is counted as one tensor.
"""

from __future__ import annotations

from typing import Any, Dict, Sequence

from benchcore.measure import audit


def _counts(value: Any) -> dict:
    if isinstance(value, (list, tuple)):
        return audit.count_many(t.detach().cpu().numpy() for t in value)
    return audit.count(value.detach().cpu().numpy())


def result_groups(result: Any) -> Dict[str, Dict[str, dict]]:
    """{"outputs": {...}, "states": {"h", "c"}} counted from a forward result."""
    if not isinstance(result, (list, tuple)):
        return {"outputs": {"output": _counts(result)}, "states": {}}
    output, (h, c) = result
    outputs = {} if output is None else {"output": _counts(output)}
    return {"outputs": outputs, "states": {"h": _counts(h), "c": _counts(c)}}


def audit_model(inputs: Sequence[Any], result: Any, params: Sequence[Any], names: Sequence[str]) -> dict:
    """The audit block of one forward result and the parameters' gradients (after a backward)."""
    input_names = ("x", "hx", "cx") if len(inputs) == 3 else tuple(f"input{i}" for i in range(len(inputs)))
    groups = {"inputs": {name: _counts(value) for name, value in zip(input_names, inputs)}, **result_groups(result)}
    groups["gradients"] = {name: _counts(param.grad) for name, param in zip(names, params) if param.grad is not None}
    return audit.summarize_tensors(groups)


def counter(workload, names: Sequence[str]) -> audit.LastCall:
    """A timed workload's audit, to be its last_call: the last timed forward's result and the
    parameters' gradients of the last timed backward (its seeded grad_outputs; the runner zeroes
    them only after this has read them)."""
    return audit.LastCall(lambda result: audit_model(workload.inputs or [], result, workload.params, names))
