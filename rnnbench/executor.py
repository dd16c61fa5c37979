"""The worker's side of rnnbench: `execute(spec, options)` rebuilds the runner's ModelDef inside
the runner's fuser/executor contexts, turns it into a benchcore Workload and times it with
`benchcore.measure.runner.run_workload` — CUDA events on a CUDA device, perf_counter around a sync on
the CPU — and audits what the last timed forward and backward produced (rnnbench.audit, as the
workload's last_call: no call is added for it; options["audit"] False skips it, and so does a
round after the one that audited the runner: benchcore.measure.audit.wanted)
and records the subnormal flushing in force (options["flush_denormal"] sets it).
Every time is in milliseconds on every device (fastrnns reported CPU seconds as "ms"), and
nothing forces a garbage collection inside the loop (fastrnns spent ~150 ms per
iteration in gc.collect() on CPU at default sizes).
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Iterator

from benchcore.errors import SkipCase
from benchcore.measure import audit
from benchcore.measure.case import CaseSpec

from .cases import ENGINE_INSTRUCTIONS, SIZE_DEFAULTS

#: Imported by a fresh worker before it takes a case (see benchcore.execute.worker), so torch's
#: import is not billed to the first runner's timeout and wall time.
WORKER_PRELOAD = ("torch", "rnnbench.runners")


# --------------------------------------------------------------------------------------------
# Worker side


@dataclass
class Prepared:
    """A runner's workload plus what building it cost (compile runners report compile time)."""

    runner: object
    modeldef: object
    workload: object
    build_ms: float


def _creator_kwargs(params: dict) -> dict:
    kwargs = {name: int(params.get(name, default)) for name, default in SIZE_DEFAULTS.items()}
    kwargs["device"] = params.get("device", "cpu")
    kwargs["seed"] = params.get("seed")
    return kwargs


def _skip_if_unrunnable(runner, device: str) -> None:
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise SkipCase(f"{runner.name}: device {device} requested but torch sees no CUDA device")
    elif getattr(runner, "cuda_only", False):
        raise SkipCase(f"{runner.name} runs on CUDA only")


def device_context(device: str):
    """Make a CUDA device current for the span (nothing to do on the CPU).

    torch.cuda.synchronize() and the CUDA events of the timer act on the *current* device and
    its stream; without this, `--device cuda:1` would time an empty stream on device 0.
    """
    if not device.startswith("cuda"):
        return nullcontext()
    import torch

    return torch.cuda.device(torch.device(device))


@contextmanager
def runner_contexts(spec: CaseSpec, runner=None) -> Iterator[object]:
    """Enter the case's fuser, executor and runner contexts; yield the runner.

    The contexts stay entered while the caller times the workload (TorchScript reads the fuser
    switches at run time, not only at compile time; `aten` reads the cuDNN switch at every
    call) and are restored on exit, so a reused worker starts the next case from torch's
    defaults. They can be entered again for the same built model (torch mode of `profile`).
    """
    from .runners import get_runner, jit_settings

    params = spec.params
    runner = runner or get_runner(spec.name)
    _skip_if_unrunnable(runner, params.get("device", "cpu"))
    with ExitStack() as stack:
        stack.enter_context(device_context(params.get("device", "cpu")))
        stack.enter_context(jit_settings(params.get("fuser", "te"), params.get("executor", "default")))
        context = getattr(runner, "context", None)
        if context is not None:
            stack.enter_context(context())
        yield runner


def build(spec: CaseSpec, runner) -> Prepared:
    """Create the ModelDef (call inside runner_contexts) and its Workload."""
    from .factory import modeldef_to_workload

    started = time.perf_counter()
    modeldef = runner.creator(**_creator_kwargs(spec.params))
    build_ms = (time.perf_counter() - started) * 1e3
    workload = modeldef_to_workload(modeldef, spec.params.get("device", "cpu"))
    return Prepared(runner=runner, modeldef=modeldef, workload=workload, build_ms=build_ms)


@contextmanager
def prepared(spec: CaseSpec) -> Iterator[Prepared]:
    """The runner's workload, built and used inside its contexts."""
    with runner_contexts(spec) as runner:
        yield build(spec, runner)


def _apply_threads(options: dict) -> None:
    threads = options.get("threads")
    if threads:
        import torch

        if torch.get_num_threads() != int(threads):
            torch.set_num_threads(int(threads))


def _model_info(prep: Prepared) -> dict:
    info = dict(getattr(prep.modeldef, "info", None) or {})
    info.update(getattr(prep.workload, "info", None) or {})
    return info


def execute(spec: CaseSpec, options: dict) -> dict:
    """benchcore executor: time one runner; the metrics hold forward/backward Measurements (ms).

    `compile_ms` is the one-off compile cost a compile runner reports in its ModelDef info
    (see compile_metrics); `build_ms` is the time the creator took, compile included.
    """
    from benchcore.measure.runner import RunSettings, run_workload
    from benchcore.measure.timers import timer_for
    from frameworks.torch import flush_state

    from .audit import counter

    _apply_threads(options)
    denormals = flush_state(bool(options.get("flush_denormal")))
    settings = RunSettings.from_dict(options.get("settings") or {})
    counting = options.get("engine") == ENGINE_INSTRUCTIONS
    with prepared(spec) as prep:
        timer = timer_for(prep.workload.device, prep.workload.sync)
        counted = counter(prep.workload, prep.modeldef.param_names)
        if audit.needed(options):
            prep.workload.last_call = counted
        outcome = count_instructions(prep.workload, settings) if counting else run_workload(prep.workload, settings, timer)
        metrics = outcome if counting else outcome.to_dict()
        counted.record(metrics, options, prep.workload)
    metrics["denormals"] = denormals
    info = _model_info(prep)
    metrics.update({
        "unit": "instructions" if counting else "ms",
        "timer": "callgrind" if counting else timer.name,
        "group": spec.params.get("group"),
        "build_ms": prep.build_ms,
        "info": _jsonable(info),
    })
    compiled = compile_metrics(info)
    if "missing" in compiled:  # joined with the audit's reason, not over it
        metrics.setdefault("missing", {}).update(compiled.pop("missing"))
    metrics.update(compiled)
    return metrics


def count_instructions(workload, settings) -> dict:
    """The runner's calls counted under callgrind (benchcore.measure.instructions) on one intra-op thread."""
    import torch

    from benchcore.execute.valgrind import count_in_worker

    torch.set_num_threads(1)
    return count_in_worker(workload, settings)


def compile_metrics(info: dict) -> dict:
    """compile_ms (+ forward/backward parts) from a creator's info (seconds), or null + reason.

    A compile runner pays torch.compile inside its creator (one forward and one backward), so
    the samples are steady-state; this is that one-off cost, kept apart.
    """
    out = {}
    for part in ("", "_forward", "_backward"):
        seconds = info.get(f"compile{part}_s")
        out[f"compile{part}_ms"] = None if seconds is None else float(seconds) * 1e3
    reason = "runner does not compile (no torch.compile step)"
    missing = {key: reason for key, value in out.items() if value is None}
    if missing:
        out["missing"] = missing
    return out


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        if isinstance(value, dict):
            return {str(k): _jsonable(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_jsonable(v) for v in value]
        return str(value)
