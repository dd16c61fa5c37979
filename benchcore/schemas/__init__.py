"""The JSON Schemas of the report (`report.schema.json`) and of a comparison
(`comparison.schema.json`), shipped with the package so any tool can validate what opbench and
rnnbench write: `jsonschema.validate(report, benchcore.schemas.load("report"))`."""

from __future__ import annotations

import json
from pathlib import Path

NAMES = ("report", "comparison")


def path(name: str) -> Path:
    """The schema file of `name` (one of NAMES)."""
    if name not in NAMES:
        raise ValueError(f"no schema named {name!r}; one of {', '.join(NAMES)}")
    return Path(__file__).with_name(f"{name}.schema.json")


def load(name: str) -> dict:
    return json.loads(path(name).read_text(encoding="utf-8"))
