"""The machine's roofs (benchcore.measure.roofs) taken with a framework's own GEMM and
elementwise add at the sweep's threads, once per machine fingerprint, and cached.

Why a process of its own: the probes set the framework's threads and import it, which a sweep's
parent must not do (a worker's timings must not depend on what the parent loaded), and a
probe that crashes must not take the sweep with it. `python -m frameworks.roofs FRAMEWORK
DEVICE THREADS FINGERPRINT` prints the roofs as JSON; `obtain` runs it where the cache
(frameworks.cache's folder) has no answer for this fingerprint, or when asked to take them again.

The fingerprint is the history store's (benchcore.history.fingerprint): the CPU, the core count,
the interpreter, numpy and framework versions and the threads, so a changed machine or build is
measured afresh. On CUDA the same probes run on the device, with the device's own figures from
its attributes beside them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from benchcore.errors import UsageError
from benchcore.measure import roofs as R
from frameworks import cache

KIND = "opbench-roofs"
FRAMEWORKS = ("torch", "mxnet")
#: the dtypes whose peak is measured, and the GEMMs' sizes: n^3 large enough that a call lasts
#: tens of milliseconds or more on a core, small enough that the probe stays within seconds; the
#: best of two sizes, since a BLAS's blocking can favour either, and one size timed while the
#: machine was busy would put the roof under what a case then reaches
MEASURED = {"float32": (1024, 2048), "float64": (768, 1536)}
#: dtypes a report may hold that have no peak measured here
NOT_MEASURED = {dtype: f"no peak measured for {dtype}: the roof probes take float32 and float64 only"
                for dtype in ("float16", "bfloat16", "int8", "uint8", "int32", "int64")}
#: a probe process that has not answered by then is stopped and the roofs are not taken
TIMEOUT_S = 300.0
#: tests take the roofs at toy sizes (opbench's variable for toy sizes, or this one alone, which
#: tests/conftest.py sets for every test's sweeps), cached apart
TINY_ENV = "OPBENCH_TINY"
ROOFS_TINY_ENV = "OPBENCH_ROOFS_TINY"
TINY_GEMM_N = 64
TINY_LARGEST = 256 * R.KIB
#: and move this much a timed call of the framework's add (R.BYTES_PER_CALL at full size)
TINY_BYTES_PER_CALL = 4 * R.MIB


def tiny() -> bool:
    return "1" in (os.environ.get(TINY_ENV), os.environ.get(ROOFS_TINY_ENV))


#: the framework's GEMM paths the peak is the best of: MXNet's `dot` calls its BLAS (OpenBLAS in
#: the pip builds) while FullyConnected and Convolution call oneDNN, which reached 2.7x dot's
#: rate on one core here (a Convolution at 270% of a dot-only roof); torch's mm is its one path
GEMM_PATHS = {"mxnet": ("dot", "FullyConnected"), "torch": ("mm",)}


def _mx_context(device: str):
    """MXNet's context for a probe device (cpu, cuda or cuda:N)."""
    import mxnet as mx

    return mx.gpu(int(device.partition(":")[2] or 0)) if device.startswith("cuda") else mx.cpu()


def gemm_call(framework: str, dtype: str, n: int, device: str,
              path: str = "") -> Tuple[Callable[[], object], Callable[[], None]]:
    """An n x n x n GEMM by one of the framework's paths (GEMM_PATHS; default its first), and
    the sync that ends it."""
    if framework == "mxnet":
        import mxnet as mx

        ctx = _mx_context(device)
        a, b = (mx.nd.random.uniform(shape=(n, n), ctx=ctx, dtype=dtype) for _ in range(2))
        out = mx.nd.empty((n, n), ctx=ctx, dtype=dtype)
        if path == "FullyConnected":  # out = a b^T: the same 2 n^3 operations
            return lambda: mx.nd.FullyConnected(a, b, num_hidden=n, no_bias=True, out=out), mx.nd.waitall
        return lambda: mx.nd.dot(a, b, out=out), mx.nd.waitall
    import torch

    a, b = (torch.rand(n, n, dtype=getattr(torch, dtype), device=device) for _ in range(2))
    out = torch.empty(n, n, dtype=getattr(torch, dtype), device=device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.startswith("cuda") else (lambda: None)
    return lambda: torch.mm(a, b, out=out), sync


def peak_rate(framework: str, dtype: str, sizes, device: str) -> Tuple[float, str]:
    """The best FLOP rate of the framework's GEMM paths at `sizes`, and which path and size gave it."""
    found = []
    for path in GEMM_PATHS[framework]:
        for n in sizes:
            try:
                call, sync = gemm_call(framework, dtype, n, device, path)
                found.append((R.gemm_rate(call, n, sync), f"{path} {n}^3"))
            except Exception as error:  # a path without this dtype (oneDNN and float64): the others decide
                if path == GEMM_PATHS[framework][0]:
                    raise
                found.append((0.0, f"{path}: {type(error).__name__}"))
    return max(found)


def add_call(framework: str, n: int, device: str) -> Tuple[Callable[[], object], Callable[[], None]]:
    """The framework's own elementwise add of an n-element float32 source into an accumulator,
    in place (MXNet: elemwise_add into out=, the accumulator), and the sync that ends it."""
    if framework == "mxnet":
        import mxnet as mx

        ctx = _mx_context(device)
        source, accumulator = mx.nd.ones(n, ctx=ctx), mx.nd.zeros(n, ctx=ctx)
        return lambda: mx.nd.elemwise_add(accumulator, source, out=accumulator), mx.nd.waitall
    import torch

    source, accumulator = torch.ones(n, device=device), torch.zeros(n, device=device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.startswith("cuda") else (lambda: None)
    return lambda: accumulator.add_(source), sync


def add_rate(framework: str, device: str) -> Callable[[int], float]:
    """The bandwidth probe by the framework's own add (add_call) at the threads it was given:
    several adds a timed call, each reading the source and reading and writing the accumulator."""

    def rate(working_set: int) -> float:
        n = max(1, working_set // 8)  # float32: a source and an accumulator
        rows = max(2, (TINY_BYTES_PER_CALL if tiny() else R.BYTES_PER_CALL) // working_set)
        add, sync = add_call(framework, n, device)

        def call():
            for _ in range(rows):
                add()

        return 3 * rows * n * 4 / R.best_seconds(call, sync)

    return rate


def add_path(framework: str, device: str) -> str:
    """The bandwidth probe's path and the threads it ran at (on a CPU), as the roofs' notes say them."""
    if device.startswith("cuda"):
        return f"{framework} {'elemwise_add' if framework == 'mxnet' else 'add_'} on {device}"
    if framework == "mxnet":
        threads = os.environ.get("OMP_NUM_THREADS")
        return f"mxnet elemwise_add (OMP_NUM_THREADS={threads})" if threads else \
            "mxnet elemwise_add (MXNet's default OpenMP threads: OMP_NUM_THREADS unset)"
    import torch

    return f"torch add_ (threads {torch.get_num_threads()})"


def bandwidth_probes(framework: str, device: str) -> Dict[str, Callable[[int], float]]:
    """The probes whose best rate is each working set's: the framework's add at the sweep's
    threads, and on the CPU numpy's one-thread add too, which has no per-call cost (a framework's
    call on a small working set times mostly its own overhead)."""
    probes = {add_path(framework, device): add_rate(framework, device)}
    if not device.startswith("cuda"):
        probes["numpy add.reduce (threads 1)"] = R.add_rate
    return probes


def curve_note(curve, probes) -> str:
    """Which probes took the curve, and which working sets each one's rate is."""
    spans: Dict[str, list] = {probe: [] for probe in probes}
    for point in curve:
        spans[point.probe].append(point.working_set_bytes)
    return "bandwidth: the best of " + " and ".join(probes) + " at each working set; " + "; ".join(
        f"{probe}: {R.size_text(min(sizes))} to {R.size_text(max(sizes))} ({len(sizes)})" if sizes else f"{probe}: none"
        for probe, sizes in spans.items())


def device_spec(device: str) -> dict:
    """A CUDA device's own figures from its attributes: what the measured roofs stand beside."""
    import torch

    props = torch.cuda.get_device_properties(device)
    clock, width = getattr(props, "memory_clock_rate", None), getattr(props, "memory_bus_width", None)
    spec = {"name": props.name, "capability": f"{props.major}.{props.minor}",
            "multiprocessors": getattr(props, "multi_processor_count", None),
            "memory_bytes": getattr(props, "total_memory", None), "l2_bytes": getattr(props, "L2_cache_size", None),
            # double data rate: two transfers a clock (kHz) over the bus width (bits)
            "memory_bytes_per_s": 2 * clock * 1e3 * width / 8 if clock and width else None,
            "flops_per_s": None, "flops_reason": "the device attributes do not give a FLOP rate per dtype"}
    if spec["memory_bytes_per_s"] is None:
        spec["memory_reason"] = "this torch's device attributes have no memory clock or bus width"
    return spec


def check_device(device: str) -> None:
    if device == "cpu":
        return
    if not device.startswith("cuda"):
        raise UsageError(f"roofs: device {device!r} is neither cpu nor cuda[:N]; pass one of those")
    import torch

    if not torch.cuda.is_available():
        raise UsageError(f"roofs: device {device} asked for, but this torch sees no CUDA device; "
                         "take the roofs on a machine with one, or on cpu")


def take(framework: str, device: str, threads: Optional[int], fingerprint: str) -> R.Roofs:
    """Every probe, in this process (the caller set the threads before importing a framework)."""
    check_device(device)
    started = time.perf_counter()
    if framework == "torch" and threads:
        import torch

        torch.set_num_threads(threads)
    sizes = {dtype: (TINY_GEMM_N,) for dtype in MEASURED} if tiny() else MEASURED
    flops: Dict[str, Optional[float]] = {}
    notes = []
    for dtype, ns in sizes.items():
        flops[dtype], best = peak_rate(framework, dtype, ns, device)
        notes.append(f"{dtype} peak from {best}")
    on_device = device.startswith("cuda")
    caches = {"L1": None, "L2": device_spec(device)["l2_bytes"], "LLC": None} if on_device else R.cache_sizes()
    working_sets = [s for s in R.working_sets(caches) if s <= TINY_LARGEST] if tiny() else R.working_sets(caches)
    probes = bandwidth_probes(framework, device)
    curve = R.bandwidth_curve(working_sets, probes)
    notes += [curve_note(curve, probes), R.level_note(curve, caches)]
    return R.Roofs(framework=framework, device=device, threads=threads, fingerprint=fingerprint, flops_per_s=flops,
                   flops_reasons=dict(NOT_MEASURED), gemm_n=max(max(ns) for ns in sizes.values()), bandwidth=curve,
                   cache_bytes=caches, taken_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   took_s=time.perf_counter() - started, spec=device_spec(device) if on_device else None, notes=notes)


# ---------------------------------------------------------------- once per fingerprint

#: a sweep's environment keys that say how it times its cases, which the probes (timed their own
#: way) do not depend on, and its threads, which the fingerprint takes apart: without them a
#: sweep, another engine's and scripts/roofs_figures share one cached file
TIMING_METHOD = ("engine", "timer", "flush_denormal", "threads")


def fingerprint(framework: str, environment: dict, threads: Optional[int]) -> str:
    """The history store's fingerprint of this environment (less its TIMING_METHOD) at these threads."""
    from benchcore.history.fingerprint import fingerprint as of_report
    from benchcore.report.model import Report

    machine = {key: value for key, value in environment.items() if key not in TIMING_METHOD}
    return of_report(Report(suite=f"roofs-{framework}", environment=machine, settings={"threads": threads})).id


def cache_path(framework: str, device: str, print_id: str) -> Path:
    size = "-tiny" if tiny() else ""
    return cache.root() / f"roofs-{framework}-{device.split(':')[0]}-{print_id}-v{R.VERSION}{size}.json"


def cached(path: Path, print_id: str) -> Tuple[Optional[R.Roofs], Optional[str]]:
    """The cached roofs, or None and what was wrong with the file (None: there was none)."""
    if not path.exists():
        return None, None
    body = cache.read(path, KIND)
    try:
        found = R.Roofs.from_dict(body) if body is not None else None
    except (KeyError, TypeError, ValueError) as error:
        return None, f"the cached roofs {path} are unreadable ({type(error).__name__}: {error}): taken again"
    if found is None:
        return None, f"the cached roofs {path} are corrupt: taken again"
    if found.fingerprint != print_id:
        return None, f"the cached roofs {path} are another machine's (fingerprint {found.fingerprint}): taken again"
    return found, None


def probe_process(framework: str, device: str, threads: Optional[int], print_id: str) -> R.Roofs:
    """Take the roofs in a process of their own, with the sweep's thread variables."""
    from benchcore.execute.environment import THREAD_VARIABLES

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                                     os.environ.get("PYTHONPATH")])))
    if threads:
        env.update({name: str(threads) for name in THREAD_VARIABLES})
    command = [sys.executable, "-m", "frameworks.roofs", framework, device, str(threads or 0), print_id]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UsageError(f"roofs: the probes took over {TIMEOUT_S:.0f} s; take them on a quieter machine") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise UsageError(f"roofs: the probe process failed ({last}); fix that, or take the roofs again")
    return R.Roofs.from_dict(json.loads(done.stdout))


def obtain(framework: str, environment: dict, threads: Optional[int] = None, device: str = "cpu",
           retake: bool = False) -> Tuple[R.Roofs, Optional[str]]:
    """This machine's roofs (cached, else taken and cached) and a note to say once where a
    cached file was corrupt or another machine's."""
    if framework not in FRAMEWORKS:
        raise UsageError(f"roofs: unknown framework {framework!r}; choose from {', '.join(FRAMEWORKS)}")
    print_id = fingerprint(framework, environment, threads)
    path = cache_path(framework, device, print_id)
    found, note = (None, None) if retake else cached(path, print_id)
    if found is None:
        found = probe_process(framework, device, threads, print_id)
        cache.write(path, KIND, found.to_dict())
    return found, note


# ---------------------------------------------------------------- a sweep's roofs

#: --roofs: read the cache (take them where it has none), take them again, or no probes at all
MODES = ("cached", "retake", "off")


def add_argument(parser) -> None:
    """--roofs, the flag every sweep that reports efficiency shares."""
    parser.add_argument("--roofs", default="cached", choices=MODES,
                        help="the machine's measured roofs each case's GB/s, GFLOP/s and %% of roof are read "
                             "against: cached (default; taken once per machine fingerprint, then read from the "
                             "cache), retake (take them again now), off (no probes; efficiency is null with that "
                             "reason)")


def sweep_device(device: str) -> str:
    """A sweep's device flag (cpu, cpu(N), gpu(N), cuda:N) as the probes name it."""
    if device.startswith("gpu"):
        return f"cuda:{device[4:-1] or 0}" if "(" in device else "cuda"
    return device if device.startswith("cuda") else "cpu"


def for_sweep(mode: str, framework: str, environment: dict, threads: Optional[int], device: str = "cpu",
              counted: bool = False) -> dict:
    """The report's roofs block of one framework: `roofs` (Roofs.to_dict, or None with `reason`),
    `source` (cached, taken, off or failed), `obtain_s` (what obtaining them cost this sweep) and
    `note` (a corrupt or another machine's cache, re-taken: said once, here). A probe that fails
    costs the sweep its efficiency figures, never its measurements. A `counted` sweep (the
    instruction engine) times nothing to read against roofs: no probe runs."""
    if mode == "off" or counted:
        why = "a counted sweep times nothing to read against roofs" if counted else "roof probes off (--roofs off)"
        return {"source": "off", "obtain_s": 0.0, "note": None, "roofs": None, "reason": why}
    started = time.perf_counter()
    print_id = fingerprint(framework, environment, threads)
    path = cache_path(framework, sweep_device(device), print_id)
    was_cached = mode != "retake" and path.exists()
    try:
        found, note = obtain(framework, environment, threads, sweep_device(device), retake=mode == "retake")
    except UsageError as error:
        return {"source": "failed", "obtain_s": time.perf_counter() - started, "note": None, "roofs": None,
                "reason": str(error)}
    source = "cached" if was_cached and note is None else "taken"
    return {"source": source, "obtain_s": time.perf_counter() - started, "note": note, "roofs": found.to_dict(),
            "reason": None}


def main(argv=None) -> int:
    framework, device, threads, print_id = (argv or sys.argv[1:])[:4]
    try:
        found = take(framework, device, int(threads) or None, print_id)
    except UsageError as error:
        sys.stderr.write(f"{error}\n")
        return 2
    sys.stdout.write(json.dumps(found.to_dict()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
