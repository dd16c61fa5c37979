"""MXNet's adapter: its environment block (version, build features, GPUs, cuDNN autotuning, its
thread variables)."""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
from pathlib import Path
from typing import Optional

from frameworks import cache

#: MXNet's own thread settings, recorded beside the OpenMP/MKL ones (benchcore's THREAD_VARIABLES)
THREAD_VARIABLES = ("MXNET_CPU_WORKER_NTHREADS", "MXNET_ENGINE_TYPE")
#: the CPU distributions of MXNet on pip (the CUDA ones, mxnet-cuXXX, are many: their
#: version is read from the module once imported)
DISTRIBUTIONS = ("mxnet", "mxnet-mkl", "mxnet-native")
#: what a history's environment summary shows of MXNet (benchcore.suite.Suite.summary_keys)
SUMMARY_KEYS = (("mxnet.version", "MXNet {}"),)
#: under the instruction engine (benchcore.suite.Suite.count_environment): the NaiveEngine runs
#: each operator inside the calling thread, so the counted call holds the operator's work and no
#: engine thread's scheduling enters the count
COUNT_ENVIRONMENT = (("MXNET_ENGINE_TYPE", "NaiveEngine"),)


#: packages MXNet imports that no operator call uses: scipy, for int8 calibration
#: (mxnet.contrib.quantization: scipy.stats), test helpers (mxnet.test_utils) and to accept a
#: scipy sparse matrix as an array's source (mxnet.ndarray.sparse, .utils: scipy.sparse), each
#: imported behind `try … except ImportError` in every release from 1.4.1 to 1.9.1. A third of
#: MXNet's import here (1.4 of 4.7 s on a loaded 2-core VM for scipy.stats alone), paid again by
#: every round's fresh worker. (What MXNet imports unguarded is deferred instead: ON_FIRST_USE.)
NOT_FOR_OPERATORS = ("scipy",)
#: modules MXNet imports unguarded that no operator call touches, executed at their first use
#: instead of at MXNet's import (importlib.util.LazyLoader): mxnet.test_utils (test helpers, with
#: numpy.testing and unittest) and requests (for mxnet.gluon.utils' download): 0.06 s of a
#: worker's 0.70 s import_for_worker (medians of ten fresh processes each, 2026-12-03), paid by
#: every round's fresh worker.
ON_FIRST_USE = ("mxnet.test_utils", "requests")


class _Refuse(importlib.abc.MetaPathFinder):
    """Answers an import of one of the packages `names` (or of a module inside one) with
    ImportError, as if it were not installed."""

    def __init__(self, names):
        self.names = names

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in self.names:
            raise ImportError(f"{fullname} is left out of a benchmark worker's MXNet import")
        return None


class _OnFirstUse(importlib.abc.MetaPathFinder):
    """Finds the modules `names` where Python's path finder would, with a loader that executes
    one at its first attribute access (importlib.util.LazyLoader)."""

    def __init__(self, names):
        self.names = names

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


def import_for_worker() -> None:
    """Import MXNet in a worker without NOT_FOR_OPERATORS and with ON_FIRST_USE not yet executed
    (a WORKER_PRELOAD entry): NOT_FOR_OPERATORS stay importable afterwards, MXNet's own
    references to them are None; ON_FIRST_USE run where something uses them. The operator
    functions MXNet generates are compiled once per build (frameworks.mxnet_generated: 40-50% of
    the import, paid by every round's fresh worker) and stored in the cache folder."""
    import sys

    if "mxnet" in sys.modules:
        return
    from frameworks import mxnet_generated

    finders = [_Refuse(NOT_FOR_OPERATORS), _OnFirstUse(ON_FIRST_USE)]
    sys.meta_path[:0] = finders
    try:
        with mxnet_generated.reused(mxnet_generated.store_file(build_name(), cache.root())):
            import mxnet  # noqa: F401
    finally:
        for finder in finders:
            sys.meta_path.remove(finder)


def collect() -> dict:
    """The `mxnet` block and MXNet's thread variables (benchcore.execute.environment.collect)."""
    return {"mxnet": mxnet_info(), **thread_settings()}


def thread_settings() -> dict:
    """MXNet's thread variables alone, without importing MXNet. Every suite records them (they
    were in every report's threads_env before the core stopped naming MXNet): a report keeps
    its keys, and a history store's environment fingerprints stay the same."""
    return {"threads_env": {name: os.environ.get(name) for name in THREAD_VARIABLES}}


#: MXNet's cuDNN autotuning (0 off, 1 limited workspace, 2 fastest; unset: 1): convolutions time
#: their algorithms on first use, which changes GPU figures; recorded in the `mxnet` block
CUDNN_AUTOTUNE_VARIABLE = "MXNET_CUDNN_AUTOTUNE_DEFAULT"
#: the cached build record's kind (frameworks.cache): {"version", "features"[, "reason"]}
BUILD_KIND = "mxnet-build-1"


def mxnet_info() -> dict:
    """The `mxnet` block: version, build features, GPUs and MXNET_CUDNN_AUTOTUNE_DEFAULT (None:
    unset). The version and features are read from this build's cached record where one exists
    (frameworks.cache, named by build_name), so a sweep's parent process need not import MXNet; the GPU count is the machine's, asked of
    MXNet only where the build has CUDA (a CPU build sees none)."""
    name = build_name()
    path = cache.root() / f"mxnet-build-{name}.json" if name else None
    build = cache.read(path, BUILD_KIND) if path else None
    if build is None:
        build = _build_record()
        if path and build.get("version"):
            cache.write(path, BUILD_KIND, build)
    if build.get("version") is None:
        return build
    return {**build, "gpus": _gpus(build.get("features")), "cudnn_autotune_env": os.environ.get(CUDNN_AUTOTUNE_VARIABLE)}


def _build_record() -> dict:
    try:
        import mxnet as mx
    except Exception as exc:  # absent or broken: record why
        return {"version": None, "reason": f"{type(exc).__name__}: {exc}"}
    try:  # a submodule from MXNet 1.5 on, imported by mxnet itself from 1.6
        from mxnet.runtime import Features
    except ImportError:  # MXNet 1.4 lists no build features
        return {"version": mx.__version__, "features": None,
                "reason": "this MXNet has no build feature list (mxnet.runtime came with 1.5)"}
    return {"version": mx.__version__, "features": sorted(name for name, feature in Features().items() if feature.enabled)}


def _gpus(features) -> int:
    if features is not None and "CUDA" not in features:
        return 0
    import mxnet as mx

    return mx.context.num_gpus()


def library_file() -> Optional[str]:
    """The MXNet library the installed package loads (its libinfo.find_lib_path, which honours
    MXNET_LIBRARY_PATH), found without importing MXNet: libinfo.py is loaded on its own from the
    package's folder. None where that cannot be done (no package; a libinfo that fails)."""
    import importlib.util

    try:
        package = importlib.util.find_spec("mxnet")
        if package is None or not package.submodule_search_locations:
            return None
        source = Path(list(package.submodule_search_locations)[0]) / "libinfo.py"
        spec = importlib.util.spec_from_file_location("_mxnet_libinfo_alone", source)
        libinfo = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(libinfo)
        return str(Path(libinfo.find_lib_path()[0]).resolve())
    except Exception:  # any failure only means nothing is cached: MXNet itself is asked
        return None


def build_name() -> Optional[str]:
    """The installed MXNet build as a file-name part: pip's version (or "source") and a hash of
    its library's path, modification time and size, so a build replaced in place (same
    version) gets a new name; None where the library cannot be found without importing MXNet."""
    library = library_file()
    if library is None:
        return None
    stat = os.stat(library)
    digest = hashlib.sha256(f"{library}\0{stat.st_mtime_ns}\0{stat.st_size}".encode()).hexdigest()[:12]
    return f"{recorded_version() or 'source'}-{digest}"


def recorded_version() -> Optional[str]:
    """The version pip recorded for an installed CPU MXNet, read without importing it (an MXNet
    too old to support may not even import on this Python); None when pip recorded none."""
    from importlib import metadata

    for distribution in DISTRIBUTIONS:
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def code_path() -> dict:
    """What decides MXNet's CPU kernels in this process (benchcore.execute.code_path): oneDNN's
    version, the ISA it dispatches to and the implementation it picks for a small inner product
    (from its verbose lines: DNNL_VERBOSE is read once, before the first primitive, so call this
    in a fresh process), and the BLAS MXNet loaded."""
    os.environ["DNNL_VERBOSE"] = os.environ["MKLDNN_VERBOSE"] = "1"
    import mxnet as mx

    from frameworks.native import captured_stdout, openblas

    def inner_product():
        x, w, b = mx.nd.ones((4, 8)), mx.nd.ones((3, 8)), mx.nd.zeros((3,))
        mx.nd.FullyConnected(x, w, b, num_hidden=3).wait_to_read()

    found = onednn_of(captured_stdout(inner_product))
    found.update(openblas())
    return found


def onednn_of(verbose: str) -> dict:
    """oneDNN's (MKL-DNN's) verbose lines → its version, ISA and the primitives' implementations."""
    found: dict = {"onednn_version": None, "onednn_isa": None, "onednn_implementations": []}
    for line in verbose.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or not fields[0].endswith("_verbose"):
            continue
        if fields[1] == "info" and fields[2].startswith(("oneDNN", "DNNL", "MKL-DNN")):
            found["onednn_version"] = fields[2].split(" (")[0]
        elif fields[1] == "info" and len(fields) > 3 and fields[3].startswith("isa:"):
            found["onednn_isa"] = fields[3][len("isa:"):]
        elif fields[1] == "exec" and len(fields) > 4:
            found["onednn_implementations"].append(f"{fields[3]}:{fields[4]}")
    return found

