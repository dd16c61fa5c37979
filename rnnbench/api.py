"""rnnbench from Python: `rnnbench bench` returned as a Report instead of files.

`measure` builds the request `rnnbench bench` builds for the same flags (rnnbench.request) and
runs it down the same path (benchcore.cli.run: runners, rounds in fresh worker processes, machine
reference, report), so `headlines()` of a case are the figures the CLI reports and `compare` is
`rnnbench compare`. Examples: docs/PYTHON_API.md.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from benchcore.compare.verdicts import Comparison
from benchcore.errors import UsageError
from benchcore.report.model import CaseResult, Report
from benchcore.views.headline import Headline
from benchcore.views.headline import headlines as _headlines

from .cases import SIZE_DEFAULTS
from .request import RunnerRequest
from .suite import SUITE
from .sweep import RunnerSweep


def measure(rnns: Sequence[str] = ("cudnn",), *, sizes: Optional[Dict[str, int]] = None, warmup: int = 10,
            nloops: int = 100, rounds: int = 3, device: str = "cpu", threads: Optional[int] = None,
            seed: int = 17, isolate: bool = True) -> Report:
    """Time LSTM runners as `rnnbench bench --group rnns --rnns …` would; `sizes` takes
    fastrnns' names (seqLength, numLayers, inputSize, hiddenSize, miniBatch)."""
    unknown = sorted(set(sizes or {}) - set(SIZE_DEFAULTS))
    if unknown:
        raise UsageError(f"unknown size {', '.join(unknown)}; fastrnns' sizes are {', '.join(SIZE_DEFAULTS)}")
    names = [part for name in rnns for part in name.split(",") if part]
    return sweep(RunnerRequest(group=("rnns",), rnns=names, warmup=warmup, nloops=nloops, rounds=rounds,
                               device=device, threads=threads, seed=seed, no_isolation=not isolate, **(sizes or {})))


def sweep(request: RunnerRequest) -> Report:
    """The sweep of a request (every flag of `rnnbench bench`, rnnbench.request), no file written."""
    from benchcore.cli import run

    return run.measure(request, RunnerSweep())


def headlines(result: CaseResult) -> Dict[str, Headline]:
    """{phase: Headline} of one runner (see benchcore.views.headline)."""
    return _headlines(result, SUITE)


def compare(base: Report, new: Report, threshold_pct: float = 5.0, allow_env_mismatch: bool = False) -> Comparison:
    """`rnnbench compare BASE NEW`, with `.answer`."""
    from benchcore.compare.answer import judged

    return judged(base, new, SUITE, threshold_pct, allow_env_mismatch=allow_env_mismatch)
