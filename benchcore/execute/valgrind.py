"""Valgrind's callgrind as a worker launcher, and the client requests that count one call.

The instruction engine runs the ordinary worker (benchcore.execute.worker) under callgrind: the
worker's command line gets the prefix `launcher()` builds, so one valgrind process imports the
framework once (80 s for MXNet under callgrind here) and then takes many cases, as a timing
worker does. Collection is off at start (`--collect-atstart=no`); the worker switches it on
only around each measured call with callgrind's client requests, compiled on demand into a
tiny shared object (`build_shim`, the system `cc` against valgrind's own header) and called
through ctypes, so no framework is needed to count. Each counted call ends in a dump
(`CALLGRIND_DUMP_STATS_AT`) that holds only that call; the worker answers with the dumps'
paths, and the parent reads and removes them (benchcore.measure.instructions.read_dumps).
Natively the requests are a few no-op instructions, so the same code runs outside valgrind.

Cache simulation (`--cache-sim=yes`) adds first-level and last-level misses; its geometry is
pinned (`Geometry`, default below) so the figures do not depend on the host's caches.

Determinism comes from the prefix's environment: one thread for OpenMP/MKL/OpenBLAS,
PYTHONHASHSEED=0, what the suite's frameworks declare (Suite.count_environment; MXNet's
NaiveEngine runs the operator inside the calling thread), and `setarch -R` (no address
randomisation) where it exists.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from benchcore.errors import UsageError

#: how to get valgrind where it is missing (the engine's one-line error)
INSTALL_HINT = "install valgrind (Debian/Ubuntu: apt-get install valgrind; or run scripts/test-system)"
#: callgrind runs a framework's calls ~100x slower than natively (measured: docs/INSTRUCTIONS.md);
#: a case's --timeout is scaled by this under the engine
SLOWDOWN = 100
#: valgrind's shadow state and translations live in the worker: a worker's resident memory under
#: callgrind is ~2.2x its native size (MXNet: 0.4 GB → 0.88 GB), so --memory-limit-gb is scaled by
#: this (else every case would restart the worker and pay the 80 s import again)
MEMORY_SCALE = 3.0
#: the worker's environment under the engine, before the suite's own (see the module docstring)
DETERMINISTIC_ENV = {
    "PYTHONHASHSEED": "0",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
#: the worker reads the client-request shim's path from here (see Collector.in_worker)
SHIM_ENV = "BENCHCORE_CALLGRIND_SHIM"
#: the file each dump goes to, in the worker's scratch folder (valgrind expands %q{VAR} and %p)
OUT_FILE_NAME = "callgrind.out"
SHIM_SOURCE = """\
#include <valgrind/callgrind.h>
void benchcore_count_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_TOGGLE_COLLECT; }
void benchcore_count_stop(const char *name) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS_AT(name); }
int benchcore_on_valgrind(void) { return RUNNING_ON_VALGRIND; }
"""
HEADER = "valgrind/callgrind.h"


@dataclass(frozen=True)
class Cache:
    """One simulated cache: size, associativity and line size in bytes (valgrind's --I1 syntax)."""

    size: int
    assoc: int
    line: int

    def flag(self) -> str:
        return f"{self.size},{self.assoc},{self.line}"


@dataclass(frozen=True)
class Geometry:
    """The simulated caches: first-level instruction and data, and the last level."""

    I1: Cache
    D1: Cache
    LL: Cache

    def flags(self) -> List[str]:
        return [f"--I1={self.I1.flag()}", f"--D1={self.D1.flag()}", f"--LL={self.LL.flag()}"]

    def to_dict(self) -> Dict[str, str]:
        return {"I1": self.I1.flag(), "D1": self.D1.flag(), "LL": self.LL.flag()}


#: a common x86-64 server core: 32 KiB 8-way L1s, 8 MiB 16-way last level, 64-byte lines
DEFAULT_GEOMETRY = Geometry(Cache(32768, 8, 64), Cache(32768, 8, 64), Cache(8388608, 16, 64))
GEOMETRY_HELP = ("'default' (I1=32768,8,64:D1=32768,8,64:LL=8388608,16,64), 'off' (instructions only), or "
                 "I1=SIZE,ASSOC,LINE:D1=SIZE,ASSOC,LINE:LL=SIZE,ASSOC,LINE in bytes")
_CACHE = re.compile(r"^(I1|D1|LL)=(\d+),(\d+),(\d+)$")


def parse_geometry(text: str) -> Optional[Geometry]:
    """--cache-sim's value → a Geometry, or None for 'off'; a UsageError naming the fix."""
    text = (text or "").strip()
    if text in ("", "default"):
        return DEFAULT_GEOMETRY
    if text == "off":
        return None
    found: Dict[str, Cache] = {}
    for part in text.split(":"):
        match = _CACHE.match(part.strip())
        if not match or match.group(1) in found:
            raise UsageError(f"--cache-sim {text!r}: {part.strip()!r} is not a cache; use {GEOMETRY_HELP}")
        size, assoc, line = (int(g) for g in match.groups()[1:])
        _check_cache(text, match.group(1), size, assoc, line)
        found[match.group(1)] = Cache(size, assoc, line)
    missing = [name for name in ("I1", "D1", "LL") if name not in found]
    if missing:
        raise UsageError(f"--cache-sim {text!r} lacks {', '.join(missing)}; use {GEOMETRY_HELP}")
    return Geometry(found["I1"], found["D1"], found["LL"])


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _check_cache(text: str, name: str, size: int, assoc: int, line: int) -> None:
    """What valgrind itself refuses, said before a worker starts: a line of 16+ bytes, a power of
    two; a whole number of sets, a power of two."""
    sets = size // (assoc * line) if assoc and line else 0
    if not (_power_of_two(line) and line >= 16 and assoc >= 1 and sets * assoc * line == size and _power_of_two(sets)):
        raise UsageError(f"--cache-sim {text!r}: {name} of {size} B, {assoc}-way, {line} B lines is not a cache "
                         "valgrind simulates (line a power of two >= 16, size = sets x ways x line with sets a "
                         "power of two); use e.g. 32768,8,64")


def find_valgrind() -> str:
    """valgrind's path, or the one-line UsageError that says how to get it."""
    path = shutil.which("valgrind")
    if path is None:
        raise UsageError(f"--engine instructions runs workers under valgrind, which is not on PATH; {INSTALL_HINT}")
    return path


def launcher(geometry: Optional[Geometry], shim: str, valgrind: Optional[str] = None,
             environment: Optional[Dict[str, str]] = None) -> List[str]:
    """The prefix of a worker's command line under callgrind (see the module docstring);
    `environment`: the suite's (Suite.count_environment)."""
    variables = {**DETERMINISTIC_ENV, **(environment or {})}
    prefix = ["env", *(f"{k}={v}" for k, v in variables.items()), f"{SHIM_ENV}={shim}"]
    setarch = shutil.which("setarch")
    if setarch and _setarch_works(setarch):
        prefix += [setarch, os.uname().machine, "-R"]
    prefix += [valgrind or find_valgrind(), "--tool=callgrind", "--quiet", "--collect-atstart=no",
               f"--callgrind-out-file=%q{{{_scratch_env()}}}/{OUT_FILE_NAME}.%p"]
    if geometry is not None:
        prefix += ["--cache-sim=yes", *geometry.flags()]
    return prefix


def _scratch_env() -> str:
    from benchcore.execute.worker import SCRATCH_ENV

    return SCRATCH_ENV


def _setarch_works(setarch: str) -> bool:
    """setarch -R needs personality(2), which some containers forbid."""
    try:
        return subprocess.run([setarch, os.uname().machine, "-R", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def shim_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benchcore"


def build_shim(folder: Optional[Path] = None) -> str:
    """The client-request shim's path, compiled once per source and header (cached by digest)."""
    include = _header_dir()
    digest = hashlib.sha256((SHIM_SOURCE + str(include)).encode()).hexdigest()[:16]
    folder = Path(folder or shim_folder())
    target = folder / f"callgrind-shim-{digest}.so"
    if target.exists():
        return str(target)
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise UsageError("--engine instructions compiles a 4-line C shim but finds no C compiler; "
                         "install one (apt-get install gcc)")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        source = Path(work) / "shim.c"
        source.write_text(SHIM_SOURCE)
        built = Path(work) / "shim.so"
        done = subprocess.run([compiler, "-shared", "-fPIC", "-O2", f"-I{include}", "-o", str(built), str(source)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"could not compile the callgrind shim ({tail}); {INSTALL_HINT}")
        os.replace(built, target)
    return str(target)


def _header_dir() -> Path:
    for root in ("/usr/include", "/usr/local/include", *_valgrind_prefix_includes()):
        if (Path(root) / HEADER).exists():
            return Path(root)
    raise UsageError(f"valgrind's header {HEADER} is missing; {INSTALL_HINT} (the package that ships the headers)")


def _valgrind_prefix_includes() -> Tuple[str, ...]:
    found = shutil.which("valgrind")
    return (str(Path(found).resolve().parent.parent / "include"),) if found else ()


class Collector:
    """In the worker: count one call at a time, each into a dump of its own.

    Natively (no valgrind) `on_valgrind` is False and the requests do nothing: the engine then
    refuses to report counts instead of reporting zeros.
    """

    def __init__(self, shim_path: str, folder: Optional[str] = None):
        import ctypes

        library = ctypes.CDLL(shim_path)
        # bound once: ctypes' first attribute lookup runs Python that must not be counted
        self._start = library.benchcore_count_start
        self._stop = library.benchcore_count_stop
        self._stop.argtypes = [ctypes.c_char_p]
        self.on_valgrind = bool(library.benchcore_on_valgrind())
        from benchcore.execute.worker import SCRATCH_ENV

        self.folder = Path(folder or os.environ.get(SCRATCH_ENV) or ".")
        self.prefix = f"{OUT_FILE_NAME}.{os.getpid()}."
        self._label = b"benchcore"
        #: dumps this process made so far (callgrind numbers them from 1)
        self.dumps = 0

    @classmethod
    def in_worker(cls) -> "Collector":
        """The worker's one Collector, on the shim its launcher named."""
        global _COLLECTOR
        if _COLLECTOR is None:
            shim = os.environ.get(SHIM_ENV)
            if not shim:
                raise RuntimeError(f"the instruction engine's worker has no {SHIM_ENV}: it was not started "
                                   "through benchcore.execute.valgrind.launcher()")
            _COLLECTOR = cls(shim)
        return _COLLECTOR

    def count(self, fn):
        """fn() with collection on around it; (its result, the dump's path). The garbage
        collector is off inside, as in timed calls (benchcore.measure.timers): a collection that falls
        into one repeat counted 1.5% more in a pure-Python case here. The dump's path is
        callgrind's own numbering (`<out file>.N` for the Nth dump of this process), so finding
        it costs no listing of the folder (everything here runs ~100x slower)."""
        import gc

        start, stop, label = self._start, self._stop, self._label
        enabled = gc.isenabled()
        gc.disable()
        try:
            start()
            result = fn()
            stop(label)
        finally:
            if enabled:
                gc.enable()
        self.dumps += 1
        path = self.folder / f"{self.prefix}{self.dumps}"
        if not path.exists():
            raise RuntimeError(f"callgrind wrote no dump {path.name} into {self.folder}")
        return result, path


_COLLECTOR: Optional[Collector] = None


def add_arguments(parser) -> None:
    """--cache-sim and --count-workers, for the suites whose sweeps take --engine instructions."""
    parser.add_argument("--cache-sim", default="default", metavar="GEOMETRY",
                        help=f"--engine instructions: the simulated caches, {GEOMETRY_HELP} (default: default)")
    parser.add_argument("--count-workers", type=_workers, default=None, metavar="N",
                        help="--engine instructions: valgrind workers counting at once (counts do not depend on the "
                             "machine's load; default: one per core)")


def _workers(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a number of workers: give 1 or more (e.g. 2)")
    return value


@dataclass(frozen=True)
class Plan:
    """What a sweep under the engine needs: the workers' prefix and the report's record."""

    launcher: Tuple[str, ...]
    record: dict
    #: workers counting at once (benchcore.execute.worker.run_slots' lanes)
    lanes: int = 1


def plan(cache_sim: str, environment: Optional[Dict[str, str]] = None, workers: Optional[int] = 1) -> Plan:
    """Check the tools and the geometry before anything runs (a UsageError names the fix). A
    --ray sweep's nodes plan again for themselves (benchcore.execute.cluster.node), with the
    environment the record carries. `environment`: the suite's (Suite.count_environment);
    `workers`: how many count at once (None: one per core)."""
    geometry = parse_geometry(cache_sim)
    valgrind = find_valgrind()
    prefix = launcher(geometry, build_shim(), valgrind, environment)
    return Plan(tuple(prefix), settings_record(prefix, geometry, environment), workers or os.cpu_count() or 1)


def apply(job, found: Plan) -> None:
    """A sweep job under the engine: its workers under valgrind, timeouts scaled, no machine
    reference (it times the machine, which counts do not depend on), the record in the
    checkpoint's options (a resume with another geometry is refused) and the report."""
    job.launcher = found.launcher
    job.timeout_scale = SLOWDOWN
    job.memory_scale = MEMORY_SCALE
    job.reference = False
    job.lanes = found.lanes
    job.worker_options["valgrind"] = found.record


def tool_version(valgrind: Optional[str] = None) -> Optional[str]:
    try:
        done = subprocess.run([valgrind or "valgrind", "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def settings_record(prefix: Sequence[str], geometry: Optional[Geometry],
                    environment: Optional[Dict[str, str]] = None) -> dict:
    """What a report records of how its counts were taken; `environment` (the suite's variables)
    also tells a --ray node how to build its own launcher."""
    from benchcore.measure.instructions import NO_AUDIT

    return {"launcher": list(prefix), "tool": "callgrind", "version": tool_version(),
            "cache_sim": geometry.to_dict() if geometry else None, "audit": NO_AUDIT,
            "environment": dict(environment or {}),
            "address_randomisation": "off (setarch -R)" if "-R" in prefix else "as the system has it"}


def count_in_worker(workload, settings) -> dict:
    """An instruction-engine case's metrics: the workload's calls counted with this worker's
    Collector (benchcore.measure.instructions.count_workload), and no timed Measurements."""
    from benchcore.measure.instructions import count_workload

    metrics = count_workload(workload, settings, Collector.in_worker())
    metrics["forward"] = metrics["backward"] = None
    return metrics
