"""opbench with --rounds: every case timed in each round's fresh workers, and the report and its
Markdown keep the rounds apart."""

import subprocess
import sys
from pathlib import Path

import mxnet  # noqa: F401  (the sweep below needs it; a broken install must fail, not skip)

from benchcore.measure.measurement import round_sizes_of
from benchcore.report.model import Report
from opbench.backends.mxnet.markdown import to_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_rounds_reach_the_report_and_its_markdown(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "opbench", "--ops", "round", "--tiny", "-w", "3", "-r", "5",
                           "--rounds", "2", "--seed", "5", "-f", "json,md", "-o", "r.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = Report.load(tmp_path / "r.json")
    assert report.settings["rounds"] == {"rounds": 2, "order_seed": 5, "runs_per_round": [3, 2], "warmup_per_round": 3}
    # how far the figures go, said on stderr too (a JSON-only user reads no Markdown)
    assert "\nopbench: trust: 2 rounds, round medians " in proc.stderr
    for result in report.results:
        assert [r["round"] for r in result.rounds] == [1, 2] and all(r["status"] == "ok" for r in result.rounds)
        assert round_sizes_of(result.metrics["profiler"]["forward"]) == [3, 2]  # the 5 runs asked, split
        assert result.metrics["forward"]["rounds"]["count"] == 2
        # each round's worker says how long its threads waited for a CPU (a bimodal case's cause)
        contention = result.metrics["contention"]
        assert len(contention) == 2 and all(0 <= r["cpu_wait_share"] <= 1 for r in contention)
        # a tiny case may end within one clock tick of /proc/stat: then others' use is unknown, and says why
        assert all(r["others_cpus"] >= 0 if r["others_cpus"] is not None else "tick" in r["reason"] for r in contention)
    reference = report.environment["system"]["reference"]
    assert reference["status"] == "ok" and reference["compute"]["rounds"]["count"] == 2
    md = (tmp_path / "r.md").read_text()
    assert md == to_markdown(report) + "\n"
    assert "2 rounds, each in fresh worker processes and a shuffled case order (seed 5), with 3, 2 runs and 3 warmup each" in md
    header = [c.strip() for c in next(line for line in md.splitlines() if line.startswith("| Operator")).split("|")]
    rows = [[c.strip() for c in line.split("|")] for line in md.splitlines() if line.startswith("| round ")]
    spread = header.index("Fwd Round Spread")
    assert rows and all(row[spread].endswith("%") for row in rows) and "Bwd Round Spread" in header
