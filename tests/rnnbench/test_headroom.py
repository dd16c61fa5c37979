"""rnnbench's runners read against the machine's roofs: a tiny bench of LSTM runners records
the torch roofs, each phase's efficiency from rnnbench.work and its median, and its Markdown
ends with the headroom lines and the roofline chart beside it."""

import json
import re

import jsonschema
import pytest

from benchcore import schemas
from benchcore.report.model import Report
from rnnbench import work
from rnnbench.cli import main as rnnbench

BENCH = ["bench", "--seqLength", "3", "--numLayers", "1", "--inputSize", "4", "--hiddenSize", "4", "--miniBatch", "2",
         "--group", "rnns", "--rnns", "aten,jit", "--nloops", "2", "-w", "1", "--rounds", "1", "--device", "cpu",
         "--no-isolation", "--no-audit", "--threads", "1"]


def test_lstm_runners_carry_efficiency_and_the_headroom_answer(tmp_path):
    assert rnnbench([*BENCH, "--output-format", "json,md", "--output-file", str(tmp_path / "rnn.json")]) == 0
    data = json.loads((tmp_path / "rnn.json").read_text())
    jsonschema.validate(data, schemas.load("report"))
    assert data["extra"]["roofs"]["torch"]["source"] in ("cached", "taken")
    report = Report.from_dict(data)
    for result in report.results:
        works = work.work(result.spec)
        assert set(result.metrics["efficiency"]) == {"forward", "backward"}
        for phase, e in result.metrics["efficiency"].items():
            assert (e["bytes"], e["flops"]) == (works[phase].bytes, works[phase].flops) and e["flops"]
            assert e["gflop_per_s"] * 1e6 * e["median_ms"] == pytest.approx(e["flops"])
    text = (tmp_path / "rnn.md").read_text()
    lines = re.findall(r"^\d+\. `(\w+)` (\w+): .*? ms, ([\d.e+-]+) ms to win", text, re.M)
    assert len(lines) == 4 and [float(x) for *_, x in lines] == sorted((float(x) for *_, x in lines), reverse=True)
    assert "![roofline](rnn.roofline.png)" in text and (tmp_path / "rnn.roofline.png").exists()
    assert "% of Roof (fwd / bwd)" in text
