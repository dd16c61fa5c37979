"""A counted `opbench ab` whose new side's python is a wrapper script (marker `valgrind`:
scripts/test-valgrind; MXNet's import under callgrind takes over a minute a side).

valgrind counted the wrapper's shell, and the interpreter it execs ran natively: every new-side
case failed as "not running under valgrind" after the base side had been counted. Now the
wrapper's real interpreter runs under valgrind with the variable the wrapper sets, so both sides
hold counts, and the new side's report says what the wrapper ran and set."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchcore.measure.instructions import counts_of
from benchcore.report.model import Report
from tests.benchcore.test_interpreter import setting

pytestmark = pytest.mark.valgrind
ROOT = Path(__file__).resolve().parents[2]


def test_a_wrapper_side_is_counted_as_its_real_interpreter(tmp_path):
    wrapped = setting(tmp_path / "new", "BENCH_WRAPPED", "1")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPBENCH_TINY="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "opbench", "ab", "-p", "instructions", "--ops", "relu", "--tiny",
                           "--rounds", "2", "--budget", "0", "--base-python", sys.executable, "--new-python", wrapped,
                           "-o", str(tmp_path / "ab")], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=1500)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert "holds only timings" not in done.stderr and "not running under valgrind" not in done.stderr
    base, new = (Report.load(tmp_path / "ab" / f"{side}.json") for side in ("base", "new"))
    for report in (base, new):
        assert report.results and all(r.ok for r in report.results), [r.error for r in report.results]
        assert all(counts_of(r.metrics, "forward") is not None for r in report.results)
    assert new.environment["python_wrapper"]["sets"] == {"BENCH_WRAPPED": "1"}
    assert os.path.realpath(new.environment["python_wrapper"]["executable"]) == os.path.realpath(sys.executable)
    assert "python_wrapper" not in base.environment
