"""Markdown prose within a width: the views' paragraphs and bullets, wrapped so that a report's
Markdown stays readable as plain text (diffs, terminals) and renders the same."""

from __future__ import annotations

import textwrap
from typing import List

#: the widest line of prose a comparison's Markdown writes (its tables keep within 160 too)
WIDTH = 150


def paragraph(text: str, width: int = WIDTH) -> List[str]:
    """`text` wrapped within `width`, then the blank line that ends a Markdown paragraph."""
    return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False) + [""]


def bullet(text: str, width: int = WIDTH) -> List[str]:
    """A Markdown bullet wrapped within `width`; its continuation lines are indented, which
    Markdown renders as the same item."""
    return textwrap.wrap(text, width, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False,
                         break_long_words=False)
