"""Input descriptors both backends share: a tensor as JSON, and the numbers that fill it.

A case crosses into a worker as JSON, so a tensor input is described, not stored:

    {"shape": [512, 512], "dtype": "float32", "init": "spd", "grad": false, ...bounds}

and the worker draws its values from a seeded generator. The initialisers say *what kind* of
values an operator needs (a valid index, an in-domain value, a well-conditioned matrix),
which is where benchmark inputs go wrong most (opperf's random normals as indices; a tiled
matrix that is singular). Everything here is numpy: each backend turns the array into its
framework's tensor on its device. MXNet's rules (opbench/backends/mxnet/rules.py) write the same dicts.

Initialisers ("init"):
  normal (loc, scale) | uniform (low, high) | indices (integers in [low, high)) |
  spd (symmetric positive definite, eigenvalues in about [1, 5]) |
  full_rank (I + 0.3 noise/sqrt(n): singular values in about [0.4, 1.6]) |
  near_identity (I + small noise: determinant near 1) |
  tril / triu (triangular, diagonal in [1, 2], small off-diagonal: a well-conditioned factor)
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence

MATRIX_INITS = ("spd", "full_rank", "near_identity", "tril", "triu")
INITS = ("normal", "uniform", "indices") + MATRIX_INITS


def tensor(shape: Sequence[int], init: str = "normal", dtype: Optional[str] = None, grad: bool = True,
           **extra: Any) -> Dict[str, Any]:
    """A tensor description; dtype None means the case's dtype."""
    desc: Dict[str, Any] = {"shape": [int(d) for d in shape], "init": init}
    if dtype is not None:
        desc["dtype"] = dtype
    if not grad:
        desc["grad"] = False
    desc.update(extra)
    return desc


def is_tensor(value: Any) -> bool:
    return isinstance(value, dict) and "shape" in value


def leaves(value: Any, leaf_type: type) -> list:
    """Every `leaf_type` object in a nested value of lists, tuples and dicts, in order: a case's
    arguments or an operator's outputs, whichever framework's tensors they hold."""
    if isinstance(value, leaf_type):
        return [value]
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in leaves(item, leaf_type)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in leaves(item, leaf_type)]
    return []


def fmt_shape(shape: Sequence[int]) -> str:
    """Compact shape label: (1024,1024), (3,), () for a scalar."""
    dims = [str(d) for d in shape]
    return "(" + ",".join(dims) + ("," if len(dims) == 1 else "") + ")"


def numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


def generate(desc: Dict[str, Any], rng) -> Any:
    """A float32/int64 numpy array for a description (the backend casts it to desc's dtype)."""
    import numpy as np

    shape = tuple(int(d) for d in desc["shape"])
    init = desc.get("init", "normal")
    if init == "normal":
        out = rng.standard_normal(shape, dtype=np.float32)
        return out * np.float32(desc.get("scale", 1.0)) + np.float32(desc.get("loc", 0.0))
    if init == "uniform":
        low, high = desc.get("low", 0.0), desc.get("high", 1.0)
        return rng.random(shape, dtype=np.float32) * np.float32(high - low) + np.float32(low)
    if init == "indices":
        return rng.integers(int(desc.get("low", 0)), int(desc["high"]), size=shape)
    if init in MATRIX_INITS:
        return matrices(init, shape, rng).astype(np.float32)
    raise ValueError(f"unknown tensor init {init!r}; choose from {', '.join(INITS)}")


def matrices(init: str, shape: Sequence[int], rng) -> Any:
    """Batches (..., n, n) of well-conditioned square matrices of one structure."""
    import numpy as np

    n = shape[-1]
    if len(shape) < 2 or shape[-2] != n:
        raise ValueError(f"init {init!r} needs square matrices (..., n, n), got shape {tuple(shape)}")
    base = rng.standard_normal(tuple(shape)) / math.sqrt(max(n, 1))
    eye = np.eye(n)
    if init == "spd":
        return base @ np.swapaxes(base, -1, -2) + eye
    if init == "full_rank":
        return eye + 0.3 * base
    if init == "near_identity":
        return eye + 0.1 * base
    diagonal = eye * rng.uniform(1.0, 2.0, tuple(shape[:-1]))[..., None]
    lower = np.tril(0.1 * base, -1)
    return diagonal + (lower if init == "tril" else np.swapaxes(lower, -1, -2))
