"""Step detection: on histories derived from a real report (a known step at a known run), through
`history regressions` (Markdown, JSON, --since, --threshold, --fail-on-regression), and on plain
series for the method's edges (noise alone, spikes, excursions, the clock's step, noisy rounds)."""

from __future__ import annotations

import datetime
import json
import math
import random

import pytest

from benchcore.cli.commands import main
from benchcore.history.detect import PENALTY, fit, visible_steps
from opbench.backends.mxnet.suite import SUITE as OPBENCH

from .support import START, Step, derive_history

BROADCAST = Step(lambda key: "/broadcast_add/" in key, at=7, factor=2.0)


def regressions(db, *args, capsys):
    code = main(OPBENCH, ["history", "regressions", "--db", db, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def filed(reports, folder, runs, steps=(), **kwargs) -> str:
    db = str(folder / "history.db")
    for k, path in enumerate(derive_history(reports["opbench"], folder / "runs", runs, steps, **kwargs)):
        assert main(OPBENCH, ["history", "add", str(path), "--db", db, "--label", f"nightly-{k}"]) == 0
    return db


@pytest.fixture(scope="module")
def stepped(reports, tmp_path_factory):
    """12 nightly runs; every broadcast_add case twice as slow from run 7 on, round unchanged."""
    return filed(reports, tmp_path_factory.mktemp("stepped"), 12, [BROADCAST])


def test_a_known_step_is_found_at_its_run_and_nowhere_else(stepped, reports, capsys):
    code, out, _ = regressions(stepped, "-f", "json", capsys=capsys)
    assert code == 0
    data = json.loads(out)
    steps = data["steps"]
    assert {(s["case_key"], s["metric"]) for s in steps} == visible_keys(reports, BROADCAST.factor)
    for s in steps:
        assert s["direction"] == "slower" and s["change_pct"] == pytest.approx(100, abs=8)  # 2x, 1% noise
        assert s["run"]["name"] == "nightly-7" and s["previous_run"]["name"] == "nightly-6"
        assert s["run"]["commit"].startswith("c07") and s["runs_after"] == 5
        assert s["holds"] and not s["provisional"]
        assert s["after_ms"] / s["before_ms"] == pytest.approx(2.0, rel=0.08)
    assert data["runs"] == 12 and data["threshold_pct"] == 5.0


def test_markdown_lists_each_step_and_the_gate_fails(stepped, reports, capsys):
    code, out, err = regressions(stepped, "--fail-on-regression", capsys=capsys)
    assert code == 1
    rows = [line for line in out.splitlines() if line.startswith("| broadcast_add")]
    assert len(rows) == len(visible_keys(reports, BROADCAST.factor))
    assert all("slower +" in row and "nightly-7" in row and "→" in row and "holds" in row for row in rows)
    assert "regression(s) of at least 5% that still hold" in err and "nightly-7" in err


def test_since_and_threshold_narrow_the_report(stepped, capsys):
    after = (START + datetime.timedelta(days=8)).date().isoformat()  # the day after the step's run
    code, out, _ = regressions(stepped, "--since", after, "--fail-on-regression", "-f", "json", capsys=capsys)
    assert code == 0 and json.loads(out)["steps"] == []
    code, out, _ = regressions(stepped, "--since", START.date().isoformat(), "-f", "json", capsys=capsys)
    assert code == 0 and json.loads(out)["steps"]
    code, out, _ = regressions(stepped, "--threshold", "150", "--fail-on-regression", capsys=capsys)
    assert code == 0 and "0 slower, 0 faster" in out


@pytest.mark.parametrize("since", ["yesterday", "2026-13-01", "12/01/2026"])
def test_a_since_that_is_not_a_date_is_a_usage_error(stepped, since, capsys):
    code, out, err = regressions(stepped, "--since", since, capsys=capsys)
    assert code == 2 and not out
    assert err.count("\n") == 1 and "is not a date" in err and "YYYY-MM-DD" in err


def test_a_regression_that_was_undone_does_not_fail_the_gate(reports, tmp_path, capsys):
    db = filed(reports, tmp_path, 12, [Step(BROADCAST.applies, at=4, factor=1.6, until=8)])
    code, out, _ = regressions(db, "--fail-on-regression", "-f", "json", capsys=capsys)
    assert code == 0
    steps = json.loads(out)["steps"]
    slower = [s for s in steps if s["direction"] == "slower"]
    faster = [s for s in steps if s["direction"] == "faster"]
    assert {s["run"]["name"] for s in slower} == {"nightly-4"} and not any(s["holds"] for s in slower)
    assert {s["run"]["name"] for s in faster} == {"nightly-8"} and all(s["holds"] for s in faster)
    assert len(slower) == len(faster) == len(visible_keys(reports, 1.6))


def visible_keys(reports, factor):
    """The broadcast_add quantities that a step by `factor` moves by more than the clock's step
    (a real sweep's tiniest cases run in 1-2 µs, where +60% is under a microsecond)."""
    from benchcore.report.model import Report

    visible = set()
    for result in Report.load(reports["opbench"]).results:
        if "/broadcast_add/" in result.spec.key and result.ok:
            for metric, timing in OPBENCH.timings(result).items():
                if (factor - 1) * timing.center_ms > timing.resolution_ms * (1 + 1e-6):
                    visible.add((result.spec.key, metric))
    assert len(visible) >= 4  # the sweep's larger broadcast_add cases are always visible
    return visible


def test_a_step_at_the_latest_run_is_reported_at_once_as_provisional(reports, tmp_path, capsys):
    db = filed(reports, tmp_path, 8, [Step(BROADCAST.applies, at=7, factor=3.0)])
    code, out, _ = regressions(db, "--fail-on-regression", "-f", "json", capsys=capsys)
    assert code == 1
    steps = json.loads(out)["steps"]
    assert steps and all(s["run"]["name"] == "nightly-7" and s["provisional"] and s["runs_after"] == 1
                         for s in steps)


def test_an_environment_of_its_own_does_not_look_like_a_step(reports, tmp_path, capsys):
    """Four runs on another CPU model, twice as fast, in the middle of the nightly series: two
    series, no step in either."""
    db = str(tmp_path / "history.db")
    paths = derive_history(reports["opbench"], tmp_path / "a", 8)
    faster_machine = derive_history(reports["opbench"], tmp_path / "b", 4, [Step(lambda key: True, 0, 0.5)],
                                    environment={"cpu_model": "A faster CPU"}, start=START.replace(day=3))
    for path in paths + faster_machine:
        assert main(OPBENCH, ["history", "add", str(path), "--db", db]) == 0
    code, out, _ = regressions(db, "-f", "json", capsys=capsys)
    assert code == 0 and json.loads(out)["steps"] == []


# --------------------------------------------------------------------------- the method on plain series


def noise_series(n, sigma, seed):
    rng = random.Random(seed)
    return [math.exp(rng.gauss(0, sigma)) for _ in range(n)]


def test_noise_alone_makes_no_reported_step():
    """200 series of 30 runs with 3% log-normal noise (seeded): the fit starts a new level in a
    few (docs/HISTORY.md has the rates), none of them as large as the 5% threshold."""
    fits = [fit(noise_series(30, 0.03, seed)) for seed in range(200)]
    assert sum(len(f.segments) > 1 for f in fits) <= 6
    assert not any(visible_steps(f, 0.05) for f in fits)


def test_a_step_of_a_few_noise_units_is_found_where_it_is():
    values = noise_series(20, 0.02, 1) + [v * 1.15 for v in noise_series(6, 0.02, 2)]
    segments = fit(values).segments
    assert [(s.start, s.stop) for s in segments] == [(0, 20), (20, 26)]
    assert segments[1].level_ms / segments[0].level_ms == pytest.approx(1.15, rel=0.03)


def test_a_single_spike_is_noise_but_two_runs_are_a_level():
    base = noise_series(16, 0.01, 3)
    spiked = base[:8] + [base[8] * 3] + base[9:]
    assert len(fit(spiked).segments) == 1
    excursion = base[:8] + [base[8] * 3, base[9] * 3] + base[10:]
    assert [(s.start, s.stop) for s in fit(excursion).segments] == [(0, 8), (8, 10), (10, 16)]


def test_the_latest_run_alone_needs_four_noise_units():
    history = noise_series(20, 0.02, 4)
    noise = fit(history).noise[-1]
    assert PENALTY == 16
    below = history + [history[-1] * math.exp(3.0 * noise)]
    above = history + [history[-1] * math.exp(6.0 * noise)]
    assert len(fit(below).segments) == 1
    assert [(s.start, s.stop) for s in fit(above).segments] == [(0, 20), (20, 21)]


def test_a_change_within_the_clock_step_is_no_step():
    """MXNet's profiler counts whole microseconds: 4 µs then 5 µs is one tick, not +25%; 4 then
    6 is two ticks, a step."""
    one_tick = [0.004] * 8 + [0.005] * 4
    assert visible_steps(fit(one_tick, resolution_ms=[0.001] * 12), 0.05, 0.001) == []
    assert len(visible_steps(fit(one_tick), 0.05)) == 1  # with no clock step known it is +25%
    two_ticks = [0.004] * 8 + [0.006] * 4
    assert len(visible_steps(fit(two_ticks, resolution_ms=[0.001] * 12), 0.05, 0.001)) == 1


def test_a_run_whose_rounds_disagree_weighs_less():
    history = noise_series(20, 0.02, 5)
    quiet = [(v * 0.99, v * 1.01) for v in history]
    last = history[-1] * 1.2
    calm_rounds = quiet + [(last * 0.99, last * 1.01)]
    wild_rounds = quiet + [(last * 0.5, last * 2.0)]
    values = history + [last]
    assert len(fit(values, calm_rounds).segments) == 2
    assert len(fit(values, wild_rounds).segments) == 1
