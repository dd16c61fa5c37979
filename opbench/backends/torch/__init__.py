"""opbench's PyTorch backend: every OpInfo entry, discovered, scaled to benchmark size, timed.

Discovery (discover.py, its own process) writes a manifest (manifest.py) of chosen samples and
scales; this module plans CaseSpecs from it; executor.py times them in workers. See
lab/notes/torch-backend.md for discovery, scaling, overrides and what is left out.
"""

from __future__ import annotations

import fnmatch
import sys
from typing import List, Optional, Tuple

from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec

from ..base import OperatorInfo, Plan, UnknownOperator, split
from .categories import CATEGORIES

NAME = "torch"
EXECUTOR = "opbench.backends.torch.executor:execute"
DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64")
ENGINES = ("native", "python", "instructions")
DEFAULT_SIZE_TARGET = 2**20
#: under --engine instructions: an operator's own work of ~1M instructions or more, so the
#: call overhead's jitter between repeats stays under 0.1% (docs/INSTRUCTIONS.md, Cost and shapes)
COUNT_SIZE_TARGET = 2**17
#: discovery's seed (which samples OpInfo draws): fixed, so a manifest is one per size target
DISCOVERY_SEED = 0
#: A worker is restarted after a case that leaves it above this resident memory. torch frees
#: a case's tensors (a worker returns to about 0.3 GiB between cases), so only a case that
#: leaves a large cache (MKLDNN, a big workspace) triggers it; the largest cases at the default
#: size target hold a few hundred MB while they run.
WORKER_MEMORY_LIMIT_GB = 1.5
_GLOB = set("*?[")


def _say(text: str) -> None:
    print(f"opbench: {text}", file=sys.stderr)  # noqa: T201  (--list/plan progress of the command line)


def parse_device(text: str) -> str:
    """"cpu", "cuda", "cuda:N" → "cpu" or "cuda:N"; anything else is a UsageError."""
    value = str(text).strip().lower()
    if value == "cpu":
        return "cpu"
    if value == "cuda":
        return "cuda:0"
    if value.startswith("cuda:") and value[5:].isdigit():
        return f"cuda:{int(value[5:])}"
    raise UsageError(f"--device {text!r} is not cpu, cuda or cuda:N; write e.g. --device cuda:0")


def check_device(device: str) -> str:
    """A CUDA device must exist in this torch (asked once here, before any case runs)."""
    if device == "cpu":
        return device
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise UsageError(f"--device {device}: torch {torch.__version__} sees no CUDA device (a CPU build, or no GPU "
                         "here); use --device cpu, or install a CUDA build of torch on a GPU machine")
    index = int(device.split(":")[1])
    if index >= count:
        raise UsageError(f"--device {device}: torch sees {count} CUDA device(s); choose cuda:0..cuda:{count - 1}")
    return device


class TorchBackend:
    name = NAME
    engines = ENGINES
    dtypes = DTYPES
    categories = CATEGORIES
    default_output_stem = "torch_operator_benchmarks"
    memory_limit_gb = WORKER_MEMORY_LIMIT_GB

    @property
    def suite(self):
        from .suite import SUITE

        return SUITE

    # ------------------------------------------------------------------ flags

    def check(self, request) -> str:
        if request.ctx is not None:
            raise UsageError(f"--ctx {request.ctx} is MXNet's flag; with --framework torch say --device (cpu, cuda or "
                             "cuda:N; --ctx gpu(0) is --device cuda:0)")
        if request.int64_tensor not in (None, "off"):
            raise UsageError("--int64-tensor is MXNet's large-tensor build flag; drop it for --framework torch")
        if request.dtype not in DTYPES:
            raise UsageError(f"--dtype {request.dtype} is not one torch's sweep runs; choose from {', '.join(DTYPES)}")
        for category in split(request.category) or ():
            if category not in CATEGORIES:
                raise UsageError(f"unknown category {category!r}; choose from {', '.join(CATEGORIES)}")
        device = check_device(parse_device(request.device or "cpu"))
        if request.flush_l2 and not device.startswith("cuda"):
            raise UsageError("--flush-l2 evicts a GPU's L2 cache; it needs --device cuda (or cuda:N)")
        return device

    def manifest(self, request, device: str, ops: Optional[List[str]] = None):
        """The manifest (manifest.obtain); `ops`: a sweep's --ops, which limit a discovery that
        has no full manifest to start from to the entries they name."""
        from .manifest import obtain

        size_target = size_target_of(request)
        manifest = obtain(request.manifest, request.dtype, device, size_target, DISCOVERY_SEED, _say, names=ops)
        built_for = manifest.header.get("size_target")
        if request.manifest and request.size_target is not None and built_for != size_target:
            raise UsageError(f"--manifest {request.manifest} was built for --size-target {built_for}, not "
                             f"{size_target}; drop --size-target or pass another --manifest")
        return manifest

    # ------------------------------------------------------------------ operators

    def scan(self, request, device: str) -> List[OperatorInfo]:
        manifest = self.manifest(request, device)
        rows = [OperatorInfo(e["name"], e["category"], None, e.get("variant") or "") for e in manifest.entries.values()]
        rows += [OperatorInfo(i["name"], i.get("category"), i["reason"], i.get("variant") or "") for i in manifest.left_out]
        return sorted(rows, key=lambda r: (r.name, r.variant))

    def knows(self, name: str) -> bool:
        """A name torch has (a function, a method or an nn.functional one), for the MXNet side's hints."""
        from .callables import resolve

        return any(resolve(path) is not None for path in (name, f"nn.functional.{name}", f"Tensor.{name}",
                                                           f"linalg.{name}", f"special.{name}"))

    def plan(self, request, device: str) -> Plan:
        from benchcore.cli.options import parse_shard
        from benchcore.execute.rounds import shard_specs

        manifest = self.manifest(request, device, split(request.ops))
        entries, left_out = _select(manifest, split(request.ops), split(request.category))
        excluded = _excluded(manifest, entries, left_out, split(request.exclude))
        entries = [e for e in entries if _label(e) not in excluded and e["name"] not in excluded]
        left_out = [i for i in left_out if _label(i) not in excluded and i["name"] not in excluded]
        specs = [case_spec(e, manifest.digests[(e["name"], e.get("variant") or "")], request.dtype, device,
                           request.seed) for e in entries]
        skipped = [(_label(i), i["reason"]) for i in left_out]
        flush_l2 = bool(request.flush_l2)
        options = {"manifest": str(manifest.path), "manifest_sha256": manifest.sha256, "flush_l2": flush_l2}
        settings = {"device": device, "size_target": manifest.header.get("size_target"), "manifest": manifest.record(),
                    "flush_l2": flush_l2}
        return Plan(shard_specs(specs, parse_shard(request.shard)), skipped, sorted(excluded), options, settings,
                    {"manifest": manifest.record()})

    def list_operators(self, request, device: str, everything: bool = False) -> int:
        from .listing import list_operators

        return list_operators(self, request, device, everything)

    # ------------------------------------------------------------------ reports

    def environment_extra(self, request) -> dict:
        timer = {"native": "torch-profiler", "python": "cuda_event" if (request.device or "").startswith("cuda")
                 else "perf_counter", "instructions": "callgrind"}[request.engine]
        return {"threads": request.threads, "engine": request.engine, "seed": request.seed, "timer": timer,
                "framework": NAME}

    def to_markdown(self, report) -> str:
        from .markdown import to_markdown

        return to_markdown(report)


def size_target_of(request) -> int:
    """--size-target, else the default for the request: toy sizes for --tiny, the counting
    engine's smaller target, else DEFAULT_SIZE_TARGET."""
    if request.size_target is not None:
        return request.size_target
    return 4096 if request.tiny else COUNT_SIZE_TARGET if request.engine == "instructions" else DEFAULT_SIZE_TARGET


def _label(item: dict) -> str:
    """An entry's name for people and selection: "name" or "name.variant" (OpInfo's full name)."""
    variant = item.get("variant") or ""
    return f"{item['name']}.{variant}" if variant else item["name"]


def case_spec(entry: dict, digest: str, dtype: str, device: str, seed: int) -> CaseSpec:
    """A CaseSpec for a manifest entry: its key holds the entry's identity and its sample's
    digest, so two reports match when they timed the same operator on the same inputs."""
    params = {"framework": NAME, "op": entry["name"], "variant": entry.get("variant") or "",
              "category": entry["category"], "dtype": dtype, "device": device, "inputs": entry["inputs"],
              "scale": entry["scale"]["k"], "sample_digest": digest, "run_backward": bool(entry["backward"]),
              "seed": int(seed)}
    if not entry["backward"]:
        params["no_backward_reason"] = entry.get("no_backward_reason") or "not differentiable"
    return CaseSpec(suite="opbench", name=_label(entry), params=params)


def matches(item: dict, pattern: str) -> bool:
    """Whether an --ops pattern names an entry ({"name", "variant"}): by name or name.variant."""
    return any(fnmatch.fnmatchcase(text, pattern) for text in (item["name"], _label(item)))


def _select(manifest, ops: Optional[List[str]], categories: Optional[List[str]]) -> Tuple[list, list]:
    """The entries and left-out items for --ops and --category; an unknown name is refused."""
    entries, left_out = list(manifest.entries.values()), list(manifest.left_out)
    if ops:
        for pattern in ops:
            if not any(matches(item, pattern) for item in entries + left_out):
                raise unknown_operator(pattern, manifest)
        entries = [e for e in entries if any(matches(e, p) for p in ops)]
        left_out = [i for i in left_out if any(matches(i, p) for p in ops)]
    if categories:
        entries = [e for e in entries if e["category"] in categories]
        left_out = [i for i in left_out if i.get("category") in categories]
    return sorted(entries, key=_label), sorted(left_out, key=_label)


def _excluded(manifest, entries, left_out, patterns: Optional[List[str]]) -> set:
    if not patterns:
        return set()
    everything = list(manifest.entries.values()) + list(manifest.left_out)
    for pattern in patterns:
        if not any(matches(item, pattern) for item in everything):
            raise unknown_operator(pattern, manifest, "--exclude: ")
    return {_label(item) for item in entries + left_out if any(matches(item, p) for p in patterns)}


def unknown_operator(name: str, manifest, flag: str = "") -> UnknownOperator:
    """A name the manifest lacks: the MXNet name's equivalent, or close names; an MXNet name with
    no PyTorch equivalent is pointed to --framework mxnet (UnknownOperator.elsewhere)."""
    import difflib

    from opbench.equivalents import torch_for

    if _GLOB & set(name):
        return UnknownOperator(f"{flag}operator pattern {name!r} matches no PyTorch operator; "
                               "see opbench --framework torch --list --all", name)
    equivalent = torch_for(name)
    if equivalent:
        return UnknownOperator(f"{flag}{name} is an MXNet operator; its PyTorch equivalent is {equivalent} "
                               f"(opbench --framework torch --ops {equivalent}, or --framework mxnet for {name})", name)
    labels = sorted({_label(i) for i in list(manifest.entries.values()) + manifest.left_out})
    close = difflib.get_close_matches(name, labels, n=3)
    return UnknownOperator(
        f"{flag}unknown PyTorch operator {name!r}; " + (f"did you mean {', '.join(close)}?" if close
                                                       else "see opbench --framework torch --list --all"),
        name, lambda framework: f"{flag}{name} is an MXNet operator, not a PyTorch one; use --framework {framework} "
                                "for it" + (f", or did you mean {', '.join(close)}?" if close else ""))


BACKEND = TorchBackend()
