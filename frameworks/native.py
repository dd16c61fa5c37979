"""What the frameworks' native libraries say about themselves: their console output captured,
and the OpenBLAS a framework loaded. Shared by the frameworks' code-path probes
(frameworks.mxnet.code_path, frameworks.torch.code_path; benchcore.execute.code_path runs them)."""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from typing import Callable, Optional


def captured_stdout(call: Callable[[], object]) -> str:
    """What `call` wrote to file descriptor 1, C libraries' printf included (oneDNN's verbose
    lines go there, not through Python's sys.stdout)."""
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 1)
        try:
            call()
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
        sink.seek(0)
        return sink.read().decode(errors="replace")


def loaded_library(fragment: str) -> Optional[str]:
    """The path of a shared library this process has mapped whose file name holds `fragment`."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if len(line.split()) >= 6}
    except OSError:
        return None
    return next((p for p in sorted(paths) if fragment in os.path.basename(p)), None)


def openblas() -> dict:
    """OpenBLAS's kernel choice where this process loaded it: the core it dispatches to (chosen
    from CPUID in a DYNAMIC_ARCH build) and its build configuration, and apart (counts always run
    one thread) its threads. Nones where no OpenBLAS is loaded."""
    path = loaded_library("libopenblas")
    if path is None:
        return {"openblas": None, "openblas_threads": None}
    lib = ctypes.CDLL(path)
    for name in ("openblas_get_corename", "openblas_get_config"):
        getattr(lib, name).restype = ctypes.c_char_p
    return {"openblas": {"library": os.path.basename(path), "core": lib.openblas_get_corename().decode(),
                         "config": lib.openblas_get_config().decode().strip()},
            "openblas_threads": lib.openblas_get_num_threads()}
