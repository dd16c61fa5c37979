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
from typing import Dict

from benchcore.report.identity import timing_identity
from benchcore.report.model import Report

#: what the summary shows, in order: (flattened key, how to show its value)
SUMMARY_KEYS = (
    ("cpu_model", "{}"), ("cpu_count", "{} cores"), ("torch.gpu.name", "{}"), ("python", "Python {}"),
    ("mxnet.version", "MXNet {}"), ("torch.version", "torch {}"), ("numpy", "numpy {}"),
    ("threads", "threads {}"), ("settings.profiler", "{} profiler"),
)


@dataclass(frozen=True)
class Fingerprint:
    id: str
    keys: Dict[str, object]

    @property
    def summary(self) -> str:
        """One line a person recognises: CPU, cores, GPU, versions, threads, profiler."""
        parts = [text.format(self.keys[key]) for key, text in SUMMARY_KEYS if self.keys.get(key) not in (None, "")]
        return " · ".join(parts) or "unknown environment"


def fingerprint(report: Report) -> Fingerprint:
    keys = timing_identity(report)
    text = json.dumps(keys, sort_keys=True, separators=(",", ":"), default=str)
    return Fingerprint(hashlib.sha256(f"{report.suite}\n{text}".encode()).hexdigest()[:16], keys)
