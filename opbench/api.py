"""opbench from Python: the sweep the command line runs, returned as a Report instead of files.

`measure` builds the request `opbench` builds for the same flags (opbench.request) and runs it
down the same path (benchcore.cli.run: case plan, rounds in fresh worker processes, machine
reference, report), so its figures are the ones the CLI reports: each case's `headlines()` are
the JSON's `metrics.headline`, and `compare` gives the verdicts and the answer `opbench compare`
prints. opperf's own API (averages only)
stays in opbench.backends.mxnet.opperf_api. Examples: docs/PYTHON_API.md.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from benchcore.compare.verdicts import Comparison
from benchcore.report.model import CaseResult, Report
from benchcore.views.headline import Headline
from benchcore.views.headline import headlines as _headlines

from .backends import backend_for
from .request import OperatorRequest
from .sweep import OperatorSweep


def measure(ops: Optional[Sequence[str]] = None, categories: Optional[Sequence[str]] = None, *,
            framework: str = "mxnet", warmup: int = 25, runs: int = 100, rounds: int = 3,
            engine: str = "native", dtype: str = "float32", threads: Optional[int] = None, seed: int = 41,
            isolate: bool = True, tiny: bool = False) -> Report:
    """Time operators (names or globs) and/or categories as `opbench --ops … --category …`
    would, with -w `warmup`, -r `runs` over `rounds` rounds; the Report its JSON would hold.

    `isolate=False` runs the cases in this process (faster to start; a crash ends it); `tiny`
    takes toy input sizes (tests). A bad argument raises benchcore.errors.UsageError.
    """
    request = OperatorRequest(framework=framework, warmup=warmup, runs=runs, rounds=rounds, engine=engine,
                              dtype=dtype, threads=threads, seed=seed, no_isolation=not isolate, tiny=tiny,
                              ops=tuple(ops) if ops else None, category=tuple(categories) if categories else None)
    return sweep(request)


def sweep(request: OperatorRequest) -> Report:
    """The sweep of a request (every flag of `opbench`, opbench.request), no file written; the
    worker memory limit, when the request leaves it out, is the backend's (as --memory-limit-gb's)."""
    import dataclasses

    from benchcore.cli import run
    from benchcore.cli.options import apply_threads

    backend = backend_for(request.framework)
    if request.memory_limit_gb is None:
        request = dataclasses.replace(request, memory_limit_gb=backend.memory_limit_gb)
    apply_threads(request.threads)
    return run.measure(request, OperatorSweep(backend))


def headlines(result: CaseResult) -> Dict[str, Headline]:
    """{phase: Headline} of one case: its median_ms (the median of the round medians), spread,
    rounds and noise, as every view of the report shows them."""
    return _headlines(result, backend_for("mxnet").suite)


def compare(base: Report, new: Report, threshold_pct: float = 5.0, allow_env_mismatch: bool = False) -> Comparison:
    """`opbench compare BASE NEW`: per case and phase a verdict (faster, slower, same, noisy),
    and `.answer` (benchcore.compare.answer.Answer: the change lines and the verdict line)."""
    from benchcore.compare.answer import judged

    return judged(base, new, backend_for("mxnet").suite, threshold_pct, allow_env_mismatch=allow_env_mismatch)
