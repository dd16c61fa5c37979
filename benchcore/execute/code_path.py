"""Which code paths the libraries take, natively and under valgrind: probes run in two fresh processes.

Libraries choose their kernels by the CPU features CPUID reports (oneDNN's ISA, torch's CPU
capability, OpenBLAS's core). Valgrind 3.19 emulates a CPU without AVX-512, so on an AVX-512
host the counted calls may run other kernels than the timed ones (docs/INSTRUCTIONS.md). A
suite names its frameworks' probes (`Suite.code_path_probes`: "package.module:function" → a
dict, e.g. frameworks.mxnet:code_path), so the core names no framework; `probe_both` runs them,
with benchcore.measure.instructions.code_path, in a native process and in one under valgrind.

The valgrind side runs under the counted workers' own launcher (their environment: one thread,
NaiveEngine) with valgrind's `none` tool instead of callgrind: the CPU a program sees is
valgrind's core's emulation, the same whatever the tool, and `none` costs a fraction of
callgrind (MXNet's import and one operator: 31 s against 80 s for callgrind's import alone).
Fresh processes, because a probe may need settings that must be in place before a library's
first call (oneDNN reads DNNL_VERBOSE once), which a worker that already ran cases cannot
give. The two run side by side.

Under `opbench ab`/`rnnbench ab` each side's report records its own libraries: the probes run
under that side's interpreter (`python`: --base-python or --new-python, as its workers do), not
the driver's.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

#: how long one probe process may take (the valgrind one imports the frameworks emulated)
PROBE_TIMEOUT_S = 900


def native_command(probes: Sequence[str], python: Optional[str] = None) -> List[str]:
    """The probe's command under `python` (an A/B side's interpreter; None: this one)."""
    return [python or sys.executable, "-m", "benchcore.execute.code_path", *probes]


def valgrind_command(launcher: Sequence[str], probes: Sequence[str], python: Optional[str] = None) -> List[str]:
    """The counted workers' launcher with callgrind and its options swapped for the `none` tool."""
    tool = next(i for i, word in enumerate(launcher) if word == "--tool=callgrind")
    return [*launcher[:tool], "--tool=none", "--quiet", *native_command(probes, python)]


def probe_both(launcher: Sequence[str], probes: Sequence[str], python: Optional[str] = None) -> Dict[str, dict]:
    """{"native": what the probes saw natively, "valgrind": under valgrind}, both under `python`
    (None: this interpreter); a side that failed says why under `error` (nothing else of the
    sweep depends on it)."""
    commands = {"native": native_command(probes, python), "valgrind": valgrind_command(launcher, probes, python)}
    running = {side: subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      stdin=subprocess.DEVNULL) for side, command in commands.items()}
    return {side: _answer(process) for side, process in running.items()}


def _answer(process: subprocess.Popen) -> dict:
    try:
        out, err = process.communicate(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return {"error": f"the probe took more than {PROBE_TIMEOUT_S} s"}
    lines = out.strip().splitlines()
    if process.returncode != 0 or not lines:
        tail = (err.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the probe failed (exit {process.returncode}): {tail}"}
    return json.loads(lines[-1])


def probe_here(probes: Sequence[str]) -> dict:
    """In the probe's process: the core's view of the CPU and threads, then each suite probe's."""
    from benchcore.measure.instructions import code_path

    found = code_path()
    for probe in probes:
        module, function = probe.split(":")
        found.update(getattr(importlib.import_module(module), function)())
    return found


def main(argv: Sequence[str]) -> int:
    sys.stdout.write(json.dumps(probe_here(argv), default=str) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
