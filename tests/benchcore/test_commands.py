"""The compare / plot / merge commands through benchcore.cli.commands.main: exit codes (the CI
gate), output to stdout or files, and one-line errors for bad input."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchcore.cli.commands import main
from benchcore.measure.measurement import Measurement
from opbench.backends.mxnet.suite import SUITE as OPBENCH
from rnnbench.suite import SUITE as RNNBENCH
from tests.benchcore.test_compare import ENV, make_report, op_result, samples
from tests.benchcore.test_merge import all_results, round_robin
from tests.benchcore.test_plot import PNG_MAGIC, rnn_report

ROOT = Path(__file__).resolve().parents[2]


def write(report, path):
    report.write(path)
    return str(path)


@pytest.fixture
def pair(tmp_path):
    """base, new: exp 20% slower (clear), log unchanged."""
    base = make_report([op_result("exp", samples(1.0, seed=1)), op_result("log", samples(2.0, seed=2))])
    new = make_report([op_result("exp", samples(1.2, seed=3)), op_result("log", samples(2.0, seed=4))])
    return write(base, tmp_path / "base.json"), write(new, tmp_path / "new.json")


def one_error_line(capsys, *words):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for word in words:
        assert word in err
    return err


def test_compare_markdown_to_stdout(pair, capsys):
    assert main(OPBENCH, ["compare", *pair]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Comparison (opbench)")
    assert "## Summary" in out and "## Cases" in out and "| overall" in out
    rows = [line for line in out.splitlines() if line.startswith("| exp")]
    assert len(rows) == 1 and "slower" in rows[0] and ("+19." in rows[0] or "+20." in rows[0])


def test_fail_above_gate(pair, capsys):
    assert main(OPBENCH, ["compare", *pair, "--fail-above", "10"]) == 1
    err = capsys.readouterr().err
    assert "1 case(s) slower by more than 10%" in err and "exp" in err
    assert "confirm before believing it: time the slower cases again with more --rounds" in err
    assert main(OPBENCH, ["compare", *pair, "--fail-above", "30"]) == 0
    assert "confirm" not in capsys.readouterr().err  # nothing failed, nothing to confirm
    # the gate looks at the slowdown: base against itself passes
    assert main(OPBENCH, ["compare", pair[0], pair[0], "--fail-above", "0"]) == 0


def test_an_interleaved_pair_that_fails_the_gate_needs_no_confirmation(tmp_path, capsys):
    """Both reports from one `ab` run: its rounds ran side by side, the failure stands as it is."""
    sides = [dict(ENV, ab_side=side) for side in ("base", "new")]
    base = write(make_report([op_result("exp", samples(1.0, seed=1))], env=sides[0]), tmp_path / "base.json")
    new = write(make_report([op_result("exp", samples(1.2, seed=3))], env=sides[1]), tmp_path / "new.json")
    assert main(OPBENCH, ["compare", base, new, "--fail-above", "10"]) == 1
    err = capsys.readouterr().err
    assert "1 case(s) slower by more than 10%" in err and "confirm" not in err


def test_a_gate_that_compared_nothing_fails(tmp_path, capsys):
    """float32 against float64 reports share no case: --fail-above must not pass silently."""
    base = write(make_report([op_result("exp", samples(1.0), inputs={"data": [4]})]), tmp_path / "a.json")
    new = write(make_report([op_result("exp", samples(1.0), inputs={"data": [8]})]), tmp_path / "b.json")
    assert main(OPBENCH, ["compare", base, new]) == 0  # a report may say "nothing in common"
    capsys.readouterr()
    assert main(OPBENCH, ["compare", base, new, "--fail-above", "10"]) == 2
    one_error_line(capsys, "no case was measured in both reports")


def test_a_case_that_crashed_in_the_new_run_fails_the_gate(tmp_path, capsys):
    base = make_report([op_result("exp", samples(1.0, seed=1)), op_result("log", samples(2.0, seed=2))])
    new = make_report([op_result("exp", samples(1.0, seed=3)), op_result("log", None, status="crashed")])
    paths = write(base, tmp_path / "base.json"), write(new, tmp_path / "new.json")
    assert main(OPBENCH, ["compare", *paths, "--fail-above", "10", "-f", "json", "-o", str(tmp_path / "g.json")]) == 1
    err = capsys.readouterr().err
    assert "1 case(s) measured in the base but not in the new report: log (crashed)" in err
    gate = json.loads((tmp_path / "g.json").read_text())["gate"]
    assert gate["passed"] is False and gate["broken"] == [{"label": "log", "new_status": "crashed"}]


def test_a_group_the_build_slowed_as_a_whole_fails_the_gate_and_is_named(tmp_path, capsys):
    """Every backward 30% slower, the machine reference unchanged (tests/benchcore/test_drift.py)."""
    from tests.benchcore.test_drift import sweep

    cases = [(f"op{i}", 1.0 + i % 3, 2.0 + i % 4, "unary") for i in range(30)]
    base = write(sweep(cases, 9, (1.0, 1.0)), tmp_path / "base.json")
    new = write(sweep([(n, f, b * 1.30, c) for n, f, b, c in cases], 10, (1.0, 1.01)), tmp_path / "new.json")
    assert main(OPBENCH, ["compare", base, new, "--fail-above", "10", "-o", str(tmp_path / "c.md")]) == 1
    err = capsys.readouterr().err
    assert "opbench: the build's backward · unary as a whole is +28.6% slower than the machine reference explains" in err
    assert main(OPBENCH, ["compare", base, new, "--fail-above", "40", "-o", str(tmp_path / "d.md")]) == 0


def test_the_gate_verdict_is_in_the_markdown(pair, capsys):
    assert main(OPBENCH, ["compare", *pair, "--fail-above", "10"]) == 1
    assert "- gate (--fail-above 10%): **failed** — exp (+" in capsys.readouterr().out
    assert main(OPBENCH, ["compare", pair[0], pair[0], "--fail-above", "10"]) == 0
    assert "- gate (--fail-above 10%): **passed**" in capsys.readouterr().out


def test_compare_json_to_file_and_overwrite(pair, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert main(OPBENCH, ["compare", *pair, "-f", "json", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {c["name"]: c["verdict"] for c in data["cases"]} == {"exp": "slower", "log": "same"}
    assert capsys.readouterr().out == ""
    assert main(OPBENCH, ["compare", *pair, "-f", "json", "-o", str(out)]) == 2
    one_error_line(capsys, "already exists", "--overwrite")
    assert main(OPBENCH, ["compare", *pair, "-f", "json", "-o", str(out), "--overwrite"]) == 0


def test_compare_with_plot_links_the_chart(pair, tmp_path):
    out = tmp_path / "cmp.md"
    assert main(OPBENCH, ["compare", *pair, "-o", str(out), "--plot", str(tmp_path / "charts")]) == 0
    assert (tmp_path / "charts" / "opbench_comparison.png").read_bytes().startswith(PNG_MAGIC)
    assert "![opbench_comparison](charts/opbench_comparison.png)" in out.read_text()


def test_env_mismatch_needs_the_flag(tmp_path, capsys):
    base = write(make_report([op_result("exp", samples(1.0))]), tmp_path / "a.json")
    other = dict(ENV, numpy="1.26.0")
    new = write(make_report([op_result("exp", samples(1.0))], env=other), tmp_path / "b.json")
    assert main(OPBENCH, ["compare", base, new]) == 2
    one_error_line(capsys, "numpy", "--allow-env-mismatch")
    assert main(OPBENCH, ["compare", base, new, "--allow-env-mismatch"]) == 0
    captured = capsys.readouterr()
    assert "environments differ (numpy)" in captured.err
    assert "## Environment differences" in captured.out and "1.26.0" in captured.out


def test_bad_inputs_are_one_line_exit_2(pair, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    rnn = write(rnn_report(), tmp_path / "rnn.json")
    cases = [
        (["compare", pair[0], str(tmp_path / "missing.json")], "does not exist"),
        (["compare", pair[0], str(bad)], "is not valid JSON"),
        (["compare", pair[0], rnn], "holds a rnnbench report, not an opbench one; use `rnnbench`"),
        (["plot", rnn], "holds a rnnbench report"),
        (["merge", rnn], "holds a rnnbench report"),
        (["compare", pair[0]], "arguments are required"),
        (["compare", *pair, "--fail-above", "-1"], "--fail-above"),
        (["compare", *pair, "--fail-above", "nan"], "--fail-above: nan must be a finite number >= 0"),
        (["compare", *pair, "--fail-above", "inf"], "--fail-above"),
        (["compare", *pair, "--threshold", "0"], "--threshold/--margin 0: the margin is a percent above 0"),
        (["compare", *pair, "--threshold", "150"], "and below 100; give e.g. --margin 5"),
        (["compare", *pair, "--margin", "100"], "--threshold/--margin 100: the margin is a percent above 0 and below 100"),
        (["compare", *pair, "--margin", "-3"], "--margin: -3"),
        (["compare", *pair, "--margin", "five"], "--margin"),
        (["compare", *pair, "--threshold", "0.05"], "0.05 looks like a fraction, but thresholds are in percent: "
                                                    "write 5 for 5%, or 0.05% if you mean 0.05 percent"),
        (["compare", *pair, "--fail-above", "0.5"], "0.5 looks like a fraction"),
        (["compare", *pair, "-f", "xml"], "'xml': this command writes md, json, csv; choose one of those"),
        (["frobnicate"], "invalid choice"),
    ]
    for argv, words in cases:
        assert main(OPBENCH, argv) == 2, argv
        one_error_line(capsys, "opbench: error:", words)


def test_help_exits_0(capsys):
    assert main(RNNBENCH, ["compare", "--help"]) == 0
    assert "--fail-above" in capsys.readouterr().out


def test_plot_command(tmp_path, capsys):
    report = write(rnn_report(), tmp_path / "rnn.json")
    assert main(RNNBENCH, ["plot", report, "-o", str(tmp_path / "charts")]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(tmp_path / "charts" / "rnnbench_runners.png")]
    assert Path(printed[0]).read_bytes().startswith(PNG_MAGIC)


def test_merge_command(tmp_path, capsys):
    paths = [write(s, tmp_path / f"shard{i}.json") for i, s in enumerate(round_robin(3))]
    out = tmp_path / "all.json"
    assert main(OPBENCH, ["merge", *paths, "-o", str(out)]) == 0
    assert capsys.readouterr().err.strip() == f"wrote {out}"
    merged = json.loads(out.read_text())
    assert sorted(r["key"] for r in merged["results"]) == sorted(r.spec.key for r in all_results())
    assert main(OPBENCH, ["merge", *paths, "-o", str(out)]) == 2
    one_error_line(capsys, "already exists")
    assert main(OPBENCH, ["merge", paths[0], paths[0]]) == 2
    one_error_line(capsys, "are both shard 1/3")
    assert main(OPBENCH, ["merge", paths[0], paths[1]]) == 2
    one_error_line(capsys, "shards 3/3 are missing")
    # without -o the merged report goes to stdout
    assert main(OPBENCH, ["merge", *paths]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "benchcore-report"


def test_compare_real_rnnbench_sweeps(tmp_path):
    """Two real tiny CPU sweeps of the same runner, compared through the suite's own CLI."""
    run = [sys.executable, "-m", "rnnbench", "bench", "--group", "rnns", "--rnns", "cudnn", "--seqLength", "5", "--inputSize", "8",
           "--hiddenSize", "8", "--miniBatch", "2", "--nloops", "5", "--warmup", "1", "--device", "cpu"]
    for name in ("a.json", "b.json"):
        done = subprocess.run(run + ["--output-file", str(tmp_path / name)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "cmp.json"
    done = subprocess.run([sys.executable, "-m", "rnnbench", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                           "-f", "json", "-o", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert [c["name"] for c in data["cases"]] == ["cudnn"]
    assert {m["metric"] for m in data["cases"][0]["metrics"]} == {"forward", "backward"}
    assert all(m["basis"] == "rounds" and m["rounds_base"] == 3 for m in data["cases"][0]["metrics"])
    # two real runs may differ either way; the same run made far slower or faster than its own
    # rounds disagree may not
    far = far_beyond_noise(tmp_path / "a.json")
    for factor, verdict in ((far, "slower"), (1 / far, "faster")):
        scaled = scaled_report(tmp_path / "a.json", factor, tmp_path / f"{verdict}.json")
        assert main(RNNBENCH, ["compare", str(tmp_path / "a.json"), str(scaled), "-f", "json",
                               "-o", str(tmp_path / f"cmp-{verdict}.json")]) == 0
        (case,) = json.loads((tmp_path / f"cmp-{verdict}.json").read_text())["cases"]
        assert case["verdict"] == verdict and case["ratio"] == pytest.approx(factor)
        assert [(m["metric"], m["verdict"]) for m in case["metrics"]] == [("forward", verdict), ("backward", verdict)]
        assert all(m["p_value"] < 0.05 and m["ratio"] == pytest.approx(factor) for m in case["metrics"])


def far_beyond_noise(path) -> float:
    """A slowdown factor no between-round noise of this report can hide from compare's test.

    Round medians spread over R = ln(max/min) (per forward/backward Measurement, the largest)
    have a standard deviation of at most R/sqrt(3) on the log scale, so ln(factor) = 10 R + ln 10
    puts Welch's t on 3 vs 3 rounds above 20 (p < 0.001) whatever R is; R = 0 gives 10. On a
    loaded 2-core machine the rounds of a tiny LSTM were seen 20x apart, where a fixed 1000x
    was not significant."""
    spread = 0.0
    for result in json.loads(Path(path).read_text())["results"]:
        for metric in ("forward", "backward"):
            block = (result.get("metrics") or {}).get(metric)
            if block:
                medians = Measurement.from_dict(block).round_medians
                spread = max(spread, math.log(max(medians) / min(medians)))
    return math.exp(10 * spread + math.log(10))


def scaled_report(path, factor: float, out):
    """A copy of a report with every forward/backward sample multiplied by `factor`: the same
    run, `factor` times slower. Statistics are derived from the samples, so nothing else changes."""
    data = json.loads(Path(path).read_text())
    for result in data["results"]:
        for metric in ("forward", "backward"):
            block = (result.get("metrics") or {}).get(metric)
            if block:
                block["samples_ms"] = [sample * factor for sample in block["samples_ms"]]
    Path(out).write_text(json.dumps(data))
    return out


def test_compare_real_opbench_sweeps_and_the_ci_gate(tmp_path):
    """Two real tiny opbench sweeps (python engine: raw samples), compared through opbench's CLI."""
    run = [sys.executable, "-m", "opbench", "--tiny", "--ops", "broadcast_add,dot", "-p", "python", "-w", "1", "-r", "8"]
    for name in ("a.json", "b.json"):
        done = subprocess.run(run + ["-o", str(tmp_path / name)], cwd=ROOT, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "cmp.json"
    done = subprocess.run([sys.executable, "-m", "opbench", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                           "-f", "json", "-o", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    base = json.loads((tmp_path / "a.json").read_text())
    assert sorted(c["key"] for c in data["cases"]) == sorted(r["key"] for r in base["results"])
    assert {c["category"] for c in data["cases"]} == {"binary_broadcast", "gemm"}
    assert all(m["basis"] == "rounds" for c in data["cases"] for m in c["metrics"])
    # a report compared with itself is never a regression, whatever the gate
    done = subprocess.run([sys.executable, "-m", "opbench", "compare", str(tmp_path / "a.json"), str(tmp_path / "a.json"),
                           "--fail-above", "1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "same" in done.stdout
