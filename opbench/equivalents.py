"""MXNet operators and their PyTorch equivalents, with how each MXNet case's arguments map.

A reviewed table (not a guess from names): each Pair says which torch function does the same
work as an MXNet operator, and `convert` turns one of the MXNet sweep's cases (its inputs, as
opbench.backends.mxnet.cases builds them at opperf's shapes) into the torch call on the same tensors — the
same shapes, the same kind of values (opbench.inputs descriptors), the same parameters under
torch's names (axis → dim, lhs/rhs → input/other, pad → padding, …) — or None where torch
has no equal call for that case (a sum pooling, a transposed `dot`). `opbench crossframe`
times both sides; the hints for a name of the other framework come from here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

#: (torch path from `torch`, sample tree in opbench.backends.torch.sample's format)
Call = Tuple[str, dict]


def _tensor(desc: dict, dtype: Optional[str] = None) -> dict:
    """An MXNet tensor description as a torch tensor node (indices become int64)."""
    out = {k: v for k, v in desc.items()}
    if dtype:
        out["dtype"] = dtype
    elif out.get("init") == "indices":
        out["dtype"] = "int64"
    return {"tensor": out}


def _tree(*args, **kwargs) -> dict:
    return {"input": args[0], "args": list(args[1:]), "kwargs": kwargs}


def _dim(inputs: dict, key: str = "axis") -> dict:
    axis = inputs.get(key)
    return {} if axis is None else {"dim": axis}


def unary(path: str) -> Callable[[dict], Optional[Call]]:
    def convert(inputs):
        return path, _tree(_tensor(inputs["data"]))
    return convert


def binary(path: str) -> Callable[[dict], Optional[Call]]:
    def convert(inputs):
        return path, _tree(_tensor(inputs["lhs"]), _tensor(inputs["rhs"]))
    return convert


def reduction(path: str) -> Callable[[dict], Optional[Call]]:
    def convert(inputs):
        return path, _tree(_tensor(inputs["data"]), **_dim(inputs))
    return convert


def along(path: str, data: str = "data") -> Callable[[dict], Optional[Call]]:
    """An operator of one tensor and an axis (softmax, sort, cumsum …)."""
    def convert(inputs):
        return path, _tree(_tensor(inputs[data]), **_dim(inputs))
    return convert


def _matmul(path: str):
    def convert(inputs):
        if inputs.get("transpose_a") or inputs.get("transpose_b"):
            return None
        return path, _tree(_tensor(inputs["lhs"]), _tensor(inputs["rhs"]))
    return convert


def _topk(inputs):
    if inputs.get("ret_typ", "indices") != "value":
        return None
    return "topk", _tree(_tensor(inputs["data"]), inputs["k"], **_dim(inputs))


_ACTIVATIONS = {"relu": "nn.functional.relu", "sigmoid": "sigmoid", "tanh": "tanh", "softrelu": "nn.functional.softplus",
                "softsign": "nn.functional.softsign", "elu": "nn.functional.elu", "selu": "nn.functional.selu",
                "gelu": "nn.functional.gelu"}


def _activation(inputs):
    path = _ACTIVATIONS.get(inputs.get("act_type"))
    return (path, _tree(_tensor(inputs["data"]))) if path else None


def _leaky_relu(inputs):
    act = inputs.get("act_type", "leaky")
    if act == "leaky":
        return "nn.functional.leaky_relu", _tree(_tensor(inputs["data"]), inputs.get("slope", 0.25))
    return _activation(inputs)


def _convolution(inputs):
    kernel = inputs["kernel"]
    if inputs.get("no_bias") or len(kernel) not in (1, 2):
        return None
    return (f"nn.functional.conv{len(kernel)}d",
            _tree(_tensor(inputs["data"]), _tensor(inputs["weight"]), _tensor(inputs["bias"]),
                  stride=inputs.get("stride") or [1] * len(kernel), padding=inputs.get("pad") or [0] * len(kernel)))


def _pooling(inputs):
    kernel, kind = inputs["kernel"], inputs.get("pool_type", "max")
    if kind not in ("max", "avg") or len(kernel) not in (1, 2):
        return None
    data = _tensor(inputs["data"])
    if inputs.get("global_pool"):
        return f"nn.functional.adaptive_{kind}_pool{len(kernel)}d", _tree(data, [1] * len(kernel))
    return (f"nn.functional.{kind}_pool{len(kernel)}d",
            _tree(data, kernel, stride=inputs.get("stride") or kernel, padding=inputs.get("pad") or [0] * len(kernel)))


def _rnn(inputs):
    """MXNet's fused RNN (one flat parameter vector) as torch.lstm/gru/rnn_* (a weight list)."""
    mode, hidden, layers = inputs["mode"], inputs["state_size"], inputs["num_layers"]
    if layers != 1 or inputs.get("bidirectional"):
        return None
    gates = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}[mode]
    data = inputs["data"]
    size = data["shape"][-1]
    weight = dict(inputs["parameters"])
    params = [_tensor(dict(weight, shape=shape)) for shape in
              ([gates * hidden, size], [gates * hidden, hidden], [gates * hidden], [gates * hidden])]
    states = [_tensor(inputs["state"])] + ([_tensor(inputs["state_cell"])] if mode == "lstm" else [])
    hx = states if mode == "lstm" else states[0]
    return mode, _tree(_tensor(data), hx, params, True, 1, float(inputs.get("p", 0.0)), True, False, False)


def _batch_norm(inputs):
    data = _tensor(inputs["data"])
    return "nn.functional.batch_norm", _tree(data, _tensor(inputs["moving_mean"]), _tensor(inputs["moving_var"]),
                                             _tensor(inputs["gamma"]), _tensor(inputs["beta"]), training=True)


def _layer_norm(inputs):
    if inputs.get("axis", -1) != -1:
        return None
    shape = inputs["data"]["shape"]
    return "nn.functional.layer_norm", _tree(_tensor(inputs["data"]), [shape[-1]], _tensor(inputs["gamma"]),
                                             _tensor(inputs["beta"]))


def _take(inputs):
    if len(inputs["indices"]["shape"]) != 1:
        return None
    return "index_select", _tree(_tensor(inputs["a"]), inputs.get("axis", 0), _tensor(inputs["indices"]))


def _list(inputs, key="data"):
    return [_tensor(desc) for desc in inputs[key]]


@dataclass(frozen=True)
class Pair:
    mxnet: str
    #: the torch function (a path from `torch`) of most cases, for hints and the table
    torch: str
    convert: Callable[[dict], Optional[Call]]


def _same(mxnet: str, torch: Optional[str] = None, kind: Callable = unary) -> Pair:
    path = torch or mxnet
    return Pair(mxnet, path, kind(path))


PAIRS: Tuple[Pair, ...] = (
    *(_same(name) for name in ("abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "square", "floor", "erf",
                               "log1p", "expm1", "reciprocal", "rsqrt")),
    _same("relu", "nn.functional.relu"),
    _same("negative", "neg"),
    *(_same(f"broadcast_{a}", b, binary) for a, b in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("div", "div"),
                                                      ("power", "pow"), ("maximum", "maximum"),
                                                      ("minimum", "minimum"), ("equal", "eq"))),
    _same("elemwise_add", "add", binary),
    Pair("dot", "matmul", _matmul("matmul")),
    Pair("batch_dot", "bmm", _matmul("bmm")),
    Pair("linalg_gemm2", "matmul", lambda i: ("matmul", _tree(_tensor(i["A"]), _tensor(i["B"])))),
    *(_same(a, b, reduction) for a, b in (("sum", "sum"), ("mean", "mean"), ("max", "amax"), ("min", "amin"),
                                          ("prod", "prod"))),
    *(_same(name, name, along) for name in ("softmax", "log_softmax", "sort", "argsort", "argmax")),
    Pair("cumsum", "cumsum", along("cumsum", "a")),
    Pair("topk", "topk", _topk),
    Pair("clip", "clamp", lambda i: ("clamp", _tree(_tensor(i["data"]), i["a_min"], i["a_max"]))),
    Pair("Activation", "nn.functional.relu", _activation),
    Pair("LeakyReLU", "nn.functional.leaky_relu", _leaky_relu),
    Pair("Convolution", "nn.functional.conv2d", _convolution),
    Pair("Pooling", "nn.functional.max_pool2d", _pooling),
    Pair("Dropout", "nn.functional.dropout", lambda i: ("nn.functional.dropout", _tree(_tensor(i["data"]), i["p"], True))
         if i.get("mode") == "always" else None),
    Pair("BatchNorm", "nn.functional.batch_norm", _batch_norm),
    Pair("LayerNorm", "nn.functional.layer_norm", _layer_norm),
    Pair("Embedding", "nn.functional.embedding",
         lambda i: ("nn.functional.embedding", _tree(_tensor(i["data"]), _tensor(i["weight"])))),
    Pair("RNN", "lstm", _rnn),
    Pair("transpose", "permute", lambda i: ("permute", _tree(_tensor(i["data"]), i["axes"]))),
    Pair("reshape", "reshape", lambda i: ("reshape", _tree(_tensor(i["data"]), i["shape"]))),
    Pair("concat", "cat", lambda i: ("cat", _tree(_list(i), dim=i.get("dim", 1)))),
    Pair("stack", "stack", lambda i: ("stack", _tree(_list(i), dim=i.get("axis", 0)))),
    Pair("tile", "tile", lambda i: ("tile", _tree(_tensor(i["data"]), i["reps"]))),
    Pair("flip", "flip", lambda i: ("flip", _tree(_tensor(i["data"]), i["axis"] if isinstance(i["axis"], list)
                                                  else [i["axis"]]))),
    Pair("expand_dims", "unsqueeze", lambda i: ("unsqueeze", _tree(_tensor(i["data"]), i["axis"]))),
    Pair("take", "index_select", _take),
    Pair("one_hot", "nn.functional.one_hot",
         lambda i: ("nn.functional.one_hot", _tree(_tensor(i["indices"]), num_classes=i["depth"]))),
    Pair("where", "where", lambda i: ("where", _tree(_tensor(i["condition"], "bool"), _tensor(i["x"]),
                                                     _tensor(i["y"])))),
    Pair("linalg_potrf", "linalg.cholesky", lambda i: ("linalg.cholesky", _tree(_tensor(i["A"])))),
    Pair("linalg_inverse", "linalg.inv", lambda i: ("linalg.inv", _tree(_tensor(i["A"])))),
    Pair("linalg_det", "linalg.det", lambda i: ("linalg.det", _tree(_tensor(i["A"])))),
)

BY_MXNET: Dict[str, Pair] = {pair.mxnet: pair for pair in PAIRS}


def torch_for(mxnet_name: str) -> Optional[str]:
    """The PyTorch equivalent of an MXNet operator (None when the table has none)."""
    pair = BY_MXNET.get(mxnet_name)
    return pair.torch if pair else None


def mxnet_for(torch_name: str) -> Optional[str]:
    """The MXNet equivalent of a PyTorch operator (OpInfo name or path); the first pair's."""
    name = torch_name[len("torch."):] if torch_name.startswith("torch.") else torch_name
    return next((pair.mxnet for pair in PAIRS if pair.torch == name), None)


def pairs(names: Optional[List[str]] = None) -> List[Pair]:
    """The pairs for these MXNet (or torch) names, all by default; an unknown name is refused."""
    from benchcore.errors import UsageError

    if not names:
        return list(PAIRS)
    chosen = []
    for name in names:
        found = [p for p in PAIRS if name in (p.mxnet, p.torch)]
        if not found:
            raise UsageError(f"no crossframe pair for {name!r}; opbench crossframe --list shows the {len(PAIRS)} pairs")
        chosen += [p for p in found if p not in chosen]
    return chosen
