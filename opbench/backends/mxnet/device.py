"""MXNet's device flag: contexts ("cpu", "gpu(1)", mx.Context) parsed, checked against this
MXNet and turned into mx.Context; and the large-tensor flag, which depends on how MXNet was built.

Specs carry the context as text ("cpu(0)"), so a case can cross into a worker process; only
mx_context() touches MXNet, in the process that runs the case.
"""

from __future__ import annotations

from typing import Any, Tuple

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
    GPU this MXNet has kernels for (probe_kernel)."""
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
        probe_kernel(mx, index)
    return text


#: the newest architecture the CUDA wheels of MXNet 1.9.1 carry machine code for (they carry no PTX)
WHEEL_NEWEST_SM = 86


def probe_kernel(mx, index: int) -> None:
    """Run a one-element kernel on gpu(index), so a GPU this MXNet has no code for is refused in
    one line before any case runs: the CUDA wheels of 1.9.1 carry machine code for sm_50 to
    sm_86 and no PTX the driver could compile, so on a Hopper GPU (sm_90) every kernel fails
    with "no kernel image is available for execution on the device"."""
    text = f"gpu({index})"
    try:
        (mx.nd.ones((1,), ctx=mx.gpu(index)) + 1).asnumpy()
    except mx.base.MXNetError as exc:
        last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:200]  # MXNet's message ends its text
        if "no kernel image" not in str(exc):
            raise UsageError(f"--ctx {text}: a one-element kernel failed there ({last}); "
                             "check the GPU with nvidia-smi or use --ctx cpu") from None
        sm = _compute_capability(mx, index)
        raise UsageError(
            f"--ctx {text}: mxnet {mx.__version__} has no kernels for this GPU ({sm}): its CUDA wheels carry "
            f"code up to sm_{WHEEL_NEWEST_SM} and no PTX; use a GPU of sm_{WHEEL_NEWEST_SM} or older, "
            "an MXNet built from source for this architecture, or --ctx cpu") from None


def _compute_capability(mx, index: int) -> str:
    try:
        return f"sm_{mx.util.get_cuda_compute_capability(mx.gpu(index))}"
    except (OSError, ValueError, AttributeError):
        return "architecture unknown"


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
