"""Environment metadata, collected in one place for every report.

A number without its context (versions, threads, CPU, GPU, commit) cannot be compared or
trusted, so every report carries this dict. Frameworks are imported lazily and only when
asked for; a missing one is recorded as null.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MXNET_CPU_WORKER_NTHREADS",
    "MXNET_ENGINE_TYPE",
)


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def cpu_model() -> Optional[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def git_commit() -> Optional[str]:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def mxnet_info() -> dict:
    try:
        import mxnet as mx
    except Exception as exc:  # absent or broken: record why
        return {"version": None, "reason": f"{type(exc).__name__}: {exc}"}
    features = mx.runtime.Features()
    enabled = sorted(name for name, feature in features.items() if feature.enabled)
    info = {"version": mx.__version__, "features": enabled, "gpus": mx.context.num_gpus() if "CUDA" in enabled else 0}
    return info


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


def nvidia_driver() -> Optional[str]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def collect(suite: str, argv: Optional[Iterable[str]] = None, frameworks: Iterable[str] = ("mxnet", "torch"),
            extra: Optional[dict] = None) -> dict:
    """Everything a reader needs to trust or reproduce the numbers in a report."""
    import numpy

    from benchcore import __version__

    env = {
        "suite": suite,
        "suite_version": __version__,
        "git_commit": git_commit(),
        "command_line": list(argv) if argv is not None else list(sys.argv),
        "started_at": now_iso(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads_env": {name: os.environ.get(name) for name in THREAD_VARIABLES},
        "nvidia_driver": nvidia_driver(),
    }
    if "mxnet" in frameworks:
        env["mxnet"] = mxnet_info()
    if "torch" in frameworks:
        env["torch"] = torch_info()
    env.update(extra or {})
    return env
