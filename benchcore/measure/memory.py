"""A worker's own memory, read from /proc: what a case inherits, its peak, what it leaves.

Every executor reads the same three figures (benchcore.execute.worker restarts a worker above
--memory-limit-gb on the resident one): resident memory before a case (what the process held),
the kernel's peak mark reset at the case's start and read at its end (the case's own peak, as
no framework counter sees the whole process), and resident memory after the case's arrays are
freed (what a reused worker carries into the next case). None where /proc does not say.
"""

from __future__ import annotations

import os
from typing import Optional

#: the metrics keys every executor reports them under (benchcore.execute.worker.MemoryBook reads them)
RSS_BEFORE, RSS_PEAK, RSS_AFTER = "rss_before_bytes", "rss_peak_bytes", "rss_after_bytes"


def resident_bytes() -> Optional[int]:
    """This process's resident memory now."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) so that peak_rss() is what follows; False where
    the kernel does not allow it (then no peak is reported: an older one would pass for it)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def peak_rss() -> Optional[int]:
    """This process's highest resident memory since reset_peak_rss() (VmHWM)."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
