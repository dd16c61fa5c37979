"""opbench's framework backends (the protocol: opbench.backends.base)."""

from __future__ import annotations

import importlib.util

from benchcore.errors import UsageError

FRAMEWORKS = ("mxnet", "torch")
#: MXNet is an extra (a GPU image with numpy 2 has none, and its last release needs numpy < 1.24)
MXNET_MISSING = ("--framework mxnet (opbench's default) needs MXNet, which is not installed: pip install -e '.[mxnet]' "
                 "(mxnet 1.9.1, which needs numpy<1.24), or run PyTorch's operators with --framework torch")


def require_framework(name: str) -> None:
    """Refuse a sweep of a framework that is not installed in one line (the backends import
    their framework lazily, so reading reports of either needs neither)."""
    if name == "mxnet" and importlib.util.find_spec("mxnet") is None:
        raise UsageError(MXNET_MISSING)


def backend_for(name: str):
    """The backend of `--framework name`."""
    if name == "mxnet":
        from .mxnet import BACKEND
    elif name == "torch":
        from .torch import BACKEND
    else:
        raise UsageError(f"--framework {name}: opbench sweeps {' or '.join(FRAMEWORKS)}; choose one of those")
    return BACKEND
