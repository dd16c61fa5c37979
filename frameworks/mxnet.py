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
