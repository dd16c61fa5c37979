"""An OpInfo SampleInput as JSON, and back as tensors at a benchmark scale.

Discovery encodes the sample it chose (`encode`), a worker rebuilds it (`decode`); discovery
also validates through `decode`, so what it checked is exactly what a worker times.

The tree: {"input": node, "args": [node, ...], "kwargs": {name: node}}. A node is a JSON
scalar or list, or a one-key dict whose key says what it holds ("tensor", "tuple", "dict",
"dtype", "size", "slice", "ellipsis", "device", "memory_format", "layout", "complex",
"float" for inf/nan). A tensor node holds an opbench.inputs descriptor; its `shape` is the
sample's, and `decode` scales it: every dimension larger than 1 times k (0 and 1 stay, so
broadcasting is kept), except those listed in its `keep` (a convolution kernel's). Its values
come from `init`:

- "tile": the sample's own values (stored once in the manifest's `data` table under a
  content hash), repeated k times along each scaled dimension. Tiling keeps what OpInfo
  made the values satisfy: domains (log's positive inputs), index ranges (an index valid
  for a dimension of 5 is valid for one of 5k), divisibility and broadcasting.
- "fresh": new uniform values in the sample's [low, high] (integers for an integer tensor),
  for operators whose work depends on repeated values (sort, unique, topk: a tiled input
  holds each value k^d times), and for sample tensors too large to store (MAX_STORED_ELEMENTS).
- any opbench.inputs initialiser (spd, full_rank, tril …), drawn at the scaled shape: for
  inputs whose structure tiling destroys (a tiled matrix is singular).

With `ints` scaling (a fallback for factory operators and size arguments), every integer
argument larger than 1 is multiplied by k too.
"""

from __future__ import annotations

import base64
import hashlib
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from opbench import inputs

#: the dtypes numpy cannot hold, stored as the bits of a same-sized integer
_BIT_VIEWS = {"bfloat16": "int16", "float8_e4m3fn": "int8", "float8_e5m2": "int8"}


#: a sample tensor with more elements is carried by its range ("fresh"), not its values: a few
#: OpInfo samples are large already (grid_sampler_3d's input holds 5.3M values, 27 MB in JSON)
MAX_STORED_ELEMENTS = 2**16


class Unencodable(Exception):
    """A sample holds something a JSON case cannot carry (a callable, a sparse tensor…)."""


@dataclass(frozen=True)
class Scale:
    """How far to grow a sample: k on every dimension > 1 (and on integer arguments > 1)."""

    k: int = 1
    ints: bool = False

    def dims(self, shape, keep=()) -> List[int]:
        """A shape at this scale; dimensions listed in `keep` (a kernel's) stay as they are."""
        return [d * self.k if d > 1 and i not in keep else d for i, d in enumerate(shape)]

    def integer(self, value: int) -> int:
        return value * self.k if self.ints and value > 1 else value


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def torch_dtype(name: str):
    import torch

    return getattr(torch, name)


# --------------------------------------------------------------------------- encoding


def encode_sample(sample, data: Dict[str, dict], fresh: bool = False) -> dict:
    """A SampleInput → its tree; tensor values go into `data` (content hash → blob)."""
    return {"input": encode(sample.input, data, fresh), "args": [encode(a, data, fresh) for a in sample.args],
            "kwargs": {str(k): encode(v, data, fresh) for k, v in sample.kwargs.items()}}


def encode(value: Any, data: Dict[str, dict], fresh: bool = False) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return {"tensor": _encode_tensor(value, data, fresh)}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": str(value)}
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    if isinstance(value, torch.Size):
        return {"size": [int(d) for d in value]}
    if isinstance(value, list):
        return [encode(v, data, fresh) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode(v, data, fresh) for v in value]}
    if isinstance(value, dict):
        return {"dict": {str(k): encode(v, data, fresh) for k, v in value.items()}}
    if isinstance(value, torch.dtype):
        return {"dtype": dtype_name(value)}
    if isinstance(value, slice):
        return {"slice": [encode(value.start, data), encode(value.stop, data), encode(value.step, data)]}
    if value is Ellipsis:
        return {"ellipsis": True}
    if isinstance(value, torch.device):
        return {"device": True}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).replace("torch.", "")}
    if isinstance(value, torch.layout):
        return {"layout": str(value).replace("torch.", "")}
    raise Unencodable(f"the sample holds a {type(value).__name__}, which a JSON case cannot carry")


def _encode_tensor(t, data: Dict[str, dict], fresh: bool) -> dict:
    import torch

    if t.layout != torch.strided or t.is_quantized or type(t) is not torch.Tensor:
        raise Unencodable(f"the sample holds a {t.layout} / {type(t).__name__} tensor; only dense tensors are carried")
    name = dtype_name(t.dtype)
    desc = inputs.tensor(list(t.shape), "tile", name, grad=bool(t.requires_grad))
    plain = t.detach().cpu().contiguous()
    if (fresh and t.numel() > 1 or t.numel() > MAX_STORED_ELEMENTS) and not t.dtype.is_complex:
        values = plain.double() if t.dtype != torch.bool else plain.int()
        low, high = float(values.min()), float(values.max())
        if math.isfinite(low) and math.isfinite(high):
            desc.update(init="fresh", low=low, high=high)
            return desc
    desc["data"] = store(plain, data)
    return desc


def store(t, data: Dict[str, dict]) -> str:
    """Put a tensor's values in the data table; its key (a content hash)."""
    import torch

    name = dtype_name(t.dtype)
    view = _BIT_VIEWS.get(name)
    raw = (t.view(getattr(torch, view)) if view else t).numpy().tobytes()
    key = hashlib.sha256(raw + f"{name}{list(t.shape)}".encode()).hexdigest()[:16]
    data[key] = {"dtype": name, "shape": list(t.shape), "b64": base64.b64encode(raw).decode()}
    return key


def load(blob: dict):
    """A data-table blob → a CPU tensor."""
    import torch

    name = blob["dtype"]
    view = _BIT_VIEWS.get(name, name)
    raw = bytearray(base64.b64decode(blob["b64"]))
    flat = torch.frombuffer(raw, dtype=torch_dtype(view)) if raw else torch.empty(0, dtype=torch_dtype(view))
    out = flat.reshape(blob["shape"]).clone()
    return out.view(torch_dtype(name)) if view != name else out


# --------------------------------------------------------------------------- decoding


@dataclass
class Decoder:
    """Rebuilds a tree on `device` at `scale`; `seed` seeds fresh and initialised values."""

    data: Dict[str, dict]
    scale: Scale
    device: str = "cpu"
    seed: int = 0
    #: give gradients to the tensors whose descriptor asks (absent "grad": yes); off for a
    #: forward-only case, whose inputs then record no graph
    grad: bool = True

    def __post_init__(self):
        import numpy as np

        self.rng = np.random.default_rng(self.seed)

    def sample(self, tree: dict) -> Tuple[Any, list, dict]:
        return (self.node(tree["input"]), [self.node(a) for a in tree["args"]],
                {k: self.node(v) for k, v in tree["kwargs"].items()})

    def node(self, node: Any) -> Any:
        if isinstance(node, bool) or node is None or isinstance(node, (str, float)):
            return node
        if isinstance(node, int):
            return self.scale.integer(node)
        if isinstance(node, list):
            return [self.node(v) for v in node]
        (tag, value), = node.items()
        return getattr(self, f"_{tag}")(value)

    def _tensor(self, desc: dict):
        import torch

        shape = self.scale.dims(desc["shape"], desc.get("keep", ()))
        dtype = torch_dtype(desc["dtype"])
        init = desc.get("init", "tile")
        if init == "tile":
            base = load(self.data[desc["data"]])
            t = base.repeat([k // d if d else 1 for k, d in zip(shape, desc["shape"])]) if base.dim() else base
        elif init == "fresh":
            t = self._fresh(shape, dtype, desc["low"], desc["high"])
        else:
            t = torch.from_numpy(inputs.generate(dict(desc, shape=shape), self.rng)).to(dtype)
        t = t.to(self.device)
        if self.grad and desc.get("grad", True) and (t.dtype.is_floating_point or t.dtype.is_complex):
            t.requires_grad_(True)
        return t

    def _fresh(self, shape, dtype, low: float, high: float):
        import numpy as np
        import torch

        if dtype == torch.bool:
            return torch.from_numpy(self.rng.random(shape) < 0.5)
        if not dtype.is_floating_point:
            return torch.from_numpy(self.rng.integers(int(low), int(high) + 1, size=shape)).to(dtype)
        values = self.rng.random(shape, dtype=np.float32) * np.float32(high - low) + np.float32(low)
        return torch.from_numpy(values).to(dtype)

    def _tuple(self, value):
        return tuple(self.node(v) for v in value)

    def _dict(self, value):
        return {k: self.node(v) for k, v in value.items()}

    def _size(self, value):
        import torch

        return torch.Size([self.scale.integer(int(d)) for d in value])

    def _dtype(self, value):
        return torch_dtype(value)

    def _slice(self, value):
        return slice(*(self.node(v) for v in value))

    def _ellipsis(self, value):
        return Ellipsis

    def _device(self, value):
        import torch

        return torch.device(self.device)

    def _memory_format(self, value):
        return torch_dtype(value)

    def _layout(self, value):
        return torch_dtype(value)

    def _complex(self, value):
        return complex(*value)

    def _float(self, value):
        return float(value)


# --------------------------------------------------------------------------- reading trees


def tensors_in(value) -> list:
    """Every tensor in a (nested) value: a sample's inputs or an operator's outputs."""
    import torch

    return inputs.leaves(value, torch.Tensor)


def descriptors(tree: Any) -> List[dict]:
    """Every tensor descriptor in a tree, in order."""
    if isinstance(tree, list):
        return [d for v in tree for d in descriptors(v)]
    if isinstance(tree, dict):
        if set(tree) == {"tensor"}:
            return [tree["tensor"]]
        return [d for v in tree.values() for d in descriptors(v)]
    return []


def describe_sample(tree: dict, scale: Scale) -> dict:
    """A sample tree for people (see describe)."""
    return {"input": describe(tree["input"], scale), "args": [describe(a, scale) for a in tree["args"]],
            "kwargs": {k: describe(v, scale) for k, v in tree["kwargs"].items()}}


def describe(tree: Any, scale: Scale) -> Any:
    """A node for people: a tensor as "(1024,1024) float32", other values as they read."""
    if isinstance(tree, list):
        return [describe(v, scale) for v in tree]
    if isinstance(tree, bool) or tree is None or isinstance(tree, (str, float)):
        return tree
    if isinstance(tree, int):
        return scale.integer(tree)
    if set(tree) == {"tensor"}:
        desc = tree["tensor"]
        init = desc.get("init", "tile")
        return f"{inputs.fmt_shape(scale.dims(desc['shape'], desc.get('keep', ())))} {desc['dtype']}" + ("" if init == "tile" else f" {init}")
    (tag, value), = tree.items()
    if tag in ("tuple", "size"):
        return [describe(v, scale) for v in value]
    if tag == "dict":
        return {k: describe(v, scale) for k, v in value.items()}
    return f"{tag}:{value}"
