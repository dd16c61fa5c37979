"""rnnbench bench with --rounds: the report and its Markdown show the median of round medians."""

from benchcore.report.model import Report
from rnnbench.cli import main

TINY = ["--seqLength", "3", "--numLayers", "1", "--inputSize", "4", "--hiddenSize", "4", "--miniBatch", "2",
        "--nloops", "4", "--warmup", "1", "--device", "cpu", "--rnns", "cudnn", "py"]


def test_rounds_reach_the_report_and_its_markdown(tmp_path, capsys):
    code = main(["bench", *TINY, "--rounds", "2", "-f", "json,md", "-o", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "rnnbench: trust: 2 rounds, round medians " in err  # how far the figures go, on stderr too
    report = Report.load(tmp_path / "r.json")
    assert report.settings["rounds"]["rounds"] == 2 and report.settings["rounds"]["runs_per_round"] == [2, 2]
    md = (tmp_path / "r.md").read_text()
    assert "Fwd round spread" in md and "median of the rounds' medians" in md
    for result in report.results:
        forward = result.metrics["forward"]
        assert forward["rounds"]["sizes"] == [2, 2]
        row = next(line for line in md.splitlines() if line.startswith(f"| {result.spec.name} "))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert float(cells[3]) == float(f"{forward['rounds']['median_ms']:.4g}")  # the rounds' figure
