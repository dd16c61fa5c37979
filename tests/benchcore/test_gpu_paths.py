"""benchcore's GPU paths on a machine without a GPU: the torch.profiler table parser on a CUDA
run's rows, the worker restart after a CUDA error, cold-cache timing and the SM clock record
(fakes of tests.cuda_fakes; nvidia-smi a fake that checks its exact command line)."""

from __future__ import annotations

import sys

import pytest

from benchcore.execute.worker import run_cases
from benchcore.measure.case import CaseSpec
from benchcore.measure.gpu_clock import SLOWDOWNS, ClockReading, read_smi, slowdowns_of_mask, sm_clock, smi_command
from benchcore.measure.timers import CudaEventTimer, L2Flush, timer_for
from opbench.backends.torch.kineto import RANGE_NAME
from rnnbench.profiler_table import markdown_table, parse_key_averages, totals
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
    assert stats["void aten::mul_kernel [CUDA]"]["device_self_ms"] == pytest.approx((2 * 5 + 2 * 7) / 1e3)
    assert stats["aten::mul"]["count"] == 6 and stats["aten::mul"]["device_self_ms"] == pytest.approx((2 * 5 + 2 * 7) / 1e3)
    assert "Device total" in markdown_table(stats)


def test_profile_totals_count_each_kernel_once_and_ranges_sort_apart():
    events, _ = cuda_run(calls=2)
    stats = parse_key_averages(events.key_averages())
    assert {name: e["kind"] for name, e in stats.items()} == {
        RANGE_NAME: "range", f"{RANGE_NAME} [CUDA]": "range", "aten::mul": "operator",
        "autograd::engine::evaluate_function: MulBackward0": "operator", "cudaLaunchKernel": "operator",
        "cudaMemcpyAsync": "operator", "void aten::mul_kernel [CUDA]": "device"}
    kernels_ms = (2 * 5 + 2 * 7) / 1e3
    # summed over every row, the kernels count twice and the ranges' spans on top: 10x here
    assert sum(e["device_self_ms"] for e in stats.values()) == pytest.approx(2 * kernels_ms + (2 * 28 + 2 * 70) / 1e3)
    assert totals(stats) == pytest.approx({"device_ms": kernels_ms,
                                           "host_self_ms": sum(e["self_ms"] for n, e in stats.items() if n != RANGE_NAME)})
    text = markdown_table(stats, key="device_self_ms")
    operators, caption, ranges, total = text.split("\n\n")
    assert operators.splitlines()[2].startswith("| aten::mul ") and RANGE_NAME not in operators  # not the 196 us range
    assert caption.startswith("Ranges (record_function") and ranges.splitlines()[2].startswith(f"| {RANGE_NAME} [CUDA] ")
    assert total == f"Totals: host self {totals(stats)['host_self_ms']:.4g} ms, device 0.024 ms (each kernel once)"


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


def fake_smi(folder, answers: dict) -> str:
    """An nvidia-smi binary for PATH: prints the line given for its exact argument list, else
    refuses as nvidia-smi refuses a field it does not know (exit 2)."""
    folder.mkdir(exist_ok=True)
    cases = "".join(f"  '{args}') echo '{line}';;\n" for args, line in answers.items())
    script = folder / "nvidia-smi"
    script.write_text(f'#!/bin/sh\ncase "$*" in\n{cases}  *) echo "Field is not a valid field to query." >&2; exit 2;;\n'
                      "esac\n")
    script.chmod(0o755)
    return str(folder)


def smi_args(group: str) -> str:
    return (f"--query-gpu=clocks.current.sm,clocks.default_applications.graphics,clocks.max.sm,{group}.sw_power_cap,"
            f"{group}.hw_slowdown,{group}.sw_thermal_slowdown,{group}.hw_thermal_slowdown,"
            f"{group}.hw_power_brake_slowdown --format=csv,noheader,nounits -i GPU-0")


@pytest.mark.parametrize("line, slowdowns", [
    # idle between calls: 345 MHz of a 1755 MHz default, no slowdown in force (gpu_idle is not asked)
    ("345, 1755, 1980, Not Active, Not Active, Not Active, Not Active, Not Active", ()),
    ("1410, 1755, 1980, Active, Not Active, Not Active, Not Active, Not Active", ("sw_power_cap",)),
    ("1980, 1755, 1980, Not Active, Active, Not Active, Active, Not Active", ("hw_slowdown", "hw_thermal_slowdown")),
    ("1980, 1755, 1980, [N/A], [N/A], [N/A], [N/A], [N/A]", None),
])
def test_throttled_comes_from_nvidia_smis_clocks_event_reasons_not_from_a_low_clock(tmp_path, monkeypatch, line, slowdowns):
    assert " ".join(smi_command("GPU-0")[1:]) == smi_args("clocks_event_reasons")
    monkeypatch.setenv("PATH", fake_smi(tmp_path / "bin", {smi_args("clocks_event_reasons"): line}))
    reading = read_smi("GPU-0")
    assert reading.slowdowns == slowdowns and reading.throttled == bool(slowdowns)
    assert reading.sm_mhz == float(line.split(",")[0]) and reading.default_mhz == 1755.0 and reading.source == "nvidia-smi"
    warning = reading.to_dict()["warning"]
    assert (warning is None) == (not slowdowns) and (not slowdowns or ", ".join(slowdowns) in warning)


def test_an_older_driver_is_asked_for_its_clocks_throttle_reasons(tmp_path, monkeypatch):
    line = "1200, 1410, 1410, Not Active, Not Active, Not Active, Active, Not Active"
    monkeypatch.setenv("PATH", fake_smi(tmp_path / "bin", {smi_args("clocks_throttle_reasons"): line}))
    assert read_smi("GPU-0") == ClockReading(1200.0, 1410.0, 1410.0, "nvidia-smi", ("hw_thermal_slowdown",))
    monkeypatch.setenv("PATH", fake_smi(tmp_path / "none", {}))
    assert read_smi("GPU-0") is None


def real_nvml():
    """NVML's Python bindings (nvidia-ml-py's pynvml module, the gpu extra): the real constants
    and functions, of which the ones that need a driver are replaced by each test."""
    import pynvml

    return pynvml


def test_nvml_reasons_bits_name_slowdowns_only():
    nvml = real_nvml()
    assert [bit for bit, _ in SLOWDOWNS] == [
        nvml.nvmlClocksEventReasonSwPowerCap, nvml.nvmlClocksEventReasonHwSlowdown,
        nvml.nvmlClocksEventReasonSwThermalSlowdown, nvml.nvmlClocksEventReasonHwThermalSlowdown,
        nvml.nvmlClocksEventReasonHwPowerBrakeSlowdown]
    at_rest = (nvml.nvmlClocksEventReasonGpuIdle | nvml.nvmlClocksEventReasonApplicationsClocksSetting
               | nvml.nvmlClocksEventReasonSyncBoost | nvml.nvmlClocksEventReasonDisplayClockSetting)
    assert slowdowns_of_mask(at_rest) == () and slowdowns_of_mask(nvml.nvmlClocksEventReasonNone) == ()
    assert slowdowns_of_mask(at_rest | nvml.nvmlClocksThrottleReasonSwPowerCap) == ("sw_power_cap",)
    assert slowdowns_of_mask(nvml.nvmlClocksEventReasonAll) == tuple(name for _, name in SLOWDOWNS)


@pytest.mark.parametrize("mask_name, slowdowns", [
    ("nvmlClocksEventReasonGpuIdle", ()), ("nvmlClocksEventReasonHwPowerBrakeSlowdown", ("hw_power_brake_slowdown",))])
def test_sm_clock_through_nvml_reads_the_current_clocks_event_reasons(monkeypatch, mask_name, slowdowns):
    nvml = real_nvml()
    clocks = {nvml.NVML_CLOCK_SM: 345 if not slowdowns else 1980, nvml.NVML_CLOCK_GRAPHICS: 1755}
    for name, fake in {"nvmlInit": lambda: None, "nvmlDeviceGetHandleByUUID": lambda uuid: f"handle {uuid}",
                       "nvmlDeviceGetClockInfo": lambda handle, kind: clocks[kind],
                       "nvmlDeviceGetDefaultApplicationsClock": lambda handle, kind: clocks[kind],
                       "nvmlDeviceGetMaxClockInfo": lambda handle, kind: 1980,
                       "nvmlDeviceGetCurrentClocksEventReasons": lambda handle: getattr(nvml, mask_name)}.items():
        monkeypatch.setattr(nvml, name, fake)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    found = sm_clock("GPU-0")
    assert found["source"] == "nvml" and found["slowdowns"] == list(slowdowns)
    assert found["throttled"] == bool(slowdowns) and found["sm_mhz"] == clocks[nvml.NVML_CLOCK_SM]


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
