"""What opbench's neutral parts ask of a framework backend, and the types they share.

opbench's command line, selection, rounds, reports and comparisons are the same for every
framework; a backend supplies the rest, reading the sweep's request (opbench.request.OperatorRequest):

- its flags' meaning: `check(request)` validates what the user asked (device or context, dtype,
  its own flags) and returns the normalised device the cases run on;
- its operators: `scan(request, device)` → OperatorInfo rows (every operator it knows, with why
  one is left out), `categories`, and `knows(name)` for the other framework's hints (UnknownOperator);
- case planning: `plan(request, device)` → a Plan (CaseSpecs, the operators without a case and
  why, what the worker needs, what the report records);
- measuring: `suite` (benchcore.suite.Suite: the worker's executor "package.module:function",
  the frameworks a worker imports, the headline figures, how rounds combine), `engines`;
- reporting: `environment_extra(request)`, `to_markdown(report)`, `list_operators(...)` (--list).

Two implementations: opbench.backends.mxnet (the registry scan, opperf's rules and cases, its
executor) and opbench.backends.torch (OpInfo discovery, scaling, its executor).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec


class UnknownOperator(UsageError):
    """A name a backend does not know. A backend does not import the other one; opbench's CLI asks
    the other backends (`knows`) and, where one knows the name, says so with `elsewhere`."""

    def __init__(self, message: str, name: str, elsewhere: Optional[Callable[[str], str]] = None):
        super().__init__(message)
        self.name = name
        #: framework that knows the name → the line to show instead; None: no hint to give
        self.elsewhere = elsewhere


@dataclass(frozen=True)
class OperatorInfo:
    """One operator a framework knows, for --list and for hints: its category, and why it
    gets no case (None when it is benchmarked)."""

    name: str
    category: Optional[str]
    reason: Optional[str] = None
    variant: str = ""


@dataclass
class Plan:
    """What a run with these flags measures."""

    specs: List[CaseSpec]
    #: (operator, why it has no case): reported under no_benchmark
    skipped: List[Tuple[str, str]]
    #: operators the user left out with --exclude
    excluded: List[str]
    #: what every worker needs besides the run settings (recorded in the checkpoint)
    worker_options: Dict[str, object] = field(default_factory=dict)
    #: the report's framework-specific settings
    settings: Dict[str, object] = field(default_factory=dict)
    #: the report's framework-specific extras
    extra: Dict[str, object] = field(default_factory=dict)


def split(values: Optional[Sequence[str]]) -> Optional[List[str]]:
    """Repeatable, comma-separated flag values → one list (None when the flag was not given)."""
    if values is None:
        return None
    return [item.strip() for value in values for item in value.split(",") if item.strip()]
