"""rnnbench.api: the report `rnnbench bench` writes, with each runner's headline figures."""

from rnnbench import api

SIZES = {"seqLength": 3, "numLayers": 1, "inputSize": 4, "hiddenSize": 4, "miniBatch": 2}


def test_measure_returns_the_cli_report_with_headline_figures(capsys):
    report = api.measure(["py"], sizes=SIZES, warmup=1, nloops=4, rounds=2, device="cpu", isolate=False)
    assert report.suite == "rnnbench" and [r.spec.name for r in report.results] == ["py"]
    assert report.results[0].ok and report.settings["sizes"]["hiddenSize"] == 4
    forward = api.headlines(report.results[0])["forward"]
    assert forward.figure == "call_ms" and forward.unit == "ms" and forward.median_ms > 0
    capsys.readouterr()
