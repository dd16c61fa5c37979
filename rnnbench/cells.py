"""Hand-written LSTM math, as plain functions that TorchScript, torch.compile and eager all accept.

Every function here is written in the TorchScript subset (type annotations, List/Tuple, no
closures) so the same source is what `jit*` runners script, what `compile*` runners hand to
torch.compile and what `py` runs eagerly: the runners then differ only in how the code is
executed, which is the thing being benchmarked.

Parameter layout, shared by every runner so results can be compared with `nn.LSTM`:
a flat list with, per layer (and per direction for bidirectional, forward first),
`[w_ih (4H, I), w_hh (4H, H), b_ih (4H), b_hh (4H)]` — nn.LSTM's own order. The layer-norm
LSTM has no biases and instead eight tensors per layer, see `layernorm_stack`.

Hidden state is `(numLayers * directions, B, H)` like nn.LSTM; a sequence is `(T, B, I)`.
Every stack function loops over all layers: fastrnns' jit/simple/premul variants used only
layer 0 and broke at two layers.
"""

from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


def gate_math(gates: Tensor, cx: Tensor) -> Tuple[Tensor, Tensor]:
    """The LSTM nonlinearity given pre-activation gates (B, 4H): i, f, g, o in nn.LSTM's order."""
    ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)
    ingate = torch.sigmoid(ingate)
    forgetgate = torch.sigmoid(forgetgate)
    cellgate = torch.tanh(cellgate)
    outgate = torch.sigmoid(outgate)
    cy = forgetgate * cx + ingate * cellgate
    hy = outgate * torch.tanh(cy)
    return hy, cy


def lstm_cell(x: Tensor, hx: Tensor, cx: Tensor, w_ih: Tensor, w_hh: Tensor,
              b_ih: Tensor, b_hh: Tensor) -> Tuple[Tensor, Tensor]:
    """One step: gates = x·W_ihᵀ + h·W_hhᵀ + b_ih + b_hh."""
    gates = torch.mm(x, w_ih.t()) + torch.mm(hx, w_hh.t()) + b_ih + b_hh
    return gate_math(gates, cx)


def lstm_layer(x: Tensor, hx: Tensor, cx: Tensor, w_ih: Tensor, w_hh: Tensor,
               b_ih: Tensor, b_hh: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """One layer over time; returns (outputs (T, B, H), h_T, c_T)."""
    steps = x.unbind(0)
    outputs: List[Tensor] = []
    for t in range(len(steps)):
        hx, cx = lstm_cell(steps[t], hx, cx, w_ih, w_hh, b_ih, b_hh)
        outputs.append(hx)
    return torch.stack(outputs), hx, cx


def premul_layer(x: Tensor, hx: Tensor, cx: Tensor, w_ih: Tensor, w_hh: Tensor,
                 b_ih: Tensor, b_hh: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """Like lstm_layer, but x·W_ihᵀ for all steps is one big matmul outside the loop.

    The input projection does not depend on the recurrence, so batching it over time trades
    T small GEMMs for one large one.
    """
    igates = torch.matmul(x, w_ih.t()).unbind(0)
    outputs: List[Tensor] = []
    for t in range(len(igates)):
        gates = igates[t] + torch.mm(hx, w_hh.t()) + b_ih + b_hh
        hx, cx = gate_math(gates, cx)
        outputs.append(hx)
    return torch.stack(outputs), hx, cx


def premul_bias_layer(x: Tensor, hx: Tensor, cx: Tensor, w_ih: Tensor, w_hh: Tensor,
                      b_ih: Tensor, b_hh: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """premul_layer with b_ih folded into the big matmul (addmm), one add less per step."""
    seq_len, batch, features = x.size(0), x.size(1), x.size(2)
    flat = torch.addmm(b_ih, x.reshape(seq_len * batch, features), w_ih.t())
    igates = flat.view(seq_len, batch, flat.size(1)).unbind(0)
    outputs: List[Tensor] = []
    for t in range(len(igates)):
        gates = igates[t] + torch.mm(hx, w_hh.t()) + b_hh
        hx, cx = gate_math(gates, cx)
        outputs.append(hx)
    return torch.stack(outputs), hx, cx


def simple_layer(x: Tensor, hx: Tensor, cx: Tensor, w_ih: Tensor, w_hh: Tensor,
                 b_ih: Tensor, b_hh: Tensor) -> Tuple[Tensor, Tensor]:
    """One layer with flat arguments that keeps only the final (h, c): no output stacking."""
    steps = x.unbind(0)
    for t in range(len(steps)):
        hx, cx = lstm_cell(steps[t], hx, cx, w_ih, w_hh, b_ih, b_hh)
    return hx, cx


def lstm_stack(x: Tensor, hx: Tensor, cx: Tensor,
               params: List[Tensor]) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
    """All layers with a flat parameter list, as nn.LSTM: (output, (h_n, c_n))."""
    hs: List[Tensor] = []
    cs: List[Tensor] = []
    for layer in range(len(params) // 4):
        w = params[4 * layer:4 * layer + 4]
        x, h, c = lstm_layer(x, hx[layer], cx[layer], w[0], w[1], w[2], w[3])
        hs.append(h)
        cs.append(c)
    return x, (torch.stack(hs), torch.stack(cs))


def premul_stack(x: Tensor, hx: Tensor, cx: Tensor,
                 params: List[Tensor]) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
    """lstm_stack built from premul_layer."""
    hs: List[Tensor] = []
    cs: List[Tensor] = []
    for layer in range(len(params) // 4):
        w = params[4 * layer:4 * layer + 4]
        x, h, c = premul_layer(x, hx[layer], cx[layer], w[0], w[1], w[2], w[3])
        hs.append(h)
        cs.append(c)
    return x, (torch.stack(hs), torch.stack(cs))


def dropout_stack(x: Tensor, hx: Tensor, cx: Tensor, params: List[Tensor], p: float,
                  training: bool) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
    """lstm_stack with dropout on every layer's output except the last (nn.LSTM's rule)."""
    hs: List[Tensor] = []
    cs: List[Tensor] = []
    num_layers = len(params) // 4
    for layer in range(num_layers):
        w = params[4 * layer:4 * layer + 4]
        x, h, c = lstm_layer(x, hx[layer], cx[layer], w[0], w[1], w[2], w[3])
        if layer < num_layers - 1:
            x = F.dropout(x, p, training)
        hs.append(h)
        cs.append(c)
    return x, (torch.stack(hs), torch.stack(cs))


def bidirectional_stack(x: Tensor, hx: Tensor, cx: Tensor,
                        params: List[Tensor]) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
    """Bidirectional stack: per layer a forward pass and a pass over reversed time.

    Outputs of both directions are concatenated on features and feed the next layer; state
    index 2·layer is the forward direction, 2·layer+1 the backward one (nn.LSTM's order).
    """
    hs: List[Tensor] = []
    cs: List[Tensor] = []
    for layer in range(len(params) // 8):
        w = params[8 * layer:8 * layer + 8]
        out_f, h_f, c_f = lstm_layer(x, hx[2 * layer], cx[2 * layer], w[0], w[1], w[2], w[3])
        out_b, h_b, c_b = lstm_layer(x.flip(0), hx[2 * layer + 1], cx[2 * layer + 1],
                                     w[4], w[5], w[6], w[7])
        x = torch.cat([out_f, out_b.flip(0)], 2)
        hs.extend([h_f, h_b])
        cs.extend([c_f, c_b])
    return x, (torch.stack(hs), torch.stack(cs))


def varlen_stack(seqs: List[Tensor], hx: Tensor, cx: Tensor,
                 params: List[Tensor]) -> Tuple[List[Tensor], Tuple[Tensor, Tensor]]:
    """Variable-length batch, one sequence at a time: seqs[i] is (T_i, I).

    Returns per-sequence outputs (T_i, H) and (h_n, c_n) of shape (L, B, H), each sequence's
    state taken after its own last step — what a packed nn.LSTM returns.
    """
    outputs: List[Tensor] = []
    hs: List[Tensor] = []
    cs: List[Tensor] = []
    for i in range(len(seqs)):
        out, (h, c) = lstm_stack(seqs[i].unsqueeze(1), hx[:, i:i + 1], cx[:, i:i + 1], params)
        outputs.append(out.squeeze(1))
        hs.append(h)
        cs.append(c)
    return outputs, (torch.cat(hs, 1), torch.cat(cs, 1))


def layer_norm_decomposed(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """Layer norm over the last dim from mean/var primitives, so a fuser sees elementwise ops."""
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) * (x - mu)).mean(-1, keepdim=True)
    return (x - mu) * torch.rsqrt(var + eps) * weight + bias


def layernorm_layer(x: Tensor, hx: Tensor, cx: Tensor, w: List[Tensor], eps: float,
                    decompose: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """Layer-norm LSTM layer: LN on x·W_ihᵀ, on h·W_hhᵀ and on the new cell; no gate biases.

    w = [w_ih, w_hh, ln_ih_weight, ln_ih_bias, ln_hh_weight, ln_hh_bias, ln_c_weight, ln_c_bias].
    """
    steps = x.unbind(0)
    outputs: List[Tensor] = []
    gsize = [w[2].size(0)]
    csize = [w[6].size(0)]
    for t in range(len(steps)):
        igates = torch.mm(steps[t], w[0].t())
        hgates = torch.mm(hx, w[1].t())
        if decompose:
            igates = layer_norm_decomposed(igates, w[2], w[3], eps)
            hgates = layer_norm_decomposed(hgates, w[4], w[5], eps)
        else:
            igates = F.layer_norm(igates, gsize, w[2], w[3], eps)
            hgates = F.layer_norm(hgates, gsize, w[4], w[5], eps)
        ingate, forgetgate, cellgate, outgate = (igates + hgates).chunk(4, 1)
        cy = torch.sigmoid(forgetgate) * cx + torch.sigmoid(ingate) * torch.tanh(cellgate)
        if decompose:
            cy = layer_norm_decomposed(cy, w[6], w[7], eps)
        else:
            cy = F.layer_norm(cy, csize, w[6], w[7], eps)
        hx = torch.sigmoid(outgate) * torch.tanh(cy)
        cx = cy
        outputs.append(hx)
    return torch.stack(outputs), hx, cx


def layernorm_stack(x: Tensor, hx: Tensor, cx: Tensor, params: List[Tensor], eps: float,
                    decompose: bool) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
    """All layers of the layer-norm LSTM, eight tensors per layer."""
    hs: List[Tensor] = []
    cs: List[Tensor] = []
    for layer in range(len(params) // 8):
        x, h, c = layernorm_layer(x, hx[layer], cx[layer], params[8 * layer:8 * layer + 8],
                                  eps, decompose)
        hs.append(h)
        cs.append(c)
    return x, (torch.stack(hs), torch.stack(cs))


class LayerNormLSTM(torch.nn.Module):
    """The layer-norm LSTM from library modules (nn.Linear without bias, nn.LayerNorm), eager.

    It is the `cudnn_layernorm` baseline: what a user gets from stock modules, whose kernels are
    the vendor ones, against which the scripted `layernorm_stack` is compared. (fastrnns' baseline
    ran nn.LSTM plus unused layer norms, which cost about the same but computed something else.)
    Parameters come out of `parameters()` in `layernorm_stack`'s order.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, eps: float = 1e-5):
        super().__init__()
        self.layers = torch.nn.ModuleList()
        for layer in range(num_layers):
            size_in = input_size if layer == 0 else hidden_size
            self.layers.append(torch.nn.ModuleDict({
                "ih": torch.nn.Linear(size_in, 4 * hidden_size, bias=False),
                "hh": torch.nn.Linear(hidden_size, 4 * hidden_size, bias=False),
                "ln_ih": torch.nn.LayerNorm(4 * hidden_size, eps=eps),
                "ln_hh": torch.nn.LayerNorm(4 * hidden_size, eps=eps),
                "ln_c": torch.nn.LayerNorm(hidden_size, eps=eps),
            }))

    def forward(self, x: Tensor, hx: Tensor, cx: Tensor) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        hs: List[Tensor] = []
        cs: List[Tensor] = []
        for index, mods in enumerate(self.layers):
            h, c = hx[index], cx[index]
            outputs: List[Tensor] = []
            for step in x.unbind(0):
                gates = mods["ln_ih"](mods["ih"](step)) + mods["ln_hh"](mods["hh"](h))
                ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)
                c = mods["ln_c"](torch.sigmoid(forgetgate) * c
                                 + torch.sigmoid(ingate) * torch.tanh(cellgate))
                h = torch.sigmoid(outgate) * torch.tanh(c)
                outputs.append(h)
            x = torch.stack(outputs)
            hs.append(h)
            cs.append(c)
        return x, (torch.stack(hs), torch.stack(cs))
