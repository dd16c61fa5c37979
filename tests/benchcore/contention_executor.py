"""An executor for contention tests: a case that shares its CPU with a second busy process for
a while (so its thread waits for the CPU about half the time), or one that only sleeps."""

import os
import subprocess
import sys
import time

SPIN = "import time\nend = time.perf_counter() + {seconds}\nwhile time.perf_counter() < end: pass\n"


def execute(spec, options):
    seconds = spec.params.get("seconds", 0.6)
    if spec.params.get("action") == "sleep":
        time.sleep(seconds)
        return {}
    cpu = sorted(os.sched_getaffinity(0))[0]
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        rival = subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=seconds)],
                                 preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
        rival.wait()
    finally:
        os.sched_setaffinity(0, before)
    return {}
