"""`opbench crossframe`: which framework is faster at this operator, here — MXNet vs PyTorch on
the same work.

For every pair of opbench.equivalents (or those --ops names), the MXNet side is the MXNet
sweep's own cases at opperf's shapes (opbench.backends.mxnet.cases.generate_cases) and the
PyTorch side the equivalent call on tensors of the same shapes and kinds of values (the pair's `convert`).
Both run through the one sweep pipeline (benchcore.execute.sweep.measure: isolated workers, rounds),
MXNet's cases in MXNet workers and torch's in torch workers, with the same engine, warmup,
runs and threads. The report is an ordinary opbench report holding both sides' results (so
`opbench compare` matches two crossframe reports case by case), plus `extra.crossframe`: per
case and phase, the MXNet time, the PyTorch time, their ratio, and both frameworks' versions
and threads; its Markdown shows that table with the geometric mean of the ratios per phase.

The default engine is `python`: a wall clock around each call bracketed by each framework's
sync is the one quantity both sides measure the same way (the native engines are two different
profilers). The two sides run one after the other, so a machine that drifts between them shows
in the ratios; use --rounds and a quiet machine.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from benchcore.cli.options import (
    ArgumentParser,
    add_output_arguments,
    add_run_arguments,
    check_output_paths,
    formats_for,
    non_negative_int,
    output_paths,
    positive_int,
    rounds_from,
    run_settings_from,
)
from benchcore.cli.request import SweepRequest, from_namespace
from benchcore.cli.run import Planned, ReportParts
from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec
from benchcore.views import headroom
from frameworks import roofs as machine_roofs

from .backends import backend_for
from .backends.base import split
from .suite import PROG, timings
from .sweep import with_efficiency

DEFAULT_OUTPUT_STEM = "crossframe"
DEFAULT_ROUNDS = 3
MEMORY_LIMIT_GB = 1.0
CHECKPOINT_SUFFIX = ".checkpoint.jsonl"


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=f"{PROG} crossframe",
                            description="MXNet vs PyTorch: each equivalent pair of operators at opperf's shapes, "
                                        "both timed the same way; one report with the ratio per case and phase.")
    parser.add_argument("--ops", "--pairs", dest="ops", action="append", default=None, metavar="NAME[,NAME]",
                        help="only the pairs of these operators, by MXNet or PyTorch name (default: all; see "
                             "--list); --pairs is the same flag")
    parser.add_argument("--list", action="store_true", help="list the pairs and exit")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"),
                        help="dtype of every tensor (default float32)")
    parser.add_argument("-p", "--profiler", "--engine", dest="engine", default="python", choices=("python", "native"),
                        help="python: wall clock around each call, both sides alike (default); native: each "
                             "framework's own profiler")
    parser.add_argument("-w", "--warmup", type=non_negative_int, default=25, help="warmup iterations (default 25)")
    parser.add_argument("-r", "--runs", type=positive_int, default=100, help="measured iterations (default 100)")
    parser.add_argument("--seed", type=int, default=41, help="random seed for the inputs (default 41, recorded)")
    parser.add_argument("--tiny", action="store_true", help="toy sizes (tests)")
    add_output_arguments(parser, DEFAULT_OUTPUT_STEM)
    add_run_arguments(parser, rounds=DEFAULT_ROUNDS, memory_limit_gb=MEMORY_LIMIT_GB)
    machine_roofs.add_argument(parser)
    return parser


def plan(request) -> Tuple[List[CaseSpec], List[CaseSpec], List[dict]]:
    """(MXNet cases, torch cases, one row per MXNet case: the pair and its torch case's key or
    why there is none)."""
    from .backends.mxnet.cases import generate_cases
    from .backends.torch.sample import Scale, describe_sample
    from .equivalents import pairs

    mxnet_specs, torch_specs, rows = [], [], []
    for pair in pairs(split(request.ops)):
        specs, skipped = generate_cases(ops=[pair.mxnet], dtype=request.dtype, seed=request.seed, tiny=request.tiny)
        for op, reason in skipped:
            rows.append({"mxnet": op, "torch": pair.torch, "variant": None, "mxnet_key": None, "torch_key": None,
                         "note": f"no MXNet case: {reason}"})
        for spec in specs:
            converted = pair.convert(spec.params["inputs"])
            row = {"mxnet": pair.mxnet, "torch": converted[0] if converted else pair.torch,
                   "variant": spec.params["variant"], "mxnet_key": spec.key, "torch_key": None, "note": None}
            mxnet_specs.append(spec)
            if converted is None:
                row["note"] = "no equal PyTorch call for this case"
            else:
                path, tree = converted
                torch_spec = _torch_spec(spec, path, tree, describe_sample(tree, Scale(1)))
                torch_specs.append(torch_spec)
                row["torch_key"] = torch_spec.key
            rows.append(row)
    return mxnet_specs, torch_specs, rows


def _torch_spec(mxnet: CaseSpec, path: str, tree: dict, described: dict) -> CaseSpec:
    """The torch side of one MXNet case: its call and sample travel in the spec (no manifest)."""
    p = mxnet.params
    params = {"framework": "torch", "op": path, "variant": p["variant"], "category": p.get("category"),
              "dtype": p["dtype"], "device": "cpu", "inputs": described, "call": {"path": path}, "tree": tree,
              "run_backward": bool(p["run_backward"]), "seed": p["seed"], "crossframe": p["op"]}
    if not p["run_backward"]:
        params["no_backward_reason"] = p.get("no_backward_reason") or "not timed on the MXNet side"
    return CaseSpec(suite=PROG, name=path, params=params)


def list_pairs(request) -> int:
    from tabulate import tabulate

    from .equivalents import pairs

    rows = [[p.mxnet, p.torch] for p in pairs(split(request.ops))]
    print(tabulate(rows, headers=["MXNet", "PyTorch"], tablefmt="simple"))
    print(f"\n{len(rows)} pairs", file=sys.stderr)
    return 0


@dataclass(frozen=True)
class CrossframeRequest(SweepRequest):
    """`opbench crossframe`'s flags over the shared ones."""

    #: the pairs' operators, as given (repeatable, comma-separated)
    ops: Optional[Sequence[str]] = None
    dtype: str = "float32"
    engine: str = "python"
    warmup: int = 25
    runs: int = 100
    seed: int = 41
    tiny: bool = False
    memory_limit_gb: Optional[float] = MEMORY_LIMIT_GB
    #: the roof probes: cached, retake or off (frameworks.roofs.MODES)
    roofs: str = "cached"


def run(argv: Sequence[str]) -> int:
    """The command: parse → request → the sweep path (or --list) → exit status."""
    from benchcore.cli import run as sweep_path
    from benchcore.cli.options import apply_threads

    try:
        args = build_parser().parse_args(list(argv))
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    apply_threads(args.threads)
    request = from_namespace(CrossframeRequest, args)
    if args.list:
        return list_pairs(request)
    return sweep_path.sweep(request, CrossframeSweep(), ["crossframe", *argv])


class CrossframeSweep:
    """The hooks of the MXNet-against-PyTorch sweep (benchcore.cli.run.SweepHooks): two jobs,
    MXNet's cases then torch's, and one report of both."""

    prog = PROG

    @property
    def suite(self):
        return backend_for("mxnet").suite

    def check(self, request: CrossframeRequest) -> str:
        return "cpu"

    def outputs(self, request: CrossframeRequest):
        paths = output_paths(request.output_file, formats_for(request), DEFAULT_OUTPUT_STEM)
        check_output_paths(paths, request.overwrite)
        return paths

    def plan(self, request: CrossframeRequest, device: str, checkpoint, pythons) -> Planned:
        mxnet_specs, torch_specs, rows = plan(request)
        if not mxnet_specs:
            raise UsageError("no MXNet case for these --ops; opbench crossframe --list shows the pairs")
        return Planned({framework: _job(request, framework, specs, _side_checkpoint(checkpoint, framework))
                        for framework, specs in (("mxnet", mxnet_specs), ("torch", torch_specs))}, rows)

    def environment_extra(self, request: CrossframeRequest, device: str) -> dict:
        """The environment's run settings (the same for both sides)."""
        return {"threads": request.threads, "engine": request.engine, "seed": request.seed, "crossframe": True}

    def collector(self, request, device, argv):
        return None

    def report(self, request: CrossframeRequest, planned: Planned, measured, paths, record: dict) -> ReportParts:
        roofs = {}
        for framework, job in planned.jobs.items():  # each side's efficiency against its own framework's roofs
            environment, results = measured[framework]
            with_efficiency(request.roofs, framework, job, environment, "cpu", request.dtype, results, roofs)
        parts = build_report(request, measured, planned.detail, record)
        parts.extra.update(roofs)
        headroom.chart_beside(PROG, parts.results, parts.extra, self.suite, paths.get("md"))
        return parts

    def to_markdown(self, report) -> str:
        return to_markdown(report)

    def announce(self, request, report) -> None:
        """Nothing before the outputs: the summary follows them."""

    def summarize(self, request, report, written, started: float) -> None:
        rows = report.extra["crossframe"]["rows"]
        failed = report.failures
        print(f"{PROG}: crossframe: {len(rows)} cases of {len({r['mxnet'] for r in rows})} pairs in "
              f"{time.perf_counter() - started:.1f} s" + (f"; {len(failed)} failed" if failed else ""), file=sys.stderr)
        for result in failed:
            print(f"  {result.spec.name} [{result.spec.params.get('variant')}]: {result.status}: {result.error}",
                  file=sys.stderr)
        for line in headroom.console_notes(report):
            print(f"{PROG}: warning: {line}", file=sys.stderr)
        print(f"{PROG}: wrote " + ", ".join(str(p) for p in written), file=sys.stderr)

    def announce_sides(self, request, reports) -> None:
        """crossframe has no `ab`."""


def _side_checkpoint(checkpoint: Optional[Path], framework: str) -> Optional[Path]:
    """Each framework's own checkpoint beside the report (<output>.<framework>.checkpoint.jsonl)."""
    if checkpoint is None:
        return None
    return checkpoint.with_name(checkpoint.name.replace(CHECKPOINT_SUFFIX, f".{framework}{CHECKPOINT_SUFFIX}"))


def _job(request: CrossframeRequest, framework: str, specs, checkpoint):
    from benchcore.execute.sweep import SweepJob

    suite = backend_for(framework).suite
    settings = run_settings_from(request, request.warmup, request.runs)
    options = {"profiler": request.engine, "threads": request.threads, "seed": request.seed}
    return SweepJob(suite, specs, settings, rounds_from(request, DEFAULT_ROUNDS), options, checkpoint)


def build_report(request: CrossframeRequest, measured: dict, rows: List[dict], record: dict) -> ReportParts:
    mxnet_env, mxnet_results = measured["mxnet"]
    torch_env, torch_results = measured["torch"]
    environment = dict(mxnet_env, torch=torch_env.get("torch"),
                       systems={"mxnet": mxnet_env.get("system"), "torch": torch_env.get("system")})
    by_key = {r.spec.key: r for r in mxnet_results + torch_results}
    table = [dict(row, **_figures(by_key.get(row["mxnet_key"]), by_key.get(row["torch_key"]))) for row in rows]
    settings = {"crossframe": True, "profiler": request.engine, "dtype": request.dtype, "ctx": "cpu(0)",
                "device": "cpu", "warmup": request.warmup, "runs": request.runs, "seed": request.seed,
                "pairs": split(request.ops), "threads": record["threads"], "timeout_s": record["timeout_s"],
                "tiny": bool(request.tiny), "run_settings": record["run_settings"], "rounds": record["rounds"]}
    versions = {"mxnet": (mxnet_env.get("mxnet") or {}).get("version"), "torch": (torch_env.get("torch") or {}).get("version")}
    worker_threads = sorted({r.metrics.get("threads") for r in torch_results if r.ok and r.metrics.get("threads")})
    threads = {"torch": worker_threads[0] if len(worker_threads) == 1 else worker_threads,
               "env": mxnet_env.get("threads_env"), "asked": request.threads}
    extra = {"crossframe": {"rows": table, "versions": versions, "threads": threads,
                            "geomean_ratio": {phase: _geomean(table, phase) for phase in ("forward", "backward")}}}
    results = sorted(mxnet_results + torch_results, key=lambda r: (r.spec.params.get("op", r.spec.name), r.spec.key))
    return ReportParts(environment, settings, results, extra)


def _figures(mxnet, torch) -> dict:
    """{phase: {mxnet_ms, torch_ms, ratio (torch / mxnet)}} from the suite's headline figures."""
    out = {}
    for phase in ("forward", "backward"):
        a = timings(mxnet).get(phase) if mxnet is not None and mxnet.ok else None
        b = timings(torch).get(phase) if torch is not None and torch.ok else None
        a_ms, b_ms = (a.center_ms if a else None), (b.center_ms if b else None)
        out[phase] = {"mxnet_ms": a_ms, "torch_ms": b_ms,
                      "ratio": b_ms / a_ms if a_ms and b_ms is not None else None,
                      **{f"{side}_percent_of_roof": _percent(result, phase)
                         for side, result in (("mxnet", mxnet), ("torch", torch))}}
    return out


def _percent(result, phase: str) -> Optional[float]:
    """A side's % of its roof in the phase (benchcore.views.headroom); None where not known."""
    found = headroom.efficiencies(result).get(phase) if result is not None and result.ok else None
    return found.percent_of_roof if found else None


def _geomean(rows: List[dict], phase: str) -> Optional[float]:
    ratios = [row[phase]["ratio"] for row in rows if row.get(phase) and row[phase]["ratio"]]
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None


def to_markdown(report) -> str:
    from tabulate import tabulate

    data = report.extra["crossframe"]
    fmt = lambda v, d=4: "---" if v is None else f"{v:.{d}f}"  # noqa: E731
    rows = []
    for row in data["rows"]:
        for phase in ("forward", "backward"):
            figures = row.get(phase) or {}
            if phase == "backward" and figures.get("mxnet_ms") is None and figures.get("torch_ms") is None:
                continue
            rows.append([row["mxnet"], row["torch"], row["variant"] or "", phase, fmt(figures.get("mxnet_ms")),
                         fmt(figures.get("torch_ms")), fmt(figures.get("ratio"), 2),
                         fmt(figures.get("mxnet_percent_of_roof"), 1), fmt(figures.get("torch_percent_of_roof"), 1),
                         row.get("note") or ""])
    versions, threads, geomean = data["versions"], data["threads"], data["geomean_ratio"]
    settings = report.settings
    thread_env = ", ".join(f"{k}={v}" for k, v in (threads.get("env") or {}).items() if v is not None) or "none set"
    lines = ["# MXNet vs PyTorch", "",
             f"MXNet {versions['mxnet']}, PyTorch {versions['torch']} ({threads['torch']} threads; thread variables: "
             f"{thread_env}); engine {settings['profiler']}; dtype {settings['dtype']}; CPU; warmup "
             f"{settings['warmup']}, runs {settings['runs']} over {settings['rounds']['rounds']} round(s). Times are "
             f"medians in ms; ratio = PyTorch / MXNet (below 1: PyTorch is faster). Geometric mean of the ratios: "
             f"forward {fmt(geomean['forward'], 2)}, backward {fmt(geomean['backward'], 2)}.", "",
             tabulate(rows, headers=["MXNet", "PyTorch", "Inputs", "Phase", "MXNet (ms)", "PyTorch (ms)", "Ratio",
                               "MXNet % of roof", "PyTorch % of roof", "Note"],
                      tablefmt="github", disable_numparse=True), ""]
    failures = [r for r in report.results if r.status in ("failed", "crashed", "timeout")]
    if failures:
        lines += ["## Failures", "", tabulate([[r.spec.name, r.spec.params.get("variant"), r.status,
                                                (r.error or "")[:200]] for r in failures],
                                              headers=["Operator", "Inputs", "Status", "Error"], tablefmt="github"), ""]
    return "\n".join(lines + headroom.markdown(report, backend_for("mxnet").suite))
