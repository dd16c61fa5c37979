"""An executor whose worker start-up is slow (its WORKER_PRELOAD sleeps), for timeout tests."""

from tests.benchcore.executors import execute  # noqa: F401  (the executor itself)

WORKER_PRELOAD = ("tests.benchcore.slow_import",)
