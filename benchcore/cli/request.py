"""What a sweep was asked to do, typed and frozen: the flags every sweep shares (SweepRequest)
and an A/B run's own (ABRequest).

The argparse namespace stops at a command line: each suite's CLI turns it into its request once
(`from_namespace`), and the Python APIs build the same requests from keywords; below them,
the sweep path (benchcore.cli.run), the backends and the plans read only requests. A field's
name is its flag's argparse `dest`, so one word names a setting from the command line to the
report.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Tuple, Type, TypeVar

from benchcore.compare.count_verdicts import FUNCTIONS
from benchcore.execute import idle
from benchcore.execute.rounds import ADDED_ROUND_MS

Request = TypeVar("Request")


@dataclass(frozen=True)
class ABRequest:
    """`ab`'s own flags: the two interpreters, the output folder, the added rounds' limits and
    the verdict flags (benchcore.cli.ab)."""

    base_python: str
    new_python: str
    output_dir: str
    threshold: float = 5.0
    alpha: float = 0.05
    fail_above: Optional[float] = None
    functions: int = FUNCTIONS
    #: --budget as benchcore.cli.ab.budget parses it: ("s", seconds) or ("x", multiple); "2x" by default
    budget: Tuple[str, float] = ("x", 2.0)
    max_rounds: Optional[int] = None
    #: --added-round-ms: how long an added round times a slow case (benchcore.execute.rounds.Short)
    added_round_ms: float = ADDED_ROUND_MS
    #: --count-undecided: count the instructions of the cases time leaves undecided
    count_undecided: bool = False


@dataclass(frozen=True)
class SweepRequest:
    """The flags every sweep shares (benchcore.cli.options.add_run_arguments and its
    companions); a suite's request adds its own. Defaults are the flags' defaults."""

    warmup: int = 25
    seed: Optional[int] = None
    rounds: int = 3
    threads: Optional[int] = None
    #: --cpu-idle: one of benchcore.execute.idle.MODES
    cpu_idle: str = idle.DEFAULT_MODE
    timeout: float = 600.0
    resume: bool = False
    no_isolation: bool = False
    memory_limit_gb: Optional[float] = 2.0
    overwrite: bool = False
    target_precision: Optional[float] = None
    min_time: Optional[float] = None
    max_time: Optional[float] = None
    ray: Optional[str] = None
    shards: Optional[int] = None
    max_retries: Optional[int] = None
    allow_env_mismatch: Optional[bool] = None
    shard: Optional[str] = None
    no_audit: bool = False
    flush_denormal: bool = False
    cache_sim: str = "default"
    #: --engine instructions: valgrind workers counting at once; None: one per core
    count_workers: Optional[int] = None
    output_format: Optional[str] = None
    output_file: Optional[str] = None
    plot: Optional[str] = None
    #: set for `ab`: the two sides and where their reports go
    ab: Optional[ABRequest] = None


def from_namespace(kind: Type[Request], namespace, **given) -> Request:
    """A request of `kind` from a parsed namespace: every field its flags set, the flags a
    command does not have at their defaults, and `given` over both (what the CLI derives)."""
    parsed = vars(namespace)
    names = {field.name for field in dataclasses.fields(kind)}
    return kind(**{**{name: value for name, value in parsed.items() if name in names}, **given})


def ab_from_namespace(namespace) -> ABRequest:
    """`ab`'s request from its parsed flags (benchcore.cli.ab.add_ab_arguments)."""
    return from_namespace(ABRequest, namespace)
