"""SystemState: what about this machine, right now, makes timings noisy, and what to do about it.

pyperf (`system show`) and Google Benchmark warn about the same things before they time: a CPU
frequency that moves (governor, turbo), other processes on the cores, more threads than cores,
address-space randomisation. A sweep records the state at its start and end (the environment's
`system` block, never compared as identity: it is a reading, not a setting), warns about what it
finds, and `opbench system` / `rnnbench system` print it with the fix for each warning.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from benchcore.execute import idle
from benchcore.execute.environment import THREAD_VARIABLES

CPU_ROOT = Path("/sys/devices/system/cpu")
#: a process using more than this share of one core while we look is "busy"
BUSY_CPU_SHARE = 0.05
#: how long processes are watched for CPU use
SAMPLE_S = 0.25
#: 1-minute load average per usable core above which the machine counts as loaded: half the
#: cores busy with other work on average (0.40 on 2 cores is a shell and an editor, not a
#: competitor; 1.0 on 2 cores is one core taken)
LOAD_PER_CORE = 0.5

#: the advice about idle states (a sweep that holds them polling, or is told not to, is quiet about it)
IDLE_CHECK = "idle states"

#: measure_speed: how long, in windows of what length; a swing above the limit is warned about
SPEED_SECONDS = 3.0
SPEED_WINDOW_S = 0.1
SPEED_SWING_LIMIT = 0.03


@dataclass(frozen=True)
class Advice:
    """One warning: what was found, and what to do."""

    check: str
    found: str
    fix: str


@dataclass
class SystemState:
    governors: Dict[str, List[int]] = field(default_factory=dict)  # governor → CPUs
    turbo: Optional[bool] = None  # None: not exposed (a VM: the host decides)
    aslr: Optional[int] = None  # /proc/sys/kernel/randomize_va_space: 0 off, 1 partial, 2 full
    load_average: Optional[List[float]] = None
    usable_cores: int = 1
    isolated_cpus: str = ""
    threads_env: Dict[str, Optional[str]] = field(default_factory=dict)
    busy_processes: List[dict] = field(default_factory=list)  # pid, name, cpu_share
    #: how much the machine's speed moves from moment to moment (measure_speed); None: not measured
    speed: Optional[dict] = None
    #: the idle states CPU 0 may enter (cpuidle's names: POLL spins, the others sleep)
    idle_states: List[str] = field(default_factory=list)
    #: the idle exit latency bound in force, µs (0: idle CPUs poll, as a sweep holds it;
    #: benchcore.execute.idle); None: not readable here (it needs root)
    idle_bound_us: Optional[int] = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["advice"] = [asdict(a) for a in self.advice()]
        return data

    def advice(self) -> List[Advice]:
        """Every warning, in the order a user should act on them."""
        found: List[Advice] = []
        for check in (_busy, _load, _speed, _idle, _threads, _governor, _turbo, _aslr):
            item = check(self)
            if item is not None:
                found.append(item)
        return found


def _busy(state: SystemState) -> Optional[Advice]:
    if not state.busy_processes:
        return None
    shown = ", ".join(f"{p['name']} (pid {p['pid']}, {p['cpu_share'] * 100:.0f}% of a core)"
                      for p in state.busy_processes[:5])
    return Advice("busy processes", shown, "stop them, or time on a machine where nothing else runs; "
                  "at least compare with `ab`, which lets drift hit both sides alike")


def _load(state: SystemState) -> Optional[Advice]:
    if not state.load_average or state.load_average[0] <= LOAD_PER_CORE * state.usable_cores:
        return None
    return Advice("load average", f"{state.load_average[0]:.2f} over the last minute on {state.usable_cores} "
                  "usable core(s)", "wait until the machine is idle; other work steals cores and caches")


def _speed(state: SystemState) -> Optional[Advice]:
    swing = max((state.speed or {}).get(part, 0.0) or 0.0 for part in ("compute_swing", "memory_swing")) \
        if state.speed else 0.0
    if swing <= SPEED_SWING_LIMIT:
        return None
    return Advice("speed swings", f"the machine's speed moves by {state.speed['compute_swing'] * 100:.0f}% (compute) "
                  f"and {state.speed['memory_swing'] * 100:.0f}% (memory) from one {state.speed['window_s']:g} s to "
                  "the next (a busy or shared host): a sweep's figures move with it",
                  "gate with `ab`, whose rounds run side by side so the moment cancels, and more --rounds; "
                  "compare's *Detectable slowdown* says what a comparison can still see")


def _idle(state: SystemState) -> Optional[Advice]:
    sleeping = [name for name in state.idle_states if name != "POLL"]
    if not sleeping or state.idle_bound_us == 0:
        return None
    bound = "unknown here" if state.idle_bound_us is None else f"{state.idle_bound_us} µs"
    return Advice(IDLE_CHECK, f"idle CPUs may enter {', '.join(sleeping)} (latency bound {bound}): a call whose "
                  "work another thread does (MXNet's engine, an OpenMP team) also times that thread's CPU waking up",
                  "run the sweep as root: it then keeps idle CPUs polling while it times (--cpu-idle auto); "
                  "or boot with idle=poll")


def measure_speed(seconds: float = SPEED_SECONDS, window_s: float = SPEED_WINDOW_S) -> dict:
    """The spread (standard deviation of the log) of the machine reference's compute and memory
    timings between successive windows of `window_s`: how much the machine's own speed moves
    from one moment to the next, which no number of samples in one moment can average away."""
    import numpy as np

    from benchcore.measure.reference import compute_workload, memory_workload

    parts = {"compute": compute_workload().forward, "memory": memory_workload().forward}
    windows: Dict[str, List[List[float]]] = {name: [] for name in parts}
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        window_end = time.perf_counter() + window_s
        window = {name: [] for name in parts}
        while time.perf_counter() < window_end:
            for name, run in parts.items():
                started = time.perf_counter()
                run()
                window[name].append(time.perf_counter() - started)
        for name in parts:
            windows[name].append(window[name])
    found = {"seconds": seconds, "window_s": window_s, "windows": len(windows["compute"])}
    for name, per_window in windows.items():
        medians = np.log([np.median(w) for w in per_window if w])
        found[f"{name}_swing"] = float(medians.std(ddof=1)) if len(medians) > 1 else None
    return found


def _threads(state: SystemState) -> Optional[Advice]:
    values = {name: value for name, value in state.threads_env.items() if value}
    counts = [int(v) for v in values.values() if v.isdigit()]
    if counts and max(counts) > state.usable_cores:
        return Advice("threads", f"{', '.join(f'{k}={v}' for k, v in values.items())} on {state.usable_cores} "
                      "usable core(s): threads outnumber cores", f"pass --threads {state.usable_cores} or fewer")
    if not counts:
        return Advice("threads", f"no thread count set: the frameworks use all {state.usable_cores} core(s), "
                      "so anything else running competes with every operator",
                      "pass --threads N (recorded in the report) and leave a core for the system")
    return None


def _governor(state: SystemState) -> Optional[Advice]:
    other = {g: cpus for g, cpus in state.governors.items() if g != "performance"}
    if not other:
        return None
    listed = "; ".join(f"{g} on CPU {','.join(map(str, cpus))}" for g, cpus in sorted(other.items()))
    return Advice("CPU governor", listed, "sudo cpupower frequency-set -g performance (pyperf system tune does "
                  "this and more)")


def _turbo(state: SystemState) -> Optional[Advice]:
    if not state.turbo:
        return None
    return Advice("turbo boost", "on: the clock depends on temperature and on what the other cores do",
                  "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo (or cpufreq/boost = 0)")


def _aslr(state: SystemState) -> Optional[Advice]:
    if not state.aslr:
        return None
    return Advice("ASLR", "on: each process gets another memory layout, so processes differ",
                  "keep it and time several rounds (--rounds), which average over layouts; or run under "
                  "`setarch -R` to fix one layout")


# --------------------------------------------------------------------------- reading the machine


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _governors() -> Dict[str, List[int]]:
    found: Dict[str, List[int]] = {}
    for folder in sorted(CPU_ROOT.glob("cpu[0-9]*"), key=lambda p: int(p.name[3:])):
        governor = _read(folder / "cpufreq" / "scaling_governor")
        if governor:
            found.setdefault(governor, []).append(int(folder.name[3:]))
    return found


def _turbo_on() -> Optional[bool]:
    no_turbo = _read(CPU_ROOT / "intel_pstate" / "no_turbo")
    if no_turbo is not None:
        return no_turbo == "0"
    boost = _read(CPU_ROOT / "cpufreq" / "boost")
    return None if boost is None else boost == "1"


def _cpu_ticks() -> Dict[int, tuple]:
    """pid → (name, user+system ticks) for every process we may read."""
    ticks: Dict[int, tuple] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _read(entry / "stat")
        if not stat or ")" not in stat:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        try:
            ticks[int(entry.name)] = (name, int(fields[11]) + int(fields[12]))
        except (IndexError, ValueError):
            continue
    return ticks


def _busy_processes(sample_s: float) -> List[dict]:
    """Processes other than this one (and its children) that used CPU while we watched."""
    before = _cpu_ticks()
    time.sleep(sample_s)
    after = _cpu_ticks()
    hz = os.sysconf("SC_CLK_TCK")
    mine = {os.getpid(), os.getppid()}
    busy = []
    for pid, (name, ticks) in after.items():
        if pid in mine or pid not in before:
            continue
        share = (ticks - before[pid][1]) / hz / sample_s
        if share > BUSY_CPU_SHARE:
            busy.append({"pid": pid, "name": name, "cpu_share": round(share, 3)})
    return sorted(busy, key=lambda p: -p["cpu_share"])


def read_system(sample_s: float = SAMPLE_S, speed: bool = False) -> SystemState:
    """The machine's state now (takes `sample_s` to watch the other processes; with `speed`, also
    SPEED_SECONDS to see how the machine's speed moves: the `system` command asks for it, a
    sweep does not, its reference probes measure that as it runs)."""
    aslr = _read(Path("/proc/sys/kernel/randomize_va_space"))
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return SystemState(
        governors=_governors(),
        turbo=_turbo_on(),
        aslr=int(aslr) if aslr and aslr.isdigit() else None,
        load_average=load,
        usable_cores=usable,
        isolated_cpus=_read(CPU_ROOT / "isolated") or "",
        threads_env={name: os.environ.get(name) for name in THREAD_VARIABLES},
        busy_processes=_busy_processes(sample_s),
        speed=measure_speed() if speed else None,
        idle_states=_idle_states(),
        idle_bound_us=_idle_bound_us(),
    )


def _idle_states() -> List[str]:
    folder = CPU_ROOT / "cpu0" / "cpuidle"
    found = [(_read(state / "name"), state.name) for state in folder.glob("state[0-9]*")]
    return [name for name, _ in sorted(found, key=lambda pair: int(pair[1][5:])) if name]


def _idle_bound_us() -> Optional[int]:
    try:
        return idle.latency_bound_us()
    except OSError:
        return None


def _pct(value: Optional[float]) -> str:
    return "---" if value is None else f"{value * 100:.1f}%"


def format_state(state: SystemState) -> str:
    """The `system` command's text: what was read, then each warning with its fix."""
    from tabulate import tabulate

    rows = [
        ["usable cores", state.usable_cores],
        ["load average (1, 5, 15 min)", ", ".join(f"{x:.2f}" for x in state.load_average or []) or "---"],
        ["CPU governor", "; ".join(f"{g}: {len(c)} CPU(s)" for g, c in state.governors.items()) or "not exposed"],
        ["turbo boost", {None: "not exposed", True: "on", False: "off"}[state.turbo]],
        ["ASLR (randomize_va_space)", "---" if state.aslr is None else state.aslr],
        ["isolated CPUs", state.isolated_cpus or "none"],
        ["idle states (latency bound)", f"{', '.join(state.idle_states) or 'not exposed'} "
                                        f"({'---' if state.idle_bound_us is None else f'{state.idle_bound_us} µs'})"],
        ["thread settings", ", ".join(f"{k}={v}" for k, v in state.threads_env.items() if v) or "unset"],
        ["busy processes", len(state.busy_processes)],
        ["speed swing (compute, memory)", "---" if not state.speed else
         f"{_pct(state.speed['compute_swing'])}, {_pct(state.speed['memory_swing'])} between "
         f"{state.speed['window_s']:g} s windows ({state.speed['windows']} windows)"],
    ]
    lines = [tabulate(rows, tablefmt="plain"), ""]
    advice = state.advice()
    if not advice:
        lines.append("Nothing found that would make timings noisy.")
    for item in advice:
        lines += [f"warning: {item.check}: {item.found}", f"  fix: {item.fix}"]
    return "\n".join(lines)
