"""Environment metadata, collected in one place for every report.

A number without its context (versions, threads, CPU, GPU, commit) cannot be compared or
trusted, so every report carries this dict. What a framework adds (its version, threads, GPU)
comes from the collectors a suite names (benchcore.suite.Suite.collectors, e.g. frameworks.torch);
which keys make two environments comparable is benchcore.report.identity's question.
"""

from __future__ import annotations

import datetime
import importlib
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable, Optional

#: The thread variables --threads sets (benchcore.cli.options.apply_threads), a report records,
#: `system` checks and a cluster's driver hands its nodes; a framework's own ones are recorded by
#: its collector (frameworks.mxnet).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def cpu_model() -> Optional[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def git_commit() -> Optional[str]:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def nvidia_driver() -> Optional[str]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def collect(suite: str, argv: Optional[Iterable[str]] = None, collectors: Iterable[str] = (),
            extra: Optional[dict] = None) -> dict:
    """Everything a reader needs to trust or reproduce the numbers in a report."""
    import numpy

    from benchcore import __version__

    env = {
        "suite": suite,
        "suite_version": __version__,
        "git_commit": git_commit(),
        "command_line": list(argv) if argv is not None else list(sys.argv),
        "started_at": now_iso(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads_env": {name: os.environ.get(name) for name in THREAD_VARIABLES},
        "nvidia_driver": nvidia_driver(),
    }
    for path in collectors:
        _merge(env, load_collector(path)())
    env.update(extra or {})
    return env


def load_collector(path: str) -> Callable[[], dict]:
    """A suite's environment collector, "package.module:function" (benchcore.suite.Suite.collectors):
    named by a string, so a worker, an A/B side's interpreter or a cluster node finds it too."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _merge(env: dict, found: dict) -> None:
    """A collector's blocks into the environment; a block both have (threads_env) is joined."""
    for key, value in found.items():
        env[key] = {**env[key], **value} if isinstance(env.get(key), dict) and isinstance(value, dict) else value
