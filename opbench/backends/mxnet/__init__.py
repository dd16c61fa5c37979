"""opbench's MXNet backend: what opbench.backends.base lists, over this package's modules.

registry (what MXNet registers) → categories and rules (opperf's grouping, the inputs of each
operator) → cases (selection and CaseSpecs) → arrays (a spec's NDArrays, in the worker) →
executor (the engines that time them) → suite (what benchcore runs) → markdown (the report's
view); device parses --ctx, gradients is the probe behind the registry's stored backward
answers, opperf_api is opperf's Python API and listing is --list.

Case keys are exactly those opbench's MXNet sweep made before the backends existed, so old
MXNet reports still compare (tests/opbench/data/mxnet_case_keys.txt holds the full list).
"""

from __future__ import annotations

import fnmatch
from typing import List

from benchcore.cli.options import parse_shard
from benchcore.errors import UsageError
from benchcore.execute.rounds import shard_specs
from opbench.equivalents import mxnet_for

from ..base import OperatorInfo, Plan, split
from . import listing, markdown, registry, releases, workspace  # noqa: F401  (workspace: MXNet's temp-space setting, before MXNet loads)
from .cases import PY_WRAPPERS, generate_cases
from .categories import CATEGORIES, category_of, opperf_members
from .device import check_ctx, int64_tensor_flag
from .opperf_api import DTYPES
from .suite import SUITE

NAME = "mxnet"
ENGINES = ("native", "python", "instructions")
#: A worker is restarted after a case that leaves it above this resident memory. MXNet keeps
#: the largest temporary workspace and MKLDNN caches for the life of the process: the 2-D
#: Convolution case at (32,3,256,256) leaves a worker at 0.74 GiB with its arrays freed (a
#: fresh worker holds 0.2), and none of that is reused by the next case. The largest case,
#: Deconvolution 2-D at (32,3,256,256), adds 1.9 GiB on top of whatever the worker holds
#: (2.07 GiB fresh, 2.62 after that Convolution case), and the parent holds about 0.35 GiB;
#: so the limit must stay below 3 - 1.9 - 0.35 GiB for the full sweep to stay under 3 GiB in
#: any case order. 0.7 GiB replaces the worker after the heavy cases only (metrics
#: rss_before/peak/after_bytes show it per case), and from the second round on only before a case
#: that would raise the sweep's highest peak (benchcore.execute.worker.MemoryBook).
WORKER_MEMORY_LIMIT_GB = 0.7


class MXNetBackend:
    name = NAME
    engines = ENGINES
    default_output_stem = "mxnet_operator_benchmarks"
    memory_limit_gb = WORKER_MEMORY_LIMIT_GB

    suite = SUITE
    dtypes = DTYPES
    categories = CATEGORIES

    # ------------------------------------------------------------------ flags

    def check(self, request) -> str:
        """--ctx (MXNet's device flag), --dtype, --int64-tensor, --category; torch's own flags refused."""
        releases.current()  # an MXNet older than opbench supports: one line naming the fix
        for flag, value in (("--device", request.device), ("--size-target", request.size_target),
                            ("--manifest", request.manifest)):
            if value is not None:
                hint = " (MXNet takes --ctx cpu, gpu or gpu(N))" if flag == "--device" else ""
                raise UsageError(f"{flag} is a --framework torch flag{hint}; add --framework torch or drop it")
        if request.dtype not in self.dtypes:
            raise UsageError(f"--dtype {request.dtype} is not one MXNet's sweep runs; choose from {', '.join(self.dtypes)}")
        for name in split(request.category) or ():
            if name not in self.categories:
                raise UsageError(f"unknown category {name!r}; choose from {', '.join(self.categories)}")
        int64_tensor_flag(request.int64_tensor or "off")
        return check_ctx(request.ctx or "cpu")

    # ------------------------------------------------------------------ operators

    def scan(self, request, device: str) -> List[OperatorInfo]:
        return [OperatorInfo(info.name, category_of(info.name), info.reason if not info.selected else None)
                for info in registry.scan()]

    def knows(self, name: str) -> bool:
        return registry.get(name) is not None

    def plan(self, request, device: str) -> Plan:
        """What a run with these flags measures (the one selection behind the sweep and --list)."""
        _check_names(split(request.ops))
        specs, skipped = generate_cases(ops=split(request.ops), categories=split(request.category), dtype=request.dtype,
                                        ctx=device, int64_tensor=int64_tensor_flag(request.int64_tensor or "off"),
                                        run_backward=True, seed=request.seed, tiny=request.tiny,
                                        counted=request.engine == "instructions")
        specs, skipped, excluded = exclude_specs(specs, skipped, split(request.exclude))
        settings = {"ctx": device, "int64_tensor": request.int64_tensor or "off"}
        extra = {"reported_category": moved} if (moved := _reported_categories(specs, split(request.category))) else {}
        return Plan(shard_specs(specs, parse_shard(request.shard)), skipped, excluded, settings=settings, extra=extra)

    def list_operators(self, request, device: str, everything: bool = False) -> int:
        return listing.list_operators(self, request, device, everything)

    # ------------------------------------------------------------------ reports

    def environment_extra(self, request) -> dict:
        return {"threads": request.threads, "engine": request.engine, "seed": request.seed,
                "timer": {"native": "mxnet-profiler", "instructions": "callgrind"}.get(request.engine, "perf_counter")}

    def to_markdown(self, report) -> str:
        return markdown.to_markdown(report)


def _reported_categories(specs, selected) -> dict:
    """{op: the selected category it came in by} for operators whose home category was not
    selected (`--category unary` takes ceil, floor… by opperf's membership; their home is
    `rounding`): the Markdown files them under what the user asked for. Their case keys keep the
    home category, so reports of either selection still compare."""
    if not selected:
        return {}
    return {spec.params["op"]: next(c for c in selected if spec.params["op"] in opperf_members(c))
            for spec in specs if spec.params["category"] not in selected}


def _check_names(ops) -> None:
    """A PyTorch name given to the MXNet sweep gets its MXNet equivalent in the error."""
    for name in ops or ():
        if set("*?[") & set(name) or registry.get(name) is not None or name in PY_WRAPPERS:
            continue
        equivalent = mxnet_for(name)
        if equivalent:
            raise UsageError(f"{name} is a PyTorch operator; MXNet's equivalent is {equivalent} "
                             f"(opbench --ops {equivalent}, or --framework torch --ops {name})")


def exclude_specs(specs, skipped, patterns):
    """Drop the operators matching `patterns` → (specs, skipped, excluded operator names).

    An excluded operator leaves both lists: one without cases is not reported as lacking a
    benchmark when the user asked to leave it out.
    """
    if not patterns:
        return list(specs), list(skipped), []
    for pattern in patterns:
        if not set("*?[") & set(pattern) and registry.get(pattern) is None:
            close = registry.suggest(pattern)
            hint = f"did you mean {', '.join(close)}?" if close else "see opbench --list --all"
            raise UsageError(f"--exclude: unknown operator {pattern!r}; {hint}")
    dropped = lambda op: any(fnmatch.fnmatchcase(op, pattern) for pattern in patterns)  # noqa: E731
    kept = [spec for spec in specs if not dropped(spec.params.get("op", spec.name))]
    kept_skipped = [(op, reason) for op, reason in skipped if not dropped(op)]
    excluded = {spec.params.get("op", spec.name) for spec in specs} | {op for op, _ in skipped}
    return kept, kept_skipped, sorted(op for op in excluded if dropped(op))


BACKEND = MXNetBackend()
