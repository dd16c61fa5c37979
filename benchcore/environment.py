"""Environment metadata, collected in one place for every report.

A number without its context (versions, threads, CPU, GPU, commit) cannot be compared or
trusted, so every report carries this dict. Frameworks are imported lazily and only when
asked for; a missing one is recorded as null.
"""

from __future__ import annotations

import datetime
import fnmatch
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional

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
    try:  # a submodule from MXNet 1.5 on, imported by mxnet itself from 1.6
        from mxnet.runtime import Features
    except ImportError:  # MXNet 1.4 lists no build features
        return {"version": mx.__version__, "features": None, "gpus": mx.context.num_gpus(),
                "reason": "this MXNet has no build feature list (mxnet.runtime came with 1.5)"}
    enabled = sorted(name for name, feature in Features().items() if feature.enabled)
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

    from . import __version__

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


#: Environment keys (flattened with dots, matched case-insensitively as globs) whose values
#: change timings: interpreter and framework versions, CPU and GPU model, thread settings,
#: device. Anything else (hostname, time, argv, paths) differs between any two runs.
ENV_KEY_PATTERNS = (
    "*python*", "*mxnet*", "*torch*", "*numpy*", "*cpu*", "*processor*", "*gpu*", "*cuda*",
    "*cudnn*", "*nvidia*", "*thread*", "*omp_*", "*mkl*", "*device*", "*denormal*",
)
#: Exact keys that always count, whatever the patterns say: how the numbers were taken (a
#: profiler's kernel times and a wall clock around the Python call are different quantities),
#: and whether torch had a GPU ("*available*" is ignored for memory figures).
ALWAYS_RELEVANT_KEYS = ("engine", "timer", "settings.profiler", "torch.cuda_available")
#: Settings keys that name the measuring method (opbench's engine): compared like the environment.
METHOD_SETTINGS = ("settings.profiler",)
ENV_KEY_IGNORED = (
    "system.*",  # noise diagnostics (load, governor, busy processes): warned about, not identity
    "*time*", "*date*", "*host*", "*argv*", "*pid*", "*path*", "*executable*", "*freq*",
    "*load*", "*usage*", "*percent*", "*available*", "*uptime*", "*git*", "*commit*", "*cwd*",
    "*seed*", "*command*",
)


# --------------------------------------------------------------------------- subnormal flushing (FTZ/DAZ)
#
# x86 cores take a slow microcode path for float32/float64 arithmetic on subnormal numbers
# unless two MXCSR bits are set: FTZ (bit 15, flush subnormal results to zero) and DAZ (bit 6,
# treat subnormal inputs as zero). MXCSR is per thread, and a new thread starts with a copy of
# its creator's, so what counts is the state of the threads that run the operators, which are
# not the Python thread: MXNet's engine workers (created at the process's first operator) and
# the OpenMP pools of both frameworks (created at their first parallel region).
#
# Reading and setting the calling thread's MXCSR needs no compiled code: glibc's fegetenv and
# fesetenv (called through ctypes) save and load the whole x86-64 floating-point environment,
# whose fenv_t ends with MXCSR at byte 28 (x86-64 Linux only; elsewhere None / False). The
# threads that run the operators are probed by what they compute (flush_probe): a framework
# multiplies the smallest normal float32 by 0.5 (FTZ flushes the subnormal result to zero)
# and a subnormal by 2**24 (DAZ reads it as zero; the result would be normal), on arrays
# large enough to be split over the framework's threads, and the fraction of values flushed
# says whether all, none or some of its threads flush. The results are read as bits.

MXCSR_FTZ = 1 << 15
MXCSR_DAZ = 1 << 6
_FENV_BYTES = 32
_MXCSR_OFFSET = 28
#: values per probe: 1 MiB of float32, split over a framework's threads (torch's element-wise
#: grain is 32768 values)
PROBE_VALUES = 1 << 18
_LIBM: list = []


def _libm():
    """glibc's libm through ctypes on x86-64 Linux, else None."""
    if not _LIBM:
        found = None
        if sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64"):
            import ctypes
            import ctypes.util

            try:
                found = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
            except OSError:
                found = None
        _LIBM.append(found)
    return _LIBM[0]


def _fenv():
    import ctypes

    libm = _libm()
    if libm is None:
        return None
    buffer = ctypes.create_string_buffer(_FENV_BYTES)
    return buffer if libm.fegetenv(buffer) == 0 else None


def read_mxcsr() -> Optional[int]:
    """The calling thread's MXCSR, or None where it cannot be read this way."""
    buffer = _fenv()
    if buffer is None:
        return None
    return int.from_bytes(buffer.raw[_MXCSR_OFFSET:_MXCSR_OFFSET + 4], "little")


def set_flush_denormal(on: bool) -> bool:
    """Set (or clear) FTZ and DAZ on the calling thread; False where that is not possible.

    Threads created afterwards inherit the setting; threads that already exist keep theirs.
    """
    import ctypes

    buffer = _fenv()
    if buffer is None:
        return False
    raw = bytearray(buffer.raw)
    value = int.from_bytes(raw[_MXCSR_OFFSET:_MXCSR_OFFSET + 4], "little")
    value = value | MXCSR_FTZ | MXCSR_DAZ if on else value & ~(MXCSR_FTZ | MXCSR_DAZ)
    raw[_MXCSR_OFFSET:_MXCSR_OFFSET + 4] = value.to_bytes(4, "little")
    return _libm().fesetenv(ctypes.create_string_buffer(bytes(raw), _FENV_BYTES)) == 0


def flush_probe(multiply: Callable[[Any, float], Any]) -> dict:
    """Whether the threads behind `multiply(float32 array, factor) → array` flush subnormals:
    {"ftz": fraction of subnormal results flushed, "daz": fraction of subnormal inputs read as
    zero}; 0 nowhere, 1 everywhere, between: some threads do."""
    import numpy as np

    def flushed(bits: int, factor: float) -> float:
        values = np.full(PROBE_VALUES, bits, dtype=np.uint32).view(np.float32)
        result = np.asarray(multiply(values, factor), dtype=np.float32).view(np.uint32)
        return float(np.count_nonzero(result == 0)) / result.size

    return {"ftz": flushed(0x00800000, 0.5), "daz": flushed(0x00400000, 2.0 ** 24)}


def thread_flush_state() -> dict:
    """The calling thread's FTZ/DAZ: from MXCSR where it can be read, else from what numpy
    computes in this thread (`method` says which)."""
    import numpy as np

    mxcsr = read_mxcsr()
    if mxcsr is not None:
        return {"method": "mxcsr", "mxcsr": f"{mxcsr:#06x}", "ftz": bool(mxcsr & MXCSR_FTZ),
                "daz": bool(mxcsr & MXCSR_DAZ)}
    probe = flush_probe(lambda values, factor: values * np.float32(factor))
    return {"method": "arithmetic", "mxcsr": None, "ftz": probe["ftz"] == 1.0, "daz": probe["daz"] == 1.0}


_TORCH_PROBED: Dict[bool, dict] = {}


def torch_flush_state(flush: bool) -> dict:
    """Apply --flush-denormal (torch.set_flush_denormal: FTZ and DAZ on the calling thread;
    torch's intra-op threads inherit it when created afterwards, i.e. at the first parallel
    region, and keep what they started with), then what is in force: this thread's MXCSR bits
    and the fraction of values torch's CPU threads flush (probed once per process)."""
    import torch

    applied: Optional[bool] = torch.set_flush_denormal(True) if flush else None
    if flush not in _TORCH_PROBED:
        _TORCH_PROBED[flush] = flush_probe(lambda values, factor: (torch.from_numpy(values) * factor).numpy())
    state = {"requested": flush, "python_thread": thread_flush_state(), "operator_threads": _TORCH_PROBED[flush]}
    if flush and not applied:
        state["reason"] = "torch.set_flush_denormal is not supported on this CPU (it needs SSE3 on x86)"
    return state


# --------------------------------------------------------------------------- differences between two reports


def flatten(data, prefix: str = "") -> Dict[str, object]:
    """Nested dicts → {"a.b.c": leaf}; lists stay leaves (compared whole)."""
    flat: Dict[str, object] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                flat.update(flatten(value, name))
            else:
                flat[name] = value
    return flat


def timing_relevant(key: str) -> bool:
    lowered = key.lower()
    if lowered in ALWAYS_RELEVANT_KEYS:
        return True
    if any(fnmatch.fnmatchcase(lowered, p) for p in ENV_KEY_IGNORED):
        return False
    return any(fnmatch.fnmatchcase(lowered, p) for p in ENV_KEY_PATTERNS)


def environment_differences(base, new) -> List[dict]:
    """Timing-relevant environment keys (and the thread and profiler settings) whose values differ.

    Only keys both reports recorded are compared: a key on one side only comes from a newer
    version of the suite (a baseline from before it recorded TF32 settings must still gate).
    What one key per block always records catches the rest: a framework that failed to import
    has `version: null`, a GPU run differs in `torch.cuda_available` and `nvidia_driver`.
    """
    b, n = _comparable_keys(base), _comparable_keys(new)
    keys = sorted(k for k in set(b) & set(n) if timing_relevant(k))
    return [{"key": k, "base": b.get(k), "new": n.get(k)} for k in keys if b.get(k) != n.get(k)]


def timing_identity(report) -> Dict[str, object]:
    """The timing-relevant keys of a report's environment and method settings, flattened and
    sorted: what must match for two reports' figures to be one series (the history store's
    environment fingerprint)."""
    return {k: v for k, v in sorted(_comparable_keys(report).items()) if timing_relevant(k)}


def _comparable_keys(report) -> Dict[str, object]:
    """The environment, flattened, plus the settings that say how the numbers were taken."""
    flat = flatten(report.environment)
    for key, value in flatten(report.settings, "settings").items():
        if "thread" in key.lower() or key in METHOD_SETTINGS:
            flat[key] = value
    return flat
