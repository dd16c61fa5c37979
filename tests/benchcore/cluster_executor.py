"""Executor for the Ray tests: a case may kill the Ray actor running its shard, as a lost node does.

The process chain on a node is Ray actor → shard subprocess (benchcore.execute.cluster.node) → isolated worker
(this executor): killing the worker's grandparent is what Ray sees when a node or its worker
dies mid-shard.
"""

import os
import signal
import time
from pathlib import Path


def _grandparent() -> int:
    fields = Path(f"/proc/{os.getppid()}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1])  # after the name: state, then ppid


def execute(spec, options):
    kill = spec.params.get("kill")  # None, "once" (a marker file says it happened) or "always"
    marker = Path(spec.params.get("marker", "/nonexistent"))
    if kill == "always" or (kill == "once" and not marker.exists()):
        marker.touch()
        time.sleep(spec.params.get("delay_s", 0))  # the results before this one reach the driver first
        os.kill(_grandparent(), signal.SIGKILL)
        time.sleep(60)  # the worker dies with the shard subprocess (PR_SET_PDEATHSIG)
    return {"value": spec.params.get("value", 1)}
