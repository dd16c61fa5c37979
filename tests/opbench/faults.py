"""Faults a test injects into real opbench runs, from the test side: the product has no test mode.

`python -m tests.opbench.faults ARGS...` is `python -m opbench ARGS...` with one change: the
suite's executor is `execute` below, which runs opbench's own executor
(opbench.backends.mxnet.executor:execute) on every case but the one named in CRASH_ENV, where
the worker kills itself with SIGKILL, or in HANG_ENV, where it sleeps for a minute. So a test can check that
a sweep survives a crashing worker, stops a hanging one and resumes after an interruption,
through the real command line, workers, checkpoint and report. A case is named by its operator
(every case of it) or by `op[variant]` (that case alone).

`python -m tests.opbench.faults -m opbench.backends.mxnet.gradients ARGS...` stands in for the
interpreter that opbench.backends.mxnet.gradients.probe runs its children with (`probe(ops,
python=...)`, through a wrapper script): the child probes as usual, but building the inputs of CRASH_ENV's operator kills it.
"""

from __future__ import annotations

import dataclasses
import os
import runpy
import signal
import sys
import time

from opbench.backends import mxnet
from opbench.backends.mxnet import arrays, executor

#: the worker imports what the real executor's worker imports before its first case
WORKER_PRELOAD = executor.WORKER_PRELOAD
EXECUTOR = "tests.opbench.faults:execute"
CRASH_ENV = "FAULTS_CRASH_CASE"
HANG_ENV = "FAULTS_HANG_CASE"


def _named(spec) -> set:
    op = spec.params.get("op", spec.name)
    return {op, f"{op}[{spec.params.get('variant')}]"}


def inject(spec) -> None:
    """Kill this process, or hang, when the environment names this case."""
    names = _named(spec)
    if os.environ.get(CRASH_ENV) in names:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(HANG_ENV) in names:
        time.sleep(60)


def execute(spec, options: dict) -> dict:
    inject(spec)
    return executor.execute(spec, options)


def _as_probe_interpreter(argv) -> None:
    """Run `-m MODULE ARGS...` with opbench.backends.mxnet.arrays.materialize faulting on CRASH_ENV's
    operator."""
    real = arrays.materialize

    def materialize(spec, *args, **kwargs):
        inject(spec)
        return real(spec, *args, **kwargs)

    arrays.materialize = materialize
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


def main(argv) -> int:
    if argv[:1] == ["-m"]:
        _as_probe_interpreter(argv)
        return 0
    from opbench import cli

    # the sweep and the report commands read the suite from the MXNet backend
    mxnet.BACKEND.suite = dataclasses.replace(mxnet.BACKEND.suite, executor=EXECUTOR)
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
