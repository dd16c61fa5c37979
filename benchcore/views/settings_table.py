"""The settings table of a Markdown report: what shaped the numbers, one row per setting.

A report's `settings` nest (run settings, rounds, sizes, a manifest); a reader wants them as
`rounds.runs_per_round | 7`, not as a JSON line. Paths, the resume flag and the output files
say where the report went, not what was measured, and are left out.
"""

from __future__ import annotations

import json
from typing import List, Tuple

#: settings that do not shape the numbers
NOT_SHOWN = ("output_file", "resume", "manifest")


def settings_rows(settings: dict, prefix: str = "") -> List[Tuple[str, str]]:
    """[(dotted name, value text)], nested dicts flattened, None left out."""
    rows: List[Tuple[str, str]] = []
    for name, value in settings.items():
        if name in NOT_SHOWN or value is None:
            continue
        if isinstance(value, dict) and value:
            rows += settings_rows(value, f"{prefix}{name}.")
        elif isinstance(value, list):
            rows.append((prefix + name, ", ".join(map(_text, value)) or "(none)"))
        else:
            rows.append((prefix + name, _text(value)))
    return rows


def _text(value) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(", ", ": "))
    return str(value).lower() if isinstance(value, bool) else str(value)


def settings_table(settings: dict) -> str:
    """A GitHub Markdown table `| Setting | Value |` of `settings`."""
    from tabulate import tabulate

    rows = [(name, text.replace("|", "\\|")) for name, text in settings_rows(settings)]
    return tabulate(rows, ["Setting", "Value"], tablefmt="github", disable_numparse=True) if rows else "(no settings)"
