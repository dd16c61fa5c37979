"""A profile of the harness itself: where a sweep's wall goes beyond its timed calls.

The timed calls are what a sweep is for; everything else (a worker's start and framework
import, building each case's inputs, the audit, the profiler's dumps, the reports) is the
harness's cost, which lab/notes/speed.md breaks down. With BENCHCORE_WORKER_PROFILE=DIR in a sweep's
environment, every worker process runs under cProfile from before its framework import and
leaves DIR/worker-<pid>.prof when the parent closes it; scripts/speed_figures --breakdown reads
them beside the parent's own profile. Off (and free) without the variable.
"""

from __future__ import annotations

import os
from typing import Optional

PROFILE_ENV = "BENCHCORE_WORKER_PROFILE"


def start() -> Optional[object]:
    """A running cProfile.Profile when PROFILE_ENV names a folder, else None."""
    if not os.environ.get(PROFILE_ENV):
        return None
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    return profile


def save(profile: Optional[object]) -> None:
    """Stop a profile from start() and write it into PROFILE_ENV's folder (no-op for None)."""
    if profile is None:
        return
    profile.disable()
    profile.dump_stats(os.path.join(os.environ[PROFILE_ENV], f"worker-{os.getpid()}.prof"))
