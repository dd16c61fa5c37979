"""The cache folder for what a run would otherwise rebuild from an installed framework every
time (torch's manifest of operators and inputs, MXNet's operator registry and build features),
one JSON file per thing, named by everything it was built from, so a changed framework build
or a changed suite is never served an old answer (a new name is built; stale files are simply
never read again).

The folder is OPBENCH_CACHE, else ~/.cache/opbench.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Optional

CACHE_ENV = "OPBENCH_CACHE"


def root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "opbench").expanduser()


def code_digest(sources: Iterable[Path]) -> str:
    """A short hash of the modules whose code decides what a cached file holds: part of its
    name, so a change to that code is never served what an older checkout built."""
    digest = hashlib.sha256()
    for source in sources:
        digest.update(Path(source).read_bytes())
    return digest.hexdigest()[:12]


def read(path: Path, kind: str) -> Optional[dict]:
    """A cached file's body, or None where there is none (or it is not a `kind` file)."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return document.get("body") if isinstance(document, dict) and document.get("format") == kind else None


def write(path: Path, kind: str, body: dict) -> None:
    """Cache `body` at `path` as a `kind` file (see write_bytes)."""
    write_bytes(path, (json.dumps({"format": kind, "body": body}) + "\n").encode("utf-8"))


def write_bytes(path: Path, data: bytes) -> None:
    """Cache `data` at `path`, written whole or not at all; where the folder cannot be written
    (a read-only home), nothing is cached and the next run builds it again."""
    from benchcore.errors import UsageError
    from benchcore.report.model import write_bytes_atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data, overwrite=True)
    except (OSError, UsageError):
        pass
