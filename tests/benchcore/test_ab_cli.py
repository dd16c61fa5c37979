"""`opbench ab`, `rnnbench ab`, `system` and the --rounds flag, through the real command lines."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchcore.report.model import Report

ROOT = Path(__file__).resolve().parents[2]
OPBENCH_FAST = ["--ops", "broadcast_add", "--tiny", "-w", "1", "-r", "4", "--rounds", "2"]
RNN_FAST = ["--seqLength", "3", "--numLayers", "1", "--inputSize", "4", "--hiddenSize", "4", "--miniBatch", "2",
            "--nloops", "4", "--warmup", "1", "--device", "cpu", "--rnns", "cudnn", "--rounds", "2"]


def run(suite, *args, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", suite, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def one_line_error(proc, prog, *words):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_opbench_ab_with_the_same_venv_twice_is_a_valid_aa_run(tmp_path):
    out = tmp_path / "ab"
    proc = run("opbench", "ab", "--base-python", sys.executable, "--new-python", sys.executable, *OPBENCH_FAST,
               "--budget", "0", "--output-dir", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    base, new = Report.load(out / "base.json"), Report.load(out / "new.json")
    assert [r.spec.key for r in base.results] == [r.spec.key for r in new.results] and base.results
    assert {base.environment["ab_side"], new.environment["ab_side"]} == {"base", "new"}
    for report in (base, new):
        assert report.settings["rounds"]["rounds"] == 2 and "sequential" not in report.settings  # --budget 0
        assert all(len(r.rounds) == 2 for r in report.results)
        assert report.environment["system"]["reference"]["status"] == "ok"
        # both sides timed under the one hold of the sweep's idle CPUs (test_idle: where it can be held)
        assert report.environment["cpu_idle"]["asked"] == "auto"
    assert base.environment["cpu_idle"] == new.environment["cpu_idle"]
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["drift"]["basis"] == "interleaved" and comparison["sequential"] is None
    assert len(comparison["cases"]) == len(base.results)
    assert "# Comparison (opbench)" in (out / "comparison.md").read_text() and "# Comparison" in proc.stdout


def test_opbench_ab_adds_rounds_to_the_undecided_cases_only_and_judges_by_its_looks(tmp_path):
    out = tmp_path / "ab"
    proc = run("opbench", "ab", "--base-python", sys.executable, "--new-python", sys.executable, *OPBENCH_FAST,
               "--max-rounds", "4", "--output-dir", str(out), cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    base, new = Report.load(out / "base.json"), Report.load(out / "new.json")
    looks = {"planned": 2, "step": 2, "horizon": 4, "spending": "pocock"}
    assert base.settings["sequential"] == new.settings["sequential"] == {**looks, "added_round_ms": 100.0}
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["sequential"] == looks
    rounds = {r.spec.key: len(r.rounds) for r in base.results}
    assert rounds == {r.spec.key: len(r.rounds) for r in new.results} and set(rounds.values()) <= {2, 4}
    added = [key for key, n in rounds.items() if n == 4]
    if added:  # tiny cases on a busy machine: usually some are undecided after 2 rounds
        assert "rounds a side: adding 2 rounds a side to their" in proc.stderr
        assert all("2 looks (at 2, 4 rounds)" in m["reason"] for c in comparison["cases"] if c["key"] in added
                   for m in c["metrics"] if m["basis"] == "rounds" and m["p_value"] is not None)


def test_opbench_ab_adds_short_rounds_to_a_case_whose_calls_outlast_the_added_round(tmp_path):
    """--added-round-ms 0.001: every case's calls outlast it, so each added round warms up 3 calls
    and times 5 (rounds.Short) where a planned one warmed up 6 and timed 10; a 0.01% margin leaves
    an A/A run's quantities undecided, so the rounds are added."""
    out = tmp_path / "ab"
    proc = run("opbench", "ab", "--base-python", sys.executable, "--new-python", sys.executable, "--ops", "broadcast_add",
               "--tiny", "-w", "6", "-r", "20", "--rounds", "2", "--max-rounds", "4", "--margin", "0.01%",
               "--added-round-ms", "0.001", "--output-dir", str(out), cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert "rounds a side: adding 2 rounds a side to their" in proc.stderr and "of them short" in proc.stderr
    for side in ("base", "new"):
        report = Report.load(out / f"{side}.json")
        assert report.settings["sequential"]["added_round_ms"] == 0.001
        added = [r for r in report.results if len(r.rounds) == 4]
        assert added, proc.stderr
        for result in added:
            assert result.metrics["forward"]["rounds"]["sizes"] == [10, 10, 5, 5]
            # the warmup asked (steady state may add calls to it, and says how many)
            assert [s["warmup_calls"] - s["extra_warmup"] for s in result.metrics["steady"]] == [6, 6, 3, 3]


def test_ab_refuses_an_added_round_length_that_is_not_a_length(tmp_path):
    for bad in ("-5", "nan", "soon"):
        proc = run("opbench", "ab", "--base-python", sys.executable, "--new-python", sys.executable, *OPBENCH_FAST,
                   "--added-round-ms", bad, "--output-dir", str(tmp_path / "o"), cwd=tmp_path)
        assert proc.returncode == 2 and "is not a round's length" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and not (tmp_path / "o").exists()


def test_rnnbench_ab_writes_both_reports_and_their_comparison(tmp_path):
    out = tmp_path / "ab"
    proc = run("rnnbench", "ab", "--base-python", sys.executable, "--new-python", sys.executable, *RNN_FAST,
               "--threads", "1", "--output-dir", str(out), "--fail-above", "50", "--max-rounds", "4", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    for side in ("base", "new"):
        report = Report.load(out / f"{side}.json")
        assert [r.spec.name for r in report.results] == ["cudnn"] and report.results[0].ok
        assert report.environment["threads"] == 1
        assert report.settings["sequential"]["horizon"] == 4 and len(report.results[0].rounds) in (2, 4)
    # the exit status is the gate's: a millisecond-long A/A case can still be hit by a burst of
    # load on one side's rounds (the other test process), so either verdict may be right here
    gate = json.loads((out / "comparison.json").read_text())["gate"]
    assert gate["fail_above_pct"] == 50 and proc.returncode == (0 if gate["passed"] else 1), proc.stderr
    assert gate["passed"] or "slower by more than 50%: cudnn" in proc.stderr


@pytest.mark.parametrize("suite,prefix", [("opbench", ["ab"]), ("rnnbench", ["ab"])])
def test_ab_refuses_a_missing_python_or_one_that_is_not_a_python(tmp_path, suite, prefix):
    fast = OPBENCH_FAST if suite == "opbench" else RNN_FAST
    missing = run(suite, *prefix, "--base-python", str(tmp_path / "nope"), "--new-python", sys.executable, *fast,
                  "--output-dir", str(tmp_path / "o"), cwd=tmp_path)
    one_line_error(missing, suite, "--base-python", "no such executable")
    not_python = run(suite, *prefix, "--base-python", sys.executable, "--new-python", "/bin/true", *fast,
                     "--output-dir", str(tmp_path / "o"), cwd=tmp_path)
    one_line_error(not_python, suite, "--new-python /bin/true is not a Python interpreter")
    assert not (tmp_path / "o" / "base.json").exists()


def test_ab_refuses_an_environment_without_the_framework(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    proc = run("opbench", "ab", "--base-python", str(tmp_path / "bare" / "bin" / "python"), "--new-python", sys.executable, *OPBENCH_FAST,
               "--output-dir", str(tmp_path / "o"), cwd=tmp_path)
    one_line_error(proc, "opbench", "--base-python", "cannot import what opbench needs", "install mxnet")


def test_count_undecided_is_refused_before_anything_runs_without_valgrind_or_on_a_counted_ab(tmp_path):
    """Counting comes after the timing: a missing valgrind must stop the run before it, not after."""
    env_path = tmp_path / "bin"
    env_path.mkdir()
    (env_path / "python").symlink_to(sys.executable)
    no_valgrind = subprocess.run([sys.executable, "-m", "opbench", "ab", "--base-python", sys.executable,
                                  "--new-python", sys.executable, *OPBENCH_FAST, "--count-undecided",
                                  "--output-dir", str(tmp_path / "o")], cwd=tmp_path, capture_output=True, text=True,
                                 timeout=300, env={"PATH": str(env_path), "HOME": str(tmp_path)})
    one_line_error(no_valgrind, "opbench", "valgrind", "not on PATH")
    counted = run("rnnbench", "ab", "--base-python", sys.executable, "--new-python", sys.executable, *RNN_FAST,
                  "--engine", "instructions", "--count-undecided", "--output-dir", str(tmp_path / "r"), cwd=tmp_path)
    one_line_error(counted, "rnnbench", "--count-undecided", "drop --count-undecided")
    shard = run("opbench", "ab", "--base-python", sys.executable, "--new-python", sys.executable, *OPBENCH_FAST,
                "--shard", "1/2", "--count-undecided", "--output-dir", str(tmp_path / "s"), cwd=tmp_path)
    one_line_error(shard, "opbench", "--count-undecided", "drop --shard")
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
    for folder in ("r", "s"):
        assert not (tmp_path / folder).exists() or not any((tmp_path / folder).iterdir())


@pytest.mark.parametrize("value,words", [("0", ["--rounds", "at least 1"]), ("x", ["--rounds", "not an integer"])])
def test_bad_rounds_are_refused_before_anything_runs(tmp_path, value, words):
    one_line_error(run("opbench", "--ops", "round", "--rounds", value, "-o", "r.json", cwd=tmp_path), "opbench", *words)
    one_line_error(run("rnnbench", "bench", "--rounds", value, cwd=tmp_path), "rnnbench", *words)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("suite", ["opbench", "rnnbench"])
def test_system_prints_the_noise_state_with_a_fix_for_each_warning(tmp_path, suite):
    proc = run(suite, "system", cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "usable cores" in proc.stdout and "load average" in proc.stdout and "ASLR" in proc.stdout
    assert "speed swing (compute, memory)" in proc.stdout and "between 0.1 s windows" in proc.stdout
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("warning: ")]
    fixes = [line for line in proc.stdout.splitlines() if line.startswith("  fix: ")]
    assert len(warnings) == len(fixes)
    assert warnings or "Nothing found" in proc.stdout
