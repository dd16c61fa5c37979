"""PyTorch's adapter: its environment block (version, threads, CUDA, TF32 and cuDNN settings, GPU) and
--flush-denormal through torch.set_flush_denormal, for every suite that runs torch."""

from __future__ import annotations

from typing import Any, Callable, Optional

#: what a history's environment summary shows of torch (benchcore.suite.Suite.summary_keys)
SUMMARY_KEYS = (("torch.gpu.name", "{}"), ("torch.version", "torch {}"))
#: nothing torch needs under the instruction engine beyond one thread (benchcore.suite.Suite.count_environment)
COUNT_ENVIRONMENT: tuple = ()


def collect() -> dict:
    """The `torch` block (benchcore.execute.environment.collect)."""
    return {"torch": torch_info()}


def flush_state(flush: bool) -> dict:
    """Apply --flush-denormal with torch.set_flush_denormal (FTZ and DAZ on the calling thread;
    torch's intra-op threads inherit it when created afterwards, at the first parallel region),
    then what is in force (benchcore.measure.denormals.flush_state)."""
    import torch

    from benchcore.measure.denormals import flush_state as state

    return state(flush, lambda: torch.set_flush_denormal(True),
                 lambda values, factor: (torch.from_numpy(values) * factor).numpy(), "torch",
                 "torch.set_flush_denormal is not supported on this CPU (it needs SSE3 on x86)")


def torch_info() -> dict:
    try:
        import torch
    except Exception as exc:
        return {"version": None, "reason": f"{type(exc).__name__}: {exc}"}
    info = {
        "version": torch.__version__,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "cuda_available": torch.cuda.is_available(),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        # TF32 changes float32 GPU timings (and results): cuDNN's LSTM uses it by default
        "float32_matmul_precision": _legacy_read(torch.get_float32_matmul_precision),
        "cudnn_allow_tf32": _legacy_read(lambda: bool(torch.backends.cudnn.allow_tf32)),
        "fp32_precision": _fp32_precision(torch),
        # cuDNN's autotuner picks each convolution's / RNN's algorithm by timing them on first use
        # (benchmark True) or by heuristics; deterministic rules some fast ones out
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
    }
    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        info["gpu"] = {"index": index, "name": props.name, "capability": f"{props.major}.{props.minor}",
                       "memory_bytes": props.total_memory, "count": torch.cuda.device_count()}
    return info


def _legacy_read(read: Callable[[], Any]) -> Any:
    """A legacy TF32 setting, or None where torch refuses to read it (the newer per-operator
    fp32_precision API was used, so one legacy answer would be ambiguous: see fp32_precision)."""
    try:
        return read()
    except RuntimeError:
        return None


def _fp32_precision(torch) -> Optional[dict]:
    """The newer API's per-operator float32 precision (ieee, tf32 or none = inherit); None on
    a torch without it."""
    try:
        return {"matmul": torch.backends.cuda.matmul.fp32_precision,
                "cudnn_conv": torch.backends.cudnn.conv.fp32_precision,
                "cudnn_rnn": torch.backends.cudnn.rnn.fp32_precision}
    except AttributeError:
        return None


def code_path() -> dict:
    """What decides torch's CPU kernels in this process (benchcore.execute.code_path): the CPU
    capability its vectorised kernels dispatch on, the BLAS it was built with, and its intra-op
    threads."""
    import re

    import torch

    blas = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return {"torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch_threads": torch.get_num_threads(),
            "torch_blas": blas.group(1) if blas else None}
