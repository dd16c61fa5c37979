"""Charts: PNG files written, non-empty, for both suites and for a comparison; the missing
matplotlib message; Markdown links."""

import builtins

import pytest

from benchcore.compare.verdicts import compare
from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec
from benchcore.measure.measurement import Measurement
from benchcore.report.model import CaseResult
from benchcore.views import charts
from opbench.backends.mxnet.suite import SUITE as OPBENCH
from rnnbench.suite import SUITE as RNNBENCH
from tests.benchcore.test_compare import make_report, op_result, opperf_result, samples

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 1000


def opbench_report(scale=1.0):
    results = []
    for i, (cat, names) in enumerate({"unary": ["exp", "log", "sin"], "gemm": ["dot", "batch_dot"],
                                      "reduction": ["sum"]}.items()):
        for j, name in enumerate(names):
            bwd = samples(2.0 * (j + 1) * scale, n=10, seed=i + j + 50) if j % 2 == 0 else None
            results.append(op_result(name, samples((i + 1) * (j + 1) * scale, n=10, seed=i * 10 + j), bwd, category=cat))
    results.append(opperf_result("cos", 0.5))  # no samples: still charted
    results.append(CaseResult(CaseSpec("opbench", "bad", {"op": "bad"}), "failed", {}, error="boom"))
    return make_report(results)


def rnn_report(scale=1.0):
    results = []
    for i, name in enumerate(["cudnn", "aten", "jit", "py"]):
        metrics = {"forward": Measurement(samples((i + 1) * scale, n=10, noise=0.05, seed=i)).to_dict(),
                   "backward": Measurement(samples(2 * (i + 1) * scale, n=10, noise=0.05, seed=i + 9)).to_dict()}
        results.append(CaseResult(CaseSpec("rnnbench", name, {"seqLength": 5, "device": "cpu"}), "ok", metrics))
    return make_report(results, suite="rnnbench")


def test_opbench_charts(tmp_path):
    paths = charts.write_report_charts(opbench_report(), tmp_path / "charts", OPBENCH)
    assert [p.name for p in paths] == ["opbench_slowest.png", "opbench_categories.png"]
    for path in paths:
        assert_png(path)


def test_rnnbench_charts(tmp_path):
    paths = charts.write_report_charts(rnn_report(), tmp_path, RNNBENCH)
    assert [p.name for p in paths] == ["rnnbench_runners.png"]
    assert_png(paths[0])


def test_report_without_measured_cases_writes_nothing(tmp_path):
    assert charts.write_report_charts(make_report([]), tmp_path) == []


def test_comparison_chart(tmp_path):
    result = compare(opbench_report(), opbench_report(1.3), OPBENCH)
    path = charts.write_comparison_chart(result, tmp_path)
    assert path.name == "opbench_comparison.png"
    assert_png(path)


def test_comparison_chart_with_noisy_and_many_cases(tmp_path, monkeypatch):
    monkeypatch.setattr(charts, "MAX_COMPARISON_CASES", 4)
    base = make_report([op_result(f"op{i}", [1.0, 1.1]) for i in range(6)])
    new = make_report([op_result(f"op{i}", [1.0 + i / 10, 1.2]) for i in range(6)])
    result = compare(base, new, OPBENCH)
    assert {c.verdict for c in result.cases} == {"undecided"}
    assert_png(charts.write_comparison_chart(result, tmp_path))


def test_missing_matplotlib_names_the_extra(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(UsageError, match=r"pip install -e \.\[plot\]"):
        charts.write_report_charts(rnn_report(), tmp_path, RNNBENCH)


def test_unwritable_folder_is_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="cannot create chart folder"):
        charts.write_report_charts(rnn_report(), blocker / "charts")


def test_chart_links_are_relative(tmp_path):
    folder = tmp_path / "charts"
    folder.mkdir()
    links = charts.chart_links_markdown([folder / "a.png", folder / "b.png"], relative_to=tmp_path)
    assert "![a](charts/a.png)" in links and "![b](charts/b.png)" in links
    assert links.startswith("## Charts")
    assert charts.chart_links_markdown([], tmp_path) == ""
