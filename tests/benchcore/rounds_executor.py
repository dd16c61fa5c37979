"""An executor for rounds tests: a Measurement of `runs` samples at the case's level, plus the
worker's pid and interpreter, so tests can see which process timed which round."""

import os
import sys

from benchcore.measure.measurement import Measurement
from benchcore.measure.runner import RunSettings


def execute(spec, options):
    settings = RunSettings.from_dict(options.get("settings") or {})
    level = spec.params.get("level", 1.0)
    samples = [level * (1 + 0.001 * i) for i in range(settings.runs)]
    return {"forward": Measurement(samples).to_dict(), "pid": os.getpid(), "python": sys.executable,
            "timed_total_ms": sum(samples), "capped": spec.params.get("capped", False)}
