"""IdleHold: the CPUs kept out of their sleep states while a sweep times (`--cpu-idle`).

Why: where idle CPUs halt (a VM's haltpoll, a server's deep C-states), a call that hands work to
another thread (MXNet's engine thread, an OpenMP team) also waits for that thread's CPU to wake.
On this suite's 2-vCPU VM an MXNet call of 17-30 µs took 80-100 µs whenever the other CPU had
halted, at random per process and case, so small calls' rounds scattered by 20-40% and `ab`
could not place them (lab/notes/answers.md, "Fifth take"). Linux's PM QoS interface keeps every
CPU's idle exit latency within a bound for as long as a process holds /dev/cpu_dma_latency open
with that bound written; at 0, idle CPUs poll instead of halting. Real-time setups and tuned's
latency-performance profile do the same. The sweep holds it while it times and closes it after,
which gives the choice back to the OS. Instruction counts do not depend on it, so the instruction
engine never holds it.

Modes: `auto` (the default) holds it where it can be written (root) and records why not where
it cannot; `poll` requires it (one-line error otherwise); `os` leaves the idle states alone.
"""

from __future__ import annotations

import os
import struct
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Optional, Tuple

from benchcore.errors import UsageError

DEVICE = Path("/dev/cpu_dma_latency")
MODES = ("auto", "poll", "os")
DEFAULT_MODE = "auto"
#: the latency bound held, in µs: no idle state that takes time to leave
POLL_LATENCY_US = 0


@dataclass(frozen=True)
class IdleHold:
    """What a sweep's CPUs did while idle: `held` true when they polled (the latency bound was
    held at 0), else `reason` says why not. The report's environment records it as `cpu_idle`."""

    asked: str
    held: bool
    reason: Optional[str] = None

    def to_dict(self) -> dict:
        return asdict(self)


@contextmanager
def held(mode: str, counting: bool = False, device: Path = DEVICE) -> Iterator[IdleHold]:
    """Hold the idle latency bound at 0 while the block runs, as `mode` asks (MODES); counting:
    the sweep counts instructions, which idle states cannot change."""
    fd, hold = _open(mode, counting, device)
    try:
        yield hold
    finally:
        if fd is not None:
            os.close(fd)


def _open(mode: str, counting: bool, device: Path) -> Tuple[Optional[int], IdleHold]:
    if mode not in MODES:
        raise UsageError(f"--cpu-idle {mode}: not one of {', '.join(MODES)}")
    if mode == "os":
        return None, IdleHold(mode, False, "--cpu-idle os: the OS chose the idle states")
    if counting:
        return None, IdleHold(mode, False, "instruction counts do not depend on idle states")
    try:
        fd = os.open(device, os.O_WRONLY)
    except OSError as error:
        return None, _not_held(mode, device, error)
    try:
        os.write(fd, struct.pack("i", POLL_LATENCY_US))
    except OSError as error:
        os.close(fd)
        return None, _not_held(mode, device, error)
    return fd, IdleHold(mode, True)


def _not_held(mode: str, device: Path, error: OSError) -> IdleHold:
    reason = f"could not hold {device} at {POLL_LATENCY_US} ({error.strerror or error})"
    if mode == "poll":
        raise UsageError(f"--cpu-idle poll: {reason}; run as root (or with write access to {device}), "
                         "or pass --cpu-idle auto or os")
    return IdleHold(mode, False, reason)


def latency_bound_us(device: Path = DEVICE) -> int:
    """The idle latency bound in force now, in µs (every holder's smallest; the kernel's default
    when none holds it). Reading it needs the same access as holding it."""
    with open(device, "rb") as stream:
        return struct.unpack("i", stream.read(4))[0]
