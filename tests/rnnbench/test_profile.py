"""rnnbench profile: nsys/nvprof wrapping (with fake tools on PATH) and torch.profiler on CPU.

This machine has neither a GPU nor nsys/nvprof, so the tools are small Python scripts written
by the test: each records its argv and the inner run's output to a log, writes the report
file where the real tool would, and runs the inner command (on the CPU: the outer run's GPU
is a fake of torch.cuda in the test process, which the child does not have). The test then
checks the exact command line, that the internal run really ran the runners, and the output path.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchcore.errors import UsageError
from benchcore.execute import external
from rnnbench import profiling
from rnnbench.cli import main
from rnnbench.profiler_table import markdown_table, parse_key_averages

TINY = {"seqLength": 5, "numLayers": 1, "inputSize": 8, "hiddenSize": 8, "miniBatch": 2}
TINY_ARGS = [arg for name, value in TINY.items() for arg in (f"--{name}", str(value))]
STAMP = re.compile(r"\d{6}-\d{4}")

FAKE_TOOL = r'''#!{python}
"""Fake {tool}: log argv, run the inner command, write the report where {tool} would."""
import json, os, subprocess, sys

TOOL = "{tool}"
argv = sys.argv[1:]
if os.environ.get("FAKE_TOOL_FAIL"):
    sys.stderr.write("fake {tool}: " + os.environ["FAKE_TOOL_FAIL"] + "\n")
    sys.exit(3)
i = 1 if TOOL == "nsys" else 0          # nsys takes the 'profile' subcommand first
takes_value = {{"-t", "-o", "-f"}} if TOOL == "nsys" else {{"-o"}}
output = None
while i < len(argv) and argv[i].startswith("-"):
    if argv[i] in takes_value:
        if argv[i] == "-o":
            output = argv[i + 1]
        i += 2
    else:
        i += 1
inner = argv[i:]
on_cpu = [("cpu" if before == "--device" else arg) for before, arg in zip([None] + inner, inner)]
done = subprocess.run(on_cpu, capture_output=True, text=True)
with open(os.environ["FAKE_TOOL_LOG"], "w") as log:
    json.dump({{"argv": sys.argv, "inner": inner, "inner_stdout": done.stdout,
               "inner_stderr": done.stderr[-2000:], "inner_rc": done.returncode}}, log)
if done.returncode == 0:
    with open(output + (".nsys-rep" if TOOL == "nsys" else ""), "w") as report:
        report.write("fake report")
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
sys.exit(done.returncode)
'''


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    """A folder on PATH for fake tools, plus the log they write; the real PATH keeps `python`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "tool-log.json"
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_TOOL_LOG", str(log))
    monkeypatch.delenv("FAKE_TOOL_FAIL", raising=False)

    def install(tool: str) -> Path:
        path = folder / tool
        path.write_text(FAKE_TOOL.format(python=sys.executable, tool=tool))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return path

    return SimpleNamespace(folder=folder, log=log, install=install)


def fake_gpu(monkeypatch, capability):
    """A CUDA GPU of this compute capability, as torch reports it to the outer run (this machine has
    none). The inner run is a child process and still sees no CUDA, so it runs on the CPU."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)


def expected_inner(runners, nloops=2, sleep="0.0", warmup=5):
    """The inner command; it always carries --warmup, so the inner run warms up outside NVTX."""
    cmd = [sys.executable, "-m", "rnnbench", "profile", "--internal-run"]
    cmd += [arg for name, value in TINY.items() for arg in (f"--{name}", str(value))]
    cmd += ["--device", "cuda", "--fuser", "te", "--seed", "17", "--nloops", str(nloops), "--sleep-between-seconds", sleep,
            "--warmup", str(warmup)]
    return cmd + ["--rnns", *runners]


def run_profile(tmp_path, *extra, device="cpu"):
    out_dir = tmp_path / "profout"
    code = main(["profile", *TINY_ARGS, "--rnns", "cudnn", "py", "--nloops", "2", "--sleep-between-seconds", "0",
                 "--device", device, "--output-dir", str(out_dir), *extra])
    return code, out_dir


def test_nsys_command_line_internal_run_and_output(tmp_path, fake_bin, capsys, monkeypatch):
    tool = fake_bin.install("nsys")
    fake_gpu(monkeypatch, (9, 0))
    code, out_dir = run_profile(tmp_path, "--profiler", "nsys", device="cuda")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    reports = list(out_dir.glob("*.nsys-rep"))
    assert len(reports) == 1
    name = reports[0].name
    assert name.startswith("prof_cudnn-py_s5-l1-i8-h8-b2_") and STAMP.fullmatch(name.split("_")[-1][: -len(".nsys-rep")])
    assert captured.out.strip() == str(reports[0])

    log = json.loads(fake_bin.log.read_text())
    base = str(reports[0])[: -len(".nsys-rep")]  # nsys appends the extension itself
    assert log["argv"] == [str(tool), "profile", "-t", "cuda,nvtx", "-o", base, *expected_inner(["cudnn", "py"])]
    assert log["inner_rc"] == 0, log["inner_stderr"]
    # the internal run really ran both runners, warmed up, without NVTX (no CUDA here)
    assert "internal run: cudnn 2 iterations after 5 warmup, nvtx off" in log["inner_stdout"]
    assert "internal run: py 2 iterations after 5 warmup, nvtx off" in log["inner_stdout"]



def test_nvprof_command_line_and_capability_check(tmp_path, fake_bin, capsys, monkeypatch):
    tool = fake_bin.install("nvprof")
    fake_gpu(monkeypatch, (7, 0))  # Volta: nvprof still works
    out_dir = tmp_path / "profout"
    code = main(["profile", *TINY_ARGS, "--rnns", "py", "--nloops", "1", "--device", "cuda", "--profiler", "nvprof",
                 "--output-dir", str(out_dir)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    (report,) = out_dir.glob("*.nvvp")
    assert report.name.startswith("prof_py_s5-l1-i8-h8-b2_")
    log = json.loads(fake_bin.log.read_text())
    assert log["argv"] == [str(tool), "-o", str(report), *expected_inner(["py"], nloops=1, sleep="1.0")]
    assert "internal run: py 1 iterations after 5 warmup, nvtx off" in log["inner_stdout"]


@pytest.mark.parametrize("capability", [(8, 0), (9, 0)])
def test_nvprof_refused_on_ampere_and_newer(tmp_path, fake_bin, capsys, monkeypatch, capability):
    fake_bin.install("nvprof")
    fake_gpu(monkeypatch, capability)
    code, out_dir = run_profile(tmp_path, "--profiler", "nvprof", device="cuda")
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "compute capability 8.0" in err and "nsys" in err
    assert not fake_bin.log.exists()  # the tool never ran


def test_nvprof_is_judged_by_the_capability_of_the_gpu_cuda_n_names(tmp_path, fake_bin, capsys, monkeypatch):
    import torch

    fake_bin.install("nvprof")
    fake_gpu(monkeypatch, None)
    asked = []

    def capability(device=None):  # a Volta as device 0 beside an H100 as device 1
        asked.append(device)
        index = torch.cuda.current_device() if device is None else torch.device(device).index or 0
        return {0: (7, 0), 1: (9, 0)}[index]
    monkeypatch.setattr(torch.cuda, "get_device_capability", capability)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    code, out_dir = run_profile(tmp_path, "--profiler", "nvprof", device="cuda:1")
    err = capsys.readouterr().err.strip()
    assert code == 2 and "compute capability 8.0" in err and len(err.splitlines()) == 1
    assert asked == [torch.device("cuda:1")] and not fake_bin.log.exists()


@pytest.mark.parametrize("capability", [(8, 0), (9, 0)])
def test_nvprof_refusal_comes_before_the_path_lookup(tmp_path, monkeypatch, capsys, capability):
    """On sm_80+ without nvprof the user is told to use nsys, not to install nvprof (which could not profile it)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    fake_gpu(monkeypatch, capability)
    code, _ = run_profile(tmp_path, "--profiler", "nvprof", device="cuda")
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "does not support GPUs of compute capability 8.0" in err and "not found on PATH" not in err


@pytest.mark.parametrize("tool", ["nsys", "nvprof"])
def test_an_external_tool_on_the_cpu_is_refused(tmp_path, fake_bin, capsys, tool):
    """Both trace CUDA kernels and NVTX ranges: on --device cpu the report would be empty."""
    fake_bin.install(tool)
    code, out_dir = run_profile(tmp_path, "--profiler", tool, device="cpu")
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == (f"rnnbench: error: --profiler {tool} traces CUDA kernels and NVTX ranges, and --device cpu has none "
                   "(its report would be empty); use --profiler torch for a CPU profile")
    assert not fake_bin.log.exists() and not out_dir.exists()


@pytest.mark.parametrize("tool", ["nsys", "nvprof"])
def test_missing_tool_is_a_one_line_usage_error(tmp_path, monkeypatch, capsys, tool):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    fake_gpu(monkeypatch, (7, 0))
    code, _ = run_profile(tmp_path, "--profiler", tool, device="cuda")
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.splitlines() == [f"rnnbench: error: {tool} not found on PATH; " + err.split("; ", 1)[1]]


def test_tool_failure_reports_its_stderr(tmp_path, fake_bin, capsys, monkeypatch):
    fake_bin.install("nsys")
    fake_gpu(monkeypatch, (9, 0))
    monkeypatch.setenv("FAKE_TOOL_FAIL", "unable to initialise the CUDA driver")
    code, out_dir = run_profile(tmp_path, "--profiler", "nsys", device="cuda")
    err = capsys.readouterr().err
    assert code == 1
    assert "nsys exited with status 3" in err and "unable to initialise the CUDA driver" in err
    assert not list(out_dir.glob("*.nsys-rep"))


def test_existing_report_is_not_replaced(tmp_path):
    tool = external.NSYS
    target = tmp_path / "prof_x.nsys-rep"
    target.write_text("old")
    calls = []
    with pytest.raises(UsageError, match="already exists"):
        external.run_external(tool, target, ["true"], run=lambda *a, **k: calls.append(a))
    assert not calls and target.read_text() == "old"
    # asked to overwrite: the tool gets its force flag
    assert external.NSYS.command(target, ["x"], overwrite=True) == ["nsys", "profile", "-t", "cuda,nvtx", "-o",
                                                                    str(tmp_path / "prof_x"), "-f", "true", "x"]
    assert external.NVPROF.command(tmp_path / "p.nvvp", ["x"], overwrite=True) == ["nvprof", "-o", str(tmp_path / "p.nvvp"), "-f", "x"]


def test_check_supported_and_default_profiler():
    external.check_supported(external.NVPROF, (7, 5))
    external.check_supported(external.NVPROF, None)
    external.check_supported(external.NSYS, (9, 0))
    with pytest.raises(UsageError, match="nsys"):
        external.check_supported(external.NVPROF, (8, 6))
    assert profiling.default_profiler("cuda", which=lambda name: None) == "torch"
    assert profiling.default_profiler("cpu", which=lambda name: "/usr/bin/nsys") == "torch"
    assert profiling.default_profiler("cuda", which=lambda name: "/usr/bin/nsys") == "nsys"
    assert profiling.default_profiler("cuda:1", which=lambda name: "/usr/bin/nsys") == "nsys"


def test_cpu_device_gets_torch_profiler_even_with_nsys_and_cuda(tmp_path, fake_bin, capsys, monkeypatch):
    """nsys on a CPU run records no kernels: --device cpu picks torch.profiler by default."""
    import torch

    fake_bin.install("nsys")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # this machine has no CUDA to find
    code, out_dir = run_profile(tmp_path)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert not fake_bin.log.exists()  # nsys never ran
    assert [Path(line).name.split(".", 1)[1] for line in captured.out.split()] == [
        "pt.trace.json", "keyavg.txt", "keyavg.md", "keyavg.json"]


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_sleep_between_seconds_must_be_finite_and_not_negative(tmp_path, capsys, value):
    code, out_dir = run_profile(tmp_path, "--profiler", "torch", "--sleep-between-seconds", value)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("rnnbench: error: argument --sleep-between-seconds") and "finite number >= 0" in err
    assert not out_dir.exists()


@pytest.mark.parametrize("seed", ["99999999999999999999999", "-1", str(2**63 - 1)])
def test_seed_out_of_torch_range_is_a_usage_error(tmp_path, capsys, seed):
    code, out_dir = run_profile(tmp_path, "--profiler", "torch", "--seed", seed)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "argument --seed" in err and "0 to 9223372036854775806" in err


@pytest.mark.parametrize("rnns, message", [
    ([], "--rnns needs at least one runner name; omit it for the default list (cudnn aten jit)"),
    (["resnet18"], "--rnns takes LSTM runners only; resnet18 is a CNN runner, which bench runs with --cnns"),
])
def test_rnns_must_name_lstm_runners(tmp_path, capsys, rnns, message):
    code = main(["profile", *TINY_ARGS, "--nloops", "1", "--device", "cpu", "--profiler", "torch",
                 "--output-dir", str(tmp_path / "p"), "--rnns", *rnns])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == f"rnnbench: error: {message}"
    assert not (tmp_path / "p").exists()


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the runner registry: runners registered in a test vanish after it."""
    from rnnbench import runners

    monkeypatch.setattr(runners, "RUNNERS", dict(runners.RUNNERS))
    return runners


@pytest.mark.parametrize("mode", [["--profiler", "torch"], ["--internal-run", "--sleep-between-seconds", "0"]])
def test_a_runner_that_raises_is_one_line_and_exit_1(tmp_path, capsys, registry, mode):
    """In torch mode and in the inner run under nsys/nvprof (whose stderr the outer run shows)."""
    def explodes(**kwargs):
        raise RuntimeError("creator exploded\nsecond line")

    registry.register_runner(dataclasses.replace(registry.RUNNERS["cudnn"], name="explodes", creator=explodes))
    code = main(["profile", *TINY_ARGS, "--rnns", "cudnn", "explodes", "--nloops", "1", "--device", "cpu",
                 "--output-dir", str(tmp_path / "p"), *mode])
    captured = capsys.readouterr()
    assert code == 1 and "explodes" not in captured.out
    assert captured.err.strip() == "rnnbench: error: profiling explodes failed: RuntimeError: creator exploded"


@pytest.mark.parametrize("extra, calls", [([], 5 + 2), (["--warmup", "0"], 2)])
def test_torch_mode_warms_up_each_runner_before_profiling(tmp_path, capsys, registry, extra, calls):
    """TorchScript's profiling executor optimises only after a few calls: 5 by default."""
    forwards = []
    cudnn = registry.RUNNERS["cudnn"]

    def counted(**kwargs):
        modeldef = cudnn.creator(**kwargs)
        forward = modeldef.forward

        def counting(*inputs):
            forwards.append(1)
            return forward(*inputs)

        return dataclasses.replace(modeldef, forward=counting)

    registry.register_runner(dataclasses.replace(cudnn, name="counted", creator=counted))
    code = main(["profile", *TINY_ARGS, "--rnns", "counted", "--nloops", "2", "--device", "cpu", "--profiler", "torch",
                 "--output-dir", str(tmp_path / "p"), *extra])
    assert code == 0, capsys.readouterr().err
    assert len(forwards) == calls


def test_output_name_follows_fastrnns():
    import datetime

    when = datetime.datetime(2024, 3, 7, 9, 5)
    base = profiling.output_base(Path("/x"), ["cudnn", "aten", "jit"], {**TINY, "numLayers": 2}, now=when)
    assert str(base) == "/x/prof_cudnn-aten-jit_s5-l2-i8-h8-b2_030724-0905"


def test_torch_profiler_on_cpu_writes_trace_and_tables(tmp_path, capsys, monkeypatch):
    import datetime

    # every run of this test in one minute, so the later runs want the first run's file names
    when = datetime.datetime(2024, 3, 7, 9, 5)
    real_base = profiling.output_base
    monkeypatch.setattr(profiling, "output_base", lambda folder, runners, sizes, now=None: real_base(folder, runners, sizes, when))
    code, out_dir = run_profile(tmp_path, "--profiler", "torch")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    written = [Path(line) for line in captured.out.split()]
    assert [p.name.split(".", 1)[1] for p in written] == ["pt.trace.json", "keyavg.txt", "keyavg.md", "keyavg.json"]
    assert all(p.parent == out_dir and p.name.startswith("prof_cudnn-py_s5-l1-i8-h8-b2_030724-0905.") for p in written)
    trace = json.loads(written[0].read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert {"cudnn.forward", "cudnn.backward", "py.forward", "py.backward"} <= names
    stats = json.loads(written[3].read_text())
    assert stats["unit"] == "ms"
    entry = stats["stats"]["py.forward"]
    assert entry["count"] == 2 and entry["total_ms"] > 0 and entry["avg_ms"] == pytest.approx(entry["total_ms"] / 2)
    # the runners' record_function ranges are ranges, listed apart from the operators they hold
    assert {name for name, e in stats["stats"].items() if e["kind"] == "range"} == {
        "cudnn.forward", "cudnn.backward", "py.forward", "py.backward"}
    assert stats["totals"]["device_ms"] == 0 and stats["totals"]["host_self_ms"] == pytest.approx(
        sum(e["self_ms"] for e in stats["stats"].values() if e["kind"] == "operator"))
    operators, ranges = written[2].read_text().split("Ranges (record_function")
    assert "cudnn.backward" in ranges and "cudnn.backward" not in operators and "aten::" in operators

    # a second run in the same minute refuses before profiling, and leaves every file as it was
    before = {path: path.read_bytes() for path in written}
    again = ["profile", *TINY_ARGS, "--rnns", "cudnn", "py", "--nloops", "1", "--device", "cpu",
             "--output-dir", str(out_dir), "--profiler", "torch"]
    code = main(again)
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.strip() == (f"rnnbench: error: profile output {written[0]} already exists; pass --overwrite "
                                    "or wait for the next minute's file name")
    assert {path: path.read_bytes() for path in written} == before
    # asked to, it replaces them: a new trace of one iteration per runner
    assert main([*again, "--overwrite"]) == 0, capsys.readouterr().err
    assert json.loads(written[3].read_text())["stats"]["py.forward"]["count"] == 1
    assert written[0].read_bytes() != before[written[0]]


def test_parse_key_averages_converts_units_and_merges():
    events = [
        SimpleNamespace(key="aten::mm", count=2, cpu_time_total=3000.0, self_cpu_time_total=2500.0,
                        device_time_total=0.0, self_device_time_total=0.0, cpu_memory_usage=64, device_memory_usage=0),
        SimpleNamespace(key="aten::mm", count=1, cpu_time_total=1000.0, self_cpu_time_total=500.0,
                        device_time_total=4000.0, self_device_time_total=4000.0, cpu_memory_usage=0, device_memory_usage=16),
    ]
    stats = parse_key_averages(events)
    mm = stats["aten::mm"]
    assert mm["count"] == 3 and mm["total_ms"] == pytest.approx(4.0) and mm["avg_ms"] == pytest.approx(4.0 / 3)
    assert mm["self_ms"] == pytest.approx(3.0) and mm["device_total_ms"] == pytest.approx(4.0)
    assert mm["cpu_memory_bytes"] == 64 and mm["device_memory_bytes"] == 16
    assert mm["min_ms"] is None and "min_ms" in mm["missing"]
    assert "aten::mm" in markdown_table(stats)
    cpu_only = parse_key_averages(events[:1])
    [row] = [line for line in markdown_table(cpu_only).splitlines() if line.startswith("| aten::mm")]
    assert row.count("---") == 2  # device columns of a CPU-only session: not measured, not 0


def test_a_missing_tool_names_how_to_get_it_and_rnnbenchs_way_around_it():
    with pytest.raises(UsageError, match=r"nsys not found on PATH; install Nsight Systems and put it on PATH$"):
        external.find_tool(external.NSYS, which=lambda name: None)
    with pytest.raises(UsageError, match=r"nvprof not found on PATH; .* or use --profiler torch$"):
        external.find_tool(external.NVPROF, which=lambda name: None, alternative="--profiler torch")
    assert external.find_tool(external.NSYS, which=lambda name: f"/opt/bin/{name}") == "/opt/bin/nsys"
