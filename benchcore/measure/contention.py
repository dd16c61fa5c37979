"""Contention: how much of a case's time its process spent waiting for a CPU, and how busy the
other processes kept the machine meanwhile.

Why: on a shared machine a quantity's second speed is, in what was measured here
(docs/STEADY_STATE.md, *Why two speeds*), the time its threads spent on the run queue while
other processes held the CPUs — per call, the profiler's kernel time of a slow call was the
kernel's own CPU time plus that wait. A round taken while the machine was busy is then slow as
a whole, and the rounds of a case split into two speeds. The scheduler counts that wait per
thread (Linux, /proc/<pid>/task/<tid>/schedstat: ns on a CPU, ns runnable but waiting), so
every worker records it around each case, and a bimodal quantity's report can say whether its
slow rounds were the ones that waited (benchcore.measure.modes.cause).

On a virtual machine a third thief sits outside the guest: the hypervisor runs other guests on
the host's cores, and the time it takes a vCPU away shows in no thread's schedstat (neither
running nor waiting) — only as the VM's *steal* time (/proc/stat). Each record holds the share
of the CPUs' time stolen while the case ran, so a slow round on an idle guest can be told from
one the host slowed.

Measured around the whole case (warmup and timed runs; the worker's own threads, the
framework's engine and OpenMP threads included). On a system without schedstat the record
holds nulls and the reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

#: a case's record: share of its threads' time spent waiting for a CPU, the CPUs' worth of work
#: other processes did meanwhile, the share of the CPUs' time the hypervisor stole meanwhile,
#: the 1-minute load average when it started
FIELDS = ("cpu_wait_share", "others_cpus", "steal_share", "load_1min")
#: /proc/stat's cpu line: user nice system idle iowait irq softirq steal …
_IDLE, _IOWAIT, _STEAL = 3, 4, 7


#: tid → an open descriptor of the thread's schedstat: two snapshots a case read every thread's
#: (an MXNet worker has a dozen and more), and opening each file anew took most of their time
_SCHEDSTAT: Dict[str, int] = {}


def _schedstat(tid: str) -> Optional[Tuple[int, int]]:
    """(ns on a CPU, ns waiting) of thread `tid`; None where it ended. A kept descriptor that
    fails is of an ended thread whose tid a new one took: it is opened anew once."""
    for _attempt in range(2):
        if tid not in _SCHEDSTAT:
            try:
                _SCHEDSTAT[tid] = os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY)
            except OSError:
                return None
        try:
            run, wait = os.pread(_SCHEDSTAT[tid], 128, 0).split()[:2]
            return int(run), int(wait)
        except (OSError, ValueError):
            os.close(_SCHEDSTAT.pop(tid))
    return None


def _threads() -> Optional[Dict[str, Tuple[int, int]]]:
    """(ns on a CPU, ns waiting for one) of each thread of this process; None without schedstat."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    for ended in set(_SCHEDSTAT) - set(tids):  # a tid the kernel may give a new thread
        os.close(_SCHEDSTAT.pop(ended))
    found = {tid: stat for tid in tids if (stat := _schedstat(tid)) is not None}
    return found or None


def _machine() -> Optional[Tuple[int, int, int]]:
    """(busy, stolen, all) clock ticks of all CPUs since boot (/proc/stat), busy without the
    stolen ticks (the guest did no work in them); None where there is none. /proc/stat's guest
    columns (after steal) are already inside user and nice, so they are not summed."""
    try:
        with open("/proc/stat") as handle:
            ticks = [int(x) for x in handle.readline().split()[1:]][:_STEAL + 1]
    except (OSError, ValueError):
        return None
    steal = ticks[_STEAL] if len(ticks) > _STEAL else 0
    idle = ticks[_IDLE] + (ticks[_IOWAIT] if len(ticks) > _IOWAIT else 0)
    return sum(ticks) - idle - steal, steal, sum(ticks)


def _own_ticks() -> int:
    times = os.times()
    return round((times.user + times.system) * os.sysconf("SC_CLK_TCK"))


@dataclass(frozen=True)
class Snapshot:
    threads: Optional[Dict[str, Tuple[int, int]]]
    machine: Optional[Tuple[int, int, int]]
    own_ticks: int
    load_1min: Optional[float]


def snapshot() -> Snapshot:
    try:
        load: Optional[float] = os.getloadavg()[0]
    except OSError:
        load = None
    return Snapshot(_threads(), _machine(), _own_ticks(), load)


def between(before: Snapshot, after: Snapshot) -> dict:
    """The record of what happened between two snapshots of this process (FIELDS, plus `reason`
    where a field could not be measured)."""
    record: dict = {"cpu_wait_share": None, "others_cpus": None, "steal_share": None, "load_1min": before.load_1min}
    reasons = []
    if before.threads is None or after.threads is None:
        reasons.append("no /proc/<pid>/task/<tid>/schedstat on this system")
    else:
        run = wait = 0
        for tid, (run1, wait1) in after.threads.items():
            run0, wait0 = before.threads.get(tid, (0, 0))  # a thread born meanwhile counts from 0
            run, wait = run + run1 - run0, wait + wait1 - wait0
        record["cpu_wait_share"] = wait / (run + wait) if run + wait > 0 else 0.0
    if before.machine is None or after.machine is None:
        reasons.append("no /proc/stat on this system")
    else:
        busy, stolen, total = (now - then for now, then in zip(after.machine, before.machine))
        if total > 0:
            others = max(0, busy - (after.own_ticks - before.own_ticks))
            record["others_cpus"] = others / total * (os.cpu_count() or 1)
            record["steal_share"] = stolen / total
        else:
            reasons.append("others_cpus: the case took less than one of /proc/stat's clock ticks")
    if reasons:
        record["reason"] = "; ".join(reasons)
    return record
