"""The headroom view on a planted report (no framework needed): the most time to win first,
one line each and at most TOP_N; a phase above 110% of its roof named; the table cells; the
roofline PNG drawn from the recorded roofs and named in extra.roofline_chart."""

from benchcore.measure.case import CaseSpec
from benchcore.measure.work import Work
from benchcore.report.efficiency import of_phase
from benchcore.report.model import CaseResult, Report
from benchcore.suite import Suite
from benchcore.views import headroom
from tests.benchcore.test_efficiency import ROOFS

SUITE = Suite("opbench", category=lambda result: result.spec.params["category"])


def result(name: str, median_ms: float, flops: int, category: str = "gemm") -> CaseResult:
    e = of_phase(Work("forward", 4096, flops), median_ms, "float32", ROOFS)
    return CaseResult(CaseSpec("opbench", name, {"op": name, "category": category}), "ok",
                      metrics={headroom.METRIC: {"forward": e.to_dict()}})


def report(results) -> Report:
    block = {"source": "cached", "obtain_s": 0.01, "note": None, "reason": None, "roofs": ROOFS.to_dict()}
    return Report(suite="opbench", results=results, extra={headroom.ROOFS: {"torch": block}})


def test_the_most_time_to_win_comes_first_and_a_phase_above_its_roof_is_named():
    cases = [result(f"op{i}", 1.0 + i, 10_000) for i in range(12)] + [result("fast", 1e-6, 20_000_000, "unary")]
    text = "\n".join(headroom.markdown(report(cases), SUITE))
    lines = [line for line in text.splitlines() if line[:1].isdigit()]
    assert len(lines) == headroom.TOP_N and lines[0].startswith("1. `op11` forward: 12 ms")
    assert [line.split("`")[1] for line in lines] == [f"op{i}" for i in range(11, 1, -1)]
    assert "Above 110% of the roof" in text and "`fast` forward" in text
    assert headroom.cells(cases[0]) == ["0.0041", "0.01", "0.005%"]  # 4096 B, 1e4 FLOP in 1 ms; 5e-5 ms at the peak


def test_the_roofline_is_drawn_beside_the_markdown_and_named(tmp_path):
    cases = [result("mm", 0.5, 1_000_000), result("add", 0.1, 1024, "binary")]
    extra = report(cases).extra
    headroom.chart_beside("opbench", cases, extra, SUITE, tmp_path / "r.md")
    assert extra[headroom.CHART] == {"path": "r.roofline.png", "reason": None}
    assert (tmp_path / "r.roofline.png").read_bytes()[:4] == b"\x89PNG"
    assert "![roofline](r.roofline.png)" in headroom.markdown(Report(suite="opbench", results=cases, extra=extra), SUITE)


def test_roofs_of_another_probe_version_say_so_not_that_none_were_taken():
    old = dict(ROOFS.to_dict(), version=2)
    block = {"source": "cached", "obtain_s": 0.01, "note": None, "reason": None, "roofs": old}
    line = headroom.roofs_line("torch", block)
    assert "version 2" in line and "not taken" not in line
    assert "not taken" in headroom.roofs_line("torch", dict(block, roofs=None))


def test_a_counted_sweep_takes_no_roofs():
    from frameworks import roofs

    block = roofs.for_sweep("retake", "torch", {}, None, counted=True)
    assert block == {"source": "off", "obtain_s": 0.0, "note": None, "roofs": None,
                     "reason": "a counted sweep times nothing to read against roofs"}


def test_a_phase_whose_work_cannot_be_read_says_so_and_the_others_keep_theirs():
    from benchcore.report.efficiency import Efficiency

    cases = [CaseResult(CaseSpec("opbench", name, {"op": name, "category": "gemm"}), "ok",
                        metrics={"forward": {"samples_ms": [1.0, 1.0, 1.0]}}) for name in ("odd", "mm")]
    block = report([]).extra[headroom.ROOFS]["torch"]
    works = {"odd": Work("forward", 4096, "not a number"), "mm": Work("forward", 4096, 10_000)}
    headroom.annotate(cases, lambda r: {"forward": works[r.spec.name]}, "float32", block, SUITE)
    odd, mm = (Efficiency.from_dict(r.metrics[headroom.METRIC]["forward"]) for r in cases)
    assert odd.percent_of_roof is None and odd.reason.startswith("work unreadable: TypeError")
    assert mm.percent_of_roof is not None and mm.reason is None
