"""The checkpoint: a sweep's finished results on disk, so an interrupted sweep resumes.

Every finished result is appended (and flushed, fsynced) to a JSON Lines file at once, so Ctrl-C
or `kill -9` of the parent loses nothing; a resume skips what is there, and refuses to mix in
samples taken under other options. A Slot names one execution of a case (its round and side):
the unit a sweep schedules, a checkpoint records and a cluster shard carries.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple

from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec
from benchcore.report.model import CaseResult

#: the longest a checkpoint's appended results wait for an fsync: a crash of the machine itself
#: loses at most that much, and an fsync per case cost 2-3% of a short sweep's wall
CHECKPOINT_SYNC_S = 10.0


def json_default(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


@dataclass(frozen=True)
class Short:
    """The calls of a round an A/B run adds to a case whose calls are slow: as many as fit in
    `--added-round-ms` (its warmup likewise), never fewer than SHORT_MIN_RUNS and SHORT_MIN_WARMUP,
    never more than a planned round's (benchcore.execute.rounds.short_round).

    Why: on this kind of machine a round's figure moves with its process (its memory, the
    machine's state that second) far more than with how many calls it holds (lab/notes/answers.md:
    a 12 ms backward's quarters of one round agree within 1-3%, its rounds differ by 5-10%). A
    comparison's precision comes from rounds, so a round of a slow case that repeats 25 warmup and
    33 timed calls of 40 ms spends seconds on what a few calls already say; short, it costs a
    fraction and the budget buys several times the rounds. Fast cases keep their full rounds:
    what they cost is the round's set-up, not their calls."""

    warmup: int
    runs: int


@dataclass(frozen=True)
class Slot:
    """One execution of a case: which round it belongs to, and in an A/B run which side.

    A sweep of N rounds runs every case N times, each round in fresh worker processes; an A/B
    run does that for two environments ("base", "new"). A plain sweep is round 1, side "".
    """

    spec: CaseSpec
    round: int = 1
    side: str = ""
    #: an added round's fewer calls (benchcore.execute.rounds.Short); None: the round's own
    short: Optional[Short] = None

    @property
    def key(self) -> tuple:
        return (self.side, self.round, self.spec.key)


class Checkpoint:
    """An append-only JSON Lines file: a header with the run's options, then finished CaseResults.

    The header lets a resume refuse to mix samples taken under other settings (a different
    --runs, warmup, profiler, threads or seed) into one report that states a single setting.
    Each result line also records its slot (round and side); lines without one are round 1.
    """

    HEADER = "checkpoint_options"

    def __init__(self, path):
        self.path = Path(path)
        self.synced_at: Optional[float] = None

    def _records(self) -> Iterator[dict]:
        """Every readable line; a torn last line (killed mid-write) is ignored."""
        for line in self.path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                yield record

    def load(self) -> Dict[tuple, CaseResult]:
        """Results by slot key (side, round, case key)."""
        results: Dict[tuple, CaseResult] = {}
        if not self.path.exists():
            return results
        for record in self._records():
            found = self.read_record(record)
            if found is not None:
                results[found[0].key] = found[1]
        return results

    @classmethod
    def read_record(cls, record: dict) -> Optional[Tuple[Slot, CaseResult]]:
        """A result line's slot and result; None for the header or a line that is not one."""
        if cls.HEADER in record:
            return None
        try:
            result = CaseResult.from_dict(record)
            return Slot(result.spec, int(record.get("round", 1)), str(record.get("side", ""))), result
        except (KeyError, ValueError, TypeError):
            return None

    def options(self) -> Optional[dict]:
        """The options the checkpointed cases ran with (None for a headerless file)."""
        return next((r[self.HEADER] for r in self._records() if self.HEADER in r), None)

    def start(self, options: dict) -> None:
        self._write({self.HEADER: _comparable(options)})

    def append(self, result: CaseResult, slot: Optional[Slot] = None) -> None:
        record = result.to_dict()
        if slot is not None and (slot.round, slot.side) != (1, ""):
            record.update(round=slot.round, side=slot.side)
        self._write(record)

    def _write(self, record: dict) -> None:
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record, default=json_default) + "\n")
            handle.flush()
            if self.synced_at is None or time.monotonic() - self.synced_at >= CHECKPOINT_SYNC_S:
                os.fsync(handle.fileno())
                self.synced_at = time.monotonic()

    def check_resumable(self, options: dict) -> None:
        """Refuse a resume whose options differ from those the checkpointed cases ran with."""
        stored, current = self.options(), _comparable(options)
        if stored is None or stored == current:
            return
        changes = "; ".join(f"{key}: {old!r} then, {new!r} now"
                            for key, (old, new) in _differences(stored, current).items())
        raise UsageError(f"checkpoint {self.path} was measured with other settings ({changes}); "
                         "resume with the flags of the interrupted run, or delete the checkpoint to start over")


def _comparable(options: dict) -> dict:
    """Options as they read back from JSON, so a stored copy compares equal to a fresh one."""
    return json.loads(json.dumps(options, default=json_default))


def _differences(old: dict, new: dict, prefix: str = "") -> Dict[str, tuple]:
    """Flattened `a.b` keys whose values differ between two option dicts."""
    changes: Dict[str, tuple] = {}
    for key in sorted(set(old) | set(new), key=str):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            changes.update(_differences(a, b, f"{prefix}{key}."))
        elif a != b:
            changes[f"{prefix}{key}"] = (a, b)
    return changes


def check_checkpoint(path, options: dict, resume: bool) -> bool:
    """Whether a checkpoint at `path` is there to resume; a UsageError when it is there without
    --resume, or holds cases measured under other options. Called before a sweep prints or
    measures anything, so a refusal is the only line it prints."""
    store = Checkpoint(path)
    if not store.path.exists():
        return False
    if not resume:
        raise UsageError(f"checkpoint {store.path} exists from an interrupted run; pass --resume to continue it or delete it")
    store.check_resumable(options)
    return True
