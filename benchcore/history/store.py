"""HistoryStore: reports filed over time, and a suite's history read back for detection and views.

A report is stored whole (its JSON, so nothing it measured is lost and later versions can derive
more from it) and as rows: one per case (name, label, category, status) and one per case and
metric it measured, holding the figure the suite presents (Suite.timings: the median of round
medians) and the rounds' statistics; a counted case (docs/INSTRUCTIONS.md) adds one row per phase
and count quantity (`forward Ir`, `backward cycles_est`), in its unit, with its repeats. A report is identified by the hash of its content, so the
same report is filed once, whatever its file is called; its environment fingerprint keeps
reports of other machines and builds in series of their own.

Every add is one transaction: a report that cannot be filed whole leaves the store as it was.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from benchcore.errors import UsageError
from benchcore.execute.environment import now_iso
from benchcore.history.database import Conflict, Database
from benchcore.history.fingerprint import Fingerprint, fingerprint
from benchcore.history.schema import migrate
from benchcore.measure.instructions import PHASES, Counts, counts_of
from benchcore.report.labels import case_labels
from benchcore.report.model import CaseResult, Report
from benchcore.suite import Suite


@dataclass(frozen=True)
class Run:
    """One filed report."""

    id: int
    suite: str
    environment_id: str
    #: when the sweep started (the report's started_at, UTC ISO 8601), else when it was filed
    run_at: str
    label: Optional[str]
    commit: Optional[str]
    source: Optional[str]
    added_at: str

    @property
    def name(self) -> str:
        """What a table or a hover calls the run: its label, its commit, or its number."""
        return self.label or (self.commit[:12] if self.commit else f"run {self.id}")

    @property
    def time(self) -> datetime.datetime:
        return parse_time(self.run_at)


@dataclass(frozen=True)
class Environment:
    id: str
    summary: str
    keys: Dict[str, object]


@dataclass(frozen=True)
class CaseRow:
    """One case of one run, measured or not."""

    run_id: int
    key: str
    name: str
    label: str
    category: str
    status: str
    error: Optional[str]


@dataclass(frozen=True)
class Point:
    """One metric of one case in one run: the figure and its rounds."""

    run_id: int
    case_key: str
    metric: str
    environment_id: str
    median_ms: float
    n: Optional[int]
    rounds: int
    round_medians_ms: Tuple[float, ...]
    low_ms: Optional[float]
    high_ms: Optional[float]
    spread: Optional[float]
    between_fraction: Optional[float]
    resolution_ms: float
    source: str
    #: "ms" for a time; a count's unit ("instructions"), whose figure median_ms then holds
    unit: str = "ms"
    #: a count's repeats (empty for a time)
    samples: Tuple[float, ...] = ()

    @property
    def counts(self) -> Optional[Counts]:
        """A count's repeats as Counts (what the count verdict rules judge); None for a time."""
        return Counts(tuple(self.samples), self.unit) if self.samples else None


@dataclass
class History:
    """A suite's whole history, runs in time order."""

    suite: str
    environments: Dict[str, Environment]
    runs: List[Run]
    cases: List[CaseRow]
    points: List[Point]

    @property
    def runs_by_id(self) -> Dict[int, Run]:
        return {run.id: run for run in self.runs}

    def latest_cases(self) -> Dict[str, CaseRow]:
        """Each case as its latest run recorded it (its label and category now)."""
        order = {run.id: position for position, run in enumerate(self.runs)}
        latest: Dict[str, CaseRow] = {}
        for case in sorted(self.cases, key=lambda c: order[c.run_id]):
            latest[case.key] = case
        return latest


@dataclass(frozen=True)
class Filed:
    """What `add` stored."""

    run: Run
    cases: int
    measurements: int
    environment: Fingerprint
    new_environment: bool


def figure_text(value: float, unit: str) -> str:
    """A figure as tables and hovers show it, without its unit: a time to 4 digits, a count whole."""
    return f"{value:.4g}" if unit == "ms" else f"{value:,.0f}"


def parse_time(text: str) -> datetime.datetime:
    """An ISO 8601 time as an aware UTC datetime (a time without zone is read as UTC)."""
    value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.astimezone(datetime.timezone.utc)


def report_hash(report: Report) -> str:
    """The content hash that identifies a report: of its canonical JSON, so a reformatted or
    renamed copy is the same report."""
    text = json.dumps(report.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class HistoryStore:
    """An open store; use `HistoryStore.open` (a context manager)."""

    def __init__(self, db: Database):
        self.db = db

    @classmethod
    def open(cls, target: str, create: bool = False) -> "HistoryStore":
        """Open (and migrate) the store at a path or postgresql:// URL; `create` a missing file."""
        db = Database.open(target, create)
        try:
            migrate(db)
        except BaseException:
            db.close()
            raise
        return cls(db)

    def __enter__(self) -> "HistoryStore":
        return self

    def __exit__(self, *exc) -> None:
        self.db.close()

    # ------------------------------------------------------------------ writing

    def add(self, report: Report, suite: Suite, source: Optional[str] = None, label: Optional[str] = None,
            commit: Optional[str] = None) -> Filed:
        """File one report, all or nothing; a report already in the store is refused."""
        digest = report_hash(report)
        self._refuse_duplicate(digest)
        env = fingerprint(report, suite.summary_keys)
        commit = commit or report.environment.get("git_commit")
        try:
            with self.db.transaction():
                new_env = self._add_environment(report.suite, env)
                run_at = _run_time(report)
                added_at = now_iso()
                run_id = self.db.insert(
                    "INSERT INTO runs (report_hash, suite, environment_id, run_at, added_at, label, commit_id, source, "
                    "report_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (digest, report.suite, env.id, run_at, added_at, label, commit, source, _compact_json(report)))
                measured = self._add_results(run_id, env.id, report, suite)
        except Conflict as exc:
            raise UsageError(f"cannot file this report ({exc}): a report holds each case once and is filed once; "
                             "the store is unchanged") from None
        run = Run(run_id, report.suite, env.id, run_at, label, commit, source, added_at)
        return Filed(run, len(report.results), measured, env, new_env)

    def _refuse_duplicate(self, digest: str) -> None:
        rows = self.db.rows("SELECT id, added_at, source FROM runs WHERE report_hash = ?", (digest,))
        if rows:
            run_id, added_at, source = rows[0]
            raise UsageError(f"this report is already in {self.db.where} as run {run_id} (filed {added_at}"
                             f"{' from ' + source if source else ''}); a report is filed once")

    def _add_environment(self, suite: str, env: Fingerprint) -> bool:
        if self.db.rows("SELECT 1 FROM environments WHERE id = ?", (env.id,)):
            return False
        self.db.execute("INSERT INTO environments (id, suite, summary, keys_json) VALUES (?, ?, ?, ?)",
                        (env.id, suite, env.summary, json.dumps(env.keys, sort_keys=True, default=str)))
        return True

    def _add_results(self, run_id: int, env_id: str, report: Report, suite: Suite) -> int:
        labels = case_labels(report.results)
        measured = 0
        for result in report.results:
            self.db.execute(
                "INSERT INTO cases (run_id, case_key, name, label, category, status, error) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, result.spec.key, result.spec.name, labels[result.spec.key], str(suite.category(result)),
                 result.status, result.error))
            for row in measurement_rows(result, suite):
                self.db.execute(
                    "INSERT INTO measurements (run_id, case_key, environment_id, metric, median_ms, n, rounds, "
                    "round_medians_json, low_ms, high_ms, spread, between_fraction, resolution_ms, source, unit, "
                    "samples_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (run_id, result.spec.key, env_id, *row))
                measured += 1
        return measured

    # ------------------------------------------------------------------ reading

    def history(self, suite: str) -> History:
        """Everything filed for `suite`, runs ordered by the time they ran."""
        runs = [Run(*row) for row in self.db.rows(
            "SELECT id, suite, environment_id, run_at, label, commit_id, source, added_at FROM runs WHERE suite = ? "
            "ORDER BY run_at, id", (suite,))]
        environments = {row[0]: Environment(row[0], row[1], json.loads(row[2])) for row in self.db.rows(
            "SELECT id, summary, keys_json FROM environments WHERE suite = ?", (suite,))}
        cases = [CaseRow(*row) for row in self.db.rows(
            "SELECT c.run_id, c.case_key, c.name, c.label, c.category, c.status, c.error FROM cases c "
            "JOIN runs r ON r.id = c.run_id WHERE r.suite = ?", (suite,))]
        points = [_point(row) for row in self.db.rows(
            "SELECT m.run_id, m.case_key, m.metric, m.environment_id, m.median_ms, m.n, m.rounds, "
            "m.round_medians_json, m.low_ms, m.high_ms, m.spread, m.between_fraction, m.resolution_ms, m.source, "
            "m.unit, m.samples_json FROM measurements m "
            "JOIN runs r ON r.id = m.run_id WHERE r.suite = ? ORDER BY r.run_at, r.id", (suite,))]
        return History(suite, environments, runs, cases, points)

    def report(self, run_id: int) -> Report:
        """The report of one run, as it was filed."""
        rows = self.db.rows("SELECT report_json FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise UsageError(f"{self.db.where} has no run {run_id}")
        return Report.from_dict(json.loads(rows[0][0]), source=f"run {run_id}")

    def counts(self) -> Dict[str, int]:
        """Rows per table (what tests and `add`'s message report)."""
        return {table: int(self.db.rows(f"SELECT COUNT(*) FROM {table}")[0][0])
                for table in ("runs", "cases", "measurements", "environments")}


#: the count quantities a history keeps: verdicts rest on Ir; cycles_est is shown beside it
COUNT_QUANTITIES = ("Ir", "cycles_est")


def count_metric(phase: str, quantity: str) -> str:
    """A count series' metric name: `forward Ir` (beside a timing's `forward`, in one report too)."""
    return f"{phase} {quantity}"


def measurement_rows(result: CaseResult, suite: Suite) -> List[tuple]:
    """(metric, median_ms, n, rounds, round medians JSON, low_ms, high_ms, spread, between
    fraction, resolution_ms, source, unit, samples JSON) for each figure the suite presents for a
    measured case, then for each of its counts. A case that failed keeps its row in `cases` but
    no figures: a partial measurement of a broken case is no point of its series."""
    if not result.ok:
        return []
    return _timing_rows(result, suite) + _count_rows(result)


def _count_rows(result: CaseResult) -> List[tuple]:
    """Per phase and COUNT_QUANTITIES: the median of the repeats, their extremes, spread and samples."""
    rows = []
    for phase in PHASES:
        for quantity in COUNT_QUANTITIES:
            c = counts_of(result.metrics, phase, quantity)
            if c is not None:
                rows.append((count_metric(phase, quantity), c.median, len(c.samples), len(c.round_sizes or (1,)),
                             None, float(min(c.samples)), float(max(c.samples)), c.spread, None, 0.0, "counts",
                             c.unit, json.dumps(list(c.samples))))
    return rows


def _timing_rows(result: CaseResult, suite: Suite) -> List[tuple]:
    rows = []
    for metric, timing in sorted(suite.timings(result).items()):
        center = timing.center_ms
        if center is None:
            continue
        m = timing.measurement
        medians = list(m.round_medians) if m is not None and m.round_count > 1 else []
        rows.append((metric, center, m.n if m else None, m.round_count if m else 1,
                     json.dumps(medians) if medians else None, min(medians) if medians else None,
                     max(medians) if medians else None, m.round_spread if m else None,
                     m.between_round_fraction if m else None, timing.resolution_ms, timing.source, "ms", None))
    return rows


def _point(row: tuple) -> Point:
    medians = tuple(json.loads(row[7])) if row[7] else ()
    samples = tuple(json.loads(row[15])) if row[15] else ()
    return Point(int(row[0]), row[1], row[2], row[3], float(row[4]), row[5], int(row[6]), medians, *row[8:12],
                 float(row[12]), row[13], row[14], samples)


def _run_time(report: Report) -> str:
    """The report's started_at in UTC, or now for a report that does not say when it ran."""
    started = report.environment.get("started_at")
    if isinstance(started, str):
        try:
            return parse_time(started).isoformat(timespec="seconds")
        except ValueError:
            pass
    return now_iso()


def _compact_json(report: Report) -> str:
    return json.dumps(report.to_dict(), separators=(",", ":"), allow_nan=False, default=str)
