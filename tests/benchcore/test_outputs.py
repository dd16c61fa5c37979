"""What the tools write, read back as a user's tools read it: the JSON against its JSON Schema
(benchcore/schemas), the CSV through pandas, benchcore.views.rows.load_rows; real reports of both
suites (tiny sizes, in-process) and a real comparison."""

import json

import jsonschema
import pandas
import pytest

from benchcore import schemas
from benchcore.views.rows import COMPARISON_COLUMNS, REPORT_COLUMNS, load_rows
from opbench.cli import main as opbench
from rnnbench.cli import main as rnnbench

OPBENCH = ["--ops", "relu,broadcast_add", "--tiny", "-w", "1", "-r", "4", "--rounds", "2", "--no-isolation",
           "--no-audit"]
RNNBENCH = ["bench", "--seqLength", "3", "--numLayers", "1", "--inputSize", "4", "--hiddenSize", "4",
            "--miniBatch", "2", "--group", "rnns", "--rnns", "cudnn", "--nloops", "4", "-w", "1", "--rounds", "2",
            "--device", "cpu", "--no-isolation", "--no-audit"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """{name: path}: an opbench sweep written as json,md,csv, a second one, an rnnbench bench
    as json and csv, and their comparisons."""
    folder = tmp_path_factory.mktemp("outputs")
    assert opbench([*OPBENCH, "-f", "json,md,csv", "-o", str(folder / "op.json")]) == 0
    assert opbench([*OPBENCH, "-o", str(folder / "op2.json")]) == 0
    assert rnnbench([*RNNBENCH, "-f", "json,csv", "-o", str(folder / "rnn.json")]) == 0
    assert opbench(["compare", str(folder / "op.json"), str(folder / "op2.json"), "-f", "json",
                    "-o", str(folder / "cmp.json")]) == 0
    assert opbench(["compare", str(folder / "op.json"), str(folder / "op2.json"), "-f", "csv",
                    "-o", str(folder / "cmp.csv")]) == 0
    return {p.stem + p.suffix: p for p in folder.iterdir()}


@pytest.mark.parametrize("name", ["op.json", "rnn.json"])
def test_reports_of_both_suites_validate_against_the_report_schema(reports, name):
    data = json.loads(reports[name].read_text())
    jsonschema.validate(data, schemas.load("report"))
    ok = [r for r in data["results"] if r["status"] == "ok"]
    assert ok and all(set(r["metrics"]["headline"]) == {"forward", "backward"} for r in ok)


def test_a_comparison_validates_against_the_comparison_schema(reports):
    data = json.loads(reports["cmp.json"].read_text())
    jsonschema.validate(data, schemas.load("comparison"))
    assert data["answer"]["verdict"].startswith("Verdict: ")


def test_the_schema_catches_a_broken_report(reports):
    data = json.loads(reports["op.json"].read_text())
    data["results"][0]["metrics"]["headline"]["forward"]["unit"] = "s"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schemas.load("report"))


def test_the_headline_is_the_profiler_figure_under_opbench_native_and_wall_time_under_rnnbench(reports):
    op = json.loads(reports["op.json"].read_text())["results"][0]["metrics"]
    assert op["headline"]["forward"]["figure"] == "profiler_ms"
    per_call = op["profiler"]["forward"]["per_call_ms"]
    assert min(per_call) <= op["headline"]["forward"]["median_ms"] <= max(per_call)
    rnn = json.loads(reports["rnn.json"].read_text())["results"][0]["metrics"]
    assert rnn["headline"]["forward"]["figure"] == "call_ms"
    assert rnn["headline"]["forward"]["median_ms"] == rnn["forward"]["rounds"]["median_ms"]


@pytest.mark.parametrize("stem", ["op", "rnn"])
def test_sweep_csv_loads_with_pandas_as_one_row_per_case_and_phase(reports, stem):
    frame = pandas.read_csv(reports[f"{stem}.csv"])
    assert tuple(frame.columns) == REPORT_COLUMNS
    cases = json.loads(reports[f"{stem}.json"].read_text())["results"]
    assert len(frame) == 2 * len(cases)
    assert set(frame["phase"]) == {"forward", "backward"}
    assert frame["median_ms"].dtype == float and frame["rounds"].eq(2).all()
    assert frame["noisy"].dtype == bool


def test_load_rows_gives_the_csv_rows(reports):
    frame = pandas.read_csv(reports["op.csv"])
    rows = pandas.DataFrame(load_rows(reports["op.json"]))
    assert list(rows["median_ms"]) == pytest.approx(list(frame["median_ms"]))
    assert list(rows["inputs"]) == list(frame["inputs"])
    assert "data (" in frame.loc[frame["case"] == "relu", "inputs"].iloc[0]  # readable, not a JSON string


def test_comparison_csv_loads_with_pandas(reports):
    frame = pandas.read_csv(reports["cmp.csv"])
    assert tuple(frame.columns) == COMPARISON_COLUMNS
    assert set(frame["verdict"]) <= {"faster", "slower", "same", "undecided"}
    compared = json.loads(reports["cmp.json"].read_text())["cases"]
    assert len(frame) == sum(len(c["metrics"]) for c in compared)


def test_the_markdown_figures_are_the_headline(reports):
    text = reports["op.md"].read_text()
    op = json.loads(reports["op.json"].read_text())["results"]
    relu = next(r for r in op if r["spec"]["name"] == "relu")
    assert f"{relu['metrics']['headline']['forward']['median_ms']:.4f}" in text


def test_the_suites_declare_the_framework_and_inputs_columns(reports):
    """rnnbench names no framework per case: its only one (torch) fills the column, and a
    runner's inputs are its sizes (rnnbench.suite.runner_sizes); opbench's cases name both."""
    rnn = pandas.read_csv(reports["rnn.csv"])
    assert set(rnn["framework"]) == {"torch"}
    assert set(rnn["inputs"]) == {"seqLength=3, numLayers=1, inputSize=4, hiddenSize=4, miniBatch=2"}
    op = pandas.DataFrame(load_rows(reports["op.json"]))
    assert set(op["framework"]) == {"mxnet"}


def test_a_quantity_with_two_speeds_says_so_in_its_headline_and_its_csv_row(reports, tmp_path):
    """The headline names two speeds (benchcore.measure.modes) and their levels, so a pandas user
    can tell a bimodal quantity's round spread from noise; the JSON still validates, and a stored
    headline with a field this version does not know is read."""
    from benchcore.report.model import Report
    from benchcore.suite import declared
    from benchcore.views.headline import annotate

    data = json.loads(reports["op.json"].read_text())
    relu = next(r for r in data["results"] if r["spec"]["name"] == "relu")
    relu["metrics"]["profiler"]["forward"].update(  # LeakyReLU gelu's alternating round (test_modes.py)
        per_call_ms=[15.69, 0.848, 15.879, 0.837, 16.447, 0.742, 16.372, 0.855, 0.799, 0.854, 0.774, 0.721,
                     0.802, 0.858, 0.828, 0.83, 0.814, 0.838, 0.815, 0.877], round_sizes=[7, 7, 6])
    report = Report.from_dict(data)
    written = json.loads(annotate(report, declared(report.suite)).to_json())
    jsonschema.validate(written, schemas.load("report"))
    headline = next(r for r in written["results"] if r["spec"]["name"] == "relu")["metrics"]["headline"]
    assert headline["forward"]["bimodal"] == "within a round"
    assert headline["forward"]["fast_ms"] == pytest.approx(0.829, abs=1e-3)
    assert headline["forward"]["slow_ms"] == pytest.approx(16.1, abs=0.05)
    assert headline["backward"]["bimodal"] is None and headline["backward"]["slow_ms"] is None

    headline["backward"]["a_later_field"] = 1
    (tmp_path / "r.json").write_text(json.dumps(written))
    rows = pandas.DataFrame(load_rows(tmp_path / "r.json"))
    key = next(r.spec.key for r in report.results if r.spec.name == "relu")  # the case changed above
    changed = rows[rows["key"] == key].set_index("phase")
    assert changed.loc["forward", "bimodal"] == "within a round"
    assert changed.loc["forward", "slow_ms"] == pytest.approx(16.1, abs=0.05)
    assert changed.loc["backward", "bimodal"] == ""
