"""PyTorch operator categories, from OpInfo's kinds and names.

OpInfo classifies some entries by class (UnaryUfuncInfo, BinaryUfuncInfo, ReductionOpInfo,
SpectralFuncInfo, ShapeFuncInfo); the 452 plain OpInfo entries (torch 2.13) are placed by their
namespace (linalg., fft., signal.windows., nn.functional.) and, for the rest, by the explicit
lists below. Each operator has one home; `category_of` is what discovery records in the manifest.
"""

from __future__ import annotations

from typing import Dict, Tuple

OTHER = "other"

CATEGORIES: Tuple[str, ...] = (
    "unary_ufunc", "binary_ufunc", "reduction", "spectral", "linalg", "blas", "activation", "convolution",
    "pooling", "normalization", "loss", "nn_functional", "shape", "indexing", "sorting_searching", "factory",
    "random", "cast", "masked", OTHER,
)

#: OpInfo class → category
BY_KIND: Dict[str, str] = {
    "UnaryUfuncInfo": "unary_ufunc", "BinaryUfuncInfo": "binary_ufunc", "ReductionOpInfo": "reduction",
    "SpectralFuncInfo": "spectral", "ShapeFuncInfo": "shape",
}

_NAMED: Dict[str, Tuple[str, ...]] = {
    "blas": ("addmm", "addmv", "addbmm", "baddbmm", "dot", "vdot", "bmm", "mv", "addr", "matmul", "mm", "outer",
             "inner", "kron", "tensordot", "einsum", "__rmatmul__", "chain_matmul", "nn.functional.linear",
             "nn.functional.bilinear", "bmm.triton_optimized"),
    "linalg": ("cholesky", "cholesky_inverse", "cholesky_solve", "geqrf", "lu", "lu_solve", "lu_unpack", "matrix_exp",
               "ormqr", "qr", "svd", "svd_lowrank", "pca_lowrank", "pinverse", "triangular_solve", "logdet", "cross",
               "trace", "tril", "triu", "diag", "diag_embed", "diagonal", "diagflat", "block_diag", "cdist", "dist",
               "renorm", "norm", "corrcoef", "cov", "matrix_power"),
    "activation": ("softmax", "log_softmax", "nn.functional.softmin", "nn.functional.hardswish",
                   "nn.functional.leaky_relu", "nn.functional.glu", "nn.functional.gelu", "_softmax_backward_data",
                   "torch.ops.aten._safe_softmax.default"),
    "convolution": ("nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
                    "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
                    "nn.functional.conv_transpose3d", "nn.functional.unfold"),
    "normalization": ("native_group_norm", "native_layer_norm", "native_batch_norm", "_native_batch_norm_legit",
                      "_batch_norm_with_update", "nn.functional.group_norm", "nn.functional.instance_norm",
                      "nn.functional.layer_norm", "nn.functional.rms_norm", "nn.functional.local_response_norm",
                      "nn.functional.batch_norm", "nn.functional.normalize"),
    "shape": ("broadcast_to", "broadcast_shapes", "broadcast_tensors", "chunk", "unsafe_chunk", "clone", "contiguous",
              "sum_to_size", "view_as_real", "view_as_complex", "expand", "expand_as", "expand_copy", "diagonal_copy",
              "alias_copy", "flip", "fliplr", "flipud", "as_strided", "as_strided_copy", "narrow", "narrow_copy",
              "view_copy", "permute", "permute_copy", "roll", "rot90", "split", "unsafe_split", "split_with_sizes",
              "split_with_sizes_copy", "tensor_split", "hsplit", "vsplit", "dsplit", "ravel", "reshape", "reshape_as",
              "view", "view_as", "atleast_1d", "atleast_2d", "atleast_3d", "flatten", "unflatten", "column_stack",
              "stack", "_chunk_cat", "hstack", "cat", "unbind", "unbind_copy", "vstack", "dstack", "unfold",
              "unfold_copy", "movedim", "squeeze", "squeeze_copy", "resize_", "resize_as_", "unsqueeze",
              "unsqueeze_copy", "transpose", "transpose_copy", "T", "H", "mT", "mH", "t", "t_copy", "meshgrid",
              "resolve_conj", "resolve_neg", "constant_pad_nd", "nn.functional.pad", "nn.functional.pixel_shuffle",
              "nn.functional.pixel_unshuffle", "nn.functional.channel_shuffle", "repeat_interleave",
              "combinations", "cartesian_prod", "fft.fftshift", "fft.ifftshift"),
    "indexing": ("diagonal_scatter", "masked_fill", "masked_scatter", "masked_select", "select", "select_scatter",
                 "slice", "slice_scatter", "gather", "index_fill", "index_copy", "index_select", "index_add",
                 "index_reduce", "_unsafe_masked_index", "_unsafe_masked_index_put_accumulate", "__getitem__",
                 "index_put", "put", "take", "scatter", "scatter_add", "scatter_reduce", "take_along_dim", "where",
                 "nonzero", "nonzero_static", "argwhere", "unravel_index", "nn.functional.one_hot",
                 "nn.functional.embedding", "nn.functional.embedding_bag", "_segment_reduce"),
    "sorting_searching": ("sort", "argsort", "msort", "topk", "kthvalue", "unique", "unique_consecutive", "bucketize",
                          "searchsorted", "isin", "histogram", "histogramdd", "histc", "bincount", "median",
                          "nanmedian", "mode", "quantile", "nanquantile"),
    "factory": ("arange", "linspace", "logspace", "empty_like", "zeros_like", "ones_like", "full_like", "new_zeros",
                "new_ones", "ones", "zeros", "full", "new_empty", "new_empty_strided", "empty_strided", "empty", "eye",
                "empty_permuted", "scalar_tensor", "new_full", "triu_indices", "tril_indices", "zero_", "linalg.vander"),
    "random": ("cauchy", "exponential", "geometric", "log_normal", "normal", "uniform", "randn", "randn_like",
               "rand_like", "randint", "randint_like", "multinomial", "bernoulli", "nn.functional.dropout",
               "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
               "nn.functional.feature_alpha_dropout", "nn.functional.rrelu"),
    "cast": ("to", "item", "to_sparse", "bfloat16", "bool", "byte", "char", "double", "float", "half", "int", "long",
             "short", "cdouble", "cfloat", "chalf"),
    "reduction": ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "logsumexp", "aminmax", "var_mean",
                  "std_mean", "max", "min", "diff", "gradient", "trapz", "trapezoid", "cumulative_trapezoid",
                  "allclose", "equal"),
}

_BY_NAME: Dict[str, str] = {name: category for category, names in _NAMED.items() for name in names}

_PREFIXES: Tuple[Tuple[str, str], ...] = (
    ("linalg.", "linalg"), ("fft.", "spectral"), ("signal.windows.", "factory"), ("masked.", "masked"),
    ("nn.functional.adaptive_", "pooling"), ("nn.functional.avg_pool", "pooling"),
    ("nn.functional.max_pool", "pooling"), ("nn.functional.fractional_max_pool", "pooling"),
    ("nn.functional.max_unpool", "pooling"), ("max_pool2d_with_indices_backward", "pooling"),
    ("nn.functional.", None),
)


def category_of(name: str, kind: str) -> str:
    """The category of an OpInfo entry from its name and class name (e.g. "UnaryUfuncInfo")."""
    if kind in BY_KIND and not name.startswith(("masked.", "nn.functional.")):
        return BY_KIND[kind]
    if name in _BY_NAME:
        return _BY_NAME[name]
    for prefix, category in _PREFIXES:
        if name.startswith(prefix):
            return category or _nn_category(name, kind)
    return BY_KIND.get(kind, OTHER)


def _nn_category(name: str, kind: str) -> str:
    if name.endswith("_loss") or name.endswith("cross_entropy") or name.endswith("entropy_with_logits"):
        return "loss"
    if kind == "UnaryUfuncInfo":
        return "activation"
    return "nn_functional"
