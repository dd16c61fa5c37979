"""Fingerprint: the environment a report's figures belong to, as a short stable id.

Two reports' figures form one time series only when they were taken under the same conditions:
the keys `compare` checks before judging two reports (benchcore.report.identity.timing_identity:
interpreter and framework versions, CPU and GPU model, core count, thread settings, the timer
and profiler). Their hash keeps a report from another machine type or build apart from the
nightly series it would otherwise seem to break. Host names, times, commits and paths are not
part of it: they differ between any two runs, and a CI machine's name changes every night.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Dict, Tuple

from benchcore.report.identity import timing_identity
from benchcore.report.model import Report

#: (flattened key, how to show its value): what every environment's summary shows around the
#: suite's own keys (its frameworks' GPU and versions: benchcore.suite.Suite.summary_keys)
SummaryKeys = Tuple[Tuple[str, str], ...]
MACHINE_KEYS: SummaryKeys = (("cpu_model", "{}"), ("cpu_count", "{} cores"))
SETUP_KEYS: SummaryKeys = (("python", "Python {}"), ("numpy", "numpy {}"), ("threads", "threads {}"),
                           ("settings.profiler", "{} profiler"))


@dataclass(frozen=True)
class Fingerprint:
    id: str
    keys: Dict[str, object]
    #: one line a person recognises: CPU, cores, GPU, versions, threads, profiler
    summary: str


def fingerprint(report: Report, suite_keys: SummaryKeys = ()) -> Fingerprint:
    """The report's id and summary: the machine, the suite's keys (Suite.summary_keys), the setup."""
    keys = timing_identity(report)
    text = json.dumps(keys, sort_keys=True, separators=(",", ":"), default=str)
    parts = [shown.format(keys[key]) for key, shown in (*MACHINE_KEYS, *suite_keys, *SETUP_KEYS) if keys.get(key) not in (None, "")]
    return Fingerprint(hashlib.sha256(f"{report.suite}\n{text}".encode()).hexdigest()[:16], keys,
                       " · ".join(parts) or "unknown environment")
