"""The worker-side executor: one opbench CaseSpec → the metrics of that case.

`execute(spec, options)` is what benchcore.execute.worker calls in the worker process
(`executor="opbench.backends.mxnet.executor:execute"`). options:
`{"settings": RunSettings dict, "profiler": "native" | "python", "threads": n | None}`.

Engines
- python: benchcore's run_workload with a perf_counter timer around each call, bracketed by
  `mx.nd.waitall()` → a full Measurement for forward and backward.
- native: the warmup runs untimed by the profiler, then the same loop runs with MXNet's
  profiler on and one aggregate dump per timed call (opbench.backends.mxnet.profiler), which gives
  the operator's own forward/backward kernel times, and the case's peak storage memory. The
  loop is still timed with perf_counter, so a native result carries wall-time Measurements
  too; the reported figures, adaptive sampling and `compare` use the profiler's per-call times.

Peak memory (native) is the profiler's storage counter: bytes of storage allocated while the
measured runs execute (outputs, head gradients and workspace; not the input gradients, whose
buffers attach_grad allocates before the profiler starts), above the counter's value when they
started, so it is that case's own figure and does not accumulate across the cases a worker
runs. Inputs exist before and are reported separately as `input_bytes`. The profiler stays on
until every array the runs made is freed, which keeps its counter balanced from one case to
the next. Temporary workspace MXNet already holds is not counted: opbench runs MXNet with one
CPU temp-space copy (opbench.backends.mxnet.workspace), which the warmup grows to what the case needs,
so the figure does not depend on what the worker ran before (with `-w 0` the first measured
call may still allocate workspace). `profiler.cpu_temp_copies` records the setting. On a
counter that already holds tens of MB, MXNet's dump is exact to a few bytes, not to one. (MXNet 1.9.1 on CPU has no other memory API: `mx.context.gpu_memory_info` is
GPU-only and reports the whole device, other processes included.)

Every metric this module cannot measure is null, with the reason in `missing`.

Audit (benchcore.measure.audit; options["audit"], on unless False): once per case (in one of its rounds,
benchcore.measure.audit.RoundAudits), untimed, right after the last timed call: the inputs as the
runs left them (in-place updates included), the outputs of the last timed forward (handed over by
the runner: Workload.last_call; no forward is run for the audit) and the input gradients of the
last timed backward, with the case's head gradients (ones); CPU arrays are counted on their own
buffers (no copy). The instruction engine, which runs its own loop under valgrind, hands no call
over: there the audit runs one more forward and backward (benchcore.measure.audit.one_more_call). metrics["audit"] holds the counts per tensor, the flag,
the rule's `expected` reason and `elapsed_ms`.

Subnormal flushing (options["flush_denormal"]): set on the worker's thread before the case's
first MXNet operator, so MXNet's engine threads, created at a process's first operator, start
with it; threads that already exist keep their state, which `metrics["denormals"]` records as
measured (benchcore.measure.denormals.flush_probe), with the Python thread's MXCSR bits.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional

from benchcore.errors import SkipCase, UsageError
from benchcore.measure import audit
from benchcore.measure.case import CaseSpec, Workload
from benchcore.measure.measurement import Measurement
from benchcore.measure.memory import RSS_AFTER, RSS_BEFORE, RSS_PEAK, peak_rss, reset_peak_rss, resident_bytes
from benchcore.measure.runner import RunSettings, run_workload
from benchcore.measure.timers import PerfCounterTimer
from opbench import inputs
from opbench.backends.mxnet.profiler import (
    RESOLUTION_MS,
    MXNetProfiler,
    PhaseStats,
    device_key,
    peak_bytes,
    summarize_phase,
)

from . import arrays, registry, releases, workspace
from .cases import describe_inputs
from .device import mx_context

ENGINES = ("native", "python", "instructions")
#: Imported by a fresh worker before it takes a case (see benchcore.execute.worker), so MXNet's
#: import is not billed to the first case's timeout and wall time; without what no operator uses
#: (frameworks.mxnet.NOT_FOR_OPERATORS), which every round's fresh worker would pay again.
WORKER_PRELOAD = ("frameworks.mxnet:import_for_worker",)
# An `ab` side whose MXNet is older than opbench supports is refused when its python is checked
# (benchcore imports this module there), in one line, instead of failing every case.
releases.refuse_recorded_release()


def _sync() -> None:
    import mxnet as mx

    mx.nd.waitall()


def _outputs(result) -> List[Any]:
    import mxnet as mx

    items = result if isinstance(result, (list, tuple)) else [result]
    return [item for item in items if isinstance(item, mx.nd.NDArray)]


def _nbytes(array) -> int:
    import numpy as np

    return int(array.size) * np.dtype(array.dtype).itemsize


def _arrays(value) -> List[Any]:
    import mxnet as mx

    return inputs.leaves(value, mx.nd.NDArray)


@dataclass
class PhaseMarker:
    """Set by the workload's forward/backward so a timer knows which phase it just timed."""

    phase: str = ""

    def marking(self, phase: str, fn):
        def marked(*args):
            self.phase = phase
            return fn(*args)
        return marked


def _ones_of(head):
    """Ones of `head`'s shape, dtype and context: made from the shape, not with ones_like, which
    reads the head (an output in oneDNN's blocked layout is first reordered: 4.0 against 1.3 s for
    the 528 MB output of Convolution (32,3,256,256), each round). A sparse head keeps ones_like."""
    import mxnet as mx

    if releases.is_numpy_array(head):
        return mx.np.ones(head.shape, dtype=head.dtype, ctx=head.context)
    if head.stype != "default":
        return mx.nd.ones_like(head)
    return mx.nd.ones(head.shape, ctx=head.context, dtype=head.dtype)


def build_workload(materialized, with_backward: bool, device: str = "cpu") -> Workload:
    """The operator as a Workload: forward records under autograd when backward will run.

    backward_setup gives head gradients of ones (untimed), made once and reused while the
    outputs keep their shapes: allocating and filling them every iteration cost more than
    some operators' backward. They belong to the harness, not the operator, so they are not
    part of the case's peak memory. backward runs autograd from every output. Gradients are
    written, not accumulated (grad_req 'write'), so no zeroing is needed.
    """
    import mxnet as mx

    if not with_backward:
        return Workload(forward=materialized.call, sync=_sync, device=device)

    def forward():
        with mx.autograd.record():
            return materialized.call()

    cache: Dict[str, Any] = {}

    def backward_setup(output):
        heads = _outputs(output)
        key = [(h.shape, h.dtype, h.context, type(h), h.stype) for h in heads]
        if cache.get("key") != key:
            cache["key"] = key
            cache["grads"] = [_ones_of(h) for h in heads]
        return heads, cache["grads"]

    def backward(prepared):
        heads, head_grads = prepared
        mx.autograd.backward(heads, head_grads)

    return Workload(forward=forward, sync=_sync, backward_setup=backward_setup, backward=backward,
                    device=device)


# ---------------------------------------------------------------------------------------------
# Engines


def run_instructions(workload: Workload, settings: RunSettings) -> dict:
    """Counts under callgrind (benchcore.measure.instructions): the worker runs under valgrind's launcher,
    with MXNet's NaiveEngine, so each operator runs inside the counted call. Under a threaded
    engine the operator runs on an engine thread the count does not hold (a doubled input counted
    the same), so a worker without it is refused rather than left to count the Python around."""
    from benchcore.execute.valgrind import count_in_worker
    from frameworks.mxnet import COUNT_ENVIRONMENT

    for name, value in COUNT_ENVIRONMENT:
        if os.environ.get(name) != value:
            raise UsageError(f"the instruction engine needs {name}={value} in MXNet's worker (it has "
                             f"{os.environ.get(name)!r}): launch it with valgrind.plan(..., suite.count_environment)")
    metrics = count_in_worker(workload, settings)
    metrics["profiler"] = None
    return metrics


def run_python(workload: Workload, settings: RunSettings) -> dict:
    outcome = run_workload(workload, settings, PerfCounterTimer(_sync))
    metrics = outcome.to_dict()
    metrics["profiler"] = None
    return metrics


class ProfilingTimer:
    """perf_counter timing plus one profiler dump per timed call, filed under its phase.

    Anything queued before the call is finished and dumped first (sync, then dump), so a
    call's dump holds exactly the work of that call.
    """

    name = "perf_counter+mxnet-profiler"

    def __init__(self, profiler, marker: PhaseMarker):
        self.inner = PerfCounterTimer(_sync)
        self.profiler = profiler
        self.marker = marker
        self.phases: Dict[str, PhaseStats] = {"forward": PhaseStats(), "backward": PhaseStats()}
        self.other_dumps: list = []

    def time(self, fn):
        _sync()
        self.other_dumps.append(self.profiler.dump())
        self.marker.phase = ""
        result, ms = self.inner.time(fn)
        dump = self.profiler.dump()
        phase = self.phases.get(self.marker.phase)
        (phase.dumps if phase is not None else self.other_dumps).append(dump)
        return result, ms

    def reported(self) -> tuple:
        """The per-call profiler times so far (the report's per_call_ms): what adaptive mode
        must judge (see run_native)."""
        return self.phases["forward"].window_totals_ms(), self.phases["backward"].window_totals_ms()

    def all_dumps(self):
        return self.other_dumps + self.phases["forward"].dumps + self.phases["backward"].dumps


def run_native(workload: Workload, settings: RunSettings, op: str, ctx) -> dict:
    """Warmup without the profiler (with it on MXNet 1.4: releases.warmup_under_profiler), then
    the measured runs with it (see the module docstring)."""

    profiler = MXNetProfiler(records_per_call=releases.profiler_records_per_call())
    warm_profiled = releases.warmup_under_profiler()
    marker = PhaseMarker()
    marked = replace(workload, forward=marker.marking("forward", workload.forward),
                     backward=marker.marking("backward", workload.backward) if workload.backward else None)
    measured = RunSettings(**{**settings.to_dict(), "warmup": 0})
    timer = ProfilingTimer(profiler, marker)
    warm_total = 0.0
    try:
        if warm_profiled:
            profiler.start()
        if settings.warmup:
            warm = RunSettings(warmup=0, runs=settings.warmup, run_backward=settings.run_backward)
            warm_total = run_workload(replace(workload, last_call=None), warm, PerfCounterTimer(_sync)).timed_total_ms
        profiler.start()  # drops whatever the warmup recorded
        baseline = profiler.baseline_bytes(ctx, _sync)
        outcome = run_workload(marked, measured, timer, reported=timer.reported, resolution_ms=RESOLUTION_MS)
        for phase in timer.phases.values():  # the calls the runner turned into warmup
            phase.drop_first(outcome.extra_warmup)
        _sync()  # the runs' last arrays are freed by now: let the counter see it
        timer.other_dumps.append(profiler.dump())
    finally:
        profiler.stop()

    metrics = replace(outcome, warmup=settings.warmup).to_dict()  # the warmup ran before the profiler
    metrics["timed_total_ms"] = outcome.timed_total_ms + warm_total
    missing: Dict[str, str] = {}
    forward, reason = summarize_phase(timer.phases["forward"], op)
    if forward is None:
        missing["profiler.forward"] = reason
    if outcome.backward is not None:
        backward, reason = summarize_phase(timer.phases["backward"], None)
        if backward is None:
            missing["profiler.backward"] = reason
    else:
        backward = None
        missing["profiler.backward"] = "backward not run for this case"
    device = device_key(ctx)
    peak, reason = peak_bytes(timer.all_dumps(), device, baseline)
    if peak is None:
        missing["profiler.peak_bytes"] = reason
    metrics["profiler"] = {
        "engine": "mxnet-native",
        "cpu_temp_copies": _cpu_temp_copies(),
        "forward": forward,
        "backward": backward,
        "peak_bytes": peak,
        "baseline_bytes": baseline,
        "device": device,
        "dump_format": profiler.dump_format,
        "records_per_call": profiler.records_per_call,
        "warmup_profiled": warm_profiled,
        "missing": missing,
    }
    return metrics


def _cpu_temp_copies() -> Optional[int]:
    """MXNet's CPU temp-space copies in this process; None when MXNet was imported before
    opbench could set it (then whatever the environment said at that import applies)."""
    if not workspace.TEMP_COPY_APPLIED:
        return None
    try:
        return int(os.environ.get(workspace.TEMP_COPY_ENV, "4"))
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# opperf's entry keys


def opperf_entry_keys(op: str, engine: str, device: str) -> List[str]:
    if engine == "native":
        return [f"avg_time_forward_{op}", f"avg_time_backward_{op}", f"max_storage_mem_alloc_{device}"]
    return [f"avg_time_{op}", f"p50_time_{op}", f"p90_time_{op}", f"p99_time_{op}"]


def add_opperf_keys(metrics: dict, op: str, engine: str, device: str, backward_reason: Optional[str]) -> None:
    """opperf's keys (ms, bytes), with opperf's meaning, kept next to the full statistics.

    python: avg/p50/p90/p99 of one whole iteration (forward plus backward when it ran), as
    opperf's python profiler timed them. native: the profiler's forward and backward averages
    and the peak storage bytes.
    """
    missing = metrics.setdefault("missing", {})
    profiler = metrics.get("profiler") or {}
    if engine == "instructions":
        missing["timing"] = "the instruction engine counts instructions under valgrind; it times nothing"
        metrics["opperf_keys"] = ["inputs"]
        return
    if engine == "native":
        forward = profiler.get("forward")
        backward = profiler.get("backward")
        metrics[f"avg_time_forward_{op}"] = forward["Avg_ms"] if forward else None
        if forward is None:
            missing[f"avg_time_forward_{op}"] = profiler.get("missing", {}).get("profiler.forward", "not measured")
        metrics[f"avg_time_backward_{op}"] = backward["Avg_ms"] if backward else None
        if backward is None:
            missing[f"avg_time_backward_{op}"] = backward_reason or profiler.get("missing", {}).get(
                "profiler.backward", "not measured")
        key = f"max_storage_mem_alloc_{device}"
        metrics[key] = profiler.get("peak_bytes")
        if metrics[key] is None:
            missing[key] = profiler.get("missing", {}).get("profiler.peak_bytes", "not measured")
    else:
        samples = list(metrics["forward"]["samples_ms"])
        if metrics.get("backward"):
            samples = [f + b for f, b in zip(samples, metrics["backward"]["samples_ms"])]
        whole = Measurement(samples)
        metrics[f"avg_time_{op}"] = whole.mean
        metrics[f"p50_time_{op}"] = whole.percentile(50)
        metrics[f"p90_time_{op}"] = whole.percentile(90)
        metrics[f"p99_time_{op}"] = whole.percentile(99)
        missing["profiler"] = ("the python engine runs without MXNet's profiler: no kernel times, no memory "
                               "figure; use --profiler native")
    metrics["opperf_keys"] = ["inputs"] + opperf_entry_keys(op, engine, device)


# ---------------------------------------------------------------------------------------------
# The executor


def _backward_decision(spec: CaseSpec, settings: RunSettings) -> Optional[str]:
    """None when backward runs, else why not."""
    if not settings.run_backward:
        return "backward not requested"
    if not spec.params.get("run_backward", False):
        return spec.params.get("no_backward_reason") or "backward not run for this operator"
    here = registry.get(spec.params.get("op", spec.name))  # planned with another MXNet (`ab`)?
    return None if here.runs_backward else here.no_backward_reason


def execute(spec: CaseSpec, options: dict) -> dict:
    """Run one case with the engine in options["profiler"]; return its JSON metrics."""
    engine = options.get("profiler") or "native"
    if engine not in ENGINES:
        raise UsageError(f"unknown profiler {engine!r}; choose native, python or instructions")
    settings = RunSettings.from_dict(options.get("settings") or {})

    op = spec.params.get("op", spec.name)
    ctx_text = spec.params.get("ctx", "cpu(0)")
    ctx = mx_context(ctx_text)
    if ctx.device_type == "gpu":
        import mxnet as mx

        if mx.context.num_gpus() <= ctx.device_id:
            raise SkipCase(f"{ctx_text} is not available here (MXNet sees {mx.context.num_gpus()} GPUs)")
    denormals = denormal_state(bool(options.get("flush_denormal")), ctx)
    rss_before = resident_bytes()
    peak_reset = reset_peak_rss()
    if registry.get(op) is None:
        raise SkipCase(releases.missing_operator(op))
    why_not = releases.broken(op, ctx_text) or releases.unaccepted_value(registry.get(op), spec.params["inputs"])
    if why_not:
        raise SkipCase(why_not)
    materialized = arrays.materialize(spec, ctx=ctx)
    backward_reason = _backward_decision(spec, settings)
    workload = build_workload(materialized, backward_reason is None, device=ctx.device_type)
    expected = spec.params.get("non_normal_reason")
    counted = audit.LastCall(functools.partial(audit_case, materialized, with_backward=backward_reason is None,
                                               expected=expected))
    if audit.needed(options):
        workload.last_call = counted
    metrics = measure(workload, settings, engine, op, ctx, backward_reason)
    metrics["inputs"] = describe_inputs(spec)
    metrics["input_bytes"] = sum(_nbytes(a) for a in _arrays(materialized.args) + _arrays(materialized.kwargs))
    metrics["threads"] = options.get("threads")
    metrics[RSS_BEFORE] = rss_before
    metrics[RSS_PEAK] = peak_rss() if peak_reset else None
    metrics["denormals"] = denormals
    counted.record(metrics, options, workload)
    del materialized, workload, counted
    _sync()
    metrics[RSS_AFTER] = resident_bytes()
    return metrics


# ---------------------------------------------------------------------------------------------
# The audit and subnormal flushing (see the module docstring)


def _counts(array) -> dict:
    """benchcore.measure.audit's counts of an NDArray (a sparse one's stored values): on the array's own
    buffer where MXNet lends it (a CPU array, through DLPack: no copy), else copied to numpy a
    chunk at a time (a whole copy of the largest outputs would add hundreds of MB to the
    worker's peak memory)."""
    if getattr(array, "stype", "default") != "default":
        array = array.data
    view = _host_view(array)
    if view is not None:
        return audit.count(view)
    if not array.size:  # no reshape or asnumpy: before 1.6 MXNet takes a 0 in a shape for unknown
        import numpy as np

        return audit.count(np.zeros(0, dtype=array.dtype))
    flat = array.reshape((-1,))
    step, size = audit.TRANSFER_VALUES, int(flat.size)
    # the stop clamped: MXNet before 1.5 refuses a slice past the end
    return audit.count_many(flat[start:min(start + step, size)].asnumpy() for start in range(0, size, step))


class _Lent:
    """A DLPack capsule in the shape numpy's from_dlpack takes (an object that hands it over)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def _host_view(array, reordered: bool = False):
    """A read-only numpy view of a CPU NDArray's buffer (after its pending writes), or None where
    MXNet (before DLPack) or numpy (before from_dlpack) cannot lend it, and for a boolean array
    (numpy refuses DLPack's bool, and a refused capsule's deleter errs in MXNet's ctypes).

    An array in oneDNN's blocked layout (a convolution's output) lends no buffer: it is reordered
    once, into a copy in MXNet's default layout, and viewed there. Read a chunk at a time
    instead, it was reordered whole for every chunk: 39 s for one 528 MB output (lab/notes/speed.md)."""
    import numpy as np

    from_dlpack = getattr(np, "from_dlpack", None) or getattr(np, "_from_dlpack", None)
    if from_dlpack is None or array.context.device_type != "cpu" or not hasattr(array, "to_dlpack_for_read") \
            or np.dtype(array.dtype).kind not in "fiu":
        return None
    try:
        return from_dlpack(_Lent(array.to_dlpack_for_read()))
    except (TypeError, ValueError, BufferError, RuntimeError) as exc:
        if "MKLDNN" in str(exc) and not reordered:
            return _host_view(array.copy(), reordered=True)
        return None


def _named_inputs(materialized) -> Dict[str, Any]:
    """The case's input arrays by argument name, `arg[i]` for one of a list."""
    named: Dict[str, Any] = {}
    for arg, value in materialized.arrays.items():
        for index, array in enumerate(value if isinstance(value, list) else [value]):
            named[f"{arg}[{index}]" if isinstance(value, list) else arg] = array
    return named


def audit_case(materialized, output, with_backward: bool, expected: Optional[str] = None) -> dict:
    """The case's audit block (without its `elapsed_ms`, benchcore.measure.audit.LastCall's): the
    inputs as the timed runs left them, `output` (the last timed forward's, handed over by the
    runner), and the input gradients of the last timed backward (gradients are written, not
    accumulated, so they are that backward's, with the case's head gradients). Each tensor is
    read once, on its own buffer (_counts)."""
    named = _named_inputs(materialized)
    input_counts = {name: _counts(array) for name, array in named.items()}
    outputs = {str(index): _counts(array) for index, array in enumerate(_outputs(output))}
    names = {id(array): name for name, array in named.items()}
    gradients = {names.get(id(array), f"grad{index}"): _counts(array.grad)
                 for index, array in enumerate(materialized.grad_arrays)
                 if with_backward and array.grad is not None}
    return audit.summarize_tensors({"inputs": input_counts, "outputs": outputs, "gradients": gradients}, expected)


def denormal_state(flush: bool, ctx) -> dict:
    """Apply --flush-denormal to this thread (before the process's first MXNet operator, so the
    engine threads inherit it), then what is in force (benchcore.measure.denormals.flush_state),
    probed once per process and context."""
    from benchcore.measure.denormals import flush_state, set_flush_denormal

    return flush_state(flush, lambda: set_flush_denormal(True), lambda values, factor: _mx_multiply(values, factor, ctx),
                       f"mxnet {ctx}", "FTZ/DAZ can be set only on x86-64 Linux (glibc fesetenv)")


def _mx_multiply(values, factor: float, ctx):
    import mxnet as mx

    return (mx.nd.array(values, ctx=ctx, dtype="float32") * factor).asnumpy()





def measure(workload: Workload, settings: RunSettings, engine: str, op: str, ctx,
            backward_reason: Optional[str] = None) -> dict:
    """Time a ready Workload with one engine; the metrics with opperf's keys added.

    backward_reason: None when the workload's backward is to be timed, else why not.
    """
    run_settings = RunSettings(**{**settings.to_dict(), "run_backward": backward_reason is None})
    if engine == "python":
        metrics = run_python(workload, run_settings)
    elif engine == "instructions":
        metrics = run_instructions(workload, run_settings)
    else:
        metrics = run_native(workload, run_settings, op, ctx)
    device = f"{ctx.device_type}/{ctx.device_id}"
    metrics["engine"] = engine
    metrics["op"] = op
    metrics["missing"] = {}
    if backward_reason:
        metrics["missing"]["backward"] = backward_reason
    add_opperf_keys(metrics, op, engine, device, backward_reason)
    return metrics
