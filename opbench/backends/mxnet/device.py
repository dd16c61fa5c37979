"""MXNet's device flag: contexts ("cpu", "gpu(1)", mx.Context) parsed, checked against this
MXNet and turned into mx.Context; and the large-tensor flag, which depends on how MXNet was built.

Specs carry the context as text ("cpu(0)"), so a case can cross into a worker process; only
mx_context() touches MXNet, in the process that runs the case.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from benchcore.errors import UsageError

from . import releases


def parse_ctx(ctx: Any) -> Tuple[str, int]:
    """("cpu"|"gpu", device id) from "cpu", "cpu(N)", "gpu", "gpu(N)" or an mx.Context."""
    if hasattr(ctx, "device_type") and hasattr(ctx, "device_id"):
        return str(ctx.device_type), int(ctx.device_id)
    text = str(ctx).strip().lower()
    for kind in ("cpu", "gpu"):
        if text == kind:
            return kind, 0
        if text.startswith(kind + "(") and text.endswith(")"):
            inner = text[len(kind) + 1:-1].strip()
            if inner.isdigit():
                return kind, int(inner)
    raise UsageError(f"bad ctx {ctx!r}: use cpu, cpu(N), gpu or gpu(N)")


def normalize_ctx(ctx: Any) -> str:
    kind, index = parse_ctx(ctx)
    return f"{kind}({index})"


def mx_context(ctx: Any):
    import mxnet as mx

    kind, index = parse_ctx(ctx)
    return mx.cpu(index) if kind == "cpu" else mx.gpu(index)



def int64_tensor_supported() -> bool:
    return releases.has_feature("INT64_TENSOR_SIZE")


def require_int64() -> None:
    """Refuse --int64-tensor on (opperf's int64_tensor='on') without a large-tensor build."""
    if not int64_tensor_supported():
        import mxnet as mx

        raise UsageError(
            "--int64-tensor on needs an MXNet built with INT64_TENSOR_SIZE; the installed "
            f"mxnet {mx.__version__} lacks it; install a large-tensor build "
            "(e.g. built with USE_INT64_TENSOR_SIZE=1) or run with --int64-tensor off"
        )


def check_ctx(ctx) -> str:
    """Validate a context against this MXNet: "gpu" needs a CUDA build, that many GPUs, and a
    GPU this MXNet has kernels for (its compute capability first, then probe_kernel)."""
    kind, index = parse_ctx("cpu" if ctx is None else ctx)
    text = f"{kind}({index})"
    if kind == "gpu":
        import mxnet as mx

        if not releases.has_feature("CUDA"):
            raise UsageError(
                f"--ctx {text}: the installed mxnet {mx.__version__} has no CUDA support; install a CUDA build "
                f"(pip install mxnet-cu112=={mx.__version__}, matching your CUDA version: mxnet-cuXXX) or use --ctx cpu")
        count = mx.context.num_gpus()
        if count == 0:
            raise UsageError(f"--ctx {text}: MXNet sees no GPU (check the driver and CUDA_VISIBLE_DEVICES) or use --ctx cpu")
        if index >= count:
            raise UsageError(f"--ctx {text}: MXNet sees {count} GPU(s); choose gpu(0)..gpu({count - 1})")
        check_architecture(mx, index)
        probe_kernel(mx, index)
    return text


#: the newest architecture the CUDA wheels of MXNet 1.9.1 carry machine code for (they carry no PTX);
#: machine code runs on GPUs of its major architecture, so sm_86 code runs on Ada's sm_89 too
WHEEL_NEWEST_SM = 86
#: the newest GPU that can run it
NEWEST_RUNNABLE_SM = 89


def check_architecture(mx, index: int) -> None:
    """Refuse a GPU of a newer major architecture than the wheels' from its compute capability
    alone (read from the driver, as mx.util does, with no MXNet context): on Hopper (sm_90) a
    worker can abort, past any Python except, while MXNet makes its cuBLAS or cuDNN handles, before
    a kernel could say "no kernel image". An MXNet built from source for sm_90 is refused too:
    nothing in a build says which architectures it carries."""
    capability = _compute_capability(mx, index)
    if capability is not None and capability // 10 > NEWEST_RUNNABLE_SM // 10:
        raise UsageError(_no_kernels(mx, index, f"sm_{capability}"))


def probe_kernel(mx, index: int) -> None:
    """Run a one-element kernel on gpu(index), so a GPU this MXNet has no code for is refused in
    one line before any case runs where its capability could not be read: the CUDA wheels of
    1.9.1 carry machine code for sm_50 to sm_86 and no PTX the driver could compile, so on a
    Hopper GPU (sm_90) every kernel fails with "no kernel image is available for execution on the device"."""
    text = f"gpu({index})"
    try:
        (mx.nd.ones((1,), ctx=mx.gpu(index)) + 1).asnumpy()
    except mx.base.MXNetError as exc:
        last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:200]  # MXNet's message ends its text
        if "no kernel image" not in str(exc):
            raise UsageError(f"--ctx {text}: a one-element kernel failed there ({last}); "
                             "check the GPU with nvidia-smi or use --ctx cpu") from None
        capability = _compute_capability(mx, index)
        raise UsageError(_no_kernels(mx, index, "architecture unknown" if capability is None
                                     else f"sm_{capability}")) from None


def _no_kernels(mx, index: int, architecture: str) -> str:
    return (f"--ctx gpu({index}): mxnet {mx.__version__} has no kernels for this GPU ({architecture}): its CUDA "
            f"wheels carry code up to sm_{WHEEL_NEWEST_SM} and no PTX; use a GPU of sm_{NEWEST_RUNNABLE_SM} or "
            f"older (Ada runs sm_{WHEEL_NEWEST_SM} code) or --ctx cpu")


def _compute_capability(mx, index: int) -> Optional[int]:
    """70 for sm_70; None where the driver library cannot be asked."""
    try:
        return int(mx.util.get_cuda_compute_capability(mx.gpu(index)))
    except (OSError, ValueError, AttributeError):
        return None


def int64_tensor_flag(value) -> bool:
    """opperf's 'on'/'off' (case-insensitive here; opperf silently read 'ON' as off), or a bool.

    'on' needs an MXNet built with INT64_TENSOR_SIZE; the pip wheel is not.
    """
    if isinstance(value, bool):
        on = value
    else:
        text = str(value).strip().lower()
        if text not in ("on", "off"):
            raise UsageError(f"--int64-tensor must be on or off, got {value!r}")
        on = text == "on"
    if on:
        require_int64()
    return on
