"""What an opbench sweep was asked to do: OperatorRequest, built once from the parsed flags
(opbench.cli) or from keywords (opbench.api), never changed afterwards. The backends, the plan
and the report read it; its fields are the flags' argparse names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from benchcore.cli.request import SweepRequest


@dataclass(frozen=True)
class OperatorRequest(SweepRequest):
    """One operator sweep of one framework (opbench's flags over the shared ones)."""

    framework: str = "mxnet"
    #: MXNet's device flag (cpu, cpu(N), gpu, gpu(N)); None: cpu
    ctx: Optional[str] = None
    #: torch's device flag (cpu, cuda, cuda:N); None: cpu
    device: Optional[str] = None
    flush_l2: bool = False
    dtype: str = "float32"
    engine: str = "native"
    int64_tensor: Optional[str] = None
    warmup: int = 25
    runs: int = 100
    seed: int = 41
    #: torch: elements of an entry's largest tensor; None: the backend's default for the engine
    size_target: Optional[int] = None
    manifest: Optional[str] = None
    #: the selection flags as given (repeatable, comma-separated: opbench.backends.base.split)
    category: Optional[Sequence[str]] = None
    ops: Optional[Sequence[str]] = None
    exclude: Optional[Sequence[str]] = None
    #: toy input sizes (tests; --tiny or OPBENCH_TINY=1)
    tiny: bool = False
    #: the roof probes: cached, retake or off (frameworks.roofs.MODES)
    roofs: str = "cached"
    #: None: the backend's default (opbench.api.sweep fills it in, as the parser does)
    memory_limit_gb: Optional[float] = None
