"""A timed `opbench ab --count-undecided` whose new side's python is a wrapper script (marker
`valgrind`: scripts/test-valgrind; MXNet's import under callgrind takes over a minute a side).

Two things in one run, so the leg pays for MXNet's import under valgrind once a side:
- the cases time leaves undecided are counted, on both sides, and only those: at a 0.01% margin
  and alpha 1e-6, perf_counter's two rounds a side can decide nothing, so every case is counted;
  each side's report keeps its timings with the counts joined (as `merge --both` joins them), and
  the Answer says what the counts call the quantities time could not decide;
- a wrapper side is counted as its real interpreter: valgrind used to count the wrapper's shell,
  and the interpreter it execs ran natively, so every new-side case failed as "not running under
  valgrind". Now the wrapper's real interpreter runs under valgrind with the variable the wrapper
  sets, and the new side's report says what the wrapper ran and set."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchcore.cli.ab import undecided_cases
from benchcore.compare.verdicts import compare
from benchcore.measure.instructions import counts_of
from benchcore.report.model import Report
from opbench.suite import SUITE
from tests.benchcore.test_interpreter import setting

pytestmark = pytest.mark.valgrind
ROOT = Path(__file__).resolve().parents[2]


def test_time_left_undecided_is_counted_on_both_sides_a_wrapper_as_its_real_interpreter(tmp_path):
    wrapped = setting(tmp_path / "new", "BENCH_WRAPPED", "1")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPBENCH_TINY="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "opbench", "ab", "-p", "python", "--ops", "linalg_gemm2", "--tiny",
                           "-w", "1", "-r", "4", "--rounds", "2", "--budget", "0", "--margin", "0.01%", "--alpha", "1e-6",
                           "--count-undecided", "--base-python", sys.executable, "--new-python", wrapped,
                           "-o", str(tmp_path / "ab")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "not running under valgrind" not in done.stderr and "counting stopped" not in done.stderr
    base, new = (Report.load(tmp_path / "ab" / f"{side}.json") for side in ("base", "new"))
    undecided = undecided_cases(compare(base, new, SUITE, threshold=0.0001, alpha=1e-6, interleaved=True))
    assert undecided == {r.spec.key for r in base.results} and undecided
    assert f"counting the instructions of the {len(undecided)} case(s) undecided on time" in done.stderr
    for report in (base, new):
        assert all(r.ok for r in report.results), [r.error for r in report.results]
        assert {r.spec.key for r in report.results if counts_of(r.metrics, "forward") is not None} == undecided
        assert all(r.metrics["forward"]["median_ms"] > 0 for r in report.results)  # the timings stay
        assert report.extra["kinds"]["not_counted"] == []
    for environment in (new.environment, new.extra["kinds"]["counted_environment"]):
        assert environment["python_wrapper"]["sets"] == {"BENCH_WRAPPED": "1"}
        assert os.path.realpath(environment["python_wrapper"]["executable"]) == os.path.realpath(sys.executable)
    assert "python_wrapper" not in base.environment
    verdict = json.loads((tmp_path / "ab" / "comparison.json").read_text())["answer"]["verdict"]
    assert f"of the {2 * len(undecided)} undecided on time, the counts call" in verdict
