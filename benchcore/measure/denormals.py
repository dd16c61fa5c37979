"""Subnormal flushing (FTZ/DAZ): set it on the calling thread and read what is in force.

Measuring conditions a case's timings depend on, framework-neutral: a suite's executor hands in
how its framework sets the flag and multiplies an array (benchcore never imports a framework).
"""

from __future__ import annotations

import platform
import sys
from typing import Any, Callable, Dict, Optional

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
#: MXCSR's six sticky exception flags (bits 0-5): the history of what the thread has computed
#: since they were last cleared (a subnormal operand seen, an inexact result), not a setting.
#: A reading leaves them out: they would differ between two rounds of one case whenever the
#: cases a worker ran before it differ.
MXCSR_EXCEPTION_FLAGS = 0x3F
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
    """The calling thread's FTZ/DAZ: from MXCSR where it can be read (its settings, without the
    exception flags), else from what numpy computes in this thread (`method` says which)."""
    import numpy as np

    mxcsr = read_mxcsr()
    if mxcsr is not None:
        return {"method": "mxcsr", "mxcsr": f"{mxcsr & ~MXCSR_EXCEPTION_FLAGS:#06x}", "ftz": bool(mxcsr & MXCSR_FTZ),
                "daz": bool(mxcsr & MXCSR_DAZ)}
    probe = flush_probe(lambda values, factor: values * np.float32(factor))
    return {"method": "arithmetic", "mxcsr": None, "ftz": probe["ftz"] == 1.0, "daz": probe["daz"] == 1.0}


_PROBED: Dict[tuple, dict] = {}


def flush_state(flush: bool, apply: Callable[[], bool], multiply: Callable[[Any, float], Any], key: str,
                unsupported: str) -> dict:
    """Apply --flush-denormal through `apply()` (before the framework creates its operator threads,
    so they inherit it), then what is in force: this thread's MXCSR bits and the fraction of values
    the framework's operator threads flush, probed with `multiply` once per process and `key` (a
    thread keeps the state it started with). `unsupported`: the reason recorded when `apply` fails."""
    applied: Optional[bool] = apply() if flush else None
    if (flush, key) not in _PROBED:
        _PROBED[(flush, key)] = flush_probe(multiply)
    state = {"requested": flush, "python_thread": thread_flush_state(), "operator_threads": _PROBED[(flush, key)]}
    if flush and not applied:
        state["reason"] = unsupported
    return state
