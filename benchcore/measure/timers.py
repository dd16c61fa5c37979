"""Timers: wall clock around a framework sync, or CUDA events on a CUDA device.

Both return milliseconds. A perf_counter timer must sync before and after the call: frameworks
queue work asynchronously (MXNet's engine, CUDA streams), and without the sync the timer
measures the launch, not the work.
"""

from __future__ import annotations

import gc
import time
from typing import Any, Callable, Optional, Tuple


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
    """torch.cuda.Event pairs recorded on the device's current stream; elapsed_time is in ms.

    The stream is idle after the preceding sync, so the start event is stamped at once: the
    elapsed time is the stream's span from there to the end event, launch latency and host
    gaps between kernels included (close to wall time for small, launch-bound models, as in
    fastrnns); no host-side sync is needed inside the region.

    `device` names the stream's device ("cuda:1"; None: the current one). `flush`, when
    given, runs before each call's sync (an L2Flush: cold-cache timing, as triton's do_bench
    does); timer_for leaves it off unless asked: the warm-cache timing of opperf and fastrnns.
    """

    name = "cuda_event"

    def __init__(self, sync: Callable[[], None], device: Optional[str] = None,
                 flush: Optional[Callable[[], None]] = None):
        import torch  # lazily: benchcore imports no framework at module level

        if not torch.cuda.is_available():
            from benchcore.errors import UsageError

            raise UsageError("CUDA-event timing needs a CUDA device, and torch sees none; use --device cpu")
        self._torch = torch
        self.sync = sync
        self.stream = torch.cuda.current_stream(device)
        self.flush = flush

    def time(self, fn: Callable[[], Any]) -> Tuple[Any, float]:
        torch = self._torch
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        if self.flush:
            self.flush()
        self.sync()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            start.record(self.stream)
            result = fn()
            end.record(self.stream)
            end.synchronize()
        finally:
            if gc_was_enabled:
                gc.enable()
        return result, float(start.elapsed_time(end))


class L2Flush:
    """Evict the GPU's L2 cache: zero a buffer twice its size on the current stream, before
    the sync that precedes the start event (so its time is never the call's)."""

    def __init__(self, device: str):
        import torch

        self.bytes = 2 * max(int(torch.cuda.get_device_properties(device).L2_cache_size), 1)
        self.buffer = torch.empty(self.bytes, dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()


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


def timer_for(device: str, sync: Callable[[], None], flush_l2: bool = False):
    """CUDA events on a CUDA device (on its stream; flush_l2: cold-cache, see CudaEventTimer),
    perf_counter + sync everywhere else."""
    if str(device).startswith("cuda"):
        return CudaEventTimer(sync, str(device), L2Flush(str(device)) if flush_l2 else None)
    return PerfCounterTimer(sync)
