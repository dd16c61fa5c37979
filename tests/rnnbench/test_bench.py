"""rnnbench bench: executor, units, fastrnns' output shapes, failures and reports (CPU, tiny sizes)."""

from __future__ import annotations

import dataclasses
import json
import statistics
import time

import pytest

from benchcore.errors import SkipCase
from benchcore.measure.case import CaseSpec
from benchcore.measure.runner import RunSettings
from benchcore.report.model import CaseResult, Report
from rnnbench import cases, executor, views
from rnnbench.cli import main

TINY = ["--seqLength", "5", "--numLayers", "1", "--inputSize", "8", "--hiddenSize", "8", "--miniBatch", "2"]
FAST = ["--nloops", "3", "--warmup", "1", "--device", "cpu", "--group", "rnns", "--no-isolation"]


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ------------------------------------------------------------------------------- formats


def test_print_json_oss_is_one_line_in_fastrnns_shape(capsys):
    code, out, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "cudnn", "py", "--print-json")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    assert list(data) == ["lstm", "lstm-backward"]
    for group in data.values():
        assert list(group) == ["cudnn", "py"]
        assert all(isinstance(v, float) and v > 0 for v in group.values())
    # the console table still goes to stderr, in ms
    assert "fwd_median_ms" in err and "Benchmarking LSTMs..." in err


def test_print_json_pep_one_line_per_iteration(capsys):
    code, out, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "cudnn", "py", "--print-json", "pep")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2 * 2 * 3  # runners × {forward, backward} × nloops
    metrics = []
    for line in lines:
        prefix, _, payload = line.partition(" ")
        assert prefix == "Caffe2Observer"
        record = json.loads(payload)
        assert set(record) == {"type", "metric", "unit", "value"}
        assert record["type"] == "NET" and record["unit"] == "ms"
        assert isinstance(record["value"], str) and float(record["value"]) > 0
        metrics.append(record["metric"])
    assert metrics == ["lstm-cudnn"] * 3 + ["lstm-py"] * 3 + ["lstm-backward-cudnn"] * 3 + ["lstm-backward-py"] * 3


def test_json_report_has_environment_and_ms_statistics(tmp_path, capsys):
    out_file = tmp_path / "r.json"
    code, out, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "jit", "--seed", "5", "--output-file", str(out_file))
    assert code == 0, err
    assert out == ""  # nothing on stdout without --print-json
    report = Report.load(out_file)
    assert report.suite == "rnnbench"
    assert report.environment["torch"]["version"] and report.environment["command_line"][0] == "rnnbench"
    assert report.settings["unit"] == "ms" and report.settings["seed"] == 5
    (result,) = report.results
    assert result.status == "ok" and result.spec.name == "jit"
    assert result.spec.params == {"seqLength": 5, "numLayers": 1, "inputSize": 8, "hiddenSize": 8, "miniBatch": 2,
                                  "device": "cpu", "fuser": "te", "executor": "default", "seed": 5, "group": "lstm"}
    m = result.metrics
    assert m["unit"] == "ms" and m["timer"] == "perf_counter" and m["warmup"] == 1
    for phase in ("forward", "backward"):
        assert m[phase]["unit"] == "ms" and m[phase]["n"] == 3 and len(m[phase]["samples_ms"]) == 3
        assert m[phase]["median_ms"] > 0
    assert m["compile_ms"] is None and {"compile_ms", "compile_forward_ms", "compile_backward_ms"} <= set(m["missing"])
    assert not (tmp_path / "r.json.checkpoint.jsonl").exists()  # the report holds everything now
    # never overwritten unless asked
    code, _, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "jit", "--output-file", str(out_file))
    assert code == 2 and "already exists" in err


def test_markdown_report(tmp_path, capsys):
    out_file = tmp_path / "r.md"
    code, _, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "cudnn", "--output-file", str(out_file))
    assert code == 0, err
    text = out_file.read_text()
    assert text.startswith("# rnnbench results") and "## LSTM (lstm)" in text
    assert "| cudnn" in text and "Fwd median (ms)" in text and "- torch:" in text


def test_both_formats_share_a_stem_and_bad_format_is_usage_error(tmp_path, capsys):
    code, _, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "py", "--output-format", "json,md",
                       "--output-file", str(tmp_path / "both.json"))
    assert code == 0, err
    assert Report.load(tmp_path / "both.json").results[0].spec.name == "py"
    assert "| py" in (tmp_path / "both.md").read_text()
    code, _, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "py", "--output-format", "xml")
    assert code == 2 and "-f/--format 'xml' is not json, md, csv" in err


def test_print_json_and_output_format_write_the_reports_to_the_output_file(tmp_path, capsys):
    """Refused without --output-file (test_usage_errors_are_one_line_exit_2); with it both go."""
    code, out, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "py", "--print-json", "--output-format", "json,md",
                         "--output-file", str(tmp_path / "r.json"))
    assert code == 0, err
    assert list(json.loads(out)) == ["lstm", "lstm-backward"]  # stdout: the --print-json line only
    assert Report.load(tmp_path / "r.json").results[0].spec.name == "py"
    assert "| py" in (tmp_path / "r.md").read_text()


def test_report_settings_record_the_resnet_batch(tmp_path, capsys):
    code, _, err = run(capsys, "bench", *TINY, "--nloops", "1", "--warmup", "0", "--device", "cpu", "--no-isolation",
                       "--group", "cnns", "--cnns", "resnet18", "--cnnBatch", "1", "--output-file", str(tmp_path / "r.json"))
    assert code == 0, err
    report = Report.load(tmp_path / "r.json")
    assert report.settings["sizes"] == {"seqLength": 5, "numLayers": 1, "inputSize": 8, "hiddenSize": 8, "miniBatch": 2,
                                        "cnnBatch": 1}
    assert report.results[0].spec.params["miniBatch"] == 1


def test_reported_median_is_milliseconds(capsys):
    """The reported forward median agrees with a bare perf_counter loop over the same forward.

    fastrnns reported CPU seconds labelled ms (off by 1000×); a factor of 4 either way is far
    tighter than that and far looser than any scheduling noise at this size.
    """
    sizes = {"seqLength": 20, "numLayers": 1, "inputSize": 64, "hiddenSize": 64, "miniBatch": 16}
    spec = CaseSpec("rnnbench", "cudnn", cases.case_params(sizes, "cpu", "te", None, 3, "lstm"))
    options = {"settings": RunSettings(warmup=2, runs=15).to_dict()}
    reported = executor.execute(spec, options)["forward"]["median_ms"]
    with executor.prepared(spec) as prep:
        for _ in range(2):
            prep.workload.forward()
        samples = []
        for _ in range(15):
            start = time.perf_counter()
            prep.workload.forward()
            samples.append((time.perf_counter() - start) * 1e3)
    independent = statistics.median(samples)
    assert independent / 4 < reported < independent * 4, (reported, independent)


# ------------------------------------------------------------------------------- failures


def test_failed_runner_is_reported_never_dropped(tmp_path, capsys, monkeypatch):
    from rnnbench import runners

    def broken(**kwargs):
        raise RuntimeError("deliberately broken creator")

    monkeypatch.setitem(runners.RUNNERS, "broken", dataclasses.replace(runners.RUNNERS["py"], name="broken", creator=broken))
    out_file = tmp_path / "r.json"
    code, out, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "cudnn", "broken", "--print-json",
                         "--output-file", str(out_file))
    assert code == 1
    data = json.loads(out)
    assert data["lstm"]["broken"] is None and data["lstm-backward"]["broken"] is None
    assert data["lstm"]["cudnn"] > 0
    assert "FAILED: RuntimeError: deliberately broken creator" in err
    assert "rnnbench: broken failed: RuntimeError: deliberately broken creator" in err
    statuses = {r.spec.name: r.status for r in Report.load(out_file).results}
    assert statuses == {"cudnn": "ok", "broken": "failed"}


def test_isolated_worker_end_to_end(capsys):
    """The default path: cases run in a benchcore worker process."""
    code, out, err = run(capsys, "bench", *TINY, "--nloops", "2", "--warmup", "0", "--device", "cpu",
                         "--group", "rnns", "--rnns", "aten", "--print-json")
    assert code == 0, err
    assert set(json.loads(out)["lstm"]) == {"aten"}


@pytest.mark.parametrize("argv, message", [
    (["--rnns", "nope"], "nope"),
    (["--fuser", "turbo"], "unknown fuser 'turbo'; choose one of te, old, none, default"),
    (["--executor", "fast"], "unknown executor 'fast'"),
    (["--hiddenSize", "0"], "--hiddenSize"),
    (["--seqLength", "-3"], "--seqLength"),
    (["--nloops", "0"], "--nloops"),
    (["--device", "cuda"], "needs CUDA"),
    (["--device", "tpu"], "unknown device 'tpu'"),
    (["--group"], "nothing to run"),
    (["--print-json", "xml"], "invalid choice"),
    (["--output-file", "/proc/x.json"], "not writable"),
    (["--seed", "99999999999999999999999"], "argument --seed: 99999999999999999999999 is outside 0 to 9223372036854775806"),
    (["--seed", "-1"], "argument --seed: -1 is outside"),
    (["--rnns"], "--rnns needs at least one runner name; omit it for the default list (cudnn aten jit"),
    (["--group", "cnns", "--cnns"], "--cnns needs at least one runner name; omit it for the default list (resnet18 "),
    (["--group", "cnns", "--cnns", "cudnn_layernorm"],
     "--cnns takes CNN runners only; cudnn_layernorm is an LSTM runner, which bench runs with --rnns"),
    (["--rnns", "resnet18", "vl_py"], "--rnns takes LSTM runners only; resnet18 is a CNN runner, which "
     "bench runs with --cnns"),
    (["--rnns", "cudnn", "--print-json", "--output-format", "json,md"],
     "--output-format without --output-file prints the report to stdout, which --print-json already uses; "
     "add --output-file PATH, or drop --output-format"),
])
def test_usage_errors_are_one_line_exit_2(capsys, argv, message):
    code, out, err = run(capsys, "bench", *TINY, "--nloops", "1", "--device", "cpu", "--group", "rnns", *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rnnbench: error: ") and message in lines[0], err


def test_a_fuser_this_torch_lacks_is_refused_before_any_case_runs(capsys, monkeypatch):
    """Refused in the parent with exit 2, not as one failed case per runner in the worker."""
    import torch

    monkeypatch.delattr(torch._C, "_jit_set_texpr_fuser_enabled")
    code, out, err = run(capsys, "bench", *TINY, "--nloops", "1", "--device", "cpu", "--group", "rnns",
                         "--rnns", "cudnn", "--fuser", "te")
    assert code == 2 and out == ""
    assert err.strip() == ("rnnbench: error: fuser 'te' needs torch._C._jit_set_texpr_fuser_enabled, "
                           f"which torch {torch.__version__} lacks; use 'default'")


def test_unknown_runner_lists_valid_ones(capsys):
    code, _, err = run(capsys, "bench", "--device", "cpu", "--rnns", "cudnn", "lstm_typo")
    assert code == 2 and "lstm_typo" in err and "cudnn" in err and "jit_premul" in err


def test_execute_skips_cuda_case_without_cuda():
    spec = CaseSpec("rnnbench", "cudnn", cases.case_params(
        {"seqLength": 2, "numLayers": 1, "inputSize": 4, "hiddenSize": 4, "miniBatch": 1}, "cuda", "te", None, 1, "lstm"))
    with pytest.raises(SkipCase, match="no CUDA"):
        executor.execute(spec, {"settings": RunSettings(warmup=0, runs=1).to_dict()})


# ------------------------------------------------------------------------------- specs and rendering


def test_build_specs_follows_fastrnns_group_order():
    from rnnbench.request import RunnerRequest

    args = RunnerRequest(seqLength=5, numLayers=2, inputSize=8, hiddenSize=8, miniBatch=2, device="cpu",
                         fuser="old", executor="simple", seed=1, variable_lstms=True,
                         group=["cnns", "rnns"], rnns=["jit"], cnns=["resnet18"])
    specs = cases.build_specs(args)
    assert [(s.name, s.params["group"]) for s in specs] == [
        ("vl_cudnn", "vl_lstm"), ("vl_jit", "vl_lstm"), ("vl_py", "vl_lstm"), ("jit", "lstm"), ("resnet18", "resnet")]
    assert specs[0].params["numLayers"] == 2 and specs[0].params["fuser"] == "old" and specs[0].params["executor"] == "simple"


def test_a_case_holds_only_the_sizes_its_model_uses():
    """Runs differing only in sizes a model ignores must match in compare, merge and resume."""
    from rnnbench.request import RunnerRequest

    def specs(seq_length):
        args = RunnerRequest(seqLength=seq_length, numLayers=1, inputSize=8, hiddenSize=8, miniBatch=2,
                             cnnBatch=4, device="cpu", fuser="te", executor=None, seed=1, variable_lstms=True,
                             group=["cnns", "rnns"], rnns=["jit", "vl_py"], cnns=["resnet18"])
        return {(s.params["group"], s.name): s for s in cases.build_specs(args)}

    short, long = specs(5), specs(50)
    sizes = lambda spec: {k: v for k, v in spec.params.items() if k in cases.SIZE_DEFAULTS}  # noqa: E731
    assert sizes(short["resnet", "resnet18"]) == {"miniBatch": 4}
    for group in ("vl_lstm", "lstm"):  # a vl_* runner, whichever list named it
        assert sizes(short[group, "vl_py"]) == {"numLayers": 1, "inputSize": 8, "hiddenSize": 8, "miniBatch": 2}
    same = [("resnet", "resnet18"), ("vl_lstm", "vl_jit"), ("lstm", "vl_py")]
    assert all(short[case].key == long[case].key for case in same)
    assert short["lstm", "jit"].key != long["lstm", "jit"].key


def _result(name, group, status="ok", fwd=(1.0, 2.0), bwd=(3.0, 5.0), error=None):
    from benchcore.measure.measurement import Measurement

    metrics = {"forward": Measurement(fwd).to_dict(), "backward": Measurement(bwd).to_dict()} if status == "ok" else {}
    return CaseResult(CaseSpec("rnnbench", name, {"group": group}), status, metrics, error)


def test_rendering_of_groups_and_failures():
    results = [_result("vl_py", "vl_lstm"), _result("cudnn", "lstm"),
               _result("jit", "lstm", status="crashed", error="worker killed by SIGSEGV"), _result("resnet18", "resnet")]
    oss = json.loads(views.oss_json(results))
    assert list(oss) == ["vl_lstm", "vl_lstm-backward", "lstm", "lstm-backward", "resnet", "resnet-backward"]
    assert oss["lstm"] == {"cudnn": 1.5, "jit": None} and oss["lstm-backward"]["cudnn"] == 4.0
    pep = [json.loads(line.split(" ", 1)[1]) for line in views.pep_lines(results)]
    assert [p["metric"] for p in pep[:4]] == ["vl_lstm-vl_py"] * 2 + ["vl_lstm-backward-vl_py"] * 2
    assert {p["metric"] for p in pep} >= {"lstm-cudnn", "lstm-backward-cudnn", "resnet-backward-resnet18"}
    assert not any("jit" in p["metric"] for p in pep)
    assert [p["value"] for p in pep[:2]] == ["1.0", "2.0"]
    table = views.console_table(results, sep="|")
    assert "Benchmarking ResNets..." in table and "CRASHED: worker killed by SIGSEGV" in table
    assert "|" + "1.5".rjust(16) + "|" in table


# ------------------------------------------------------------------ CUDA device choice (faked)


def _fake_cuda(monkeypatch, count: int) -> list:
    """torch.cuda reporting `count` devices; torch.cuda.device records what it is entered with.

    A fake of what this machine lacks (CUDA), so only the choice of device is checked here.
    """
    import contextlib

    import torch

    entered = []

    @contextlib.contextmanager
    def fake_device(device):
        entered.append(("enter", device))
        yield
        entered.append(("exit", device))

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "device", fake_device)
    return entered


@pytest.mark.parametrize("device, message", [
    ("cuda:2", "--device cuda:2: torch sees 2 CUDA device(s); use cuda:0 to cuda:1"),
    ("cuda:x", "--device cuda:x: torch sees 2 CUDA device(s)"),
])
def test_a_cuda_index_torch_does_not_see_is_a_usage_error(monkeypatch, device, message):
    from benchcore.errors import UsageError

    _fake_cuda(monkeypatch, 2)
    cases.check_device("cuda:1")
    cases.check_device("cuda")
    with pytest.raises(UsageError) as info:
        cases.check_device(device)
    assert str(info.value).startswith(message)


def test_the_case_device_is_current_while_a_runner_builds_and_runs(monkeypatch):
    """Sync and CUDA events act on the current device: cuda:1 must be current, then restored."""
    import torch

    entered = _fake_cuda(monkeypatch, 2)
    spec = CaseSpec(cases.SUITE, "cudnn", {"device": "cuda:1", "fuser": "default"})
    with executor.runner_contexts(spec):
        assert entered == [("enter", torch.device("cuda:1"))]
    assert entered[-1] == ("exit", torch.device("cuda:1"))
    with executor.runner_contexts(CaseSpec(cases.SUITE, "cudnn", {"device": "cpu", "fuser": "default"})):
        pass
    assert len(entered) == 2


def test_the_report_describes_the_gpu_that_was_benchmarked(monkeypatch):
    import argparse
    import contextlib
    import types

    import torch

    from rnnbench.sweep import bench_environment

    current = [0]

    @contextlib.contextmanager
    def fake_device(device):
        saved, current[0] = current[0], device.index
        yield
        current[0] = saved

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "device", fake_device)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: types.SimpleNamespace(name=f"GPU{i}", major=9, minor=0, total_memory=1))
    args = argparse.Namespace(device="cuda:1", threads=None, seed=None, flush_denormal=False)
    env = bench_environment(args, args.device, ["bench", "--device", "cuda:1"])
    assert env["torch"]["gpu"]["index"] == 1 and env["torch"]["gpu"]["name"] == "GPU1"
    assert env["timer"] == "cuda_event" and current[0] == 0


def test_one_variable_length_runner_can_be_chosen_with_rnns(capsys):
    code, out, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "vl_jit", "--print-json")
    assert code == 0, err
    assert list(json.loads(out)["lstm"]) == ["vl_jit"]


def test_markdown_shows_runs_and_marks_an_adaptive_run_that_was_capped(tmp_path, capsys):
    out_file = tmp_path / "r.md"
    code, _, err = run(capsys, "bench", *TINY, "--device", "cpu", "--group", "rnns", "--no-isolation", "--warmup", "0",
                       "--rnns", "cudnn", "--target-precision", "0.0001%", "--max-time", "1",
                       "--output-file", str(out_file))
    assert code == 0, err
    [row] = [line for line in out_file.read_text().splitlines() if line.startswith("| cudnn")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[-2]) >= 5  # Runs: adaptive mode's own count, not --nloops
    assert cells[-1] == "ok, capped: --max-time ran out before --target-precision was reached"


@pytest.mark.parametrize("argv, groups", [
    (["--rnns", "cudnn"], ["lstm"]),
    (["--cnns", "resnet18"], ["resnet"]),
    (["--rnns", "cudnn", "--cnns", "resnet18"], ["lstm", "resnet"]),
    ([], ["lstm", "resnet"]),
    (["--rnns", "cudnn", "--group", "cnns", "rnns"], ["lstm", "resnet"]),
])
def test_naming_one_list_runs_that_group_only(argv, groups):
    """`--rnns cudnn jit` must not also run four ResNets for minutes (fastrnns did)."""
    from rnnbench.cli import build_parser

    args = build_parser().parse_args(["bench", *argv])
    assert [spec.params["group"] for spec in cases.build_specs(args)][-1:] == groups[-1:]
    assert sorted({spec.params["group"] for spec in cases.build_specs(args)}) == sorted(groups)


def test_runner_lists_take_commas_and_typos_get_a_suggestion(capsys):
    code, out, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "cudnn,py", "--print-json")
    assert code == 0, err
    assert list(json.loads(out)["lstm"]) == ["cudnn", "py"]
    code, _, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "jitt")
    assert code == 2 and "unknown runner 'jitt'; did you mean jit" in err


def test_output_format_has_opbench_short_flag(tmp_path, capsys):
    code, _, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "py", "-f", "md", "-o", str(tmp_path / "r.md"))
    assert code == 0, err
    assert (tmp_path / "r.md").read_text().startswith("# rnnbench results")


def test_bench_without_output_writes_the_json_report_to_stdout(capsys):
    """As --help says: the report goes to stdout; the console table to stderr."""
    code, out, err = run(capsys, "bench", *TINY, *FAST, "--rnns", "py")
    assert code == 0, err
    report = json.loads(out)
    assert report["schema"] == "benchcore-report" and report["results"][0]["spec"]["name"] == "py"
    assert report["results"][0]["metrics"]["headline"]["forward"]["figure"] == "call_ms"


def test_markdown_has_a_settings_table_and_says_what_the_count_is(tmp_path, capsys):
    code, _, err = run(capsys, "bench", *TINY, "--nloops", "4", "--warmup", "1", "--device", "cpu", "--group", "rnns",
                       "--no-isolation", "--rounds", "3", "--rnns", "py", "-o", str(tmp_path / "r.md"))
    assert code == 0, err
    md = (tmp_path / "r.md").read_text()
    assert "## Settings" in md and "| rounds.runs_per_round" in md and "settings: {" not in md
    assert "so the count is N" in md
    header = [c.strip() for c in next(line for line in md.splitlines() if line.startswith("| Runner")).split("|")]
    row = [c.strip() for c in next(line for line in md.splitlines() if line.startswith("| py")).split("|")]
    assert row[header.index("Timed calls")] == "4"  # 4 runs over 3 rounds: 2, 1, 1
