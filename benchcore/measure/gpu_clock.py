"""The SM clock a GPU ran a case at, and whether it was throttled.

A GPU that runs hot or at its power cap lowers its SM clock, and every kernel slows with it:
a figure taken then says more about the machine's cooling than about the code. nvbench records
the clock for the same reason. The clock is read right after the measured runs, while the GPU
is still at the clock it ran them at (read before, an idle GPU shows its resting clock, a
fraction of its default, which is no throttling). It is compared with the default applications
clock (the clock the GPU runs at under load when nothing holds it back); below
THROTTLED_FRACTION of it the reading carries a warning.

Sources, in order: NVML through pynvml when it is installed, else `nvidia-smi`; neither, and
the reading is None with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import asdict, dataclass
from typing import Callable, List, Optional

#: below this fraction of the default clock a reading is called throttled
THROTTLED_FRACTION = 0.75
#: nvidia-smi's fields: the SM clock now, the default applications (graphics = SM) clock, the maximum
SMI_FIELDS = "clocks.current.sm,clocks.default_applications.graphics,clocks.max.sm"


@dataclass(frozen=True)
class ClockReading:
    sm_mhz: float
    default_mhz: Optional[float]
    max_mhz: Optional[float]
    source: str

    @property
    def throttled(self) -> bool:
        return bool(self.default_mhz) and self.sm_mhz < THROTTLED_FRACTION * self.default_mhz

    @property
    def warning(self) -> Optional[str]:
        if not self.throttled:
            return None
        return (f"SM clock {self.sm_mhz:g} MHz is below {THROTTLED_FRACTION:.0%} of its default "
                f"{self.default_mhz:g} MHz: the GPU was throttled (heat or power cap); its times are slow")

    def to_dict(self) -> dict:
        return {**asdict(self), "throttled": self.throttled, "warning": self.warning}


def smi_command(gpu_uuid: str) -> List[str]:
    """nvidia-smi's query for one GPU, named by its UUID ("GPU-…"), which CUDA_VISIBLE_DEVICES
    does not renumber as it does indices."""
    return ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits", "-i", gpu_uuid]


def _number(text: str) -> Optional[float]:
    try:
        return float(text.strip())
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def read_smi(gpu_uuid: str, run: Callable = subprocess.run, which: Callable = shutil.which) -> Optional[ClockReading]:
    if not which("nvidia-smi"):
        return None
    done = run(smi_command(gpu_uuid), capture_output=True, text=True, timeout=30)
    lines = done.stdout.strip().splitlines() if done.returncode == 0 else []
    values = [_number(v) for v in lines[0].split(",")] if lines else []
    if len(values) != 3 or values[0] is None:
        return None
    return ClockReading(sm_mhz=values[0], default_mhz=values[1], max_mhz=values[2], source="nvidia-smi")


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
    except pynvml.NVMLError:
        return None
    return ClockReading(sm_mhz=float(sm), default_mhz=default, max_mhz=top, source="nvml")


def _optional(read: Callable[[], float]) -> Optional[float]:
    import pynvml

    try:
        return float(read())
    except pynvml.NVMLError:  # not supported on this board
        return None


def sm_clock(gpu_uuid: str) -> dict:
    """{"sm_mhz", "default_mhz", "max_mhz", "source", "throttled", "warning"}, or
    {"missing": why} where neither NVML nor nvidia-smi can tell."""
    reading = read_nvml(gpu_uuid) or read_smi(gpu_uuid)
    if reading is None:
        return {"missing": "neither pynvml nor nvidia-smi could read the SM clock"}
    return reading.to_dict()
