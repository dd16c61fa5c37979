"""MXNet's adapter: its environment block (version, build features, GPUs, its thread variables)."""

from __future__ import annotations

import os

#: MXNet's own thread settings, recorded beside the OpenMP/MKL ones (benchcore's THREAD_VARIABLES)
THREAD_VARIABLES = ("MXNET_CPU_WORKER_NTHREADS", "MXNET_ENGINE_TYPE")
#: what a history's environment summary shows of MXNet (benchcore.suite.Suite.summary_keys)
SUMMARY_KEYS = (("mxnet.version", "MXNet {}"),)


def collect() -> dict:
    """The `mxnet` block and MXNet's thread variables (benchcore.execute.environment.collect)."""
    return {"mxnet": mxnet_info(), **thread_settings()}


def thread_settings() -> dict:
    """MXNet's thread variables alone, without importing MXNet. Every suite records them (they
    were in every report's threads_env before the core stopped naming MXNet): a report keeps
    its keys, and a history store's environment fingerprints stay the same."""
    return {"threads_env": {name: os.environ.get(name) for name in THREAD_VARIABLES}}


def mxnet_info() -> dict:
    try:
        import mxnet as mx
    except Exception as exc:  # absent or broken: record why
        return {"version": None, "reason": f"{type(exc).__name__}: {exc}"}
    try:  # a submodule from MXNet 1.5 on, imported by mxnet itself from 1.6
        from mxnet.runtime import Features
    except ImportError:  # MXNet 1.4 lists no build features
        return {"version": mx.__version__, "features": None, "gpus": mx.context.num_gpus(),
                "reason": "this MXNet has no build feature list (mxnet.runtime came with 1.5)"}
    enabled = sorted(name for name, feature in Features().items() if feature.enabled)
    info = {"version": mx.__version__, "features": enabled, "gpus": mx.context.num_gpus() if "CUDA" in enabled else 0}
    return info


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

