"""A report of both kinds (`merge --both`): a real timing sweep of MXNet operators (tiny, in
process) joined with counts of the same cases, compared on time and on counts, filed into a
history. The counts are synthetic here (the count verdict rules are what is tested); the real
counted sweep joined with a real timed one: test_instructions_valgrind.py."""

import copy
import json
import re

import jsonschema
import pytest

from benchcore import schemas
from benchcore.measure.instructions import Counts
from benchcore.report.model import Report
from opbench.cli import main as opbench

SWEEP = ["--ops", "broadcast_add,sum", "--tiny", "-w", "1", "-r", "3", "--no-isolation", "--no-audit"]


def counted_copy(timed: Report, grow: dict = None) -> Report:
    """The timing report's cases as a counted sweep records them (`grow`: name → factor on Ir)."""
    data = copy.deepcopy(timed.to_dict())
    # as a counted sweep records them: it never holds the idle CPUs polling, which the timed sweep
    # (as root, as here and in CI) did, and merge --both still joins them as one build
    data["environment"].update(engine="instructions", timer="callgrind",
                               cpu_idle={"asked": "auto", "held": False,
                                         "reason": "instruction counts do not depend on idle states"})
    data["settings"].update(profiler="instructions", warmup=20, runs=3,
                            valgrind={"version": "valgrind-3.19.0", "cache_sim": None})
    for result in data["results"]:
        ir = 1_000_000 * (grow or {}).get(result["spec"]["name"], 1.0)
        result["metrics"] = {"engine": "instructions", "forward": None, "backward": None, "repeats": 3, "warmup": 20,
                             "counts": {"forward": {"Ir": Counts([round(ir)] * 3).to_dict()},
                                        "backward": {"Ir": Counts([round(ir / 2)] * 3).to_dict()}},
                             "profile": {"forward": [{"function": "kernel", "self": round(ir), "inclusive": round(ir)}]},
                             "code_path": {"cpu_features": ["AVX2", "FMA3", "AVX"]}}
    return Report.from_dict(data)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """{name: path}: a real timing sweep, its counts, the same counts with sum +3%."""
    folder = tmp_path_factory.mktemp("kinds")
    assert opbench([*SWEEP, "-o", str(folder / "timed.json")]) == 0
    timed = Report.load(folder / "timed.json")
    paths = {"timed": folder / "timed.json"}
    for name, grow in (("counted", None), ("counted_sum_up", {"sum": 1.03})):
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(counted_copy(timed, grow).to_json())
    return paths


def both(reports, tmp_path, counted="counted", name="both.json", order=None):
    out = tmp_path / name
    pair = [str(reports["timed"]), str(reports[counted])]
    assert opbench(["merge", "--both", *(pair[::-1] if order == "reversed" else pair), "-o", str(out)]) == 0
    return out


def test_merge_both_gives_each_case_its_timings_and_its_counts(reports, tmp_path):
    data = json.loads(both(reports, tmp_path, order="reversed").read_text())  # either order
    ok = [r for r in data["results"] if r["status"] == "ok"]
    assert {r["spec"]["name"] for r in ok} == {"broadcast_add", "sum"}
    for result in ok:
        assert result["metrics"]["forward"]["samples_ms"] and result["metrics"]["profiler"]  # the real timings
        assert result["metrics"]["counts"]["forward"]["Ir"]["median"] == 1_000_000
        assert set(result["metrics"]["headline"]) == {"forward", "backward"}
    assert data["settings"]["profiler"] == "native" and data["settings"]["valgrind"]["version"] == "valgrind-3.19.0"
    assert data["settings"]["counted"]["warmup"] == 20
    assert data["extra"]["kinds"]["not_counted"] == [] and data["extra"]["kinds"]["not_timed"] == []
    jsonschema.validate(data, schemas.load("report"))
    ok[0]["metrics"]["counts"]["forward"]["Ir"]["samples"] = ["many"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schemas.load("report"))


def test_compare_judges_both_kinds_and_says_which_rests_on_what(reports, tmp_path, capsys):
    base = both(reports, tmp_path, name="base.json")
    new = both(reports, tmp_path, counted="counted_sum_up", name="new.json")
    assert opbench(["compare", str(base), str(new), "-f", "json", "-o", str(tmp_path / "cmp.json")]) == 0
    data = json.loads((tmp_path / "cmp.json").read_text())
    timed = {(c["label"].split()[0], m["metric"]) for c in data["cases"] for m in c["metrics"]}
    counted = {(q["label"].split()[0], q["phase"]): q["verdict"] for q in data["instructions"]["quantities"]}
    assert timed == set(counted) and len(counted) == 4  # the same quantities, judged both ways
    assert counted[("sum", "forward")] == "slower" and counted[("broadcast_add", "forward")] == "same"
    assert data["unmeasured"] == []
    # the answer: one line per changed quantity, time and counts side by side (the same timings on both
    # sides leave time undecided or the same; the counts moved +3%, within the 5% margin)
    changes = data["answer"]["changes"]
    assert len(changes) == data["instructions"]["verdicts"]["slower"] == 6  # sum's 3 cases, both phases
    for line in changes:
        assert line.startswith("sum ") and "+3.0% instructions (counted): " in line
        assert line.endswith("undecided on time; +3.0% instructions (counted): the counts decide it") or \
            line.endswith("the same within ±5% (timed); +3.0% instructions (counted): they agree")
    assert ("on instruction counts: 6 of 16 quantities slower, 0 faster, 10 the same within their bands"
            in data["answer"]["verdict"])
    undecided = [line for line in changes if "undecided on time" in line]
    tally = re.search(r"; of the (\d+) undecided on time, the counts call (\d+) slower, 0 faster and (\d+) the same$",
                      data["answer"]["verdict"])
    timed_undecided = sum(m["verdict"] == "undecided" for case in data["cases"] for m in case["metrics"])
    if timed_undecided:
        assert tally and int(tally[1]) == timed_undecided and int(tally[2]) == len(undecided)
        assert int(tally[2]) + int(tally[3]) == timed_undecided  # every quantity counted
    else:
        assert tally is None and not undecided
    jsonschema.validate(data, schemas.load("comparison"))
    assert opbench(["compare", str(base), str(new)]) == 0
    out = capsys.readouterr().out
    assert "Verdicts in this section rest on time" in out
    assert "Verdicts here rest on instruction counts" in out and "+3.00%" in out
    assert opbench(["compare", str(base), str(new), "--fail-above", "2"]) == 1  # the gate reads the counts too


def test_a_report_of_both_kinds_against_a_timing_only_one_is_refused(reports, tmp_path, capsys):
    base = both(reports, tmp_path)
    capsys.readouterr()
    code = opbench(["compare", str(base), str(reports["timed"])])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "holds only timings" in err


def test_a_report_of_both_kinds_against_a_counted_one_is_judged_on_counts_and_names_the_missing_timings(
        reports, tmp_path):
    base = both(reports, tmp_path)
    assert opbench(["compare", str(base), str(reports["counted_sum_up"]), "-f", "json", "--allow-env-mismatch",
                    "-o", str(tmp_path / "cmp.json")]) == 0
    data = json.loads((tmp_path / "cmp.json").read_text())
    assert {q["verdict"] for q in data["instructions"]["quantities"] if q["label"].startswith("sum")} == {"slower"}
    assert data["cases"] == [] and len(data["unmeasured"]) == len(data["instructions"]["quantities"]) // 2


def _merge_error(argv, capsys):
    code = opbench(["merge", "--both", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    return err[0]


def test_merge_both_refuses_what_is_not_one_timing_and_one_counted_report(reports, tmp_path, capsys):
    timed, counted = str(reports["timed"]), str(reports["counted"])
    assert "neither holds instruction counts" in _merge_error([timed, timed], capsys)
    assert "both hold instruction counts" in _merge_error([counted, counted], capsys)
    assert "joins two reports" in _merge_error([timed], capsys)
    merged = str(both(reports, tmp_path))
    capsys.readouterr()
    assert "holds both timings and counts already" in _merge_error([merged, counted], capsys)
    other = Report.load(reports["counted"])
    other.environment["mxnet"]["version"] = "1.8.0"
    (tmp_path / "other.json").write_text(other.to_json())
    assert "measured different environments (mxnet.version" in _merge_error([timed, str(tmp_path / "other.json")],
                                                                            capsys)
    shard = Report.load(reports["counted"])
    shard.settings["shard"] = "1/2"
    (tmp_path / "shard.json").write_text(shard.to_json())
    assert "merge its shards first" in _merge_error([timed, str(tmp_path / "shard.json")], capsys)
    assert not (tmp_path / "out.json").exists()


def test_a_case_counted_on_one_side_only_is_kept_and_listed(reports, tmp_path):
    counted = Report.load(reports["counted"])
    counted.results = [r for r in counted.results if r.spec.name != "sum"]
    (tmp_path / "partial.json").write_text(counted.to_json())
    out = tmp_path / "both.json"
    assert opbench(["merge", "--both", str(reports["timed"]), str(tmp_path / "partial.json"), "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    missing = data["extra"]["kinds"]["not_counted"]
    sums = [r for r in data["results"] if r["spec"]["name"] == "sum"]
    assert sorted(m["key"] for m in missing) == sorted(r["key"] for r in sums)
    assert all(m["status"] == "absent" for m in missing)
    assert all(r["metrics"]["forward"]["samples_ms"] and "counts" not in r["metrics"] for r in sums)


def test_history_files_a_report_of_both_kinds_as_time_and_count_series(reports, tmp_path):
    from benchcore.history.store import HistoryStore

    db = str(tmp_path / "h.db")
    assert opbench(["history", "add", str(both(reports, tmp_path)), "--db", db]) == 0
    with HistoryStore.open(db) as store:
        points = store.history("opbench").points
    assert {(p.metric, p.unit) for p in points} == {("forward", "ms"), ("backward", "ms"),
                                                    ("forward Ir", "instructions"), ("backward Ir", "instructions")}
