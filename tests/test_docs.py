"""The documentation: every link inside the repository resolves, no doc cites a file outside it,
and every flag of every subcommand of both tools is documented somewhere (README or docs/).
docs/ is for users: its index links every page, and no page there is a dated investigation log;
those are lab notes (lab/notes/), each opening with its date and its question, whose links are
checked too (their flags are not: a note records what was run on its day)."""

import argparse
import re
from pathlib import Path

import pytest

from benchcore.cli.commands import build_parser as shared_parser
from opbench.backends import backend_for
from opbench.cli import build_parser as opbench_parser
from rnnbench.cli import build_parser as rnnbench_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
NOTES = sorted((ROOT / "lab").glob("**/*.md"))


def all_text() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in DOCS)


@pytest.mark.parametrize("doc", DOCS + NOTES, ids=[str(d.relative_to(ROOT)) for d in DOCS + NOTES])
def test_links_resolve_inside_the_repository(doc):
    text = doc.read_text(encoding="utf-8")
    assert "NOISE.md" not in text and "shared/" not in text
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path = (doc.parent / target).resolve()
        assert ROOT in path.parents and path.exists(), f"{doc.name} links {target}"


def test_the_index_links_every_user_doc():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = {(ROOT / "docs" / target).resolve() for target in re.findall(r"\]\(([^)#\s]+)", index)}
    missing = [str(d.relative_to(ROOT)) for d in DOCS[1:] if d.name != "README.md" and d not in linked]
    assert not missing, f"docs/README.md does not link {missing}"


def test_no_user_doc_is_a_dated_investigation_log():
    """A heading with a date (a pass, a sitting) marks a log; it belongs in lab/notes."""
    dated = [(d.name, line) for d in DOCS for line in d.read_text(encoding="utf-8").splitlines()
             if line.startswith("#") and re.search(r"\b20\d\d-\d\d-\d\d\b|\bpass\b", line)]
    assert not dated, dated


@pytest.mark.parametrize("note", [n for n in NOTES if n.parent.name == "notes" and n.name != "README.md"],
                         ids=lambda n: n.name)
def test_a_lab_note_opens_with_its_date_and_question(note):
    head = note.read_text(encoding="utf-8").split("\n\n", 2)
    assert head[0].startswith("# ") and head[1].startswith("**Date:** 20") and "**Question:**" in head[1], note.name
    assert note.name in (ROOT / "lab" / "notes" / "README.md").read_text(encoding="utf-8"), f"index {note.name}"


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
