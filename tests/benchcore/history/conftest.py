"""Fixtures of the history tests: real reports (one sweep per suite per session), a PostgreSQL
server (one per session, a fresh database per test), a headless Chromium (one per session)."""

from __future__ import annotations

import pytest

from .support import CHROMIUM_FLAGS, PostgresServer, chromium_path, run_sweeps


@pytest.fixture(scope="session")
def reports(tmp_path_factory):
    """{"opbench": path, "rnnbench": path}: real tiny sweeps' reports."""
    return run_sweeps(tmp_path_factory.mktemp("sweeps"))


@pytest.fixture(scope="session")
def postgres():
    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request, tmp_path):
    """Where a test's store lives: a new SQLite file, or a new database on the test server."""
    if request.param == "sqlite":
        return str(tmp_path / "history.db")
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: it is in the dev extra (scripts/setup installs it)")
    driver = sync_playwright().start()
    try:
        chromium = driver.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
    except BaseException:
        driver.stop()
        raise
    yield chromium
    chromium.close()
    driver.stop()
