"""Fixtures the suites' tests share."""

import os

import pytest


@pytest.fixture
def restored_environ():
    """In-process runs of the CLI set the thread variables (--threads) in os.environ: undo that."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)
