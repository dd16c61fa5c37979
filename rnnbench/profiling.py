"""`rnnbench profile`: run runners under nsys, nvprof or torch.profiler.

External tools (nsys, nvprof) wrap a whole process, so the CLI re-runs itself under the tool
with `--internal-run`; that inner run does `warmup` unlabelled iterations per runner, then
`nloops` untimed ones with NVTX ranges around forward and backward when CUDA is present, and
sleeps between runners so their kernels are easy to tell apart on the timeline. `torch` mode
runs the same loop in-process under torch.profiler (CPU, plus CUDA when present) and writes a
Chrome trace and key-averages tables; it works on a CPU-only machine.

Report names follow fastrnns: `prof_{runners joined by -}_s{S}-l{L}-i{I}-h{H}-b{B}_{MMDDYY-HHMM}`.
"""

from __future__ import annotations

import datetime
import json
import shutil
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from benchcore.errors import UsageError, error_summary
from benchcore.execute import external
from benchcore.report.model import ensure_folder

from .cases import SIZE_DEFAULTS, SIZE_LETTERS
from .executor import build, prepared, runner_contexts

PROFILERS = ("nsys", "nvprof", "torch")
DEFAULT_PROFILE_RNNS = ("cudnn", "aten", "jit")
DEFAULT_OUTPUT_DIR = "~/profout"
#: Iterations per runner before the profiled ones. TorchScript's profiling executor (fuser te)
#: optimises a graph only after profiling a few runs: on CPU, jit's forward took 0.7, 6.7 and
#: 3.3 ms, then 0.2-0.3 ms from the fourth call (s4-l1-i8-h8-b2; at fastrnns' sizes 1228, 404,
#: 297, then about 250 ms). 5 leaves a margin and matches fastrnns' profiled nloops.
DEFAULT_WARMUP = 5


# --------------------------------------------------------------------------------------------
# Names and places


def describe_sizes(sizes: Dict[str, int]) -> str:
    return "-".join(f"{SIZE_LETTERS[name]}{sizes[name]}" for name in SIZE_DEFAULTS)


def output_base(output_dir: Path, runners: Sequence[str], sizes: Dict[str, int],
                now: Optional[datetime.datetime] = None) -> Path:
    """The report path without extension."""
    stamp = (now or datetime.datetime.now()).strftime("%m%d%y-%H%M")
    return Path(output_dir) / f"prof_{'-'.join(runners)}_{describe_sizes(sizes)}_{stamp}"


def prepare_output_dir(path) -> Path:
    return ensure_folder(path, "output folder", "pass a writable --output-dir")


# --------------------------------------------------------------------------------------------
# Which profiler, and may it run here


def compute_capability(device: str = "cuda") -> Optional[Tuple[int, int]]:
    """The compute capability of the GPU `device` names ("cuda": the current one, "cuda:N": the
    N-th, not device 0 where GPUs differ), None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    return tuple(torch.cuda.get_device_capability(torch.device(device)))


def default_profiler(device: str, which: Callable[[str], Optional[str]] = shutil.which) -> str:
    """nsys when it is on PATH and the device is CUDA, torch.profiler otherwise: nsys traces
    CUDA kernels and NVTX ranges, so a CPU run under it leaves an empty report. The device
    has been checked already (a CUDA device here means torch sees CUDA)."""
    return "nsys" if device.startswith("cuda") and which("nsys") else "torch"


# --------------------------------------------------------------------------------------------
# The profiled loop (shared by the inner run and torch mode)


def _nvtx_range(name: str, enabled: bool):
    if not enabled:
        return nullcontext()
    import torch

    return torch.cuda.nvtx.range(name)


def _record(name: str, enabled: bool):
    if not enabled:
        return nullcontext()
    from torch.profiler import record_function

    return record_function(name)


def run_iterations(name: str, workload, nloops: int, nvtx: bool = False, record: bool = False) -> None:
    """nloops untimed forward + backward + zero-grad iterations, labelled for the profilers."""
    for _ in range(nloops):
        with _nvtx_range(f"{name}.forward", nvtx), _record(f"{name}.forward", record):
            output = workload.forward()
            workload.sync()
        if workload.backward is None:
            continue
        prepared_input = workload.backward_setup(output) if workload.backward_setup else output
        with _nvtx_range(f"{name}.backward", nvtx), _record(f"{name}.backward", record):
            workload.backward(prepared_input)
            workload.sync()
        if workload.zero_grad:
            workload.zero_grad()
    workload.sync()


class RunnerFailed(Exception):
    """A runner's build or iterations raised: a runtime failure of that runner, not bad usage."""

    def __init__(self, runner: str, exc: BaseException):
        super().__init__(f"profiling {runner} failed: {error_summary(exc)}")


@contextmanager
def runner_failures(name: str) -> Iterator[None]:
    """Turn an error of runner `name` into RunnerFailed; a UsageError stays what it is."""
    try:
        yield
    except UsageError:
        raise
    except Exception as exc:
        raise RunnerFailed(name, exc) from exc


@dataclass
class RunnerRun:
    name: str
    iterations: int
    nvtx: bool
    seconds: float
    warmup: int


def internal_run(specs, nloops: int = 5, sleep_s: float = 1.0, warmup: int = DEFAULT_WARMUP,
                 sleep: Callable[[float], None] = time.sleep) -> List[RunnerRun]:
    """What runs under nsys/nvprof: every runner, warmup iterations outside the NVTX ranges
    (so the ranges hold the optimised graph), nloops inside them, a pause in between."""
    runs = []
    for index, spec in enumerate(specs):
        nvtx = spec.params.get("device", "cpu").startswith("cuda")
        with runner_failures(spec.name), prepared(spec) as prep:
            run_iterations(spec.name, prep.workload, warmup)
            started = time.perf_counter()
            run_iterations(spec.name, prep.workload, nloops, nvtx=nvtx)
            runs.append(RunnerRun(spec.name, nloops, nvtx, time.perf_counter() - started, warmup))
        if sleep_s and index < len(specs) - 1:
            sleep(sleep_s)
    return runs


# --------------------------------------------------------------------------------------------
# External tools


@dataclass
class ExternalProfile:
    tool: str
    command: List[str]
    output: Path
    stdout_tail: str


def inner_command(options: Dict[str, object], runners: Sequence[str]) -> List[str]:
    """This CLI, re-run with --internal-run and the same options (values as separate args)."""
    cmd = [sys.executable, "-m", "rnnbench", "profile", "--internal-run"]
    for flag, value in options.items():
        if value is None:
            continue
        cmd += [f"--{flag}", str(value)]
    return cmd + ["--rnns", *runners]


def external_profile(tool_name: str, output_dir: Path, runners: Sequence[str], sizes: Dict[str, int],
                     options: Dict[str, object], overwrite: bool = False,
                     capability: Callable[[str], Optional[Tuple[int, int]]] = compute_capability,
                     now: Optional[datetime.datetime] = None, run=None) -> ExternalProfile:
    """Re-run the internal loop under nsys or nvprof; the report lands in output_dir.

    Refused before anything runs: a CPU device (both tools trace CUDA kernels and NVTX ranges,
    which a CPU run has none of: the report would be empty), then a GPU the tool does not
    support (nvprof on sm_80 and newer: told to use nsys even where nvprof is not installed,
    since installing it would not help), then a tool not on PATH."""
    tool = external.get_tool(tool_name)
    device = str(options.get("device") or "cpu")
    if not device.startswith("cuda"):
        raise UsageError(f"--profiler {tool.name} traces CUDA kernels and NVTX ranges, and --device {device} has none "
                         "(its report would be empty); use --profiler torch for a CPU profile")
    external.check_supported(tool, capability(device))
    executable = external.find_tool(tool, alternative="--profiler torch")
    folder = prepare_output_dir(output_dir)
    output = Path(str(output_base(folder, runners, sizes, now)) + tool.extension)
    inner = inner_command({**{name: sizes[name] for name in SIZE_DEFAULTS}, **options}, runners)
    kwargs = {"run": run} if run is not None else {}
    done = external.run_external(tool, output, inner, overwrite=overwrite, executable=executable, **kwargs)
    return ExternalProfile(tool=tool.name, command=done.command, output=done.output, stdout_tail=done.stdout_tail)


# --------------------------------------------------------------------------------------------
# torch.profiler


@dataclass
class TorchProfile:
    trace: Path
    table_text: Path
    table_markdown: Path
    stats_json: Path
    stats: Dict[str, dict] = field(default_factory=dict)
    runners: List[RunnerRun] = field(default_factory=list)


def torch_profile(specs, output_dir: Path, sizes: Dict[str, int], nloops: int = 5, warmup: int = DEFAULT_WARMUP,
                  overwrite: bool = False, now: Optional[datetime.datetime] = None, row_limit: int = 40) -> TorchProfile:
    """Run every runner's loop under one torch.profiler session; write trace and tables.

    Each runner is built and warmed up before the session starts (TorchScript's profiling
    executor and torch.compile optimise on the first calls); inside the session each runner's
    contexts are entered again and its iterations are recorded with
    `{runner}.forward` / `{runner}.backward` ranges, so the tables show per-runner totals.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    from benchcore.report.model import write_text_atomic
    from rnnbench.profiler_table import markdown_table, parse_key_averages, totals

    folder = prepare_output_dir(output_dir)
    base = str(output_base(folder, [s.name for s in specs], sizes, now))
    paths = {suffix: Path(base + suffix) for suffix in (".pt.trace.json", ".keyavg.txt", ".keyavg.md", ".keyavg.json")}
    for path in paths.values():
        if path.exists() and not overwrite:
            raise UsageError(f"profile output {path} already exists; pass --overwrite or wait for the next minute's file name")
    activities = [ProfilerActivity.CPU]
    if any(s.params.get("device", "cpu").startswith("cuda") for s in specs) and torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)

    built = []
    for spec in specs:
        with runner_failures(spec.name), runner_contexts(spec) as runner:
            prep = build(spec, runner)
            run_iterations(spec.name, prep.workload, warmup)
        built.append(prep)
    runs: List[RunnerRun] = []
    with profile(activities=activities, profile_memory=True) as prof:
        for spec, prep in zip(specs, built):
            with runner_failures(spec.name), runner_contexts(spec, prep.runner):
                started = time.perf_counter()
                run_iterations(spec.name, prep.workload, nloops, record=True)
                runs.append(RunnerRun(spec.name, nloops, False, time.perf_counter() - started, warmup))
    averages = prof.key_averages()
    stats = parse_key_averages(averages)
    # the old name: torch before 2.4 knows only it, later versions map it to self_device_time_total
    sort_by = "self_cuda_time_total" if len(activities) > 1 else "self_cpu_time_total"
    if paths[".pt.trace.json"].exists():
        paths[".pt.trace.json"].unlink()
    prof.export_chrome_trace(str(paths[".pt.trace.json"]))
    write_text_atomic(paths[".keyavg.txt"], averages.table(sort_by=sort_by, row_limit=row_limit) + "\n", overwrite=overwrite)
    key = "device_self_ms" if len(activities) > 1 else "self_ms"
    header = f"# torch.profiler key averages: {', '.join(s.name for s in specs)} ({describe_sizes(sizes)}, {nloops} iterations)\n\n"
    write_text_atomic(paths[".keyavg.md"], header + markdown_table(stats, n=row_limit, key=key) + "\n", overwrite=overwrite)
    write_text_atomic(paths[".keyavg.json"], json.dumps({"unit": "ms", "engine": "torch.profiler", "totals": totals(stats),
                                                       "stats": stats}, indent=1) + "\n",
                      overwrite=overwrite)
    return TorchProfile(trace=paths[".pt.trace.json"], table_text=paths[".keyavg.txt"], table_markdown=paths[".keyavg.md"],
                        stats_json=paths[".keyavg.json"], stats=stats, runners=runs)
