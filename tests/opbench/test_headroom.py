"""Issue 35's achieved-against-attainable figures and the headroom answer on real tiny sweeps
(torch and MXNet on CPU, in-process, toy-sized roofs from tests/conftest.py): the JSON's roofs
block and per-phase efficiency agree with the cases' Work and times, every view carries them,
the headroom lines are sorted by time to win, the roofline PNG is written and linked, compare
and crossframe show efficiency, and a corrupt roof cache is taken again and said once."""

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from benchcore import schemas
from benchcore.measure import work as W
from benchcore.report.model import Report
from frameworks import roofs as F
from opbench.backends.torch import work as torch_work
from opbench.cli import main as opbench

TORCH = ["--framework", "torch", "--ops", "add,mm,sort", "--tiny", "-w", "1", "-r", "2", "--rounds", "1",
         "--no-isolation", "--no-audit", "--threads", "1"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """A torch sweep as json, md and csv; the same with --roofs off; and their comparison."""
    folder = tmp_path_factory.mktemp("headroom")
    assert opbench([*TORCH, "-f", "json,md,csv", "-o", str(folder / "op.json")]) == 0
    assert opbench([*TORCH, "--roofs", "off", "-f", "json", "-o", str(folder / "off.json")]) == 0
    for fmt in ("json", "md"):
        assert opbench(["compare", str(folder / "op.json"), str(folder / "off.json"), "-f", fmt,
                        "-o", str(folder / f"cmp.{fmt}")]) in (0, 1)
    return folder


def test_the_report_records_the_roofs_and_each_phase_agrees_with_its_work_and_time(sweeps):
    data = json.loads((sweeps / "op.json").read_text())
    jsonschema.validate(data, schemas.load("report"))
    block = data["extra"]["roofs"]["torch"]
    assert block["source"] in ("cached", "taken") and block["roofs"]["framework"] == "torch" and block["reason"] is None
    assert "bandwidth: the best of torch add_ (threads 1) and numpy add.reduce (threads 1)" in block["roofs"]["notes"][-2]
    report = Report.from_dict(data)
    options = {"manifest": report.settings["manifest"]["path"], "manifest_sha256": report.settings["manifest"]["sha256"]}
    checked = 0
    for result in report.results:
        works = torch_work.work(result.spec, options)
        for phase, e in result.metrics["efficiency"].items():
            assert e["median_ms"] == result.metrics["headline"][phase]["median_ms"]
            assert (e["bytes"], e["flops"]) == (works[phase].bytes, works[phase].flops)
            assert e["gb_per_s"] * 1e9 * e["median_ms"] / 1e3 == pytest.approx(e["bytes"])
            if e["flops"] is not None:
                assert e["gflop_per_s"] * 1e9 * e["median_ms"] / 1e3 == pytest.approx(e["flops"])
            assert e["percent_of_roof"] == pytest.approx(100 * e["roof_ms"] / e["median_ms"])
            checked += 1
    assert checked == 6
    sort = next(r for r in report.results if r.spec.name == "sort").metrics["efficiency"]["backward"]
    assert sort["gflop_per_s"] == 0 and sort["reason"] == W.SORT_BACKWARD and sort["bound"] == "memory"


def test_with_the_probes_off_the_rates_stay_and_the_roof_is_null_with_the_reason(sweeps):
    data = json.loads((sweeps / "off.json").read_text())
    jsonschema.validate(data, schemas.load("report"))
    assert data["extra"]["roofs"]["torch"]["source"] == "off"
    phases = [e for r in data["results"] for e in r["metrics"]["efficiency"].values()]
    assert phases and all(e["gb_per_s"] and e["percent_of_roof"] is None for e in phases)
    assert all("roof probes off (--roofs off)" in e["reason"] for e in phases)
    assert not (sweeps / "off.roofline.png").exists()


def test_the_markdown_ends_with_the_headroom_lines_sorted_by_time_to_win_and_links_the_chart(sweeps):
    text = (sweeps / "op.md").read_text()
    section = text[text.index("## Headroom"):]
    assert text.rstrip().endswith("![roofline](op.roofline.png)")
    assert (sweeps / "op.roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    to_win = [float(m) for m in re.findall(r"^\d+\. .*?: [\d.e+-]+ ms, ([\d.e+-]+) ms to win", section, re.M)]
    report = Report.load(sweeps / "op.json")
    stored = [e["to_win_ms"] for r in report.results for e in r.metrics["efficiency"].values()]
    assert len(to_win) == 6 and to_win == sorted(to_win, reverse=True)
    assert to_win == pytest.approx(sorted(stored, reverse=True), rel=1e-3)
    assert "% of Roof (fwd / bwd)" in text and "- torch: " in section
    assert "(cache levels from sysfs: " in section  # a toy curve stops inside the caches: nothing cut


def test_the_csv_rows_carry_the_efficiency(sweeps):
    rows = list(csv.DictReader((sweeps / "op.csv").open()))
    report = Report.load(sweeps / "op.json")
    by_key = {r.spec.key: r for r in report.results}
    for row in rows:
        e = by_key[row["key"]].metrics["efficiency"][row["phase"]]
        assert float(row["percent_of_roof"]) == pytest.approx(e["percent_of_roof"])
        assert int(row["bytes"]) == e["bytes"] and row["efficiency_reason"] == (e["reason"] or "")


def test_compare_shows_each_case_phases_efficiency_before_and_after(sweeps):
    data = json.loads((sweeps / "cmp.json").read_text())
    jsonschema.validate(data, schemas.load("comparison"))
    rows = data["efficiency"]
    assert len(rows) == 6
    assert all(r["base_percent_of_roof"] is not None and r["new_percent_of_roof"] is None for r in rows)
    assert all("roof probes off (--roofs off)" in r["reason"].partition("new: ")[2] for r in rows)
    text = (sweeps / "cmp.md").read_text()
    assert "## Efficiency" in text and "| Base % of roof" in text.replace("|   ", "| ")


def test_a_corrupt_roof_cache_is_taken_again_and_said_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPBENCH_CACHE", str(tmp_path / "cache"))
    args = ["--ops", "relu", "--tiny", "-w", "1", "-r", "2", "--rounds", "1", "--no-isolation", "--no-audit",
            "--threads", "1", "-f", "json,md"]
    assert opbench([*args, "-o", str(tmp_path / "first.json")]) == 0
    assert json.loads((tmp_path / "first.json").read_text())["extra"]["roofs"]["mxnet"]["source"] == "taken"
    [cached] = (tmp_path / "cache").glob("roofs-mxnet-*.json")
    cached.write_text("{not json")
    capsys.readouterr()
    assert opbench([*args, "-o", str(tmp_path / "second.json")]) == 0
    err = capsys.readouterr().err
    assert err.count("are corrupt: taken again") == 1 and "opbench: warning: roofs (mxnet): the cached roofs" in err
    block = json.loads((tmp_path / "second.json").read_text())["extra"]["roofs"]["mxnet"]
    assert block["source"] == "taken" and block["note"] == f"the cached roofs {cached} are corrupt: taken again"
    assert (tmp_path / "second.md").read_text().count("are corrupt: taken again") == 1
    assert opbench([*args, "-o", str(tmp_path / "third.json")]) == 0
    assert "roofs" not in capsys.readouterr().err
    block = json.loads((tmp_path / "third.json").read_text())["extra"]["roofs"]["mxnet"]
    assert block["source"] == "cached" and block["note"] is None
    assert block["roofs"]["fingerprint"] == json.loads(cached.read_text())["body"]["fingerprint"]


def test_the_roofs_flag_is_refused_with_a_bad_value_and_documented_in_help():
    done = subprocess.run([sys.executable, "-m", "opbench", "--roofs", "sometimes"], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 2 and "--roofs: invalid choice: 'sometimes'" in done.stderr
    assert "Traceback" not in done.stderr
    assert F.MODES == ("cached", "retake", "off")


def test_crossframe_shows_mxnet_and_pytorch_efficiency_side_by_side(tmp_path):
    done = subprocess.run([sys.executable, "-m", "opbench", "crossframe", "--ops", "broadcast_add,dot", "--tiny", "-w",
                           "1", "-r", "2", "--rounds", "1", "--threads", "1", "-f", "json,md", "-o",
                           str(tmp_path / "cf.json")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "cf.json").read_text())
    assert set(data["extra"]["roofs"]) == {"mxnet", "torch"}
    rows = data["extra"]["crossframe"]["rows"]
    paired = [row["forward"] for row in rows if row["forward"]["torch_ms"] is not None]
    assert paired and all(f["mxnet_percent_of_roof"] is not None and f["torch_percent_of_roof"] is not None
                          for f in paired)
    unpaired = [row["forward"] for row in rows if row["forward"]["torch_ms"] is None]
    assert all(f["torch_percent_of_roof"] is None for f in unpaired)
    text = (tmp_path / "cf.md").read_text()
    assert "MXNet % of roof" in text and "PyTorch % of roof" in text and "![roofline](cf.roofline.png)" in text
    assert (tmp_path / "cf.roofline.png").exists()


def test_the_coverage_script_lists_phases_above_their_roof_and_the_roofs_cost(sweeps, tmp_path):
    data = json.loads((sweeps / "op.json").read_text())
    planted = data["results"][0]["metrics"]["efficiency"]["forward"]
    planted["percent_of_roof"] = 500.0  # what a wrong formula or roof would show
    (tmp_path / "planted.json").write_text(json.dumps(data))
    script = [sys.executable, str(ROOT / "scripts" / "work_coverage"), "--suites", "none", "--reports"]
    done = subprocess.run([*script, str(tmp_path / "planted.json"), str(sweeps / "off.json")], capture_output=True,
                          text=True)
    assert done.returncode == 1, done.stderr
    name = data["results"][0]["spec"]["name"]
    assert "above 110% of the roof: 1 (target 0)" in done.stdout and f"  {name}  forward: 500% (" in done.stdout
    assert re.search(r"roofs torch: (cached|taken), [\d.]+ s = [\d.]+% of the sweep's \d+ s wall", done.stdout)
    assert re.search(r"^ +\d phases without a roof: roof probes off \(--roofs off\)$", done.stdout, re.M)
    bad = subprocess.run([*script, str(tmp_path / "absent.json")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "does not exist" in bad.stderr
    # --rework: the phase's work computed again from its recorded median, so the planted figure is gone
    again = subprocess.run([*script[:-1], "--rework", "--reports", str(tmp_path / "planted.json")],
                           capture_output=True, text=True)
    assert "efficiencies computed again with this version's work formulas" in again.stdout, again.stderr
    assert "above 110% of the roof: 0 (target 0)" in again.stdout


def test_a_dtype_without_a_measured_peak_has_rates_but_no_roof_with_the_reason(tmp_path):
    assert opbench(["--ops", "relu", "--dtype", "float16", "--tiny", "-w", "1", "-r", "2", "--rounds", "1",
                    "--no-isolation", "--no-audit", "--threads", "1", "-o", str(tmp_path / "f16.json")]) == 0
    phases = [e for r in Report.load(tmp_path / "f16.json").results for e in r.metrics["efficiency"].values()]
    assert phases and all(e["gb_per_s"] and e["gflop_per_s"] is not None and e["percent_of_roof"] is None
                          and e["to_win_ms"] is None for e in phases)
    assert {e["reason"] for e in phases} == {F.NOT_MEASURED["float16"]}
