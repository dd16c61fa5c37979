"""Time fastrnns-style runners through benchcore, and render the results in fastrnns' shapes.

The worker side is `execute(spec, options)`: it rebuilds the runner's ModelDef inside the
runner's fuser/executor contexts, turns it into a benchcore Workload and times it with
`benchcore.measure.runner.run_workload` — CUDA events on a CUDA device, perf_counter around a sync on
the CPU — and audits what the last timed forward and backward produced (rnnbench.audit, as the
workload's last_call: no call is added for it; options["audit"] False skips it, and so does a
round after the one that audited the runner: benchcore.measure.audit.wanted)
and records the subnormal flushing in force (options["flush_denormal"] sets it).
Every time is in milliseconds on every device (fastrnns reported CPU seconds as "ms"), and
nothing forces a garbage collection inside the loop (fastrnns spent ~150 ms per
iteration in gc.collect() on CPU at default sizes).

The parent side builds CaseSpecs (`build_specs`) and renders a list of CaseResults as
fastrnns' console table, `--print-json oss|pep` lines and a Markdown report. These functions
return strings; only the CLI prints.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence

from benchcore.errors import SkipCase, UsageError
from benchcore.measure import audit, steady
from benchcore.measure.case import CaseSpec
from benchcore.measure.measurement import Measurement
from benchcore.views import trust
from benchcore.views.settings_table import settings_table

SUITE = "rnnbench"
EXECUTOR = "rnnbench.bench:execute"
#: Imported by a fresh worker before it takes a case (see benchcore.execute.worker), so torch's
#: import is not billed to the first runner's timeout and wall time.
WORKER_PRELOAD = ("torch", "rnnbench.runners")

#: fastrnns' sizes and their defaults, in the order its file names use them (s, l, i, h, b).
#: python: each call timed (ms); instructions: each call counted under valgrind (benchcore.measure.instructions)
ENGINE_INSTRUCTIONS = "instructions"
ENGINES = ("python", ENGINE_INSTRUCTIONS)
SIZE_DEFAULTS = {"seqLength": 100, "numLayers": 1, "inputSize": 512, "hiddenSize": 512, "miniBatch": 64}
#: fastrnns' ResNets always ran on 32 images of 3x224x224, whatever --miniBatch said.
CNN_BATCH_DEFAULT = 32
SIZE_LETTERS = {"seqLength": "s", "numLayers": "l", "inputSize": "i", "hiddenSize": "h", "miniBatch": "b"}

FUSERS = ("te", "old", "none", "default")
EXECUTORS = ("profiling", "simple", "legacy", "default")

#: fastrnns' output groups; `--print-json` keys are these names and `<name>-backward`.
GROUP_LSTM = "lstm"
GROUP_RESNET = "resnet"
GROUP_VL_LSTM = "vl_lstm"
GROUP_TITLES = {GROUP_VL_LSTM: "variable-length sequence LSTM", GROUP_LSTM: "LSTM", GROUP_RESNET: "ResNet"}

DEFAULT_RNNS = ("cudnn", "aten", "jit", "jit_premul", "jit_premul_bias", "jit_simple", "jit_multilayer", "py")
DEFAULT_CNNS = ("resnet18", "resnet18_jit", "resnet50", "resnet50_jit")
DEFAULT_VL_RNNS = ("vl_cudnn", "vl_jit", "vl_py")


def default_lists() -> Dict[str, Sequence[str]]:
    """The runner lists per group; the runners module may define its own, which win."""
    lists = {GROUP_LSTM: DEFAULT_RNNS, GROUP_RESNET: DEFAULT_CNNS, GROUP_VL_LSTM: DEFAULT_VL_RNNS}
    try:
        from . import runners
    except ImportError:
        return lists
    for group, attr in ((GROUP_LSTM, "DEFAULT_RNNS"), (GROUP_RESNET, "DEFAULT_CNNS"), (GROUP_VL_LSTM, "DEFAULT_VL")):
        if getattr(runners, attr, None):
            lists[group] = tuple(getattr(runners, attr))
    return lists


# --------------------------------------------------------------------------------------------
# Validation shared by the CLI subcommands (parent side, before any case runs)


def check_fuser(fuser: str, executor: Optional[str]) -> None:
    """Validate --fuser/--executor in the parent: known names that this torch can apply."""
    from .runners import check_jit_settings

    check_jit_settings(fuser, executor or "default")


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def default_device() -> str:
    """fastrnns defaulted to cuda and asserted it; we fall back to the CPU when there is none."""
    return "cuda" if cuda_available() else "cpu"


def check_device(device: str) -> None:
    if device != "cpu" and not (device == "cuda" or device.startswith("cuda:")):
        raise UsageError(f"unknown device {device!r}; use cpu, cuda or cuda:N")
    if device.startswith("cuda") and not cuda_available():
        raise UsageError(f"--device {device} needs CUDA, but torch sees no CUDA device; use --device cpu")
    if device.startswith("cuda:"):
        import torch

        index, count = device.partition(":")[2], torch.cuda.device_count()
        if not index.isdigit() or int(index) >= count:
            raise UsageError(f"--device {device}: torch sees {count} CUDA device(s); use cuda:0"
                             f"{f' to cuda:{count - 1}' if count > 1 else ''}")


#: Each runner group (runners.GROUPS) as a message names it, and the bench flag that runs it.
GROUP_KINDS = {"rnns": "an LSTM runner", "cnns": "a CNN runner", "vl": "a variable-length LSTM runner"}
GROUP_FLAGS = {"rnns": "--rnns", "cnns": "--cnns", "vl": "--variable-lstms"}


def check_runner_list(names: Optional[Sequence[str]], flag: str, groups: Sequence[str], takes: str,
                      default: str) -> None:
    """Refuse a runner list given empty or naming runners of another group (None: not given).

    argparse's nargs='*' turns a bare `--rnns` into [], which would quietly run the default
    list; and a runner in the wrong list runs with the wrong sizes: a ResNet under --rnns gets
    --miniBatch images, an LSTM under --cnns gets --cnnBatch and the resnet key of --print-json.
    """
    if names is None:
        return
    if not names:
        raise UsageError(f"{flag} needs at least one runner name; omit it for the default list ({default})")
    from .runners import get_runners

    misplaced = [r for r in get_runners(list(names)) if r.group not in groups]
    if misplaced:
        raise UsageError(f"{flag} takes {takes} only; " + "; ".join(
            f"{r.name} is {GROUP_KINDS[r.group]}, which bench runs with {GROUP_FLAGS[r.group]}" for r in misplaced))


def check_runners(names: Sequence[str], device: str) -> List:
    """Resolve runner names; every unknown one is named at once, with the valid ones."""
    from .runners import get_runners

    resolved = get_runners(list(names))
    cuda_only = [r.name for r in resolved if getattr(r, "cuda_only", False)]
    if cuda_only and not device.startswith("cuda"):
        raise UsageError(f"runner(s) {', '.join(cuda_only)} need CUDA; drop them or use --device cuda on a CUDA machine")
    return resolved


# --------------------------------------------------------------------------------------------
# Specs


def case_params(sizes: Dict[str, int], device: str, fuser: str, executor: Optional[str], seed: Optional[int], group: str) -> dict:
    params = {name: int(value) for name, value in sizes.items()}
    params.update({"device": device, "fuser": fuser, "executor": executor or "default", "seed": seed, "group": group})
    return params


def default_group(request) -> tuple:
    """--group when not given: what --rnns/--cnns name alone (`--rnns cudnn jit` should not also
    run four ResNets for minutes), else fastrnns' default, both."""
    rnns, cnns = request.rnns is not None, request.cnns is not None
    if rnns != cnns:
        return ("rnns",) if rnns else ("cnns",)
    return ("cnns", "rnns")


def selected_groups(request) -> List[tuple]:
    """(group, runner names) in fastrnns' order: variable-length LSTMs, LSTMs, ResNets."""
    lists = default_lists()
    groups = []
    if request.variable_lstms:
        groups.append((GROUP_VL_LSTM, list(lists[GROUP_VL_LSTM])))
    wanted = set(request.group if request.group is not None else default_group(request))
    if "rnns" in wanted:
        groups.append((GROUP_LSTM, list(request.rnns or lists[GROUP_LSTM])))
    if "cnns" in wanted:
        groups.append((GROUP_RESNET, list(request.cnns or lists[GROUP_RESNET])))
    return groups


def sizes_from(request) -> Dict[str, int]:
    """fastrnns' five sizes of a request (rnnbench.request.RunnerRequest)."""
    return {name: getattr(request, name) for name in SIZE_DEFAULTS}


#: The sizes each kind of runner (its registry group) uses. Only these enter its cases' params
#: (and so their keys): runs that differ in a size a model ignores compare, merge and resume as
#: the same cases, whichever list (--rnns or --variable-lstms) named the runner.
SIZES_USED = {
    "rnns": tuple(SIZE_DEFAULTS),
    "vl": ("numLayers", "inputSize", "hiddenSize", "miniBatch"),  # lengths drawn in [30, 100)
    "cnns": ("miniBatch",),  # images per batch (--cnnBatch); 3x224x224 each
}


def build_specs(request, device: Optional[str] = None) -> List[CaseSpec]:
    """One CaseSpec per runner of every selected group, sizes/device/fuser/seed in its params
    (`device`: the resolved one, else the request's)."""
    from .runners import get_runner

    lstm_sizes = sizes_from(request)
    cnn_sizes = {**lstm_sizes, "miniBatch": request.cnnBatch}  # its own batch
    specs = []
    for group, names in selected_groups(request):
        sizes = cnn_sizes if group == GROUP_RESNET else lstm_sizes
        for name in names:
            used = SIZES_USED.get(get_runner(name).group, tuple(SIZE_DEFAULTS))
            params = case_params({size: sizes[size] for size in used}, device or request.device, request.fuser,
                                 request.executor, request.seed, group)
            specs.append(CaseSpec(SUITE, name, params))
    return specs


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


# --------------------------------------------------------------------------------------------
# Rendering (parent side). Each function returns text; the CLI prints it.


def _stat(result, which: str, key: str) -> Optional[float]:
    data = (result.metrics or {}).get(which) if result.ok else None
    return None if not data else data.get(key)


def group_of(result) -> str:
    return result.spec.params.get("group") or GROUP_LSTM


def run_order(specs) -> Dict[str, List[str]]:
    """{group: runner names} in the order a run takes them (recorded in the report's settings,
    before sharding, so every shard holds the whole sweep's order)."""
    order: Dict[str, List[str]] = {}
    for spec in specs:
        order.setdefault(spec.params["group"], []).append(spec.name)
    return order


def finish_merged(report):
    """A merged report's results in the order the unsharded run lists them (benchcore.report.merge's
    finisher for rnnbench; shards hold their cases sorted by key): the recorded run order,
    else fastrnns' group order and runner registration order."""
    from .runners import runner_names

    order = report.settings.get("runners") or {
        group: runner_names() for group in (GROUP_VL_LSTM, GROUP_LSTM, GROUP_RESNET)}
    groups = list(order)

    def position(result):
        group = group_of(result)
        names = order.get(group, [])
        return (groups.index(group) if group in groups else len(groups),
                names.index(result.spec.name) if result.spec.name in names else len(names), result.spec.key)

    report.results = sorted(report.results, key=position)
    return report


def grouped(results) -> Dict[str, list]:
    """Results by group, groups in first-seen order (fastrnns' order when built by build_specs)."""
    groups: Dict[str, list] = {}
    for result in results:
        groups.setdefault(group_of(result), []).append(result)
    return groups


TABLE_COLUMNS = ("name", "fwd_mean_ms", "fwd_std_ms", "fwd_median_ms", "bwd_mean_ms", "bwd_std_ms", "bwd_median_ms")


def _cell(value, width: int) -> str:
    text = value if isinstance(value, str) else ("-" if value is None else f"{value:.4g}")
    return text.rjust(width)  # a longer name widens its cell rather than losing its end


def table_row(result) -> List[object]:
    """Runner, then mean, std and median of forward and backward; with rounds the median is the
    median of the round medians (the figure `compare` judges)."""
    row: List[object] = [result.spec.name]
    for which in ("forward", "backward"):
        row += [_stat(result, which, "mean_ms"), _stat(result, which, "std_ms"), _center(result, which)]
    return row


def _center(result, which: str) -> Optional[float]:
    rounds = _stat(result, which, "rounds")
    return rounds["median_ms"] if isinstance(rounds, dict) else _stat(result, which, "median_ms")


def _round_spread(result, which: str) -> Optional[str]:
    """The rounds' spread, or "bimodal" where the rounds sit at two speeds (benchcore.measure.modes)."""
    rounds, modes = _stat(result, which, "rounds"), _stat(result, which, "modes")
    if isinstance(modes, dict):
        return "bimodal"
    return None if not isinstance(rounds, dict) or rounds.get("spread") is None else f"{rounds['spread'] * 100:.1f}%"


def _bimodal_texts(result) -> dict:
    return {which: (_stat(result, which, "modes") or {}).get("text") for which in ("forward", "backward")}


def console_table(results, sep: str = " ", colwidth: int = 16) -> str:
    """fastrnns' fixed-width table (fields joined by --sep), one block per group, in ms.

    A runner that did not run shows its status and error on its own row instead of numbers.
    """
    lines = []
    for group, members in grouped(results).items():
        lines.append(f"Benchmarking {GROUP_TITLES.get(group, group)}s...")
        lines.append(sep.join(_cell(c, colwidth) for c in TABLE_COLUMNS))
        for result in members:
            if result.ok:
                lines.append(sep.join(_cell(v, colwidth) for v in table_row(result)))
            else:
                lines.append(sep.join([_cell(result.spec.name, colwidth), f"{result.status.upper()}: {result.error or ''}"]))
        lines.append("")
    return "\n".join(lines)


def oss_json(results) -> str:
    """fastrnns' `--print-json oss` line: {group: {runner: mean fwd}, group-backward: {...}} (ms).

    A runner that failed appears with null (fastrnns dropped it silently).
    """
    out: Dict[str, dict] = {}
    for group, members in grouped(results).items():
        out[group] = {r.spec.name: _stat(r, "forward", "mean_ms") for r in members}
        out[group + "-backward"] = {r.spec.name: _stat(r, "backward", "mean_ms") for r in members}
    return json.dumps(out)


def pep_lines(results) -> List[str]:
    """fastrnns' `--print-json pep` lines, one per measured iteration, values in ms.

    The metric is `<group>-<runner>` for forward and `<group>-backward-<runner>` for backward
    (fastrnns joins the group key, which for backward is `<group>-backward`, to the runner
    name). Runners that did not run have no samples, so no lines; the CLI reports them on
    stderr.
    """
    lines = []
    for group, members in grouped(results).items():
        for key, which in ((group, "forward"), (group + "-backward", "backward")):
            for result in members:
                samples = _stat(result, which, "samples_ms") or []
                for value in samples:
                    record = {"type": "NET", "metric": f"{key}-{result.spec.name}", "unit": "ms", "value": str(value)}
                    lines.append("Caffe2Observer " + json.dumps(record))
    return lines


def _status_text(result) -> str:
    """ok, ok but capped (adaptive mode ran out of --max-time before its precision), or why not."""
    if not result.ok:
        return f"{result.status}: {result.error or ''}"
    if (result.metrics or {}).get("capped"):
        return "ok, capped: --max-time ran out before --target-precision was reached"
    return "ok"


def markdown_report(report) -> str:
    """A Markdown view of a Report: environment summary, then one table per group."""
    from tabulate import tabulate

    env = report.environment or {}
    torch_env = env.get("torch") or {}
    lines = ["# rnnbench results", ""]
    facts = [
        ("torch", torch_env.get("version")),
        ("device", ", ".join(sorted({r.spec.params.get("device", "?") for r in report.results})) or None),
        ("threads", torch_env.get("threads")),
        ("cpu", env.get("cpu_model")),
        ("git commit", env.get("git_commit")),
        ("started", env.get("started_at")),
    ]
    lines += [f"- {name}: {value}" for name, value in facts if value is not None]
    lines.append("")
    ok = [r for r in report.results if r.ok]
    measured = [Measurement.from_dict(r.metrics[which]) for r in ok for which in ("forward", "backward")
                if isinstance(r.metrics.get(which), dict) and r.metrics[which].get("samples_ms")]
    lines += trust.section(measured, [r.metrics or {} for r in ok], report.settings or {}, env)
    lines += ["## Settings", "", settings_table(report.settings or {}), ""]
    rounds = ((report.settings or {}).get("rounds") or {}).get("rounds", 1) > 1
    lines += ["Times: wall time per call in ms (the JSON's `metrics.headline.<phase>`, figure `call_ms`). "
              "*Timed calls*: the forward calls timed over all rounds; --nloops N is split over the rounds as "
              "evenly as it goes (10 over 3: 4, 3, 3), so the count is N (more only where N is below the rounds)."
              + (" With rounds, a median is the median of the rounds' medians, and *round spread* is (largest - "
                 "smallest round median) / that median." if rounds else ""), ""]
    headers = ["Runner", "Fwd mean (ms)", "Fwd std (ms)", "Fwd median (ms)", "Bwd mean (ms)", "Bwd std (ms)",
               "Bwd median (ms)"] + (["Fwd round spread", "Bwd round spread"] if rounds else []) + [
               "Compile (ms)", "Timed calls", "Status"]
    for group, members in grouped(report.results).items():
        lines += [f"## {GROUP_TITLES.get(group, group)} ({group})", ""]
        rows = []
        for result in members:
            metrics = result.metrics or {}
            spreads = [_round_spread(result, "forward"), _round_spread(result, "backward")] if rounds else []
            rows.append(table_row(result) + spreads + [metrics.get("compile_ms"), _stat(result, "forward", "n"),
                                                       _status_text(result)])
        lines.append(tabulate(rows, headers=headers, tablefmt="github", floatfmt=".4g", missingval="---"))
        lines.append("")
    lines += steady.markdown_section([(r.spec.name, r.metrics or {}, _bimodal_texts(r)) for r in report.results if r.ok])
    if (report.settings or {}).get("valgrind"):
        from benchcore.views.count_report import markdown_section

        lines += markdown_section(report.results, lambda r: r.spec.name, report.settings["valgrind"])
    lines += audit.markdown_section([(r.spec.name, r.metrics or {}) for r in report.results if r.ok],
                                    audited=(report.settings or {}).get("audit") is not False)
    return "\n".join(lines)
