"""The SM clock a GPU ran a case at, and whether something held it back.

A GPU at its power cap or running hot lowers its SM clock, and every kernel slows with it: a
figure taken then says more about the machine's cooling than about the code. nvbench records
the clock for the same reason. The clock is read right after the measured runs, while the GPU
is still at the clock it ran them at.

"Throttled" comes from the driver's own account, the clocks-event reasons (NVML
nvmlDeviceGetCurrentClocksEventReasons, nvidia-smi `clocks_event_reasons.*`; both were
"throttle reasons" before driver 535): a software power cap, a hardware slowdown, thermal
slowdown, a power brake. A low clock alone says nothing: an idle GPU rests at a fraction of its
default clock (345 MHz of 1980 on an H100) between calls, and the reasons name that
(`gpu_idle`) and an applications-clocks setting apart, which are no slowdown.

Sources, in order: NVML through pynvml when it is installed, else `nvidia-smi`; neither, and
the reading is None with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import asdict, dataclass
from typing import Callable, List, Optional, Tuple

#: the reasons that slow a GPU down, as NVML's bits (nvml.h, nvmlClocksEventReason*) and as
#: nvidia-smi's field names; GpuIdle 0x1, ApplicationsClocksSetting 0x2, SyncBoost 0x10 and
#: DisplayClockSetting 0x100 are left out: they say why a clock is what it is, not that it was held back
SLOWDOWNS: Tuple[Tuple[int, str], ...] = (
    (0x4, "sw_power_cap"), (0x8, "hw_slowdown"), (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"))
#: nvidia-smi's clock fields: the SM clock now, the default applications (graphics = SM) clock, the maximum
SMI_CLOCKS = "clocks.current.sm,clocks.default_applications.graphics,clocks.max.sm"
#: nvidia-smi's names for the reasons' group: the current one, then the one drivers before 535 know
SMI_REASON_GROUPS = ("clocks_event_reasons", "clocks_throttle_reasons")


@dataclass(frozen=True)
class ClockReading:
    sm_mhz: float
    default_mhz: Optional[float]
    max_mhz: Optional[float]
    source: str
    #: the slowdown reasons in force (names of SLOWDOWNS); None where the driver would not say
    slowdowns: Optional[Tuple[str, ...]] = None

    @property
    def throttled(self) -> bool:
        return bool(self.slowdowns)

    @property
    def warning(self) -> Optional[str]:
        if not self.throttled:
            return None
        return (f"the driver reports {', '.join(self.slowdowns)} in force (SM clock {self.sm_mhz:g} MHz): "
                "the GPU was held back (power cap or heat); its times are slow")

    def to_dict(self) -> dict:
        return {**asdict(self), "slowdowns": None if self.slowdowns is None else list(self.slowdowns),
                "throttled": self.throttled, "warning": self.warning}


def slowdowns_of_mask(mask: int) -> Tuple[str, ...]:
    """NVML's reasons bit mask → the slowdowns among them."""
    return tuple(name for bit, name in SLOWDOWNS if mask & bit)


def smi_fields(group: str) -> str:
    return ",".join([SMI_CLOCKS, *(f"{group}.{name}" for _, name in SLOWDOWNS)])


def smi_command(gpu_uuid: str, group: str = SMI_REASON_GROUPS[0]) -> List[str]:
    """nvidia-smi's query for one GPU, named by its UUID ("GPU-…"), which CUDA_VISIBLE_DEVICES
    does not renumber as it does indices."""
    return ["nvidia-smi", f"--query-gpu={smi_fields(group)}", "--format=csv,noheader,nounits", "-i", gpu_uuid]


def _number(text: str) -> Optional[float]:
    try:
        return float(text.strip())
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def _smi_slowdowns(values: List[str]) -> Optional[Tuple[str, ...]]:
    """nvidia-smi's "Active" / "Not Active" per reason; None if any is unsupported ("[N/A]")."""
    states = [v.strip() for v in values]
    if any(state not in ("Active", "Not Active") for state in states):
        return None
    return tuple(name for (_, name), state in zip(SLOWDOWNS, states) if state == "Active")


def read_smi(gpu_uuid: str, run: Callable = subprocess.run, which: Callable = shutil.which) -> Optional[ClockReading]:
    """Asks with the current field names, then (an older driver refuses them) with the older ones."""
    if not which("nvidia-smi"):
        return None
    for group in SMI_REASON_GROUPS:
        done = run(smi_command(gpu_uuid, group), capture_output=True, text=True, timeout=30)
        lines = done.stdout.strip().splitlines() if done.returncode == 0 else []
        values = lines[0].split(",") if lines else []
        if len(values) == 3 + len(SLOWDOWNS):
            break
    else:
        return None
    clocks = [_number(v) for v in values[:3]]
    if clocks[0] is None:
        return None
    return ClockReading(sm_mhz=clocks[0], default_mhz=clocks[1], max_mhz=clocks[2], source="nvidia-smi",
                        slowdowns=_smi_slowdowns(values[3:]))


def read_nvml(gpu_uuid: str) -> Optional[ClockReading]:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByUUID(gpu_uuid)
        sm = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        default = _optional(lambda: pynvml.nvmlDeviceGetDefaultApplicationsClock(handle, pynvml.NVML_CLOCK_GRAPHICS))
        top = _optional(lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM))
        reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons  # the name before driver 535's bindings
        mask = _optional(lambda: reasons(handle))
    except pynvml.NVMLError:
        return None
    return ClockReading(sm_mhz=float(sm), default_mhz=default, max_mhz=top, source="nvml",
                        slowdowns=None if mask is None else slowdowns_of_mask(int(mask)))


def _optional(read: Callable[[], float]) -> Optional[float]:
    import pynvml

    try:
        return float(read())
    except pynvml.NVMLError:  # not supported on this board
        return None


def sm_clock(gpu_uuid: str) -> dict:
    """{"sm_mhz", "default_mhz", "max_mhz", "source", "slowdowns", "throttled", "warning"}, or
    {"missing": why} where neither NVML nor nvidia-smi can tell."""
    reading = read_nvml(gpu_uuid) or read_smi(gpu_uuid)
    if reading is None:
        return {"missing": "neither pynvml nor nvidia-smi could read the SM clock"}
    return reading.to_dict()
