"""The history on instruction counts: synthetic series of counted reports (the counts a real
callgrind sweep records: repeats that agree within a few hundredths of a percent, a few
thousand instructions between processes) filed, judged by the count verdict rules, shown on the
dashboard. The real counted sweeps are test_instructions_valgrind.py's."""

from __future__ import annotations

import datetime
import json
import random

import pytest

from benchcore.cli.commands import main
from benchcore.history.store import HistoryStore
from benchcore.measure.case import CaseSpec
from benchcore.measure.instructions import Counts
from benchcore.report.model import CaseResult, Report
from opbench.backends.mxnet.suite import SUITE as OPBENCH

from .support import START

#: case → forward Ir of a repeatable call (exact to a few instructions within a process)
CASES = {"broadcast_add": 2_000_000, "sum": 1_200_000, "dot": 5_000_000}


def counted_result(name: str, forward: list, cycles: list = None) -> CaseResult:
    block = {"Ir": Counts(forward).to_dict()}
    if cycles:
        block["cycles_est"] = Counts(cycles, "cycles (estimated)").to_dict()
    counts = {"forward": block, "backward": {"Ir": Counts([f // 2 for f in forward]).to_dict()}}
    spec = CaseSpec("opbench", name, {"op": name, "category": "synthetic"})
    return CaseResult(spec, "ok", {"engine": "instructions", "counts": counts, "forward": None, "backward": None})


def repeats(rng: random.Random, level: float, spread: float = 0.0002) -> list:
    """Three repeats of one process: the level moved by the process (±1,000 instructions), each
    repeat within `spread` of it."""
    process = level + rng.uniform(-1000, 1000)
    return [round(process * (1 + rng.uniform(-spread / 2, spread / 2))) for _ in range(3)]


def counted_report(run: int, results) -> Report:
    environment = {"started_at": (START + datetime.timedelta(days=run)).isoformat(), "cpu_model": "synthetic"}
    return Report(suite="opbench", environment=environment, results=list(results),
                  settings={"profiler": "instructions", "valgrind": {"version": "valgrind-3.19.0"}})


def file_series(folder, runs: int, level, db: str = None) -> str:
    """`runs` counted reports filed in order (into `db`, else a new SQLite file); `level(case,
    run, rng)` gives a case's repeats."""
    rng = random.Random(19)
    db = db or str(folder / "history.db")
    for run in range(runs):
        report = counted_report(run, [counted_result(name, level(name, run, rng)) for name in CASES])
        path = folder / f"run{run}.json"
        path.write_text(report.to_json())
        assert main(OPBENCH, ["history", "add", str(path), "--db", db, "--label", f"nightly-{run}"]) == 0
    return db


def steps(db, capsys, *args):
    code = main(OPBENCH, ["history", "regressions", "--db", db, "-f", "json", *args])
    return code, json.loads(capsys.readouterr().out)["steps"]


def test_counts_are_filed_with_their_unit_and_repeats(tmp_path, capsys):
    db = file_series(tmp_path, 2, lambda name, run, rng: repeats(rng, CASES[name]))
    with HistoryStore.open(db) as store:
        history = store.history("opbench")
    assert {p.metric for p in history.points} == {"forward Ir", "backward Ir"}  # the counted cases timed nothing
    forward = [p for p in history.points if p.metric == "forward Ir"]
    assert len(forward) == 2 * len(CASES)
    assert all(p.unit == "instructions" and len(p.samples) == 3 and p.counts.median == p.median_ms for p in forward)


def test_a_one_percent_step_in_counts_is_found_at_its_run(store_target, tmp_path, capsys):
    def level(name, run, rng):
        return repeats(rng, CASES[name] * (1.01 if name == "dot" and run >= 6 else 1.0))

    db = file_series(tmp_path, 10, level, store_target)  # SQLite and PostgreSQL
    code, found = steps(db, capsys)  # the default --threshold of 5% is the time series'
    assert code == 0
    # dot's backward (half its forward's work) moved by 1% too
    assert sorted((s["case"].split()[0], s["metric"]) for s in found) == [("dot", "backward Ir"), ("dot", "forward Ir")]
    step = next(s for s in found if s["metric"] == "forward Ir")
    assert step["run"]["name"] == "nightly-6" and step["previous_run"]["name"] == "nightly-5"
    assert step["rests_on"] == "instruction counts" and step["unit"] == "instructions"
    assert step["change_pct"] == pytest.approx(1.0, abs=0.1) and step["threshold_pct"] == pytest.approx(0.5)
    assert step["holds"] and step["runs_after"] == 4 and step["non_repeatable"] is None
    assert "before_ms" not in step  # a count is no time
    assert main(OPBENCH, ["history", "regressions", "--db", db, "--fail-on-regression"]) == 1
    out = capsys.readouterr()
    assert "instruction counts (band ±0.50%)" in out.out and "dot" in out.err


def test_an_unchanged_series_raises_nothing(tmp_path, capsys):
    db = file_series(tmp_path, 12, lambda name, run, rng: repeats(rng, CASES[name]))
    code, found = steps(db, capsys)
    assert code == 0 and found == []


def test_a_non_repeatable_quantity_is_judged_with_its_own_spread_and_named(tmp_path, capsys):
    def level(name, run, rng):
        if name != "sum":
            return repeats(rng, CASES[name])
        # a random operator: its repeats differ by ~3%; +1.5% from run 4 is within that, +8% from run 8 is not
        shift = 1.08 if run >= 8 else 1.015 if run >= 4 else 1.0
        return repeats(rng, CASES[name] * shift, spread=0.03)

    db = file_series(tmp_path, 11, level)
    _, found = steps(db, capsys)
    assert sorted((s["case"].split()[0], s["metric"], s["run"]["name"]) for s in found) == [
        ("sum", "backward Ir", "nightly-8"), ("sum", "forward Ir", "nightly-8")]
    assert all("vary by" in s["non_repeatable"] and s["threshold_pct"] > 3 for s in found)


def test_cycles_are_kept_and_shown_but_verdicts_rest_on_instructions(tmp_path, capsys):
    rng = random.Random(5)
    db = str(tmp_path / "history.db")
    for run in range(6):
        cycles = 3_000_000 * (1.2 if run >= 3 else 1.0)  # the simulated caches missed more; Ir unchanged
        result = counted_result("dot", repeats(rng, CASES["dot"]), repeats(rng, cycles))
        path = tmp_path / f"run{run}.json"
        path.write_text(counted_report(run, [result]).to_json())
        assert main(OPBENCH, ["history", "add", str(path), "--db", db]) == 0
    _, found = steps(db, capsys)
    assert found == []
    site = tmp_path / "site"
    assert main(OPBENCH, ["history", "dashboard", "--db", db, "-o", str(site)]) == 0
    index = (site / "index.html").read_text()
    assert "forward Ir (instructions)" in index and "forward cycles_est (cycles (estimated))" in index


def test_the_dashboard_says_what_a_step_rests_on_and_names_non_repeatable_counts(tmp_path, capsys):
    def level(name, run, rng):
        if name == "sum":
            return repeats(rng, CASES[name], spread=0.03)
        return repeats(rng, CASES[name] * (1.02 if name == "dot" and run >= 5 else 1.0))

    db = file_series(tmp_path, 6, level)
    site = tmp_path / "site"
    assert main(OPBENCH, ["history", "dashboard", "--db", db, "-o", str(site)]) == 0
    index = (site / "index.html").read_text()
    assert "instruction counts (band ±0.50%)" in index and "forward Ir (instructions)" in index
    pages = {p.name.split("-")[0]: p.read_text() for p in (site / "cases").iterdir()}
    assert "Non-repeatable counts" in pages["sum"] and "vary by" in pages["sum"]
    assert "Non-repeatable counts" not in pages["dot"] and "on instruction counts" in pages["dot"]
