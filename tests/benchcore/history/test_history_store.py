"""The history store through `<suite> history add` on real reports, on SQLite and on a real
PostgreSQL server: what is stored, duplicates, environments kept apart, schema versions and
migrations, and bad input refused in one line with the store unchanged."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import threading

import pytest

from benchcore.cli.commands import main
from benchcore.errors import UsageError
from benchcore.history import schema
from benchcore.history.store import HistoryStore
from benchcore.report.model import Report
from opbench.backends.mxnet.suite import SUITE as OPBENCH
from rnnbench.suite import SUITE as RNNBENCH

from .support import ROOT, derive_history, env


def one_error_line(capsys, *words):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(("opbench: error: ", "rnnbench: error: ")), err
    for word in words:
        assert word in err, err
    return err


def add(target, path, *extra, suite=OPBENCH):
    return main(suite, ["history", "add", str(path), "--db", target, *extra])


def counts(target):
    with HistoryStore.open(target) as store:
        return store.counts()


def test_a_report_is_stored_whole_and_by_case_and_metric(store_target, reports, capsys):
    path = reports["opbench"]
    assert add(store_target, path, "--label", "nightly-1", "--commit", "abc123") == 0
    assert "filed" in capsys.readouterr().err
    report = Report.load(path)
    with HistoryStore.open(store_target) as store:
        history = store.history("opbench")
        assert store.report(history.runs[0].id).to_dict() == report.to_dict()
    run = history.runs[0]
    assert (run.label, run.commit, run.name) == ("nightly-1", "abc123", "nightly-1")
    assert run.run_at.startswith(report.environment["started_at"][:16])
    assert {c.key for c in history.cases} == {r.spec.key for r in report.results}
    assert {c.category for c in history.cases} == {"binary_broadcast", "rounding"}
    expected = {(r.spec.key, metric): timing for r in report.results for metric, timing in OPBENCH.timings(r).items()}
    assert {(p.case_key, p.metric) for p in history.points} == set(expected)
    for p in history.points:
        timing = expected[(p.case_key, p.metric)]
        medians = timing.measurement.round_medians
        assert p.median_ms == pytest.approx(timing.center_ms)
        assert p.rounds == 2 and p.round_medians_ms == pytest.approx(medians)
        assert (p.low_ms, p.high_ms) == pytest.approx((min(medians), max(medians)))
        assert p.resolution_ms == pytest.approx(0.001) and p.source == "profiler"  # the native engine's figures


def test_rnnbench_reports_file_into_the_same_store_apart(store_target, reports, capsys):
    assert add(store_target, reports["opbench"]) == 0
    assert add(store_target, reports["rnnbench"], suite=RNNBENCH) == 0
    with HistoryStore.open(store_target) as store:
        rnn, op = store.history("rnnbench"), store.history("opbench")
    assert len(rnn.runs) == len(op.runs) == 1
    assert {c.name for c in rnn.cases} == {"cudnn", "jit"} and {p.metric for p in rnn.points} == {"forward", "backward"}
    assert {c.category for c in rnn.cases} == {"lstm"}  # rnnbench's category: its runner group
    capsys.readouterr()
    assert add(store_target, reports["rnnbench"]) == 2  # an rnnbench report is not for `opbench history`
    one_error_line(capsys, "rnnbench report", "use `rnnbench`")


def test_the_same_report_is_refused_even_renamed_and_reformatted(store_target, reports, tmp_path, capsys):
    assert add(store_target, reports["opbench"]) == 0
    before = counts(store_target)
    copy = tmp_path / "renamed.json"
    copy.write_text(json.dumps(json.loads(reports["opbench"].read_text()), indent=4))
    capsys.readouterr()
    assert add(store_target, copy, "--label", "again") == 2
    one_error_line(capsys, "already in", "as run 1")
    assert counts(store_target) == before


def test_another_environment_is_kept_apart(store_target, reports, tmp_path, capsys):
    same = derive_history(reports["opbench"], tmp_path / "a", 2)
    other = derive_history(reports["opbench"], tmp_path / "b", 1, environment={"cpu_model": "Another CPU"})
    for path in same + other:
        assert add(store_target, path) == 0
    err = capsys.readouterr().err
    assert err.count("new environment") == 2
    with HistoryStore.open(store_target) as store:
        history = store.history("opbench")
    assert len(history.environments) == 2
    assert sum(e.summary.startswith("Another CPU") for e in history.environments.values()) == 1
    by_env = {}
    for p in history.points:
        by_env.setdefault(p.environment_id, set()).add(p.run_id)
    assert sorted(len(runs) for runs in by_env.values()) == [1, 2]


def test_bad_reports_leave_the_store_unchanged(store_target, reports, tmp_path, capsys):
    assert add(store_target, reports["opbench"]) == 0
    before = counts(store_target)
    not_ours = tmp_path / "other.json"
    not_ours.write_text(json.dumps({"benchmarks": []}))
    broken = tmp_path / "broken.json"
    broken.write_text(reports["opbench"].read_text()[:200])
    twice = tmp_path / "twice.json"  # a hand-edited report with one case twice: the insert fails midway
    data = json.loads(derive_history(reports["opbench"], tmp_path / "d", 1)[0].read_text())
    data["results"].append(data["results"][0])
    twice.write_text(json.dumps(data))
    capsys.readouterr()
    for path, words in ((not_ours, ("not a benchcore report",)), (broken, ("not valid JSON",)),
                        (tmp_path / "missing.json", ("does not exist",)), (twice, ("store is unchanged",))):
        assert add(store_target, path) == 2
        one_error_line(capsys, *words)
        assert counts(store_target) == before  # the transaction rolled back whatever it had written


def test_a_bad_report_creates_no_database(reports, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(OPBENCH, ["history", "add", str(bad)]) == 2
    one_error_line(capsys, "not a benchcore report")
    assert not (tmp_path / "benchmarks.db").exists()


def test_every_history_command_defaults_to_one_store_in_the_working_folder(reports, tmp_path, capsys, monkeypatch):
    path = derive_history(reports["opbench"], tmp_path / "nightly", 1)[0]
    monkeypatch.chdir(tmp_path)
    assert main(OPBENCH, ["history", "add", str(path)]) == 0
    assert (tmp_path / "benchmarks.db").is_file() and not (tmp_path / "nightly" / "benchmarks.db").exists()
    assert "benchmarks.db" in capsys.readouterr().err
    assert main(OPBENCH, ["history", "regressions", "-f", "json"]) == 0  # finds the same store
    assert json.loads(capsys.readouterr().out) is not None


def test_two_stores_at_once_and_csv_are_one_line(reports, tmp_path, capsys):
    for argv, words in ((["regressions", "--db", "a.db", "--db", "b.db"], "two history stores at once (a.db and b.db)"),
                        (["regressions", "-f", "csv"], "'csv': this command writes md, json"),
                        (["regressions", "--threshold", "0.1"], "0.1 looks like a fraction")):
        assert main(OPBENCH, ["history", *argv]) == 2
        one_error_line(capsys, words)


def test_a_store_of_a_newer_schema_is_refused(store_target, reports, tmp_path, capsys):
    assert add(store_target, reports["opbench"]) == 0
    with HistoryStore.open(store_target) as store:
        store.db.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                         (schema.SCHEMA_VERSION + 1, "2099-01-01"))
    path = derive_history(reports["opbench"], tmp_path / "d", 1)[0]
    capsys.readouterr()
    assert add(store_target, path) == 2
    one_error_line(capsys, f"schema version {schema.SCHEMA_VERSION + 1}", "upgrade")
    assert main(OPBENCH, ["history", "regressions", "--db", store_target]) == 2
    one_error_line(capsys, "newer")
    with pytest.raises(UsageError, match="newer"):
        HistoryStore.open(store_target)
    assert _raw_rows(store_target, "SELECT COUNT(*) FROM runs") == [(1,)]


def _raw_rows(target, sql):
    from benchcore.history.database import Database

    db = Database.open(target, create=False)
    try:
        return db.rows(sql)
    finally:
        db.close()


def test_migrations_bring_an_older_store_up_to_date(store_target, reports, monkeypatch, capsys):
    assert add(store_target, reports["opbench"], "--label", "old") == 0
    newer = {**schema.MIGRATIONS, schema.SCHEMA_VERSION + 1: ("ALTER TABLE runs ADD COLUMN note TEXT",)}
    monkeypatch.setattr(schema, "MIGRATIONS", newer)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", max(newer))
    with HistoryStore.open(store_target) as store:
        assert schema.check(store.db) == max(newer)
        assert [r[0] for r in store.db.rows("SELECT version FROM schema_version ORDER BY version")] == sorted(newer)
        assert store.db.rows("SELECT label, note FROM runs") == [("old", None)]  # the data came along
        assert len(store.history("opbench").points) > 0


def test_a_corrupt_or_foreign_sqlite_file_is_refused_unchanged(reports, tmp_path, capsys):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 200)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE accounts (id INTEGER)")
    damaged = tmp_path / "damaged.db"
    assert add(str(damaged), reports["opbench"]) == 0
    data = bytearray(damaged.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page overwritten
    damaged.write_bytes(bytes(data))
    capsys.readouterr()
    for path, word in ((garbage, "not a database"), (foreign, "no history store"), (damaged, "malformed")):
        content = path.read_bytes()
        assert add(str(path), reports["opbench"]) == 2
        one_error_line(capsys, str(path), word)
        assert path.read_bytes() == content
    assert main(OPBENCH, ["history", "regressions", "--db", str(tmp_path / "none.db")]) == 2
    one_error_line(capsys, "no history database")
    assert not (tmp_path / "none.db").exists()


def test_an_unreachable_postgresql_fails_in_one_line(reports, capsys):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    assert add(f"postgresql://nobody:secret@127.0.0.1:{port}/history", reports["opbench"]) == 2
    err = one_error_line(capsys, "cannot connect to PostgreSQL", f"127.0.0.1:{port}")
    assert "secret" not in err


def test_a_postgresql_server_that_never_answers_times_out(reports):
    """A listener that accepts and says nothing: the connect timeout (the URL's, here 1 s; 5 s by
    default) ends the attempt, so a nightly job does not hang."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    accepted = []
    threading.Thread(target=lambda: accepted.append(silent.accept()), daemon=True).start()
    url = f"postgresql://nobody@127.0.0.1:{silent.getsockname()[1]}/history?connect_timeout=1"
    try:
        done = subprocess.run([sys.executable, "-m", "opbench", "history", "add", str(reports["opbench"]), "--db", url],
                              cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
    finally:
        silent.close()
        for connection, _ in accepted:
            connection.close()
    assert done.returncode == 2 and accepted, done.stderr
    assert done.stderr.count("\n") == 1 and "cannot connect to PostgreSQL" in done.stderr


def test_postgresql_urls_get_a_bounded_connect_timeout(postgres):
    from benchcore.history.database import CONNECT_TIMEOUT_S, Database

    db = Database.open(postgres.url(), create=False)
    try:  # the connection's own options, as libpq holds them
        options = {o.keyword: o.val for o in db._connection.pgconn.info}
    finally:
        db.close()
    assert options[b"connect_timeout"] == str(CONNECT_TIMEOUT_S).encode()


def test_both_command_lines_have_history():
    for suite in ("opbench", "rnnbench"):
        done = subprocess.run([sys.executable, "-m", suite, "history", "--help"], cwd=ROOT, env=env(),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        for word in ("add", "regressions", "dashboard", "serve"):
            assert word in done.stdout
