"""The worker-side executor for PyTorch cases: one CaseSpec → the metrics of that case.

`execute(spec, options)` is what benchcore.execute.worker calls in the worker
(`executor="opbench.backends.torch.executor:execute"`). options: {"settings": RunSettings
dict, "profiler": "native" | "python", "threads", "seed", "manifest": path,
"manifest_sha256": …}. The worker reads the manifest (never op_db: see discover.py), finds
the case's entry by (name, variant), checks the entry is the one the case was planned from
(its digest), and rebuilds the sample at the entry's scale on the case's device.

Engines (both run the warmup first, then read the device memory baseline: warm_up)
- python: perf_counter around each call bracketed by a device sync, or CUDA events on a
  CUDA device (benchcore.measure.timers.timer_for) → a Measurement for forward and backward.
- native: the measured loop under the kineto profiler (kineto.py), each timed call inside a record_function
  range; a call's figure is the time of the operators inside its range (on CPU their
  inclusive CPU time, which leaves out the Python between them; on CUDA their kernels' device
  time, backward's included though autograd runs it on a thread of its own), and the phase
  block names every operator seen, by its exact profiler name, with the OpInfo entry's own
  `aten::<aten_name>` picked out: its host `self_ms` / `total_ms`, and on CUDA its kernels'
  `device_self_ms` beside them (CUDA API calls such as cudaLaunchKernel are no operators).

A `cuda:N` case runs with N current (device_context): its syncs, CUDA events and memory
statistics are N's.

Backward runs autograd from every floating-point output that carries a gradient, against a
random gradient of its shape (drawn once, outside the timed region); input gradients are reset
to None between iterations (untimed: before the next forward), so backward never times an
accumulation.

Audit (options["audit"], on unless False): once per case (in one of its rounds:
benchcore.measure.audit.RoundAudits), untimed, of what the last timed call left (audit.py: the
inputs, the last timed forward's outputs and backward's input gradients, counted after the
memory figures are read), with the
override table's reason when the non-normal values are the operator's (overrides.NON_NORMAL).
Subnormal flushing (options["flush_denormal"]): torch.set_flush_denormal before the case's
first operator; `metrics["denormals"]` records what torch's threads really do (frameworks.torch.flush_state, as
rnnbench's).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import replace
from typing import Any, Dict, List, Optional

from benchcore.errors import SkipCase, UsageError
from benchcore.measure import audit
from benchcore.measure.case import CaseSpec, Workload
from benchcore.measure.gpu_clock import sm_clock
from benchcore.measure.memory import RSS_AFTER, RSS_BEFORE, RSS_PEAK, peak_rss, reset_peak_rss, resident_bytes
from benchcore.measure.runner import RunSettings, run_workload
from benchcore.measure.timers import PhaseMarker, timer_for

from . import kineto

ENGINES = ("native", "python", "instructions")
#: imported by a fresh worker before its first case (benchcore.execute.worker)
WORKER_PRELOAD = ("torch",)


@functools.lru_cache(maxsize=2)
def _manifest(path: str, sha256: Optional[str]):
    from .manifest import load

    manifest = load(path)
    if sha256 and manifest.sha256 != sha256:
        raise UsageError(f"manifest {path} changed since the sweep was planned; rerun the sweep")
    return manifest


def sync_for(device: str):
    """Wait for the case's own device: a bare torch.cuda.synchronize() waits for the current
    device, which for `cuda:N` is the case's only while device_context is entered."""
    if device.startswith("cuda"):
        import torch

        return functools.partial(torch.cuda.synchronize, torch.device(device))
    return lambda: None


def device_context(device: str):
    """Make `cuda:N` the current device for the case: the default stream the operators run on,
    the stream the CUDA events are recorded on and the allocator statistics are then all N's
    (without it `--device cuda:1` times device 0's empty stream)."""
    if not device.startswith("cuda"):
        return contextlib.nullcontext()
    import torch

    return torch.cuda.device(torch.device(device))


def _heads(output) -> List[Any]:
    from .sample import tensors_in

    return [t for t in tensors_in(output) if t.requires_grad and t.grad_fn is not None
            and (t.dtype.is_floating_point or t.dtype.is_complex)]


def build_workload(fn, first, args, kwargs, with_backward: bool, device: str, seed: int) -> Workload:
    """The operator as a Workload (see the module docstring)."""
    import torch

    from .sample import tensors_in

    sync = sync_for(device)

    def forward():
        return fn(first, *args, **kwargs)

    if not with_backward:
        return Workload(forward=forward, sync=sync, device=device.split(":")[0])
    leaves = [t for t in tensors_in([first, args, kwargs]) if t.requires_grad]
    cache: Dict[str, Any] = {}

    def backward_setup(output):
        heads = _heads(output)
        shapes = [(h.shape, h.dtype) for h in heads]
        if cache.get("shapes") != shapes:
            generator = torch.Generator(device=heads[0].device if heads else "cpu").manual_seed(seed)
            cache["shapes"] = shapes
            cache["grads"] = [torch.randn(h.shape, dtype=h.dtype, device=h.device, generator=generator) for h in heads]
        return heads, cache["grads"]

    def backward(prepared):
        heads, grads = prepared
        torch.autograd.backward(heads, grads)

    def zero_grad():
        for leaf in leaves:
            leaf.grad = None

    return Workload(forward=forward, sync=sync, backward_setup=backward_setup, backward=backward,
                    zero_grad=zero_grad, device=device.split(":")[0])


# --------------------------------------------------------------------------- engines


class RangeTimer:
    """The inner timer, with each timed call inside one profiler range; which phase each call
    was is read from the marker after it (the ranges are matched to it by their order)."""

    name = "torch-profiler"

    def __init__(self, inner, marker: PhaseMarker):
        self.inner = inner
        self.marker = marker
        self.phases: List[str] = []

    def time(self, fn):
        from torch.profiler import record_function

        def ranged():
            with record_function(kineto.RANGE_NAME):
                return fn()

        self.marker.phase = ""
        result, ms = self.inner.time(ranged)
        self.phases.append(self.marker.phase)
        return result, ms


def warm_up(workload: Workload, settings: RunSettings, timer) -> float:
    """The warmup calls, timed as the measured ones are (their time counts in timed_total_ms).

    Run before the device memory baseline is read: the first matmul in a worker makes cuBLAS
    allocate its workspace (cuDNN likewise), which the caching allocator keeps for the process;
    read before, that workspace would land in the peak of whichever case came first."""
    if not settings.warmup:
        return 0.0
    warm = RunSettings(warmup=0, runs=settings.warmup, run_backward=settings.run_backward)
    return run_workload(replace(workload, last_call=None), warm, timer).timed_total_ms


def run_python(workload: Workload, settings: RunSettings, timer) -> dict:
    outcome = run_workload(workload, settings, timer)
    metrics = outcome.to_dict()
    metrics["profiler"] = None
    return metrics


def run_instructions(workload: Workload, settings: RunSettings) -> dict:
    """Counts under callgrind (benchcore.measure.instructions), on one intra-op thread."""
    import torch

    from benchcore.execute.valgrind import count_in_worker

    torch.set_num_threads(1)
    metrics = count_in_worker(workload, settings)
    metrics["profiler"] = None
    return metrics


def run_native(workload: Workload, settings: RunSettings, device: str, aten_name: Optional[str], timer) -> dict:
    """The measured runs under the profiler (see the module docstring); the warmup ran before."""
    marker = PhaseMarker()
    marked = replace(workload, forward=marker.marking("forward", workload.forward),
                     backward=marker.marking("backward", workload.backward) if workload.backward else None)
    ranged = RangeTimer(timer, marker)
    on_cuda = device.startswith("cuda")
    with kineto.profile(on_cuda) as prof:
        outcome = run_workload(marked, settings, ranged, resolution_ms=kineto.RESOLUTION_MS)
    turned = outcome.extra_warmup * (2 if outcome.backward is not None else 1)  # calls the runner made warmup
    ranged.phases[:turned] = ["warmup"] * turned
    phases = kineto.phase_summaries(kineto.spans(prof, on_cuda), ranged.phases, on_cuda, aten_name)
    metrics = outcome.to_dict()
    missing = {f"profiler.{phase}": "phase not run" for phase in ("forward", "backward") if phases.get(phase) is None}
    metrics["profiler"] = {"engine": "torch-profiler", "device": device, "forward": phases.get("forward"),
                           "backward": phases.get("backward") if outcome.backward is not None else None,
                           "missing": missing}
    return metrics


def run_engine(workload: Workload, settings: RunSettings, device: str, engine: str,
               aten_name: Optional[str], flush_l2: bool = False) -> dict:
    """Warmup, then the device memory baseline, then the engine's measured runs; the metrics
    with the warmup counted, the measured runs' device memory peak and, on CUDA, the SM clock
    right after them (benchcore.measure.gpu_clock). flush_l2: cold-cache timing (benchcore.measure.timers.L2Flush)."""
    timer = timer_for(device, workload.sync, flush_l2)  # before the baseline: a flush buffer is the worker's
    warm_total = warm_up(workload, settings, timer)
    memory = _device_memory_start(device)
    measured = RunSettings(**{**settings.to_dict(), "warmup": 0})
    if engine == "python":
        metrics = run_python(workload, measured, timer)
    else:
        metrics = run_native(workload, measured, device, aten_name, timer)
    metrics["flush_l2"] = flush_l2
    metrics["warmup"] = settings.warmup
    metrics["timed_total_ms"] += warm_total
    metrics["missing"] = dict(metrics.get("missing") or {})
    metrics["peak_bytes"], why = _device_memory_peak(device, memory)
    if why:
        metrics["missing"]["peak_bytes"] = why
    if device.startswith("cuda"):
        metrics["sm_clock"] = sm_clock(gpu_uuid(device))
    return metrics


def gpu_uuid(device: str) -> str:
    """The GPU's UUID as NVML and nvidia-smi name it ("GPU-…")."""
    import torch

    return f"GPU-{torch.cuda.get_device_properties(torch.device(device)).uuid}"


# --------------------------------------------------------------------------- the executor


def _check_device(device: str) -> None:
    if device == "cpu":
        return
    import torch

    index = int(device.split(":")[1]) if ":" in device else 0
    if not torch.cuda.is_available() or torch.cuda.device_count() <= index:
        raise SkipCase(f"{device} is not available here (torch sees {torch.cuda.device_count()} CUDA devices)")


def _entry(spec: CaseSpec, options: dict):
    """(entry, data table) of a case: its manifest entry, or the call and sample the spec
    carries itself (opbench crossframe's torch side, at the MXNet case's shapes)."""
    params = spec.params
    if "tree" in params:
        return {"call": params["call"], "tree": params["tree"], "scale": {"k": 1, "ints": False},
                "inputs": params["inputs"], "aten_name": None}, {}
    name, variant = params["op"], params.get("variant") or ""
    manifest = _manifest(options["manifest"], options.get("manifest_sha256"))
    entry = manifest.entry(name, variant)
    if entry is None or manifest.digests[(name, variant)] != params.get("sample_digest"):
        raise UsageError(f"{name} [{variant}] is not in manifest {manifest.path} as planned; rerun the sweep")
    return entry, manifest.data


def execute(spec: CaseSpec, options: dict) -> dict:
    """Run one case with the engine in options["profiler"], on its device made current; its
    JSON metrics."""
    engine = options.get("profiler") or "native"
    if engine not in ENGINES:
        raise UsageError(f"unknown profiler {engine!r}; choose native, python or instructions")
    device = spec.params["device"]
    _check_device(device)
    with device_context(device):
        return _run_case(spec, options, engine, device)


def _run_case(spec: CaseSpec, options: dict, engine: str, device: str) -> dict:
    import torch

    from frameworks.torch import flush_state

    from .audit import counter
    from .callables import callable_for
    from .overrides import NON_NORMAL
    from .sample import Decoder, Scale, tensors_in

    settings = RunSettings.from_dict(options.get("settings") or {})
    denormals = flush_state(bool(options.get("flush_denormal")))
    params = spec.params
    name, variant = params["op"], params.get("variant") or ""
    entry, data = _entry(spec, options)
    backward = bool(params.get("run_backward")) and settings.run_backward
    seed = int(params.get("seed", 0))
    torch.manual_seed(seed)
    first, args, kwargs = Decoder(data, Scale(**entry["scale"]), device, seed, grad=backward).sample(entry["tree"])
    fn = callable_for(entry["call"], name, variant)
    rss_before = resident_bytes()
    peak_reset = reset_peak_rss()
    workload = build_workload(fn, first, args, kwargs, backward, device, seed)
    counted = counter((first, args, kwargs), backward, NON_NORMAL.get((name, variant)))
    if audit.needed(options):
        workload.last_call = counted
    run_settings = RunSettings(**{**settings.to_dict(), "run_backward": backward})
    if engine == "instructions":
        metrics = run_instructions(workload, run_settings)
    else:
        metrics = run_engine(workload, run_settings, device, engine, entry.get("aten_name"),
                             bool(options.get("flush_l2")))
    metrics["engine"] = engine
    metrics["framework"] = "torch"
    if not backward:
        metrics["missing"]["backward"] = params.get("no_backward_reason") or "backward not requested"
    metrics["inputs"] = entry["inputs"]
    metrics["input_bytes"] = sum(t.numel() * t.element_size() for t in tensors_in([first, args, kwargs]))
    metrics["threads"] = torch.get_num_threads()
    metrics[RSS_BEFORE] = rss_before
    metrics[RSS_PEAK] = peak_rss() if peak_reset else None
    metrics["denormals"] = denormals
    counted.record(metrics, options, workload)
    del first, args, kwargs, workload, counted
    return_freed_memory()
    metrics[RSS_AFTER] = resident_bytes()
    return metrics


def return_freed_memory() -> None:
    """Give the case's freed heap back to the system (glibc keeps it otherwise): a reused worker
    then starts the next case near its own size instead of at its high-water mark (1.1-1.2 GiB
    without this), so the memory a sweep holds is one case's, and --memory-limit-gb measures
    what a worker really keeps.

    What survives the collection (the manifest, caches: ~125,000 objects after the first case)
    is frozen (gc.freeze), so the next case's collection walks only what that case made: 0.24 s
    a case before, for the same garbage found."""
    import ctypes
    import gc

    gc.collect()
    gc.freeze()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def _device_memory_start(device: str) -> Optional[int]:
    """The device memory the case holds once warmed up (see warm_up), its peak statistics reset."""
    if not device.startswith("cuda"):
        return None
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    return torch.cuda.memory_allocated(device)


def _device_memory_peak(device: str, start: Optional[int]):
    """(bytes the measured runs allocated at their peak above what the warmed-up case held, reason)."""
    if start is None:
        return None, "torch keeps no allocator statistics on CPU; rss_peak_bytes is the worker's resident peak"
    import torch

    return max(0, torch.cuda.max_memory_allocated(device) - start), None


