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


def pytest_collection_modifyitems(config, items):
    """Tests marked `valgrind` run workers under valgrind for minutes: they run only when the
    -m expression names the marker (scripts/test-valgrind), so `scripts/test` leaves them out."""
    if "valgrind" in (config.getoption("markexpr") or ""):
        return
    kept = [item for item in items if item.get_closest_marker("valgrind") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("valgrind")])
        items[:] = kept
