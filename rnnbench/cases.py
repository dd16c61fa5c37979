"""Which runners a sweep times, and their CaseSpecs: fastrnns' sizes, groups and default runner
lists, the checks of the runner flags (parent side, before any case runs), and build_specs.
The worker's side is rnnbench.executor; the console, --print-json and Markdown views are
rnnbench.views."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec

SUITE = "rnnbench"

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
