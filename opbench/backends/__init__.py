"""opbench's framework backends (the protocol: opbench.backends.base)."""

from __future__ import annotations

from benchcore.errors import UsageError

FRAMEWORKS = ("mxnet", "torch")


def backend_for(name: str):
    """The backend of `--framework name`."""
    if name == "mxnet":
        from .mxnet import BACKEND
    elif name == "torch":
        from .torch import BACKEND
    else:
        raise UsageError(f"--framework {name}: opbench sweeps {' or '.join(FRAMEWORKS)}; choose one of those")
    return BACKEND
