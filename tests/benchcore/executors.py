"""Executors for isolation tests: each case does what its params ask, in a real worker."""

import os
import signal
import sys
import time


def execute(spec, options):
    action = spec.params.get("action", "ok")
    if action == "ok":
        return {"value": spec.params.get("value", 1), "pid": os.getpid()}
    if action == "raise":
        raise ValueError("bad input for this case")
    if action == "raise_cuda":  # as torch words a sticky CUDA error
        raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                           "CUDA kernel errors might be asynchronously reported at some other API call")
    if action == "abort":
        sys.stderr.write("about to abort\n")
        sys.stderr.flush()
        os.abort()
    if action == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "hang":
        time.sleep(3600)
    if action == "meet":  # leave a mark, then wait (up to `wait_s`) for the partner's: only met when run at once
        from pathlib import Path

        Path(spec.params["mark"]).touch()
        deadline = time.monotonic() + spec.params.get("wait_s", 30)
        while not Path(spec.params["partner"]).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return {"pid": os.getpid(), "met": Path(spec.params["partner"]).exists()}
    if action == "print":
        print("stray output on stdout must not break the protocol")
        return {"value": 2}
    if action == "grow":
        # hold ~64 MiB so the memory ceiling restarts the worker
        execute.ballast = bytearray(64 * 2**20)
        return {"pid": os.getpid()}
    if action == "memory":  # holds `hold_mib` for the worker's life, touches `peak_mib` for the case's
        from benchcore.measure import memory

        before, reset = memory.resident_bytes(), memory.reset_peak_rss()
        execute.held = getattr(execute, "held", []) + [b"h" * (spec.params.get("hold_mib", 0) * 2**20)]
        transient = b"t" * (spec.params.get("peak_mib", 0) * 2**20)
        del transient
        return {"pid": os.getpid(), memory.RSS_BEFORE: before, memory.RSS_PEAK: memory.peak_rss() if reset else None}
    if action == "slow":
        time.sleep(spec.params.get("seconds", 0.5))
        return {"pid": os.getpid()}
    if action == "litter":  # a file in the worker's scratch folder, then the worker dies
        from benchcore.execute.worker import SCRATCH_ENV

        scratch = os.environ[SCRATCH_ENV]
        with open(os.path.join(scratch, "left-behind"), "w") as handle:
            handle.write("x")
        if spec.params.get("tell"):  # where the parent's test can find it after a kill
            with open(spec.params["tell"], "w") as handle:
                handle.write(scratch)
        if spec.params.get("then") == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        return {"scratch": scratch}
    if action == "share":  # what an earlier round's worker left in the sweep's shared folder
        from benchcore.execute.worker import SHARED_SCRATCH_ENV

        shared = os.environ[SHARED_SCRATCH_ENV]
        path = os.path.join(shared, "left-by-a-worker")
        found = os.path.exists(path)
        open(path, "w").close()
        return {"shared": shared, "found": found, "pid": os.getpid()}
    if action == "gc":  # what the worker froze before its first case
        import gc

        return {"frozen": gc.get_freeze_count()}
    if action == "atexit":  # an exit handler that writes a file (the worker's exit skips it)
        import atexit

        atexit.register(lambda path=spec.params["path"]: open(path, "w").close())
        return {"pid": os.getpid()}
    if action == "launched":  # the lingering launcher's log (tests/benchcore/lingering_launcher.py)
        with open(spec.params["log"]) as handle:
            events = handle.read().split()
        first = events[1]  # "start <pid>" of the first worker's launcher
        open(spec.params["log"] + ".done", "w").close()  # this worker's launcher need not linger
        return {"events": events, "first_gone": not os.path.exists(f"/proc/{first}")}
    if action == "skip":
        from benchcore.errors import SkipCase

        raise SkipCase("needs a GPU")
    raise AssertionError(f"unknown action {action}")
