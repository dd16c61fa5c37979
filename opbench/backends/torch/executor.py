"""The worker-side executor for PyTorch cases: one CaseSpec → the metrics of that case.

`execute(spec, options)` is what benchcore.isolation calls in the worker
(`executor="opbench.backends.torch.executor:execute"`). options: {"settings": RunSettings
dict, "profiler": "native" | "python", "threads", "seed", "manifest": path,
"manifest_sha256": …}. The worker reads the manifest (never op_db: see discover.py), finds
the case's entry by (name, variant), checks the entry is the one the case was planned from
(its digest), and rebuilds the sample at the entry's scale on the case's device.

Engines
- python: perf_counter around each call bracketed by a device sync, or CUDA events on a
  CUDA device (benchcore.timers.timer_for) → a Measurement for forward and backward.
- native: the warmup untimed by the profiler, then the same loop under torch.profiler, each
  timed call inside a record_function range; a call's figure is the time of the operators
  inside its range (on CPU their inclusive CPU time, which leaves out the Python between
  them; on CUDA their kernels' device time), and the phase block names every operator seen,
  by its exact profiler name, with the OpInfo entry's own `aten::<aten_name>` picked out.

Backward runs autograd from every floating-point output that carries a gradient, against a
random gradient of its shape (drawn once, outside the timed region); input gradients are reset
to None after each iteration (untimed), so backward never times an accumulation.

Audit (options["audit"], on unless False): once per case, untimed, after the timed runs
(audit.py: the inputs, one more forward, and one more backward's input gradients), with the
override table's reason when the non-normal values are the operator's (overrides.NON_NORMAL).
Subnormal flushing (options["flush_denormal"]): torch.set_flush_denormal before the case's
first operator; `metrics["denormals"]` records what torch's threads really do (benchcore.environment's
torch_flush_state, as rnnbench's).
"""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional

from benchcore.case import CaseSpec, Workload
from benchcore.errors import SkipCase, UsageError
from benchcore.memory import peak_rss, reset_peak_rss, resident_bytes
from benchcore.runner import RunSettings, run_workload
from benchcore.timers import PhaseMarker, timer_for

ENGINES = ("native", "python", "instructions")
#: imported by a fresh worker before its first case (benchcore.isolation)
WORKER_PRELOAD = ("torch",)
#: the profiler range around each timed call
RANGE_NAME = "opbench::call"
#: the profiler's clock step (it records microseconds with a nanosecond fraction)
RESOLUTION_MS = 1e-6
US_PER_MS = 1e3


@functools.lru_cache(maxsize=2)
def _manifest(path: str, sha256: Optional[str]):
    from .manifest import load

    manifest = load(path)
    if sha256 and manifest.sha256 != sha256:
        raise UsageError(f"manifest {path} changed since the sweep was planned; rerun the sweep")
    return manifest


def _sync_for(device: str):
    if device.startswith("cuda"):
        import torch

        return torch.cuda.synchronize
    return lambda: None


def _heads(output) -> List[Any]:
    from .sample import tensors_in

    return [t for t in tensors_in(output) if t.requires_grad and t.grad_fn is not None
            and (t.dtype.is_floating_point or t.dtype.is_complex)]


def build_workload(fn, first, args, kwargs, with_backward: bool, device: str, seed: int) -> Workload:
    """The operator as a Workload (see the module docstring)."""
    import torch

    from .sample import tensors_in

    sync = _sync_for(device)

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
            with record_function(RANGE_NAME):
                return fn()

        self.marker.phase = ""
        result, ms = self.inner.time(ranged)
        self.phases.append(self.marker.phase)
        return result, ms


def run_instructions(workload: Workload, settings: RunSettings) -> dict:
    """Counts under callgrind (benchcore.instructions), on one intra-op thread."""
    import torch

    from benchcore.instructions import count_workload
    from benchcore.valgrind import Collector

    torch.set_num_threads(1)
    metrics = count_workload(workload, settings, Collector.in_worker())
    metrics["forward"] = metrics["backward"] = None
    metrics["profiler"] = None
    return metrics


def run_python(workload: Workload, settings: RunSettings, device: str) -> dict:
    outcome = run_workload(workload, settings, timer_for(device, workload.sync))
    metrics = outcome.to_dict()
    metrics["profiler"] = None
    return metrics


def run_native(workload: Workload, settings: RunSettings, device: str, aten_name: Optional[str]) -> dict:
    """Warmup without the profiler, then the measured runs under it (see the module docstring)."""
    from torch.profiler import ProfilerActivity, profile

    warm_total = 0.0
    if settings.warmup:
        warm = RunSettings(warmup=0, runs=settings.warmup, run_backward=settings.run_backward)
        warm_total = run_workload(workload, warm, timer_for(device, workload.sync)).timed_total_ms
    marker = PhaseMarker()
    marked = Workload(forward=marker.marking("forward", workload.forward), sync=workload.sync,
                      backward_setup=workload.backward_setup,
                      backward=marker.marking("backward", workload.backward) if workload.backward else None,
                      zero_grad=workload.zero_grad, device=workload.device)
    timer = RangeTimer(timer_for(device, workload.sync), marker)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    measured = RunSettings(**{**settings.to_dict(), "warmup": 0})
    with profile(activities=activities) as prof:
        outcome = run_workload(marked, measured, timer, resolution_ms=RESOLUTION_MS)
    phases = phase_summaries(prof.events(), timer.phases, device.startswith("cuda"), aten_name)
    metrics = outcome.to_dict()
    metrics["warmup"] = settings.warmup
    metrics["timed_total_ms"] = outcome.timed_total_ms + warm_total
    missing = {f"profiler.{phase}": "phase not run" for phase in ("forward", "backward") if phases.get(phase) is None}
    metrics["profiler"] = {"engine": "torch-profiler", "device": device, "forward": phases.get("forward"),
                           "backward": phases.get("backward") if outcome.backward is not None else None,
                           "missing": missing}
    return metrics


def phase_summaries(events, phases: List[str], on_device: bool, aten_name: Optional[str]) -> Dict[str, dict]:
    """{phase: summary} from the profiler's events, the i-th range being the i-th timed call
    (of phase phases[i]): per call, the time of the operators inside its range; plus every
    operator by its profiler name (count, self and total ms) and the entry's own."""
    calls: Dict[str, List[float]] = {}
    names: Dict[str, Dict[str, dict]] = {}
    ranges = sorted((e for e in events if e.name == RANGE_NAME), key=lambda e: e.time_range.start)
    if len(ranges) != len(phases):
        raise RuntimeError(f"the profiler recorded {len(ranges)} call ranges for {len(phases)} timed calls")
    for event, phase in zip(ranges, phases):
        if on_device:
            inside_us = sum(_device_us(child) for child in _descendants(event))
        else:
            inside_us = event.cpu_time_total - event.self_cpu_time_total
        calls.setdefault(phase, []).append(inside_us / US_PER_MS)
        table = names.setdefault(phase, {})
        for child in _descendants(event):
            row = table.setdefault(child.name, {"count": 0, "self_ms": 0.0, "total_ms": 0.0})
            row["count"] += 1
            row["self_ms"] += (_device_us(child) if on_device else child.self_cpu_time_total) / US_PER_MS
            row["total_ms"] += child.cpu_time_total / US_PER_MS
    return {phase: _summary(per_call, names[phase], aten_name) for phase, per_call in calls.items()}


def _descendants(event):
    for child in event.cpu_children:
        yield child
        yield from _descendants(child)


def _device_us(event) -> float:
    return float(getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0.0) or 0.0)


def _summary(per_call: List[float], entries: Dict[str, dict], aten_name: Optional[str]) -> dict:
    own = f"aten::{aten_name}" if aten_name else None
    return {"Count": len(per_call), "Total_ms": sum(per_call), "Min_ms": min(per_call), "Max_ms": max(per_call),
            "Avg_ms": sum(per_call) / len(per_call), "calls": len(per_call), "per_call_ms": per_call,
            "resolution_ms": RESOLUTION_MS, "source": "all operators of each call",
            "operator": own if own in entries else None,
            "entries": dict(sorted(entries.items()))}


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
    """Run one case with the engine in options["profiler"]; its JSON metrics."""
    import torch

    from benchcore.environment import torch_flush_state

    from .audit import add_audit
    from .callables import callable_for
    from .overrides import NON_NORMAL
    from .sample import Decoder, Scale, tensors_in

    engine = options.get("profiler") or "native"
    if engine not in ENGINES:
        raise UsageError(f"unknown profiler {engine!r}; choose native, python or instructions")
    settings = RunSettings.from_dict(options.get("settings") or {})
    denormals = torch_flush_state(bool(options.get("flush_denormal")))
    params = spec.params
    name, variant, device = params["op"], params.get("variant") or "", params["device"]
    _check_device(device)
    entry, data = _entry(spec, options)
    backward = bool(params.get("run_backward")) and settings.run_backward
    seed = int(params.get("seed", 0))
    torch.manual_seed(seed)
    first, args, kwargs = Decoder(data, Scale(**entry["scale"]), device, seed, grad=backward).sample(entry["tree"])
    fn = callable_for(entry["call"], name, variant)
    rss_before = resident_bytes()
    peak_reset = reset_peak_rss()
    workload = build_workload(fn, first, args, kwargs, backward, device, seed)
    run_settings = RunSettings(**{**settings.to_dict(), "run_backward": backward})
    memory = _device_memory_start(device)
    if engine == "python":
        metrics = run_python(workload, run_settings, device)
    elif engine == "instructions":
        metrics = run_instructions(workload, run_settings)
    else:
        metrics = run_native(workload, run_settings, device, entry.get("aten_name"))
    metrics["engine"] = engine
    metrics["framework"] = "torch"
    metrics["missing"] = dict(metrics.get("missing") or {})
    if not backward:
        metrics["missing"]["backward"] = params.get("no_backward_reason") or "backward not requested"
    metrics["peak_bytes"], why = _device_memory_peak(device, memory)
    if why:
        metrics["missing"]["peak_bytes"] = why
    metrics["inputs"] = entry["inputs"]
    metrics["input_bytes"] = sum(t.numel() * t.element_size() for t in tensors_in([first, args, kwargs]))
    metrics["threads"] = torch.get_num_threads()
    metrics["rss_before_bytes"] = rss_before
    metrics["rss_peak_bytes"] = peak_rss() if peak_reset else None
    metrics["denormals"] = denormals
    add_audit(metrics, options, workload, (first, args, kwargs), NON_NORMAL.get((name, variant)))
    del first, args, kwargs, workload
    return_freed_memory()
    metrics["rss_after_bytes"] = resident_bytes()
    return metrics


def return_freed_memory() -> None:
    """Give the case's freed heap back to the system (glibc keeps it otherwise): a reused worker
    then starts the next case near its own size instead of at its high-water mark (1.1-1.2 GiB
    without this), so the memory a sweep holds is one case's, and --memory-limit-gb measures
    what a worker really keeps."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def _device_memory_start(device: str) -> Optional[int]:
    if not device.startswith("cuda"):
        return None
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    return torch.cuda.memory_allocated(device)


def _device_memory_peak(device: str, start: Optional[int]):
    """(bytes the measured runs allocated at their peak above what the case started with, reason)."""
    if start is None:
        return None, "torch keeps no allocator statistics on CPU; rss_peak_bytes is the worker's resident peak"
    import torch

    return max(0, torch.cuda.max_memory_allocated(device) - start), None


