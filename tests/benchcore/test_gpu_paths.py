"""benchcore's GPU paths on a machine without a GPU: the torch.profiler table parser on a CUDA
run's rows, the worker restart after a CUDA error, cold-cache timing and the SM clock record
(fakes of tests.cuda_fakes; nvidia-smi a fake that checks its exact command line)."""

from __future__ import annotations

import subprocess

import pytest

from benchcore.execute.worker import run_cases
from benchcore.measure.case import CaseSpec
from benchcore.measure.gpu_clock import SMI_FIELDS, ClockReading, read_smi, sm_clock, smi_command
from benchcore.measure.timers import CudaEventTimer, L2Flush, timer_for
from opbench.backends.torch.kineto import RANGE_NAME
from rnnbench.profiler_table import markdown_table, parse_key_averages
from tests.cuda_fakes import FakeCuda, cuda_run

EXECUTOR = "tests.benchcore.executors:execute"


def test_key_averages_keep_a_ranges_cpu_and_gpu_rows_apart():
    events, _ = cuda_run(calls=2)
    stats = parse_key_averages(events.key_averages())
    cpu, gpu = stats[RANGE_NAME], stats[f"{RANGE_NAME} [CUDA]"]
    assert cpu["count"] == 4 and gpu["count"] == 4  # 2 forward + 2 backward ranges, each side once
    assert cpu["total_ms"] == pytest.approx((2 * 100 + 2 * 400) / 1e3)
    assert cpu["avg_ms"] == pytest.approx(cpu["total_ms"] / 4)
    assert gpu["total_ms"] == 0 and gpu["device_total_ms"] == pytest.approx((2 * 28 + 2 * 70) / 1e3)
    # the forward ranges' kernels (backward's ran on another thread, under no range)
    assert cpu["device_total_ms"] == pytest.approx(2 * 5 / 1e3)
    assert stats["void aten::mul_kernel [CUDA]"]["device_self_ms"] == pytest.approx(2 * 5 / 1e3)
    assert stats["aten::mul"]["count"] == 6 and stats["aten::mul"]["device_self_ms"] == pytest.approx((2 * 5 + 2 * 7) / 1e3)
    assert "Device total" in markdown_table(stats)


def test_a_failed_cuda_case_gets_a_fresh_worker_others_keep_theirs():
    specs = [CaseSpec("t", "before", {"action": "ok"}), CaseSpec("t", "sticky", {"action": "raise_cuda"}),
             CaseSpec("t", "after", {"action": "ok"}), CaseSpec("t", "plain", {"action": "raise"}),
             CaseSpec("t", "kept", {"action": "ok"})]
    before, sticky, after, plain, kept = run_cases(specs, EXECUTOR, timeout_s=60)
    assert sticky.status == "failed" and "illegal memory access" in sticky.error  # recorded where it happened
    assert after.status == "ok" and after.metrics["pid"] != before.metrics["pid"]
    assert plain.status == "failed" and kept.metrics["pid"] == after.metrics["pid"]  # a plain failure keeps the worker


def test_cuda_errors_are_told_from_others():
    from benchcore.execute.device_errors import is_cuda_error

    assert is_cuda_error("AcceleratorError: CUDA error: device-side assert triggered")
    assert is_cuda_error("MXNetError: [10:01:02] src/storage/./pooled_storage_manager.h:97: cudaMalloc failed: "
                         "CUDA: an illegal memory access was encountered")
    assert is_cuda_error("RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, ...)`")
    assert not is_cuda_error("ValueError: bad input for this case")


def test_l2_flush_zeroes_twice_the_cache_before_the_start_event(monkeypatch):
    fake = FakeCuda().install(monkeypatch)
    flush = L2Flush("cpu")  # the fake GPU's L2 size, a real buffer in host memory
    assert flush.bytes == 2 * FakeCuda.L2_BYTES and flush.buffer.numel() == flush.bytes
    flush.buffer.fill_(7)
    flushed = []

    def flushing():
        flush()
        flushed.append(int(flush.buffer.max()))
        fake.log.append("flush")

    timer = CudaEventTimer(lambda: fake.log.append("sync"), "cuda:0", flushing)
    timer.time(lambda: fake.log.append("call"))
    assert fake.log == ["flush", "sync", "record", "call", "record"] and flushed == [0]


def test_warm_cache_is_the_default(monkeypatch):
    fake = FakeCuda().install(monkeypatch)
    timer = timer_for("cuda:1", lambda: None)
    assert timer.flush is None and timer.stream == ("stream", 1)
    timer.time(lambda: None)
    assert fake.recorded == [("stream", 1), ("stream", 1)]


class FakeSmi:
    """nvidia-smi as subprocess.run sees it: answers only the exact query it expects."""

    def __init__(self, line: str):
        self.line, self.commands = line, []

    def __call__(self, command, **kwargs):
        self.commands.append(command)
        expected = smi_command("GPU-0")
        ok = command == expected
        return subprocess.CompletedProcess(command, 0 if ok else 6, self.line + "\n" if ok else "", "")


def test_sm_clock_from_nvidia_smi_and_the_throttling_warning():
    assert smi_command("GPU-0") == ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits",
                                    "-i", "GPU-0"]
    assert SMI_FIELDS == "clocks.current.sm,clocks.default_applications.graphics,clocks.max.sm"
    smi = FakeSmi("1980, 1755, 1980")
    reading = read_smi("GPU-0", run=smi, which=lambda name: "/usr/bin/nvidia-smi")
    assert reading == ClockReading(1980.0, 1755.0, 1980.0, "nvidia-smi") and not reading.throttled
    throttled = read_smi("GPU-0", run=FakeSmi("1200, 1755, 1980"), which=lambda name: "/usr/bin/nvidia-smi")
    assert throttled.throttled and "below 75% of its default 1755 MHz" in throttled.to_dict()["warning"]
    assert read_smi("GPU-0", run=FakeSmi("[N/A], [N/A], [N/A]"), which=lambda name: "/x") is None
    assert read_smi("GPU-0", run=smi, which=lambda name: None) is None


def test_sm_clock_without_nvml_or_nvidia_smi_says_why(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "pynvml" in sm_clock("GPU-0")["missing"]


def test_a_cuda_case_records_its_sm_clock(monkeypatch):
    from benchcore.measure.case import Workload
    from benchcore.measure.runner import RunSettings
    from opbench.backends.torch import executor

    FakeCuda().install(monkeypatch)
    seen = []
    monkeypatch.setattr(executor, "sm_clock", lambda uuid: seen.append(uuid) or {"sm_mhz": 1980.0})
    workload = Workload(forward=lambda: None, sync=executor.sync_for("cuda:1"), device="cuda")
    metrics = executor.run_engine(workload, RunSettings(warmup=0, runs=2), "cuda:1", "python", None)
    assert metrics["sm_clock"] == {"sm_mhz": 1980.0} and seen == ["GPU-00000001-1111-2222-3333-444444444444"]
    assert metrics["flush_l2"] is False
