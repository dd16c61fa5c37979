"""How a worker calls an OpInfo operator without importing torch.testing._internal.

An OpInfo entry holds the callable its tests run (`op`). Most are public torch functions,
found again here by a dotted path from `torch` (`nn.functional.conv2d` →
torch.nn.functional.conv2d); discovery records that path only when it resolves to the very
same object. 86 entries (torch 2.13) call a lambda defined inside the test module, which a
timing worker must not import (it changes global torch state: see lab/notes/torch-backend.md).
LAMBDAS is the reviewed public equivalent of each, keyed by (name, variant); discovery runs
both on the same sample and keeps an entry only when the outputs agree (values for
deterministic operators, shapes and dtypes for random ones), so a wrong row is left out with
its reason instead of timing something else.

OpInfo wraps its random operators in `wrapper_set_seed` (a fixed seed per call, for its
tests); the equivalents here call the operator directly: reseeding is not the operator's work.
"""

from __future__ import annotations

import functools
from typing import Callable, Dict, Optional, Tuple

Key = Tuple[str, str]


def _method(name: str, **fixed) -> Callable:
    """`x.<name>(*args, **kwargs)`."""
    def call(x, *args, **kwargs):
        return getattr(x, name)(*args, **kwargs, **fixed)
    call.__qualname__ = f"Tensor.{name}"
    return call


def _torch():
    import torch

    return torch


def _function(path: str, **fixed) -> Callable:
    """`torch.<path>(*args, **kwargs)`, looked up at call time (this module imports no torch)."""
    def call(*args, **kwargs):
        return resolve(path)(*args, **kwargs, **fixed)
    call.__qualname__ = path
    return call


def _property(name: str) -> Callable:
    def call(x):
        return getattr(x, name)
    call.__qualname__ = f"Tensor.{name}"
    return call


def _polygamma(path: str) -> Callable:
    def call(x, n, **kwargs):
        return resolve(path)(n, x, **kwargs)
    return call


def _swap_first_two(path: str) -> Callable:
    """OpInfo's `lambda weight, idx, **kw: f(idx, weight, **kw)` (embedding's argument order)."""
    def call(first, second, **kwargs):
        return resolve(path)(second, first, **kwargs)
    return call


def _einsum(tensors, equation):
    return _torch().einsum(equation, tensors)


def _where(self, condition, other, **kwargs):
    return _torch().where(condition, self, other, **kwargs)


def _resize(x, shape):
    return x.clone().resize_(shape)


def _resize_as(x, other):
    return _torch().resize_as_(x.clone(), other)


def _zero(x):
    return _torch().zero_(x.clone())


def _lowrank(path: str) -> Callable:
    def call(a, b, **kwargs):
        return resolve(path)(a @ b.mT, **kwargs)
    return call


def _lstsq(a, b, driver):
    return _torch().linalg.lstsq(a, b, driver=driver)[:2]


def _pinv_singular(a, b):
    return _torch().linalg.pinv(a @ b.mT)


def _normal_number_mean(std, mean, *args, **kwargs):
    return _torch().normal(mean, std, *args, **kwargs)


def _max_pool2d_backward(*args, kernel_size=(), stride=(), padding=(0,), dilation=(1,), ceil_mode=False, **kwargs):
    torch = _torch()
    out, indices = torch.nn.functional.max_pool2d_with_indices(
        *args, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode,
        return_indices=True)
    grad_out = torch.ones_like(out)
    return torch.ops.aten.max_pool2d_with_indices_backward.default(
        grad_out, args[0], kernel_size, stride, padding, dilation, ceil_mode, indices)


_CASTS = ("bfloat16", "bool", "byte", "char", "double", "float", "half", "int", "long", "short", "chalf")
_IN_PLACE_RANDOM = ("cauchy_", "exponential_", "geometric_", "log_normal_", "uniform_")

#: (name, variant) → the public call OpInfo's lambda makes (see the module docstring).
LAMBDAS: Dict[Key, Callable] = {
    ("item", ""): _method("item"),
    **{(name[:-1], ""): _method(name) for name in _IN_PLACE_RANDOM},
    ("normal", "in_place"): _method("normal_"),
    ("contiguous", ""): _method("contiguous"),
    ("sum_to_size", ""): _method("sum_to_size"),
    ("expand", ""): _method("expand"),
    ("expand_as", ""): _method("expand_as"),
    ("nn.functional.fractional_max_pool2d", ""): _function("nn.functional.fractional_max_pool2d"),
    ("nn.functional.fractional_max_pool3d", ""): _function("nn.functional.fractional_max_pool3d"),
    ("max_pool2d_with_indices_backward", ""): _max_pool2d_backward,
    ("nn.functional.rrelu", ""): _function("nn.functional.rrelu"),
    ("nn.functional.scaled_dot_product_attention", ""): _function("nn.functional.scaled_dot_product_attention"),
    ("to", ""): _method("to"),
    ("einsum", ""): _einsum,
    ("svd_lowrank", ""): _lowrank("svd_lowrank"),
    ("pca_lowrank", ""): _lowrank("pca_lowrank"),
    **{("polygamma", f"polygamma_n_{n}"): _polygamma("polygamma") for n in range(5)},
    ("special.polygamma", "special_polygamma_n_0"): _polygamma("special.polygamma"),
    ("reshape_as", ""): _method("reshape_as"),
    ("view", ""): _method("view"),
    ("view_as", ""): _method("view_as"),
    **{(name, ""): _method(name) for name in _CASTS},
    ("randn", ""): _function("randn"),
    ("randn_like", ""): _function("randn_like"),
    ("rand_like", ""): _function("rand_like"),
    ("randint", ""): _function("randint"),
    ("randint_like", ""): _function("randint_like"),
    ("new_zeros", ""): _method("new_zeros"),
    ("new_ones", ""): _method("new_ones"),
    ("new_empty", ""): _method("new_empty"),
    ("new_empty_strided", ""): _method("new_empty_strided"),
    ("empty_strided", ""): _function("empty_strided"),
    ("new_full", ""): _method("new_full"),
    ("multinomial", ""): _function("multinomial"),
    ("normal", ""): _function("normal"),
    ("normal", "number_mean"): _normal_number_mean,
    ("bernoulli", ""): _function("bernoulli"),
    ("unfold", ""): _method("unfold"),
    ("repeat", ""): _method("repeat"),
    ("resize_", ""): _resize,
    ("resize_as_", ""): _resize_as,
    ("zero_", ""): _zero,
    **{(name, ""): _property(name) for name in ("T", "H", "mT", "mH")},
    ("to_sparse", ""): _method("to_sparse"),
    ("where", ""): _where,
    ("nn.functional.dropout", ""): _function("nn.functional.dropout"),
    ("nn.functional.dropout2d", ""): _function("nn.functional.dropout2d"),
    ("nn.functional.dropout3d", ""): _function("nn.functional.dropout3d"),
    ("nn.functional.alpha_dropout", ""): _function("nn.functional.alpha_dropout"),
    ("nn.functional.feature_alpha_dropout", "with_train"): _function("nn.functional.feature_alpha_dropout"),
    ("nn.functional.feature_alpha_dropout", "without_train"): _function("nn.functional.feature_alpha_dropout"),
    ("nn.functional.embedding", ""): _swap_first_two("nn.functional.embedding"),
    ("nn.functional.embedding_bag", ""): _swap_first_two("nn.functional.embedding_bag"),
    ("nn.functional.multi_head_attention_forward", ""): _function("nn.functional.multi_head_attention_forward"),
    ("linalg.lstsq", "grad_oriented"): _lstsq,
    ("linalg.pinv", "singular"): _pinv_singular,
}

#: What a manifest's `call` field says for a LAMBDAS row (the path form is for everything else).
LAMBDA = "lambda"


@functools.lru_cache(maxsize=None)
def resolve(path: str):
    """`torch.<path>` (e.g. "nn.functional.conv2d", "ops.aten._safe_softmax.default",
    "Tensor.__radd__"); None when a part of it does not exist."""
    target = _torch()
    for part in path.split("."):
        target = getattr(target, part, None)
        if target is None:
            return None
    return target


def callable_for(call: dict, name: str, variant: str) -> Optional[Callable]:
    """The function a manifest entry's `call` field names: {"path": ...} or {"lambda": true}."""
    if call.get(LAMBDA):
        return LAMBDAS.get((name, variant))
    return resolve(call["path"]) if call.get("path") else None
