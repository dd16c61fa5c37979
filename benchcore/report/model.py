"""The Report model and its JSON format (the source of truth), plus atomic file writes.

One module owns the JSON schema and its version. Markdown and charts are views built from a
loaded Report; they never read anything the JSON does not hold.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec

#: 2 added rounds: a result's per-round record (`rounds`) and round boundaries in its samples.
#: Version 1 reports (one process per case) are still read.
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
#: ok: measured; failed: the case raised; crashed: the worker died (signal, abort);
#: timeout: the case ran past its limit; skipped: not run, with a reason in `error`.
STATUSES = ("ok", "failed", "crashed", "timeout", "skipped")


@dataclass
class CaseResult:
    spec: CaseSpec
    status: str
    #: suite-defined JSON metrics: "forward"/"backward" Measurement dicts, profiler stats, ...
    metrics: dict = field(default_factory=dict)
    error: Optional[str] = None
    stderr_tail: Optional[str] = None
    wall_s: Optional[float] = None
    #: with --rounds N: one record per round (round, position in its shuffled order, status,
    #: wall_s, error); None for a single-round result
    rounds: Optional[List[dict]] = None
    #: the cluster node that ran it (a `--ray` sweep; its environment is under
    #: environment.cluster.nodes); None on one machine, and when its rounds ran on several nodes
    #: (each round record then names its own)
    node: Optional[str] = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        return {
            "spec": self.spec.to_dict(),
            "key": self.spec.key,
            "status": self.status,
            "metrics": self.metrics,
            "error": self.error,
            "stderr_tail": self.stderr_tail,
            "wall_s": self.wall_s,
            **({"rounds": self.rounds} if self.rounds is not None else {}),
            **({"node": self.node} if self.node is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "CaseResult":
        return cls(
            spec=CaseSpec.from_dict(data["spec"]),
            status=data["status"],
            metrics=data.get("metrics") or {},
            error=data.get("error"),
            stderr_tail=data.get("stderr_tail"),
            wall_s=data.get("wall_s"),
            rounds=data.get("rounds"),
            node=data.get("node"),
        )


@dataclass
class Report:
    suite: str
    environment: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    results: List[CaseResult] = field(default_factory=list)
    #: suite-specific extras, e.g. opbench's operators without a benchmark
    extra: dict = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @property
    def failures(self) -> List[CaseResult]:
        return [r for r in self.results if r.status in ("failed", "crashed", "timeout")]

    def to_dict(self) -> dict:
        return {
            "schema": "benchcore-report",
            "schema_version": self.schema_version,
            "suite": self.suite,
            "environment": self.environment,
            "settings": self.settings,
            "results": [r.to_dict() for r in self.results],
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, data: dict, source: str = "report") -> "Report":
        if not isinstance(data, dict) or data.get("schema") != "benchcore-report":
            raise UsageError(f"{source} is not a benchcore report (no 'schema': 'benchcore-report'); pass a JSON report written by opbench or rnnbench")
        version = data.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise UsageError(f"{source} has report schema version {version}; this tool reads versions "
                             f"{', '.join(map(str, READABLE_VERSIONS))}")
        return cls(
            suite=data["suite"],
            environment=data.get("environment") or {},
            settings=data.get("settings") or {},
            results=[CaseResult.from_dict(r) for r in data.get("results") or []],
            extra=data.get("extra") or {},
            schema_version=version,
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, allow_nan=False, default=_json_default)

    def write(self, path, overwrite: bool = False) -> Path:
        return write_text_atomic(path, self.to_json() + "\n", overwrite=overwrite)

    @classmethod
    def load(cls, path) -> "Report":
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise UsageError(f"report {path} does not exist; pass the path of a JSON report") from None
        except OSError as exc:
            raise UsageError(f"cannot read report {path}: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}); pass a JSON report, not Markdown") from None
        return cls.from_dict(data, source=str(path))


def _json_default(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def ensure_folder(path, what: str, fix: str) -> Path:
    """Create `path` if needed and check it is writable; a UsageError naming `fix` otherwise."""
    folder = Path(path).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {what} {folder}: {exc.strerror}; {fix}") from None
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{what} {folder} is not writable; {fix}")
    return folder


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_writable(path, overwrite: bool = False) -> Path:
    """Fail before any measuring if the report could not be written at the end."""
    path = Path(path).expanduser()
    if path.exists() and not overwrite:
        raise UsageError(f"output file {path} already exists; choose another path or pass --overwrite")
    folder = path.parent
    if not folder.is_dir():
        raise UsageError(f"cannot write {path}: folder {folder} does not exist; create it or choose another path")
    try:  # a real probe: os.access says yes to root for /proc and read-only mounts
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=folder)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: folder {folder} is not writable ({exc.strerror}); choose another path") from None
    os.close(fd)
    os.unlink(probe)
    return path


def write_text_atomic(path, text: str, overwrite: bool = False) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"), overwrite=overwrite)


def write_bytes_atomic(path, data: bytes, overwrite: bool = False) -> Path:
    """Write via a temp file in the same folder + rename, so readers never see half a file.

    Refuses to replace an existing file unless overwrite is set: a benchmark result is costly
    to reproduce, and opperf's answer (an assertion) lost whole sweeps.
    """
    path = check_writable(path, overwrite)
    folder = path.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}; choose a writable path") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a report is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
