"""opbench's framework backends (the protocol: opbench.backends.base)."""

from __future__ import annotations

import importlib.util

from benchcore.errors import UsageError

FRAMEWORKS = ("mxnet", "torch")
#: MXNet is an extra (a GPU image with numpy 2 has none, and its last release needs numpy < 1.24)
MXNET_MISSING = ("--framework mxnet (opbench's default) needs MXNet, which is not installed: pip install -e '.[mxnet]' "
                 "(mxnet 1.9.1, which needs numpy<1.24), or run PyTorch's operators with --framework torch")


def backend_for(name: str):
    """The backend of `--framework name`."""
    if name == "mxnet":
        if importlib.util.find_spec("mxnet") is None:  # the backend imports MXNet lazily: ask before it runs
            raise UsageError(MXNET_MISSING)
        from .mxnet import BACKEND
    elif name == "torch":
        from .torch import BACKEND
    else:
        raise UsageError(f"--framework {name}: opbench sweeps {' or '.join(FRAMEWORKS)}; choose one of those")
    return BACKEND
