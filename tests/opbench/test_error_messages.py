"""A failing operator's report says MXNet's reason, not "Traceback (most recent call last):"."""

import mxnet  # noqa: F401  (plainly: a broken MXNet fails these tests instead of skipping them)

from benchcore.execute.worker import run_cases
from opbench.backends.mxnet.cases import spec_from_inputs


def test_an_mxnet_error_is_recorded_with_its_check_message():
    spec = spec_from_inputs("dot", {"lhs": (4, 4), "rhs": (5, 4)}, "float32", "cpu(0)", True, 41)
    settings = {"warmup": 0, "runs": 1, "run_backward": True}
    [result] = run_cases([spec], "opbench.backends.mxnet.executor:execute",
                         {"settings": settings, "profiler": "native", "threads": None}, isolate=False)
    assert result.status == "failed"
    assert result.error.startswith("MXNetError: Check failed")
    assert "dot shape error: [4,4] X [5,4]" in result.error
