"""The documentation: every link inside the repository resolves, no doc cites a file outside it,
and every flag of every subcommand of both tools is documented somewhere (README or docs/)."""

import argparse
import re
from pathlib import Path

import pytest

from benchcore.cli.commands import build_parser as shared_parser
from opbench.backends import backend_for
from opbench.cli import build_parser as opbench_parser
from rnnbench.cli import build_parser as rnnbench_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def all_text() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in DOCS)


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_links_resolve_inside_the_repository(doc):
    text = doc.read_text(encoding="utf-8")
    assert "NOISE.md" not in text and "shared/" not in text
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path = (doc.parent / target).resolve()
        assert ROOT in path.parents and path.exists(), f"{doc.name} links {target}"


def parsers():
    """Every parser of both tools: (name, parser)."""
    found = [("opbench", opbench_parser(backend_for("mxnet"))), ("opbench torch", opbench_parser(backend_for("torch"))),
             ("opbench ab", opbench_parser(backend_for("mxnet"), ab=True))]
    stack = [("", shared_parser("opbench")), ("rnnbench", rnnbench_parser())]
    while stack:
        name, parser = stack.pop()
        found.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack += [(f"{name} {sub}".strip(), p) for sub, p in action.choices.items()]
    return found


def test_every_flag_is_documented():
    text = all_text()
    missing = sorted({(name, flag) for name, parser in parsers() for action in parser._actions
                      if action.help != argparse.SUPPRESS for flag in action.option_strings
                      if flag not in ("-h", "--help") and f"`{flag}" not in text and f"{flag}`" not in text
                      and f" {flag} " not in text and f"{flag}=" not in text})
    assert not missing, missing
