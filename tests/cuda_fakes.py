"""Fakes of what this machine lacks (a CUDA GPU), built from torch's real structures.

- profiler events: torch.autograd.profiler_util.FunctionEvent objects laid out as torch's
  kineto parser lays out a CUDA run (CPU-side ops carrying their kernels through
  append_kernel; device-side rows with device_type CUDA, among them the gpu_user_annotation
  copy of every record_function range; backward's ops on the autograd engine's device thread);
- FakeCuda: a GPU as code sees it through `torch.cuda` (devices, streams, events, allocator
  statistics), installed over the real module's functions with monkeypatch.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

from opbench.backends.torch.kineto import RANGE_NAME

MAIN, DEVICE_THREAD = 1, 2  # the calling thread; the autograd engine's thread for the CUDA device


class Ids:
    def __init__(self):
        self.next = 0

    def __call__(self):
        self.next += 1
        return self.next


def cpu_op(ids, name, start, end, thread=MAIN, kernel_us=0.0, activity="cpu_op"):
    """A host-side event: an operator (kineto's cpu_op), a record_function range
    (user_annotation), a CUDA API call (cuda_runtime; activity None: a torch whose events carry
    no activity type)."""
    activity = "user_annotation" if name == RANGE_NAME else activity
    event = FunctionEvent(id=ids(), name=name, thread=thread, start_us=start, end_us=end, use_device="cuda",
                          stack=[], input_shapes=[], is_user_annotation=name == RANGE_NAME, activity_type=activity)
    if kernel_us:
        event.append_kernel(f"void {name}_kernel", 0, kernel_us)
    return event


def device_row(ids, name, start, end):
    """A device-side row: a kernel, or the gpu_user_annotation copy of a record_function range."""
    annotation = name == RANGE_NAME
    return FunctionEvent(id=ids(), name=name, thread=7, start_us=start, end_us=end, use_device="cuda", stack=[],
                         input_shapes=[], device_type=DeviceType.CUDA, is_user_annotation=annotation,
                         activity_type="gpu_user_annotation" if annotation else "kernel")


def cuda_run(calls=2):
    """`calls` forward ranges (aten::mul, 5 us of kernel each, launched through cudaLaunchKernel)
    then `calls` backward ranges whose ops run on the device thread (7 us of kernels each; their
    launches named only, as where torch keeps no activity type), as kineto reports a CUDA run."""
    ids, events, phases = Ids(), [], []
    for i in range(calls):
        t = 1000.0 * i
        events += [cpu_op(ids, RANGE_NAME, t, t + 100), cpu_op(ids, "aten::mul", t + 10, t + 30, kernel_us=5.0),
                   cpu_op(ids, "cudaLaunchKernel", t + 15, t + 25, activity="cuda_runtime"),
                   device_row(ids, RANGE_NAME, t + 12, t + 40), device_row(ids, "void aten::mul_kernel", t + 26, t + 31)]
        phases.append("forward")
    for i in range(calls):
        t = 1000.0 * (calls + i)
        events += [cpu_op(ids, RANGE_NAME, t, t + 400),
                   cpu_op(ids, "autograd::engine::evaluate_function: MulBackward0", t + 10, t + 390, thread=DEVICE_THREAD),
                   cpu_op(ids, "aten::mul", t + 20, t + 50, thread=DEVICE_THREAD, kernel_us=3.0),
                   cpu_op(ids, "cudaLaunchKernel", t + 30, t + 40, thread=DEVICE_THREAD, activity=None),
                   cpu_op(ids, "aten::mul", t + 60, t + 90, thread=DEVICE_THREAD, kernel_us=4.0),
                   cpu_op(ids, "cudaMemcpyAsync", t + 70, t + 80, thread=DEVICE_THREAD, activity=None),
                   device_row(ids, RANGE_NAME, t + 25, t + 95), device_row(ids, "void aten::mul_kernel", t + 41, t + 44),
                   device_row(ids, "void aten::mul_kernel", t + 85, t + 89)]
        phases.append("backward")
    listed = EventList(events, use_device="cuda")
    listed._build_tree()  # what torch.profiler does before events() hands them out
    return listed, phases


# --------------------------------------------------------------------------- a fake torch.cuda


class FakeCuda:
    """A GPU as the executor sees it through torch.cuda: devices, streams, events, allocator."""

    #: an H200's L2 cache
    L2_BYTES = 60 * 2**20

    def __init__(self, count=2):
        self.count = count
        self.current = 0
        self.synced, self.recorded, self.entered = [], [], []
        self.log: list = []  # syncs and event records, in order
        self.allocated = self.peak = 0
        self.calls = 0

    def install(self, monkeypatch):
        cuda = torch.cuda
        for name, value in {
            "is_available": lambda: True, "device_count": lambda: self.count,
            "synchronize": self.synchronize, "current_stream": self.current_stream, "Event": self.event,
            "device": self.device, "memory_allocated": lambda device=None: self.allocated,
            "max_memory_allocated": lambda device=None: self.peak,
            "reset_peak_memory_stats": self.reset_peak, "get_device_properties": self.properties,
        }.items():
            monkeypatch.setattr(cuda, name, value)
        return self

    def index(self, device):
        if device is None:
            return self.current
        return torch.device(device).index if torch.device(device).index is not None else self.current

    def synchronize(self, device=None):
        self.synced.append(self.index(device))
        self.log.append("sync")

    def properties(self, device=None):
        index = self.index(device) if device != "cpu" else 0
        return SimpleNamespace(name="NVIDIA H200", major=9, minor=0, L2_cache_size=self.L2_BYTES,
                               uuid=f"0000000{index}-1111-2222-3333-444444444444")

    def current_stream(self, device=None):
        return ("stream", self.index(device))

    def event(self, enable_timing=False):
        fake = self

        class Event:
            def record(self, stream=None):
                fake.recorded.append(stream if stream is not None else ("stream", fake.current))
                fake.log.append("record")

            def synchronize(self):
                pass

            def elapsed_time(self, other):
                return 0.25

        return Event()

    @contextlib.contextmanager
    def device(self, device):
        previous, self.current = self.current, self.index(device)
        self.entered.append(self.current)
        try:
            yield
        finally:
            self.current = previous

    def reset_peak(self, device=None):
        self.peak = self.allocated

    def matmul_call(self):
        """A call that, the first time in the process, makes cuBLAS allocate a 4 MiB workspace
        the caching allocator keeps; every call holds 1 KiB for its output while it runs."""
        if self.calls == 0:
            self.allocated += 4 * 2**20
        self.calls += 1
        self.peak = max(self.peak, self.allocated + 1024)
