"""The Markdown report people read: grouped by category (as selected), both phases' spreads, a
noise marker, a settings table, readable inputs."""

from benchcore.report.model import Report
from opbench.backends.mxnet.markdown import to_markdown
from opbench.cli import main


def test_markdown_groups_by_the_selected_category_with_readable_inputs(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["--category", "unary", "--ops", "ceil,relu", "--tiny", "-w", "1", "-r", "4", "--rounds", "2",
                 "--no-isolation", "--no-audit", "-o", str(out)]) == 0
    report = Report.load(out)
    assert {r.spec.params["category"] for r in report.results} == {"rounding", "unary"}  # keys keep the home
    assert report.extra["reported_category"] == {"ceil": "unary"}
    md = to_markdown(report)
    sections = [line for line in md.splitlines() if line.startswith("## ")]
    assert sections[:3] == ["## How far to trust these figures", f"## unary ({len(report.results)})",
                            "## Settings"]  # ceil is filed where the user asked
    assert "| Setting" in md and "| rounds.runs_per_round" in md and "| 2 " in md
    header = next(line for line in md.splitlines() if line.startswith("| Operator"))
    assert "Noise" in header and "Fwd Round Spread" in header and "Bwd Round Spread" in header
    relu = next(line for line in md.splitlines() if line.startswith("| relu"))
    assert "data (" in relu and '"' not in relu  # `data (4, 6)`, not a JSON string
    capsys.readouterr()


def test_the_noise_marker_names_the_noisy_phases():
    from benchcore.measure.measurement import Measurement
    from opbench.markdown import _noise

    steady, noisy = Measurement([1.0, 1.0, 1.01, 1.0]), Measurement([1.0, 2.0, 1.0, 3.0])
    assert _noise((("fwd", steady), ("bwd", noisy))) == "noisy bwd"
    assert _noise((("fwd", noisy), ("bwd", noisy))) == "noisy fwd+bwd"
    assert _noise((("fwd", steady), ("bwd", None))) == ""
