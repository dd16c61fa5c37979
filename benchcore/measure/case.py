"""What is measured: a serializable CaseSpec, and the Workload a worker rebuilds from it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence


@dataclass(frozen=True)
class CaseSpec:
    """A small, JSON-serializable description of one thing to time.

    It crosses process boundaries (to a worker), is written to checkpoints, sharded, and
    matched between two reports, so `params` must hold only JSON values.
    """

    suite: str
    name: str
    params: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Stable identity: equal for equal cases in any process or report."""
        return f"{self.suite}/{self.name}/{json.dumps(self.params, sort_keys=True, separators=(',', ':'))}"

    def to_dict(self) -> dict:
        return {"suite": self.suite, "name": self.name, "params": self.params}

    @classmethod
    def from_dict(cls, data: dict) -> "CaseSpec":
        return cls(suite=data["suite"], name=data["name"], params=dict(data.get("params") or {}))


def _no_sync() -> None:
    return None


@dataclass
class Workload:
    """What the timing loop sees: fastrnns' ModelDef, generalised to any framework.

    forward() runs the timed forward call and returns its output. When backward is set,
    backward_setup(output) prepares (untimed) what backward(prepared) consumes; zero_grad()
    clears gradients afterwards (untimed). sync() waits for the device to finish queued work,
    so a timer that brackets a call with sync() measures the work, not its launch.
    device is "cpu" or "cuda"; on "cuda" the runner times with CUDA events.

    last_call(output), when set, is called once, untimed, after the timed runs, with the last
    timed iteration's forward output while it and that iteration's gradients are still in
    place (before its zero_grad): the audit counts what the timed calls produced there instead
    of running one more forward and backward. A warmup-only run leaves it unset.
    """

    forward: Callable[[], Any]
    sync: Callable[[], None] = _no_sync
    backward_setup: Optional[Callable[[Any], Any]] = None
    backward: Optional[Callable[[Any], Any]] = None
    zero_grad: Optional[Callable[[], None]] = None
    inputs: Any = None
    params: Sequence[Any] = ()
    device: str = "cpu"
    info: dict = field(default_factory=dict)
    last_call: Optional[Callable[[Any], None]] = None

    @property
    def has_backward(self) -> bool:
        return self.backward is not None
