"""`opbench ab --count-undecided` end to end (marker `valgrind`: scripts/test-valgrind; MXNet's
import under callgrind takes over a minute a side).

A margin of 0.01% leaves an A/A run's time undecided (nothing is the same within it, and nothing
differs); the cases time leaves undecided are then counted on both sides, and only those: each
side's report holds its timings with those cases' counts joined (as `merge --both` joins them),
and the Answer says what the counts call the quantities time could not decide."""

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

pytestmark = pytest.mark.valgrind
ROOT = Path(__file__).resolve().parents[2]


def test_the_cases_undecided_on_time_are_counted_on_both_sides_and_answered_on_counts(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPBENCH_TINY="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "opbench", "ab", "--ops", "linalg_gemm2", "--tiny", "-w", "1", "-r", "4",
                           "--rounds", "2", "--budget", "0", "--margin", "0.01%", "--count-undecided",
                           "--base-python", sys.executable, "--new-python", sys.executable, "-o", str(tmp_path / "ab")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    base, new = (Report.load(tmp_path / "ab" / f"{side}.json") for side in ("base", "new"))
    undecided = undecided_cases(compare(base, new, SUITE, threshold=0.0001, interleaved=True))
    assert undecided, "a 0.01% margin left nothing undecided on an A/A run"
    assert f"counting the instructions of the {len(undecided)} case(s) undecided on time" in done.stderr
    for report in (base, new):
        counted = {r.spec.key for r in report.results if counts_of(r.metrics, "forward") is not None}
        assert counted == undecided
        assert all(r.metrics["forward"]["median_ms"] > 0 for r in report.results)  # the timings stay
        assert report.extra["kinds"]["not_counted"] == [{"key": r.spec.key, "status": "absent"}
                                                        for r in report.results if r.spec.key not in undecided]
    verdict = json.loads((tmp_path / "ab" / "comparison.json").read_text())["answer"]["verdict"]
    assert "undecided on time, the counts call" in verdict and "on instruction counts:" in verdict
