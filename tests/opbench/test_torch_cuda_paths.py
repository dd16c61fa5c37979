"""The torch backend's CUDA paths, on a machine without CUDA, with the fakes of tests.cuda_fakes
(profiler events as torch lays out a CUDA run; a fake torch.cuda in this process)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from benchcore.measure.case import Workload
from benchcore.measure.runner import RunSettings
from opbench.backends.torch import executor, kineto
from opbench.backends.torch.kineto import RANGE_NAME, phase_summaries, spans_of_events
from tests.cuda_fakes import FakeCuda, cuda_run


def test_cuda_ranges_count_once_and_backward_device_time_is_found():
    events, phases = cuda_run(calls=2)
    # what torch keeps: each range twice (CPU side and its gpu_user_annotation), backward's ops
    # under no range (they are on another thread)
    assert sum(e.name == RANGE_NAME for e in events) == 8
    assert all(not r.cpu_children for r in events if r.name == RANGE_NAME and r.time_range.start >= 2000)
    summary = phase_summaries(spans_of_events(events, on_cuda=True), phases, on_device=True, aten_name="mul")
    assert summary["forward"]["Count"] == 2 and summary["backward"]["Count"] == 2
    assert summary["forward"]["per_call_ms"] == pytest.approx([0.005, 0.005])
    assert summary["backward"]["per_call_ms"] == pytest.approx([0.007, 0.007])
    assert summary["forward"]["operator"] == "aten::mul"
    assert summary["backward"]["entries"]["aten::mul"]["count"] == 4
    # host time beside device time, never one in the other's place: 4 x 30 us on the host (each
    # less the 10 us API call under it), 3 + 4 us of kernels per call
    assert summary["backward"]["entries"]["aten::mul"] == pytest.approx(
        {"count": 4, "self_ms": 0.080, "total_ms": 0.120, "device_self_ms": 0.014})
    for phase in ("forward", "backward"):  # device rows and CUDA API calls are not operators
        assert not any("kernel" in name or name.startswith("cuda") for name in summary[phase]["entries"])
    assert set(summary["forward"]["entries"]) == {"aten::mul"}


def test_cuda_api_calls_are_told_by_activity_type_or_else_by_name():
    events, _ = cuda_run(calls=1)
    calls = {(e.name, e.activity_type) for e in events if kineto.is_api_call(e)}
    assert calls == {("cudaLaunchKernel", "cuda_runtime"), ("cudaLaunchKernel", None), ("cudaMemcpyAsync", None)}
    assert not any(kineto.is_api_call(SimpleNamespace(name=name, activity_type=None))
                   for name in ("aten::cudnn_convolution", "cudnn.forward", "aten::mul"))
    assert kineto.is_api_call(SimpleNamespace(name="cuLaunchKernelEx", activity_type="cuda_driver"))


def test_cpu_phase_entries_carry_host_times_only():
    events, phases = cuda_run(calls=1)
    summary = phase_summaries(spans_of_events(events, on_cuda=False), phases, on_device=False, aten_name="mul")
    assert summary["forward"]["entries"]["aten::mul"] == pytest.approx({"count": 1, "self_ms": 0.010, "total_ms": 0.020})


def test_a_case_on_cuda_1_syncs_times_and_measures_device_1(monkeypatch):
    fake = FakeCuda().install(monkeypatch)
    workload = Workload(forward=lambda: None, sync=executor.sync_for("cuda:1"), device="cuda")
    with executor.device_context("cuda:1"):
        metrics = executor.run_engine(workload, RunSettings(warmup=2, runs=3), "cuda:1", "python", None)
    assert fake.entered == [1] and fake.current == 0  # made current for the case, then restored
    assert set(fake.synced) == {1} and set(fake.recorded) == {("stream", 1)}
    assert metrics["forward"]["samples_ms"] == [0.25] * 3


def test_cuda_peak_bytes_leave_out_the_first_matmuls_workspace(monkeypatch):
    fake = FakeCuda().install(monkeypatch)
    workload = Workload(forward=fake.matmul_call, sync=executor.sync_for("cuda:0"), device="cuda")
    metrics = executor.run_engine(workload, RunSettings(warmup=1, runs=3), "cuda:0", "python", None)
    assert metrics["peak_bytes"] == 1024  # the case's own; not 4 MiB + 1 KiB
    assert metrics["warmup"] == 1 and metrics["timed_total_ms"] == pytest.approx(0.25 * 4)
    assert "peak_bytes" not in metrics["missing"]


def test_cpu_cases_keep_their_reason_for_no_peak_bytes():
    workload = Workload(forward=lambda: torch.ones(4) * 2)
    metrics = executor.run_engine(workload, RunSettings(warmup=1, runs=2), "cpu", "python", None)
    assert metrics["peak_bytes"] is None and "allocator statistics" in metrics["missing"]["peak_bytes"]


def test_cuda_profiling_is_asked_for_as_each_torch_release_spells_it(monkeypatch):
    assert kineto.cuda_switch("2.13.0+cpu") == {"use_device": "cuda"}
    assert kineto.cuda_switch("2.4.0") == {"use_device": "cuda"}
    assert kineto.cuda_switch("2.3.1+cu121") == {"use_cuda": True}  # 2.1-2.3: use_device was for other backends
    FakeCuda().install(monkeypatch)
    assert kineto.profile(on_cuda=True).use_device == "cuda"
    assert kineto.profile(on_cuda=False).use_device is None
