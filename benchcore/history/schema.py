"""The history store's tables, their version, and the migrations that bring a store up to it.

One schema for SQLite and PostgreSQL (the type words `{id}` and `{real}` are the only
difference, see database.py). `schema_version` holds one row per migration applied; a store
whose newest row is above SCHEMA_VERSION was written by a newer version of this suite and is
refused rather than misread. Each migration runs in its own transaction, so a store is always at
one version or the next, never between.

Tables (docs/HISTORY.md):
    environments  one row per environment fingerprint: its timing-relevant keys and a summary
    runs          one row per filed report: the report whole (JSON), its content hash (a report
                  is filed once), when it ran, label and commit, environment
    cases         one row per case of a run: name, label, category, status, error
    measurements  one row per case and metric (forward/backward; `forward Ir`, ... for counts) of a
                  run that measured it: the figure (median of round medians) in its unit, the
                  rounds' statistics, the clock step; a count's repeats (version 2)
"""

from __future__ import annotations

from typing import Dict, Tuple

from benchcore.errors import UsageError
from benchcore.execute.environment import now_iso
from benchcore.history.database import Database

#: version → the statements that bring a store from the version before to it
MIGRATIONS: Dict[int, Tuple[str, ...]] = {
    1: (
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
        "CREATE TABLE environments (id TEXT PRIMARY KEY, suite TEXT NOT NULL, summary TEXT NOT NULL, "
        "keys_json TEXT NOT NULL)",
        "CREATE TABLE runs (id {id}, report_hash TEXT NOT NULL UNIQUE, suite TEXT NOT NULL, "
        "environment_id TEXT NOT NULL REFERENCES environments (id), run_at TEXT NOT NULL, added_at TEXT NOT NULL, "
        "label TEXT, commit_id TEXT, source TEXT, report_json TEXT NOT NULL)",
        "CREATE INDEX runs_by_time ON runs (suite, environment_id, run_at)",
        "CREATE TABLE cases (run_id BIGINT NOT NULL REFERENCES runs (id), case_key TEXT NOT NULL, "
        "name TEXT NOT NULL, label TEXT NOT NULL, category TEXT NOT NULL, status TEXT NOT NULL, error TEXT, "
        "PRIMARY KEY (run_id, case_key))",
        "CREATE TABLE measurements (run_id BIGINT NOT NULL, case_key TEXT NOT NULL, metric TEXT NOT NULL, "
        "environment_id TEXT NOT NULL, median_ms {real} NOT NULL, n INTEGER, rounds INTEGER NOT NULL, "
        "round_medians_json TEXT, low_ms {real}, high_ms {real}, spread {real}, between_fraction {real}, "
        "resolution_ms {real} NOT NULL, source TEXT NOT NULL, PRIMARY KEY (run_id, case_key, metric), "
        "FOREIGN KEY (run_id, case_key) REFERENCES cases (run_id, case_key))",
        "CREATE INDEX measurements_by_series ON measurements (case_key, metric, environment_id)",
    ),
    # instruction counts (docs/INSTRUCTIONS.md): a figure's unit (the column median_ms holds a
    # count there) and a count's repeats, which the count verdict rules judge the series by
    2: (
        "ALTER TABLE measurements ADD COLUMN unit TEXT NOT NULL DEFAULT 'ms'",
        "ALTER TABLE measurements ADD COLUMN samples_json TEXT",
    ),
}
SCHEMA_VERSION = max(MIGRATIONS)
#: tables a store holds; a database with other tables and no schema_version is not ours
TABLES = ("cases", "environments", "measurements", "runs", "schema_version")


def version_of(db: Database) -> int:
    """The store's schema version: 0 for an empty database."""
    tables = db.tables()
    if "schema_version" in tables:
        return int(db.rows("SELECT MAX(version) FROM schema_version")[0][0] or 0)
    if tables:
        raise UsageError(f"{db.where} holds tables ({', '.join(tables[:5])}) but no history store; pass a history "
                         "database, or a new file name, with --db")
    return 0


def migrate(db: Database) -> int:
    """Bring the store to SCHEMA_VERSION (creating it when empty); the version it is now."""
    version = check(db)
    while version < SCHEMA_VERSION:
        with db.transaction(exclusive=True):
            current = version_of(db)  # another writer may have migrated meanwhile
            if current == version:
                for statement in MIGRATIONS[version + 1]:
                    db.execute(db.ddl(statement))
                db.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", (version + 1, now_iso()))
        version = check(db)
    return version


def check(db: Database) -> int:
    """The store's version, refusing one written by a newer version of this suite."""
    version = version_of(db)
    if version > SCHEMA_VERSION:
        raise UsageError(f"history database {db.where} has schema version {version}, newer than this version of the "
                         f"suite reads ({SCHEMA_VERSION}); upgrade opbench-suite to use it")
    return version
