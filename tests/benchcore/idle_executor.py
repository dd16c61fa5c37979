"""A worker that reports, while it runs, whether the sweep that started it holds the idle CPUs
polling: its parent's open /dev/cpu_dma_latency and the bound in force (benchcore.execute.idle)."""

import json
import os
from pathlib import Path

from benchcore.execute import idle


def execute(spec, options):
    with open(spec.params["tell"], "w") as handle:
        json.dump({"parent_holds": idle.DEVICE in held_devices(os.getppid()),
                   "bound_us": idle.latency_bound_us() if os.access(idle.DEVICE, os.R_OK) else None}, handle)
    return {"value": 1}


def held_devices(pid: int) -> set:
    """The character devices and files process `pid` has open."""
    found = set()
    for link in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found.add(Path(os.readlink(link)))
        except OSError:
            continue
    return found
