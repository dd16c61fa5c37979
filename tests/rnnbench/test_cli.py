"""rnnbench CLI: entry points, `test` subcommand exit codes, shared-command dispatch, and the
pytest-benchmark entry run at tiny sizes."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchcore.report.model import Report
from rnnbench.cli import main
from tests.benchcore.test_commands import far_beyond_noise, scaled_report

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--seqLength", "5", "--numLayers", "2", "--inputSize", "8", "--hiddenSize", "8", "--miniBatch", "2"]


def test_python_dash_m_entry_point():
    done = subprocess.run([sys.executable, "-m", "rnnbench", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0
    assert "bench" in done.stdout and "profile" in done.stdout and "compare" in done.stdout


def test_missing_subcommand_is_usage_error(capsys):
    assert main([]) == 2
    assert capsys.readouterr().err.startswith("rnnbench: error: ")


def test_test_subcommand_passes_and_prints_table(capsys):
    code = main(["test", *TINY, "--rnns", "jit", "py", "--device", "cpu"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "PASS" in captured.out and "jit" in captured.out and "py" in captured.out


def test_test_subcommand_exits_1_on_a_wrong_runner(capsys, monkeypatch):
    from rnnbench import runners

    good = runners.RUNNERS["py"]

    def wrong_creator(**kwargs):
        modeldef = good.creator(**kwargs)
        forward = modeldef.forward

        def off_by_a_bit(*inputs):
            output, (h, c) = forward(*inputs)
            return output + 0.01, (h, c)

        return dataclasses.replace(modeldef, forward=off_by_a_bit)

    monkeypatch.setitem(runners.RUNNERS, "wrong", dataclasses.replace(good, name="wrong", creator=wrong_creator))
    code = main(["test", *TINY, "--rnns", "py", "wrong", "--device", "cpu"])
    captured = capsys.readouterr()
    assert code == 1
    assert "FAIL" in captured.out and "wrong" in captured.err
    # a looser tolerance accepts the same runner
    assert main(["test", *TINY, "--rnns", "wrong", "--device", "cpu", "--atol", "0.05"]) == 0


@pytest.mark.parametrize("argv, message", [
    (["test", "--rnns", "nope"], "nope"),
    (["test", "--rnns", "resnet18"], "LSTM runners only"),
    (["test", "--atol", "-1"], "--atol"),
    (["test", "--rnns", "jit", "--seed", "99999999999999999999999"], "argument --seed: 99999999999999999999999 is outside"),
    (["test", "--rnns", "jit", "--seed", "-1"], "argument --seed: -1 is outside 0 to 9223372036854775806"),
    (["test", *TINY, "--rnns", "jit", "--atol", "nan"], "argument --atol: nan must be a finite number >= 0"),
    (["test", *TINY, "--rnns", "jit", "--atol", "inf"], "argument --atol: inf must be a finite number >= 0"),
    (["test", *TINY, "--rnns", "jit", "--rtol", "nan"], "argument --rtol: nan must be a finite number >= 0"),
    (["test", *TINY, "--rnns", "jit", "--rtol", "-0.1"], "argument --rtol: -0.1 must be a finite number >= 0"),
    (["test", *TINY, "--rnns"], "--rnns needs at least one runner name; omit it for the default list (every LSTM runner)"),
    (["bench", *TINY, "--nloops", "1", "--group", "rnns", "--rnns", "cudnn", "--seed", "-1"], "argument --seed: -1"),
    (["profile", "--fuser", "x"], "unknown fuser"),
    (["profile", "--rnns", "zzz", "--profiler", "torch"], "zzz"),
])
def test_subcommand_usage_errors(capsys, argv, message):
    code = main([*argv, "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err


def test_largest_seed_works_with_seed_plus_one(capsys):
    """2**63 - 2 is the top of --seed's range: the creators also seed a generator with seed + 1."""
    code = main(["test", *TINY, "--rnns", "jit", "--device", "cpu", "--seed", str(2**63 - 2)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "PASS" in captured.out


def test_compare_is_dispatched_to_benchcore(tmp_path, capsys):
    code = main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    err = capsys.readouterr().err
    assert code == 2 and "a.json" in err  # benchcore.cli.commands answered: the report does not exist


def test_compare_two_bench_reports(tmp_path, capsys):
    for name in ("a", "b"):
        assert main(["bench", *TINY, "--rnns", "cudnn", "--group", "rnns", "--nloops", "6", "--warmup", "1",
                     "--device", "cpu", "--no-isolation", "--output-file", str(tmp_path / f"{name}.json")]) == 0
    capsys.readouterr()
    code = main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    captured = capsys.readouterr()
    assert code == 0, captured.err  # without --fail-above, compare reports and never fails
    rows = [[cell.strip() for cell in line.split("|")[1:4]] for line in captured.out.splitlines() if line.startswith("| cudnn")]
    assert rows == [["cudnn", "lstm", "forward"], ["cudnn", "lstm", "backward"]]
    # a slowdown alone does not fail it either; only the gate does
    slower = scaled_report(tmp_path / "a.json", far_beyond_noise(tmp_path / "a.json"), tmp_path / "slower.json")
    assert main(["compare", str(tmp_path / "a.json"), str(slower)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| cudnn")]
    assert len(rows) == 2 and all("| slower " in row for row in rows)
    assert main(["compare", str(tmp_path / "a.json"), str(slower), "--fail-above", "50"]) == 1
    assert "1 case(s) slower by more than 50%: cudnn" in capsys.readouterr().err


def test_pytest_benchmark_entry_runs_at_tiny_sizes(tmp_path):
    """benchmarks/rnnbench is not part of the unit suite; prove it works with --benchmark-*."""
    out = tmp_path / "executor.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks/rnnbench", "-q", "-p", "no:cacheprovider",
         "--rnnbench-sizes", "5,1,8,8,2", "--rnnbench-device", "cpu", "--rnnbench-runners", "cudnn", "jit",
         "--benchmark-min-rounds", "2", "--benchmark-max-time", "0.01", "--benchmark-warmup", "off", "--rnnbench-warmup", "2",
         "--benchmark-json", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        # a pytest of its own, even when this suite runs under pytest-xdist (pytest-benchmark
        # disables itself in an xdist worker, which the inherited variables would make it)
        env={k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(out.read_text())
    names = sorted(b["name"] for b in data["benchmarks"])
    assert names == ["test_backward[cudnn]", "test_backward[jit]", "test_forward[cudnn]", "test_forward[jit]"]
    assert {b["group"] for b in data["benchmarks"]} == {"fastrnns"}
    assert all(b["stats"]["rounds"] >= 2 and b["stats"]["median"] > 0 for b in data["benchmarks"])
    assert {b["extra_info"]["warmup_iterations"] for b in data["benchmarks"]} == {2}


def test_shards_merge_back_to_the_unsharded_case_list(tmp_path, capsys):
    common = ["bench", *TINY, "--group", "rnns", "--rnns", "py", "cudnn", "jit", "--nloops", "2", "--warmup", "0",
              "--device", "cpu", "--no-isolation"]  # not registry order: the run's own order must come back
    assert main([*common, "--output-file", str(tmp_path / "all.json")]) == 0
    for k in (1, 2):
        assert main([*common, "--shard", f"{k}/2", "--output-file", str(tmp_path / f"s{k}.json")]) == 0
    assert main(["merge", str(tmp_path / "s1.json"), str(tmp_path / "s2.json"), "-o", str(tmp_path / "merged.json")]) == 0
    keys = lambda name: [r["key"] for r in json.loads((tmp_path / name).read_text())["results"]]  # noqa: E731
    assert keys("merged.json") == keys("all.json")  # the same cases, in the unsharded order
    assert keys("s1.json") and keys("s2.json") and not set(keys("s1.json")) & set(keys("s2.json"))
    capsys.readouterr()


def test_plot_option_writes_charts_linked_from_the_markdown(tmp_path):
    code = main(["bench", *TINY, "--group", "rnns", "--rnns", "cudnn", "--nloops", "2", "--warmup", "0",
                 "--device", "cpu", "--no-isolation", "--output-file", str(tmp_path / "r.md"),
                 "--plot", str(tmp_path / "charts")])
    assert code == 0
    chart = tmp_path / "charts" / "rnnbench_runners.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](charts/rnnbench_runners.png)" in (tmp_path / "r.md").read_text()
    # another run into the same folder would replace the charts r.md links: refused, like a report
    again = ["bench", *TINY, "--group", "rnns", "--rnns", "cudnn", "--nloops", "2", "--warmup", "0", "--device", "cpu",
             "--no-isolation", "--output-file", str(tmp_path / "s.md"), "--plot", str(tmp_path / "charts")]
    assert main(again) == 2
    assert main([*again, "--overwrite"]) == 0


def test_markdown_on_stdout_links_the_charts_from_the_working_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["bench", *TINY, "--group", "rnns", "--rnns", "cudnn", "--nloops", "2", "--warmup", "0",
                 "--device", "cpu", "--no-isolation", "--output-format", "md", "--plot", "charts"])
    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith("# rnnbench results") and "](charts/rnnbench_runners.png)" in out


def test_two_formats_need_a_file_not_stdout(capsys):
    code = main(["bench", *TINY, "--group", "rnns", "--rnns", "cudnn", "--device", "cpu", "--output-format", "json,md"])
    assert code == 2
    assert "would print both reports to stdout" in capsys.readouterr().err


@pytest.mark.parametrize("shard", ["3/2", "x", "0/4"])
def test_bad_shard_is_usage_error(shard, capsys):
    assert main(["bench", *TINY, "--rnns", "cudnn", "--group", "rnns", "--device", "cpu", "--shard", shard]) == 2
    assert "--shard" in capsys.readouterr().err


def test_resnets_take_fastrnns_batch_of_32_unless_asked():
    from rnnbench import cases
    from rnnbench.cli import build_parser

    args = build_parser().parse_args(["bench", "--miniBatch", "16", "--device", "cpu"])
    batches = {s.params["group"]: s.params["miniBatch"] for s in cases.build_specs(args)}
    assert batches == {"lstm": 16, "resnet": 32}
    args = build_parser().parse_args(["bench", "--group", "cnns", "--cnnBatch", "4", "--device", "cpu"])
    assert {s.params["miniBatch"] for s in cases.build_specs(args)} == {4}


def test_absolute_grads_turns_gradient_scaling_off(capsys, monkeypatch):
    from rnnbench import correctness

    seen = {}
    real = correctness.check_runners

    def spy(names, **kwargs):
        seen.update(kwargs)
        return real(names, **kwargs)

    monkeypatch.setattr(correctness, "check_runners", spy)
    assert main(["test", *TINY, "--rnns", "jit", "--device", "cpu", "--absolute-grads"]) == 0
    assert seen["scale_grads"] is False
    assert main(["test", *TINY, "--rnns", "jit", "--device", "cpu"]) == 0
    assert seen["scale_grads"] is True
    capsys.readouterr()


def test_threads_and_seed_reach_the_report(tmp_path, capsys, restored_environ):
    out = tmp_path / "r.json"
    code = main(["bench", *TINY, "--group", "rnns", "--rnns", "cudnn", "jit", "--nloops", "2", "--warmup", "0",
                 "--rounds", "1", "--device", "cpu", "--threads", "1", "--seed", "5",
                 "--output-file", str(out)])
    assert code == 0, capsys.readouterr().err
    report = Report.load(out)
    assert (report.settings["threads"], report.settings["seed"]) == (1, 5)
    assert (report.environment["threads"], report.environment["seed"]) == (1, 5)
    assert report.environment["threads_env"]["OMP_NUM_THREADS"] == "1"  # what the worker inherited
    assert [(r.spec.name, r.status, r.spec.params["seed"]) for r in report.results] == [("cudnn", "ok", 5), ("jit", "ok", 5)]


def _refused_changes(capsys, argv):
    """The CLI must refuse this resume in one line: the option keys the refusal names."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "was measured with other settings (" in err, err
    changes = err.split("was measured with other settings (", 1)[1].rsplit("); resume with", 1)[0]
    return {change.split(": ", 1)[0] for change in changes.split("; ")}


def test_an_interrupted_bench_resumes_without_rerunning_finished_runners(tmp_path, capsys, monkeypatch,
                                                                          restored_environ):
    """Ctrl-C in the middle of the second of three runners (in this process, --no-isolation):
    the first is kept in the checkpoint; a resume under other settings is refused, naming them;
    the resume with the same flags runs the other two only."""
    from rnnbench import runners

    monkeypatch.setattr(runners, "RUNNERS", dict(runners.RUNNERS))
    cudnn = runners.RUNNERS["cudnn"]
    built = []

    def creator(name):
        def build(**kwargs):
            built.append(name)
            if built == ["first", "stops"]:
                raise KeyboardInterrupt
            return cudnn.creator(**kwargs)
        return build

    for name in ("first", "stops", "last"):
        runners.register_runner(dataclasses.replace(cudnn, name=name, creator=creator(name)))
    out = tmp_path / "r.json"
    argv = ["bench", *TINY, "--group", "rnns", "--rnns", "first", "stops", "last", "--nloops", "2", "--warmup", "0",
            "--rounds", "1", "--device", "cpu", "--no-isolation", "--output-file", str(out)]
    assert main(argv) == 130
    assert "rerun with --resume" in capsys.readouterr().err
    checkpoint = tmp_path / "r.json.checkpoint.jsonl"
    kept = checkpoint.read_bytes()
    assert [json.loads(line).get("spec", {}).get("name") for line in kept.decode().splitlines()] == [None, "first"]
    assert not out.exists()

    assert main(argv) == 2 and "pass --resume" in capsys.readouterr().err
    resume = [*argv, "--resume"]
    assert _refused_changes(capsys, [*resume, "--threads", "1"]) == {"threads"}
    assert _refused_changes(capsys, [*resume, "--seed", "5"]) == {"seed", "rounds.order_seed"}
    # two rounds: each gets half of the runs (rounds.runs_per_round) and of the --max-time cap
    assert _refused_changes(capsys, [*resume, "--rounds", "2"]) == {"rounds.rounds", "rounds.runs_per_round",
                                                                     "settings.runs", "settings.max_time_s"}
    assert _refused_changes(capsys, [*resume, "--nloops", "4"]) == {"settings.runs", "rounds.runs_per_round"}
    assert checkpoint.read_bytes() == kept and built == ["first", "stops"]

    assert main(resume) == 0, capsys.readouterr().err
    assert built == ["first", "stops", "stops", "last"]  # first was not run again
    report = Report.load(out)
    assert [(r.spec.name, r.status) for r in report.results] == [("first", "ok"), ("stops", "ok"), ("last", "ok")]
    assert not checkpoint.exists()
