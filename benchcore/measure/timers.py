"""Timers: wall clock around a framework sync, or CUDA events on a CUDA device.

Both return milliseconds. A perf_counter timer must sync before and after the call: frameworks
queue work asynchronously (MXNet's engine, CUDA streams), and without the sync the timer
measures the launch, not the work.
"""

from __future__ import annotations

import gc
import time
from typing import Any, Callable, Tuple


class PerfCounterTimer:
    """time.perf_counter around fn, bracketed by sync(). `clock` is injectable for tests."""

    name = "perf_counter"

    def __init__(self, sync: Callable[[], None], clock: Callable[[], float] = time.perf_counter):
        self.sync = sync
        self.clock = clock

    def time(self, fn: Callable[[], Any]) -> Tuple[Any, float]:
        self.sync()
        gc_was_enabled = gc.isenabled()
        gc.disable()  # a collection inside the timed region is noise, not the workload's cost
        try:
            start = self.clock()
            result = fn()
            self.sync()
            end = self.clock()
        finally:
            if gc_was_enabled:
                gc.enable()
        return result, (end - start) * 1e3


class CudaEventTimer:
    """torch.cuda.Event pairs recorded on the current stream; elapsed_time is in ms.

    The stream is idle after the preceding sync, so the start event is stamped at once: the
    elapsed time is the stream's span from there to the end event, launch latency and host
    gaps between kernels included (close to wall time for small, launch-bound models, as in
    fastrnns); no host-side sync is needed inside the region.
    """

    name = "cuda_event"

    def __init__(self, sync: Callable[[], None]):
        import torch  # lazily: benchcore imports no framework at module level

        if not torch.cuda.is_available():
            from benchcore.errors import UsageError

            raise UsageError("CUDA-event timing needs a CUDA device, and torch sees none; use --device cpu")
        self._torch = torch
        self.sync = sync

    def time(self, fn: Callable[[], Any]) -> Tuple[Any, float]:
        torch = self._torch
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        self.sync()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            start.record()
            result = fn()
            end.record()
            end.synchronize()
        finally:
            if gc_was_enabled:
                gc.enable()
        return result, float(start.elapsed_time(end))


class PhaseMarker:
    """Set by a workload's forward/backward as they run, so a timer that wraps every call the
    same way (a profiler dump, a profiler range) can tell afterwards which phase it timed."""

    def __init__(self):
        self.phase = ""

    def marking(self, phase: str, fn: Callable) -> Callable:
        def marked(*args):
            self.phase = phase
            return fn(*args)
        return marked


def timer_for(device: str, sync: Callable[[], None]):
    """CUDA events on a CUDA device, perf_counter + sync everywhere else."""
    if str(device).startswith("cuda"):
        return CudaEventTimer(sync)
    return PerfCounterTimer(sync)
