"""Fixtures the suites' tests share."""

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def tiny_roofs():
    """Every test's sweep reads the machine's roofs at toy sizes (frameworks.roofs.tiny), taken
    once per fingerprint and cached: the probes stay out of the tests' wall."""
    os.environ["OPBENCH_ROOFS_TINY"] = "1"
    yield


@pytest.fixture
def restored_environ():
    """In-process runs of the CLI set the thread variables (--threads) in os.environ: undo that."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


#: markers of the tests that belong to a CI leg of their own and run only when the -m expression
#: names them: `valgrind` (workers under valgrind for minutes; scripts/test-valgrind) and
#: `old_mxnet` (a real old MXNet in its own venv; scripts/test-old-mxnet). `scripts/test`
#: leaves them out, deselected (counted as such), never skipped.
LEG_MARKERS = ("valgrind", "old_mxnet")


def pytest_collection_modifyitems(config, items):
    named = config.getoption("markexpr") or ""
    legs = [marker for marker in LEG_MARKERS if marker not in named]
    left_out = [item for item in items if any(item.get_closest_marker(marker) for marker in legs)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]
