"""The torch backend's CUDA paths, on a machine without CUDA.

Two kinds of fakes, each built from what torch really produces or offers:
- profiler events: torch.autograd.profiler_util.FunctionEvent objects laid out as torch's
  kineto parser lays out a CUDA run (CPU-side ops carrying their kernels through
  append_kernel; device-side rows with device_type CUDA, among them the gpu_user_annotation
  copy of every record_function range; backward's ops on the autograd engine's device thread);
- a fake `torch.cuda` in this process (a GPU's events, streams, allocator statistics and
  device switching), under which the executor's real timing loop runs CPU work.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

from benchcore.case import Workload
from benchcore.runner import RunSettings
from opbench.backends.torch import executor
from opbench.backends.torch.executor import RANGE_NAME, phase_summaries

MAIN, DEVICE_THREAD = 1, 2  # the calling thread; the autograd engine's thread for the CUDA device


class Ids:
    def __init__(self):
        self.next = 0

    def __call__(self):
        self.next += 1
        return self.next


def cpu_op(ids, name, start, end, thread=MAIN, kernel_us=0.0):
    event = FunctionEvent(id=ids(), name=name, thread=thread, start_us=start, end_us=end, use_device="cuda")
    if kernel_us:
        event.append_kernel(f"void {name}_kernel", 0, kernel_us)
    return event


def device_row(ids, name, start, end):
    """A device-side row: a kernel, or the gpu_user_annotation copy of a record_function range."""
    return FunctionEvent(id=ids(), name=name, thread=7, start_us=start, end_us=end, use_device="cuda",
                         device_type=DeviceType.CUDA, is_user_annotation=name == RANGE_NAME)


def cuda_run(calls=2):
    """`calls` forward ranges (aten::mul, 5 us of kernel each) then `calls` backward ranges
    whose ops run on the device thread (7 us of kernels each), as kineto reports a CUDA run."""
    ids, events, phases = Ids(), [], []
    for i in range(calls):
        t = 1000.0 * i
        events += [cpu_op(ids, RANGE_NAME, t, t + 100), cpu_op(ids, "aten::mul", t + 10, t + 30, kernel_us=5.0),
                   device_row(ids, RANGE_NAME, t + 12, t + 40), device_row(ids, "void aten::mul_kernel", t + 12, t + 17)]
        phases.append("forward")
    for i in range(calls):
        t = 1000.0 * (calls + i)
        events += [cpu_op(ids, RANGE_NAME, t, t + 400),
                   cpu_op(ids, "autograd::engine::evaluate_function: MulBackward0", t + 10, t + 390, thread=DEVICE_THREAD),
                   cpu_op(ids, "aten::mul", t + 20, t + 50, thread=DEVICE_THREAD, kernel_us=3.0),
                   cpu_op(ids, "aten::mul", t + 60, t + 90, thread=DEVICE_THREAD, kernel_us=4.0),
                   device_row(ids, RANGE_NAME, t + 25, t + 95)]
        phases.append("backward")
    listed = EventList(events, use_device="cuda")
    listed._build_tree()  # what torch.profiler does before events() hands them out
    return listed, phases


def test_cuda_ranges_count_once_and_backward_device_time_is_found():
    events, phases = cuda_run(calls=2)
    # what torch keeps: each range twice (CPU side and its gpu_user_annotation), backward's ops
    # under no range (they are on another thread)
    assert sum(e.name == RANGE_NAME for e in events) == 8
    assert all(not r.cpu_children for r in events if r.name == RANGE_NAME and r.time_range.start >= 2000)
    summary = phase_summaries(events, phases, on_device=True, aten_name="mul")
    assert summary["forward"]["Count"] == 2 and summary["backward"]["Count"] == 2
    assert summary["forward"]["per_call_ms"] == pytest.approx([0.005, 0.005])
    assert summary["backward"]["per_call_ms"] == pytest.approx([0.007, 0.007])
    assert summary["forward"]["operator"] == "aten::mul"
    assert summary["backward"]["entries"]["aten::mul"]["count"] == 4
    assert summary["backward"]["entries"]["aten::mul"]["self_ms"] == pytest.approx(0.014)
    assert not any("kernel" in name for name in summary["forward"]["entries"])  # device rows are not operators


def test_real_cpu_profile_still_reads_the_same():
    """A real torch.profiler run on the CPU: each call's range holds its operators."""
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.ones(64, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            with record_function(RANGE_NAME):
                y = x * 2
            with record_function(RANGE_NAME):
                y.sum().backward()
    summary = phase_summaries(prof.events(), ["forward", "backward"] * 3, on_device=False, aten_name="mul")
    assert summary["forward"]["Count"] == 3 and summary["forward"]["operator"] == "aten::mul"
    assert all(ms > 0 for ms in summary["forward"]["per_call_ms"] + summary["backward"]["per_call_ms"])
    assert "aten::mul" in summary["backward"]["entries"]


# --------------------------------------------------------------------------- a fake torch.cuda


class FakeCuda:
    """A GPU as the executor sees it through torch.cuda: devices, streams, events, allocator."""

    def __init__(self, count=2):
        self.count = count
        self.current = 0
        self.synced, self.recorded, self.entered = [], [], []
        self.allocated = self.peak = 0
        self.calls = 0

    def install(self, monkeypatch):
        cuda = torch.cuda
        for name, value in {
            "is_available": lambda: True, "device_count": lambda: self.count,
            "synchronize": self.synchronize, "current_stream": self.current_stream, "Event": self.event,
            "device": self.device, "memory_allocated": lambda device=None: self.allocated,
            "max_memory_allocated": lambda device=None: self.peak,
            "reset_peak_memory_stats": self.reset_peak,
        }.items():
            monkeypatch.setattr(cuda, name, value)
        return self

    def index(self, device):
        if device is None:
            return self.current
        return torch.device(device).index if torch.device(device).index is not None else self.current

    def synchronize(self, device=None):
        self.synced.append(self.index(device))

    def current_stream(self, device=None):
        return ("stream", self.index(device))

    def event(self, enable_timing=False):
        fake = self

        class Event:
            def record(self, stream=None):
                fake.recorded.append(stream if stream is not None else ("stream", fake.current))

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


def test_a_case_on_cuda_1_syncs_times_and_measures_device_1(monkeypatch):
    fake = FakeCuda().install(monkeypatch)
    workload = Workload(forward=lambda: None, sync=executor._sync_for("cuda:1"), device="cuda")
    with executor.device_context("cuda:1"):
        metrics = executor.run_engine(workload, RunSettings(warmup=2, runs=3), "cuda:1", "python", None)
    assert fake.entered == [1] and fake.current == 0  # made current for the case, then restored
    assert set(fake.synced) == {1} and set(fake.recorded) == {("stream", 1)}
    assert metrics["forward"]["samples_ms"] == [0.25] * 3


def test_cuda_peak_bytes_leave_out_the_first_matmuls_workspace(monkeypatch):
    fake = FakeCuda().install(monkeypatch)
    workload = Workload(forward=fake.matmul_call, sync=executor._sync_for("cuda:0"), device="cuda")
    metrics = executor.run_engine(workload, RunSettings(warmup=1, runs=3), "cuda:0", "python", None)
    assert metrics["peak_bytes"] == 1024  # the case's own; not 4 MiB + 1 KiB
    assert metrics["warmup"] == 1 and metrics["timed_total_ms"] == pytest.approx(0.25 * 4)
    assert "peak_bytes" not in metrics["missing"]


def test_cpu_cases_keep_their_reason_for_no_peak_bytes():
    workload = Workload(forward=lambda: torch.ones(4) * 2)
    metrics = executor.run_engine(workload, RunSettings(warmup=1, runs=2), "cpu", "python", None)
    assert metrics["peak_bytes"] is None and "allocator statistics" in metrics["missing"]["peak_bytes"]
