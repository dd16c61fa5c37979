"""The work of an rnnbench case (benchcore.measure.work): an LSTM runner's tensors from its
sizes (the same names and shapes rnnbench.factory draws) and its matrix products.

The backward differentiates the parameters only (fastrnns' inputs and initial states have no
gradient), so it skips two products a forward has a transpose of: the first layer's input
projection towards the input, and every layer's first step towards the initial state.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from benchcore.measure import work as W
from benchcore.measure.case import CaseSpec
from benchcore.measure.work import Flops, Tensor, Work

from .factory import _param_shape, lstm_param_names

GATES = W.RNN_GATES["lstm"]
#: runners whose final (h, c) is all they return, so only h gets a head gradient
FINAL_STATE_ONLY = ("jit_simple",)
NO_FORMULA = {
    "vl": "variable-length batch: the lengths are drawn in the worker, so its work is not known from the sizes",
    "cnns": "ResNet: no FLOP formula for a whole network here",
}


def _shape(runner: str) -> tuple:
    """(directions, layer norm) of an LSTM runner."""
    return (2 if "bidirectional" in runner else 1), "layernorm" in runner


def tensors(spec: CaseSpec, dtype: str = "float32") -> Dict[str, List[Tensor]]:
    """inputs (x, hx, cx), params, outputs (the sequence, h, c) and heads of an LSTM case."""
    p = spec.params
    seq, batch, size, hidden, layers = (int(p[k]) for k in ("seqLength", "miniBatch", "inputSize", "hiddenSize",
                                                           "numLayers"))
    directions, layernorm = _shape(spec.name)
    names = lstm_param_names(layers, directions, layernorm)
    per_layer = len(names) // layers
    params = [W.tensor(_param_shape(name, i // per_layer, size, hidden, directions), dtype) for i, name in enumerate(names)]
    state = W.tensor((layers * directions, batch, hidden), dtype)
    sequence = W.tensor((seq, batch, hidden * directions), dtype)
    simple = spec.name in FINAL_STATE_ONLY
    return {"inputs": [W.tensor((seq, batch, size), dtype), state, state], "params": params,
            "outputs": [state, state] if simple else [sequence, state, state],
            "heads": [state] if simple else [sequence]}


def flops(spec: CaseSpec) -> Flops:
    p = spec.params
    seq, batch, size, hidden, layers = (int(p[k]) for k in ("seqLength", "miniBatch", "inputSize", "hiddenSize",
                                                           "numLayers"))
    directions, layernorm = _shape(spec.name)
    forward = W.recurrent("lstm", seq, batch, size, hidden, layers, directions).forward
    # products whose transposes the backward skips: towards the input and the initial states
    skipped = directions * (W.gemm(batch, GATES * hidden, size, seq, 0).forward
                            + layers * W.gemm(batch, GATES * hidden, hidden, 1, 0).forward)
    extra = _layernorm(seq, batch, hidden, layers * directions) if layernorm else Flops(0, 0)
    return Flops(forward + extra.forward, 2 * forward - skipped + extra.backward)


def _layernorm(seq: int, batch: int, hidden: int, cells: int) -> Flops:
    """The layer-norm LSTM normalises both gate projections (4 H each) and the cell (H) a step."""
    return W.normalization(seq * batch * cells * (2 * GATES + 1) * hidden)


def group_of(spec: CaseSpec) -> Optional[str]:
    from .runners import get_runner

    return get_runner(spec.name).group


def work(spec: CaseSpec, run_backward: bool = True) -> Dict[str, Work]:
    """The case's work per phase (the backward where the sweep times it)."""
    group = group_of(spec)
    if group in NO_FORMULA:
        reason = f"{NO_FORMULA[group]}; bytes unknown for the same reason"
        return {phase: Work(phase, None, None, reason) for phase in (W.FORWARD, W.BACKWARD)[:1 + run_backward]}
    t, counted = tensors(spec), flops(spec)
    found = {W.FORWARD: W.forward_work(t["inputs"] + t["params"], t["outputs"], counted)}
    if run_backward:
        found[W.BACKWARD] = W.backward_work(t["heads"], t["inputs"][:1] + t["params"], t["params"], counted)
    return found
