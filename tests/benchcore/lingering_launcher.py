"""A worker launcher (run_slots' `launcher`) whose process outlives its worker: after the worker
exits it lingers until a later worker's launcher has started (at most LINGER_S), as a worker whose
exit takes long would, or until the file LOG_ENV names plus ".done" exists (a case can end the
lingering of the last launcher). Each launcher appends "start <pid>" and "exit <pid>" to the file named by
LOG_ENV, so a test reads the order of the starts and the exits."""

import os
import subprocess
import sys
import time

LOG_ENV = "LINGERING_LAUNCHER_LOG"
LINGER_S = 20.0


def _log(event: str) -> None:
    with open(os.environ[LOG_ENV], "a") as handle:
        handle.write(f"{event} {os.getpid()}\n")


def _started_after_me() -> bool:
    with open(os.environ[LOG_ENV]) as handle:
        starts = [line for line in handle.read().splitlines() if line.startswith("start ")]
    return starts[-1] != f"start {os.getpid()}"


def main() -> int:
    _log("start")
    code = subprocess.call(sys.argv[1:])
    deadline = time.monotonic() + LINGER_S
    done = os.environ[LOG_ENV] + ".done"
    while time.monotonic() < deadline and not _started_after_me() and not os.path.exists(done):
        time.sleep(0.02)
    _log("exit")
    return code


if __name__ == "__main__":
    sys.exit(main())
