"""Identity of environments: which recorded keys make two reports' figures comparable, and
where a cluster report's cases ran.

A report's environment (benchcore.execute.environment collects it) holds everything a reader
needs to trust the numbers; only some of it changes timings. This module says which keys count
(versions, CPU and GPU, threads, how the numbers were taken), lists the differences between two
reports, gives the history store its fingerprint, and reads a cluster report's record of which
environment each case ran in (written by benchcore.execute.cluster.driver).
"""

from __future__ import annotations

import fnmatch
from typing import Dict, Iterable, List, Optional, Tuple

from benchcore.report.model import CaseResult, Report

#: Environment keys (flattened with dots, matched case-insensitively as globs) whose values
#: change timings: interpreter versions, CPU and GPU model, thread settings, device. Anything
#: else (hostname, time, argv, paths) differs between any two runs. A framework's own block
#: counts whole (framework_blocks), so the core names no framework here.
ENV_KEY_PATTERNS = (
    "*python*", "*numpy*", "*cpu*", "*processor*", "*gpu*", "*cuda*",
    "*cudnn*", "*nvidia*", "*thread*", "*omp_*", "*mkl*", "*device*", "*denormal*",
)
#: Keys (globs) that always count, whatever the patterns say: how the numbers were taken (a
#: profiler's kernel times and a wall clock around the Python call are different quantities),
#: and whether a framework had a GPU ("*available*" is ignored for memory figures).
ALWAYS_RELEVANT_KEYS = ("engine", "timer", "settings.profiler", "*.cuda_available")
#: Settings keys that name the measuring method (opbench's engine): compared like the environment.
METHOD_SETTINGS = ("settings.profiler",)
ENV_KEY_IGNORED = (
    "system.*",  # noise diagnostics (load, governor, busy processes): warned about, not identity
    "*time*", "*date*", "*host*", "*argv*", "*pid*", "*path*", "*executable*", "*freq*",
    "*load*", "*usage*", "*percent*", "*available*", "*uptime*", "*git*", "*commit*", "*cwd*",
    "*seed*", "*command*",
    "cpu_idle.asked", "cpu_idle.reason",  # what was asked and why not held: `cpu_idle.held` is what counts
)


def flatten(data, prefix: str = "") -> Dict[str, object]:
    """Nested dicts → {"a.b.c": leaf}; lists stay leaves (compared whole)."""
    flat: Dict[str, object] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                flat.update(flatten(value, name))
            else:
                flat[name] = value
    return flat


def framework_blocks(environment: dict) -> Tuple[str, ...]:
    """The environment's framework blocks: the dicts with a `version` that a suite's collectors
    write (frameworks.mxnet: `mxnet`, frameworks.torch: `torch`). Every key in one can change
    timings (its version, build features, threads, GPU), so each counts whole."""
    return tuple(name for name, block in environment.items() if isinstance(block, dict) and "version" in block)


def timing_relevant(key: str, blocks: Iterable[str] = ()) -> bool:
    """Whether an environment key (flattened) can change timings; `blocks`: framework_blocks."""
    lowered = key.lower()
    if any(fnmatch.fnmatchcase(lowered, p) for p in ALWAYS_RELEVANT_KEYS):
        return True
    if any(fnmatch.fnmatchcase(lowered, p) for p in ENV_KEY_IGNORED):
        return False
    return key.split(".", 1)[0] in blocks or any(fnmatch.fnmatchcase(lowered, p) for p in ENV_KEY_PATTERNS)


def environment_differences(base, new) -> List[dict]:
    """Timing-relevant environment keys (and the thread and profiler settings) whose values differ.

    Only keys both reports recorded are compared: a key on one side only comes from a newer
    version of the suite (a baseline from before it recorded TF32 settings must still gate).
    What one key per block always records catches the rest: a framework that failed to import
    has `version: null`, a GPU run differs in `<framework>.cuda_available` and `nvidia_driver`.
    """
    b, n = _comparable_keys(base), _comparable_keys(new)
    blocks = framework_blocks(base.environment) + framework_blocks(new.environment)
    keys = sorted(k for k in set(b) & set(n) if timing_relevant(k, blocks))
    return [{"key": k, "base": b.get(k), "new": n.get(k)} for k in keys if b.get(k) != n.get(k)]


def timing_identity(report) -> Dict[str, object]:
    """The timing-relevant keys of a report's environment and method settings, flattened and
    sorted: what must match for two reports' figures to be one series (the history store's
    environment fingerprint)."""
    blocks = framework_blocks(report.environment)
    return {k: v for k, v in sorted(_comparable_keys(report).items()) if timing_relevant(k, blocks)}


def _comparable_keys(report) -> Dict[str, object]:
    """The environment, flattened, plus the settings that say how the numbers were taken."""
    flat = flatten(report.environment)
    for key, value in flatten(report.settings, "settings").items():
        if "thread" in key.lower() or key in METHOD_SETTINGS:
            flat[key] = value
    return flat


# --------------------------------------------------------------------------- cluster reports


def _groups(report: Report) -> List[dict]:
    cluster = report.environment.get("cluster")
    return list(cluster.get("environment_groups") or ()) if isinstance(cluster, dict) else []


def mixed_environments(report: Report) -> bool:
    """Whether the report's cases ran in more than one environment (--allow-env-mismatch)."""
    return len(_groups(report)) > 1


def case_environment(report: Report, result: CaseResult) -> Optional[dict]:
    """The environment a result was measured in: its node's in a cluster report (the one of its
    rounds' nodes where they ran on several of one environment), else the report's; None when
    its rounds ran in different environments."""
    cluster = report.environment.get("cluster")
    if not isinstance(cluster, dict) or not cluster.get("nodes"):
        return report.environment
    nodes = {n.get("node"): n for n in cluster["nodes"]}
    found = [nodes[label] for label in _ran_on(result) if label in nodes]
    if not found:
        return report.environment
    return found[0].get("environment") if len({n.get("group") for n in found}) == 1 else None


def environment_label(report: Report, result: CaseResult) -> Optional[str]:
    """A short name for the environment a result ran in, where a report has several: the values
    in which the environments differ (`torch.gpu.name=…`); None in a one-environment report."""
    if not mixed_environments(report):
        return None
    for group in _groups(report):
        if _ran_on(result) & set(group.get("nodes", ())):
            differs = group.get("differs", {})
            return ", ".join(f"{key}={value}" for key, value in differs.items()) or f"env {group['group']}"
    return None


def _ran_on(result: CaseResult) -> set:
    """The nodes a result's rounds ran on."""
    return {result.node} if result.node else {r["node"] for r in result.rounds or () if r.get("node")}
