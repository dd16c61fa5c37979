"""opperf's 23 operator categories, with the same membership, plus a home for the rest.

opperf decides membership partly by predicates over the registry (narg, argument names,
name prefixes) and partly by explicit lists; both are reproduced here so the membership on
mxnet 1.9.1 matches ANCHORS.md exactly (`opperf_members`). opperf lets ten operators sit in
two categories; each operator here has ONE home (`category_of`), chosen as the more specific
category:

- round, rint, fix, floor, ceil, trunc: unary and rounding  -> "rounding"
- shape_array, size_array:              unary and shape     -> "shape"
- reshape_like:                         binary_misc, shape  -> "shape" (it is a reshape)
- split:                                shape, join_split   -> "join_split"

The 11 selected operators opperf puts nowhere live in "other".
"""

from __future__ import annotations

from functools import lru_cache
from typing import Dict, List, Optional, Tuple

from . import registry

OTHER = "other"

CATEGORIES: Tuple[str, ...] = (
    "unary",
    "binary_broadcast",
    "binary_elemwise",
    "binary_misc",
    "gemm",
    "random",
    "reduction",
    "sorting_searching",
    "indexing",
    "rearrange",
    "shape",
    "expanding",
    "rounding",
    "join_split",
    "nn_basic",
    "activation",
    "pooling",
    "convolution",
    "transpose_convolution",
    "optimizer",
    "loss",
    "misc",
    "linalg",
    OTHER,
)

OPPERF_CATEGORIES: Tuple[str, ...] = CATEGORIES[:-1]

# Explicit lists (the part of opperf's membership that is not a registry predicate).
_EXPLICIT: Dict[str, Tuple[str, ...]] = {
    "unary": ("amp_multicast",),
    "binary_elemwise": ("ElementWiseSum",),
    "binary_misc": ("choose_element_0index", "reshape_like"),
    "gemm": ("dot", "batch_dot", "khatri_rao"),
    "random": ("GridGenerator", "BilinearSampler"),
    "reduction": ("norm",),
    "sorting_searching": ("sort", "argsort", "argmax", "argmin", "topk"),
    "indexing": ("slice", "slice_axis", "slice_like", "take", "one_hot", "where",
                 "ravel_multi_index", "gather_nd", "pick"),
    "rearrange": ("transpose", "swapaxes", "flip", "depth_to_space", "space_to_depth",
                  "SwapAxis", "reverse"),
    "shape": ("split", "diag", "reshape", "reshape_like", "size_array", "shape_array"),
    "expanding": ("broadcast_axes", "broadcast_axis", "broadcast_to", "broadcast_like",
                  "repeat", "tile", "pad", "expand_dims"),
    "rounding": ("round", "rint", "fix", "floor", "ceil", "trunc"),
    "join_split": ("concat", "stack", "split"),
    "nn_basic": ("RNN", "FullyConnected", "Dropout", "BatchNorm", "L2Normalization",
                 "LayerNorm", "InstanceNorm", "Embedding", "Correlation", "SpatialTransformer",
                 "im2col", "col2im", "GroupNorm", "LRN"),
    "activation": ("Softmax", "SoftmaxActivation", "softmin", "Activation", "LeakyReLU",
                   "hard_sigmoid", "softmax", "log_softmax"),
    "pooling": ("Pooling", "ROIPooling"),
    "convolution": ("Convolution",),
    "transpose_convolution": ("Deconvolution",),
    "optimizer": ("sgd_update", "sgd_mom_update", "mp_sgd_update", "mp_sgd_mom_update",
                  "nag_mom_update", "mp_nag_mom_update", "adam_update", "ftml_update",
                  "ftrl_update", "rmsprop_update", "rmspropalex_update", "signum_update",
                  "signsgd_update", "lamb_update_phase1", "lamb_update_phase2",
                  "multi_sgd_update", "multi_sgd_mom_update", "multi_mp_sgd_update",
                  "multi_mp_sgd_mom_update", "preloaded_multi_sgd_update",
                  "preloaded_multi_sgd_mom_update", "preloaded_multi_mp_sgd_update",
                  "preloaded_multi_mp_sgd_mom_update"),
    "loss": ("smooth_l1", "CTCLoss", "ctc_loss", "MakeLoss", "softmax_cross_entropy"),
    "misc": ("squeeze", "all_finite", "clip", "multi_lars", "SequenceReverse", "SequenceLast",
             "SequenceMask", "cast_storage", "cumsum", "fill_element_0index", "reset_arrays",
             "multi_all_finite", "multi_sum_sq", "add_n", "UpSampling", "Custom"),
    "linalg": ("moments",),
}

# Where an operator opperf lists twice lives here (see the module docstring).
_HOME: Dict[str, str] = {
    "round": "rounding", "rint": "rounding", "fix": "rounding", "floor": "rounding",
    "ceil": "rounding", "trunc": "rounding",
    "shape_array": "shape", "size_array": "shape",
    "reshape_like": "shape",
    "split": "join_split",
}


def _predicate_members(category: str, info: registry.OperatorInfo) -> bool:
    """opperf's registry-driven rules (the part of membership that is not a fixed list)."""
    names, name = info.arg_names, info.name
    if category == "unary":
        return (info.narg == 1 and "data" in names) or name in ("cast", "amp_cast")
    if category == "binary_broadcast":
        return name.startswith("broadcast_") and info.narg == 2 and set(names) == {"lhs", "rhs"}
    if category == "binary_elemwise":
        return name.startswith("elemwise_") and info.narg == 2 and set(names) == {"lhs", "rhs"}
    if category == "random":
        return name.startswith(("random_", "sample_"))
    if category == "reduction":
        return info.narg == 4 and {"data", "axis", "exclude", "keepdims"} <= set(names)
    if category == "linalg":
        return name.startswith("linalg_")
    return False


@lru_cache(maxsize=1)
def _opperf_membership() -> Dict[str, Tuple[str, ...]]:
    selected = [info for info in registry.scan() if info.selected]
    selected_names = {info.name for info in selected}
    table = {}
    for category in OPPERF_CATEGORIES:
        members = {info.name for info in selected if _predicate_members(category, info)}
        members |= {n for n in _EXPLICIT.get(category, ()) if n in selected_names}
        table[category] = tuple(sorted(members))
    return table


def opperf_members(category: str) -> Tuple[str, ...]:
    """opperf's membership of one of its 23 categories (operators may repeat across categories)."""
    _check(category)
    if category == OTHER:
        return tuple(operators_in(OTHER))
    return _opperf_membership()[category]


@lru_cache(maxsize=1)
def _homes() -> Dict[str, str]:
    homes: Dict[str, str] = {}
    for category, members in _opperf_membership().items():
        for name in members:
            homes.setdefault(name, _HOME.get(name, category))
    for name in registry.selected_names():
        homes.setdefault(name, OTHER)
    return homes


def category_of(name: str) -> Optional[str]:
    """The one category a selected operator belongs to; None for filtered/unknown operators."""
    return _homes().get(name)


def operators_in(category: str) -> List[str]:
    """Selected operators whose home is `category`, sorted."""
    _check(category)
    return sorted(name for name, home in _homes().items() if home == category)


def _check(category: str) -> None:
    if category not in CATEGORIES:
        from benchcore.errors import UsageError

        raise UsageError(
            f"unknown category {category!r}; choose from: {', '.join(CATEGORIES)}"
        )
