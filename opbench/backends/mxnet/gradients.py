"""Which operators MXNet can differentiate, which have a gradient worth timing, and which draw
from MXNet's random generators: the probe behind registry.NOT_DIFFERENTIABLE,
registry.ZERO_GRADIENT and registry.DRAWS_RANDOM.

opperf's `has_backward` only asks whether an operator named `_backward_<op>` is registered.
That misses operators whose backward is registered under another name (split's is
`_backward_SliceChannel`) and every operator whose gradient is made of other operators
(batch_dot's gradient is two batch_dots, exp's is a multiplication by its output). The
question that matters for timing a backward pass is whether autograd can take the gradient,
and only MXNet can answer it: this module asks it, at tiny shapes.

`probe_one(op)` builds the operator's first tiny input combination whose backward is not
marked off in its rule, the same way a timed case does (opbench.backends.mxnet.arrays.materialize
with backward planned: gradients on the inputs the rule marks, or on every floating-point input
the operator does not write when it marks none), records one call with autograd and runs
backward from every output with head gradients of ones. The answer is one of:

- differentiable: backward ran and every input with a gradient got one;
- NO_FGRADIENT: MXNet raised "... is non-differentiable because it didn't register FGradient";
- NO_TENSOR_INPUT: the operator takes no tensor (random_normal: only shape and parameters);
- NO_OUTPUT: the operator returns nothing (it writes its inputs in place: reset_arrays);
- IN_PLACE: autograd refuses to record it, because it writes its inputs in place (the
  multi-tensor optimizer updates, whose outputs are their weights).

Any other error is a fault of the rule or of MXNet and is raised, never guessed around.

Differentiable is not the same as worth timing. For some operators MXNet registers a gradient
that is identically zero (argmax, round, the comparisons, BlockGrad, the sample_* samplers …:
their FGradient only makes zeros), so their "backward" times nothing but MXNet filling the
input gradients with zeros. `zero_gradient(op)` finds them: it runs backward on every tiny
input combination whose backward is not marked off, with random head gradients in [0.5, 1.5)
(not ones: the gradient of sum(softmax(x)) is zero although softmax's is not), and answers
True when every input gradient of every combination is exactly zero. Such operators stay
differentiable, but their backward is not timed (reason ZERO_FILL).

`draws_random(op)` says whether the sweep's cases of an operator take values from MXNet's
random generators (the samplers, Dropout and rrelu in training, shuffle …): it seeds them, runs
every tiny case as a timed case runs it, then draws from both of MXNet's CPU generators and
compares with the same draws made right after the seed. Only such cases need MXNet seeded before
them (opbench.backends.mxnet.arrays.materialize): seeding costs about a millisecond (MXNet seeds
every state of its parallel generator), which every case of every round paid.

The answers are not computed at every start (importing and probing every operator takes
seconds): they are stored in registry.NOT_DIFFERENTIABLE and registry.ZERO_GRADIENT, and
tests/opbench/test_gradients.py runs this probe on the installed MXNet and asserts the stored
tables equal it (registry.DRAWS_RANDOM as well). After an MXNet upgrade, `python -m opbench.backends.mxnet.gradients` prints the
tables to paste.

`probe(ops)` runs the probe in child processes, so an operator that crashes MXNet (a segfault
or a double free, as SequenceLast's backward without sequence lengths does) is reported as
crashed instead of killing the caller; the next child carries on after it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from benchcore.errors import error_summary
from benchcore.measure.case import CaseSpec

from . import cases, registry, releases, rules
from .arrays import materialize
from .registry import IN_PLACE, NO_FGRADIENT, NO_OUTPUT, NO_TENSOR_INPUT, REASON_NAMES

_ROOT = Path(__file__).resolve().parents[3]


class ProbeError(RuntimeError):
    """The probe could not tell: an error other than MXNet's own 'not differentiable'."""


def _backward_specs(op: str) -> List:
    """The tiny cases the probe uses: every combination whose backward is not marked off, with
    backward forced on (whatever the registry's stored answers plan for the operator)."""


    found = cases.rule_for(op, rules.TINY)
    if not found:
        raise ProbeError(f"{op}: no input rule, so it cannot be probed")
    specs, _ = cases.generate_cases(ops=[op], tiny=True)
    chosen = [CaseSpec(spec.suite, spec.name, {**spec.params, "run_backward": True})
              for (_, inputs), spec in zip(found, specs) if rules.NO_BACKWARD not in inputs]
    if not chosen:
        raise ProbeError(f"{op}: every input combination marks its backward off ({rules.NO_BACKWARD})")
    return chosen


def _probe_spec(op: str):
    """The tiny case probe_one uses: the first combination whose backward is not marked off."""
    return _backward_specs(op)[0]


def _ndarrays(result) -> List:
    import mxnet as mx

    items = result if isinstance(result, (list, tuple)) else [result]
    return [item for item in items if isinstance(item, mx.nd.NDArray)]


def probe_one(op: str) -> Tuple[bool, Optional[str]]:
    """(True, None) when MXNet can differentiate `op`, else (False, one of registry.REASONS).

    Runs in this process: an operator whose backward crashes MXNet takes the process with it
    (use probe() for a crash-safe run).
    """
    import mxnet as mx

    spec = _probe_spec(op)
    plain = materialize(type(spec)(spec.suite, spec.name, {**spec.params, "run_backward": False}))
    if not _ndarrays(plain.call()):
        mx.nd.waitall()
        return False, NO_OUTPUT
    mx.nd.waitall()
    m = materialize(spec)
    if not m.grad_arrays:
        return False, NO_TENSOR_INPUT
    try:
        with mx.autograd.record():
            heads = _ndarrays(m.call())
    except mx.base.MXNetError as exc:
        if "Inplace operations" in str(exc):
            return False, IN_PLACE
        raise ProbeError(f"{op}: recording failed for another reason: {error_summary(exc)}") from exc
    try:
        mx.autograd.backward(heads, [mx.nd.ones_like(h) for h in heads])
        mx.nd.waitall()
    except mx.base.MXNetError as exc:
        if "non-differentiable" in str(exc) and "FGradient" in str(exc):
            return False, NO_FGRADIENT
        raise ProbeError(f"{op}: backward failed for another reason: {error_summary(exc)}") from exc
    missing = [i for i, a in enumerate(m.grad_arrays) if a.grad is None]
    if missing:
        raise ProbeError(f"{op}: backward ran but inputs {missing} got no gradient")
    return True, None


def _head_gradients(heads: List) -> List:
    """Random head gradients in [0.5, 1.5) for dense floating-point outputs (seeded), ones for
    the others (integer outputs such as shape_array's, sparse ones)."""
    import mxnet as mx
    import numpy as np

    rng = np.random.default_rng(0)
    grads = []
    for head in heads:
        if head.stype == "default" and np.issubdtype(np.dtype(head.dtype), np.floating):
            grads.append(mx.nd.array(rng.uniform(0.5, 1.5, head.shape), ctx=head.context, dtype=head.dtype))
        else:
            grads.append(mx.nd.ones_like(head))
    return grads


def zero_gradient(op: str) -> bool:
    """True when the gradient of the differentiable `op` is identically zero: in every tiny
    input combination whose backward is not marked off, backward from random head gradients
    leaves every input gradient exactly zero. One nonzero (or non-finite) element anywhere
    answers False. Runs in this process, like probe_one.
    """
    import mxnet as mx
    import numpy as np

    for spec in _backward_specs(op):
        m = materialize(spec)
        with mx.autograd.record():
            heads = _ndarrays(m.call())
        mx.autograd.backward(heads, _head_gradients(heads))
        mx.nd.waitall()
        if any(a.grad is not None and np.any(a.grad.asnumpy() != 0) for a in m.grad_arrays):
            return False
    return True


#: the seed the randomness probe sets; any seed would do
PROBE_SEED = 7


def _draws_after_seed(run) -> tuple:
    """Values from both of MXNet's CPU generators (uniform: the parallel one; shuffle: the other)
    after seeding them and running `run`."""
    import mxnet as mx

    mx.random.seed(PROBE_SEED)
    run()
    mx.nd.waitall()
    return (tuple(mx.nd.random.uniform(shape=(8,)).asnumpy().tolist()),
            tuple(mx.nd.random.shuffle(mx.nd.arange(32)).asnumpy().tolist()))


def draws_random(op: str) -> bool:
    """True when running `op`'s tiny cases as timed cases run them (executor.build_workload:
    forward under autograd and backward where the case times it, else the plain call) changes
    what MXNet's generators give next. Runs in this process, like probe_one."""
    from .executor import build_workload

    info = registry.get(op)
    specs, _ = cases.generate_cases(ops=[op], tiny=True)
    workloads = [build_workload(materialize(spec), bool(spec.params.get("run_backward")) and info.runs_backward)
                 for spec in specs if not releases.broken(op, spec.params.get("ctx", "cpu(0)"))
                 and not releases.unaccepted_value(info, spec.params["inputs"])]  # what execute() skips

    def run_all():
        for workload in workloads:
            output = workload.forward()
            if workload.backward is not None:
                workload.backward(workload.backward_setup(output))

    return _draws_after_seed(run_all) != _draws_after_seed(lambda: None)


def probe(ops: Iterable[str], python: Optional[str] = None, timeout_s: float = 600.0) -> Dict[str, dict]:
    """Probe `ops` in child processes:
    {op: {"differentiable": bool|None, "reason": str|None, "zero_gradient": bool|None,
    "draws_random": bool|None}}.

    zero_gradient is zero_gradient(op) for a differentiable operator, None otherwise. An
    operator that kills its child (signal or abort) gets differentiable None and a reason
    naming the crash; probing goes on in a fresh child with the operators after it.
    """
    remaining = list(dict.fromkeys(ops))
    results: Dict[str, dict] = {}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))}
    while remaining:
        command = [python or sys.executable, "-m", "opbench.backends.mxnet.gradients", "--jsonl", *remaining]
        proc = subprocess.run(command,
                              capture_output=True, text=True, timeout=timeout_s, env=env, cwd=str(_ROOT))
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                item = json.loads(line)
                results[item["op"]] = {key: item.get(key) for key in
                                       ("differentiable", "reason", "zero_gradient", "draws_random")}
        remaining = [op for op in remaining if op not in results]
        if remaining:
            crashed = remaining.pop(0)
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            results[crashed] = {"differentiable": None, "zero_gradient": None, "draws_random": None,
                                "reason": f"the probe's process died (exit {proc.returncode}): {tail}"}
    return results


def _child(ops: List[str]) -> int:
    """--jsonl: probe in this process, one JSON line per operator as soon as it is known."""
    for op in ops:
        try:
            ok, reason = probe_one(op)
            item = {"op": op, "differentiable": ok, "reason": reason,
                    "zero_gradient": zero_gradient(op) if ok else None, "draws_random": draws_random(op)}
        except Exception as exc:  # reported, not raised: the other operators still get probed
            item = {"op": op, "differentiable": None, "reason": f"probe error: {error_summary(exc)}",
                    "zero_gradient": None, "draws_random": None}
        print(json.dumps(item), flush=True)
    sys.stdout.flush()
    os._exit(0)  # skip MXNet's teardown: an earlier operator's damage must not look like a crash


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--jsonl"]:
        return _child(argv[1:])
    ops = argv or registry.selected_names()
    results = probe(ops)
    print("NOT_DIFFERENTIABLE: Dict[str, str] = {")
    for op, item in sorted(results.items()):
        if item["differentiable"] is False:
            print(f"    {op!r}: {REASON_NAMES[item['reason']]},")
    print("}")
    zero = sorted(op for op, item in results.items() if item["zero_gradient"])
    print("ZERO_GRADIENT: Dict[str, str] = {op: ZERO_FILL for op in (")
    print("\n".join(f"    {op!r}," for op in zero))
    print(")}")
    drawing = sorted(op for op, item in results.items() if item["draws_random"])
    print("DRAWS_RANDOM: FrozenSet[str] = frozenset((")
    print("\n".join(f"    {op!r}," for op in drawing))
    print("))")
    unknown = {op: item["reason"] for op, item in results.items() if item["differentiable"] is None}
    for op, reason in sorted(unknown.items()):
        print(f"# {op}: {reason}", file=sys.stderr)
    differentiable = sum(1 for item in results.values() if item["differentiable"])
    print(f"# {differentiable} of {len(results)} differentiable, {differentiable - len(zero)} with a "
          f"nonzero gradient", file=sys.stderr)
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main())
