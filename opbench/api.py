"""opbench from Python: the sweep the command line runs, returned as a Report instead of files.

`measure` runs exactly what `opbench` runs for the same flags (the same parser, case plan,
rounds in fresh worker processes, machine reference and report), so its figures are the ones
the CLI reports: each case's `headlines()` are the JSON's `metrics.headline`, and `compare`
gives the verdicts and the answer `opbench compare` prints. opperf's own API (averages only)
stays in opbench.backends.mxnet.api. Examples: docs/PYTHON_API.md.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from benchcore.compare.verdicts import Comparison
from benchcore.report.model import CaseResult, Report
from benchcore.views.headline import Headline, annotate
from benchcore.views.headline import headlines as _headlines

from .backends import backend_for


def measure(ops: Optional[Sequence[str]] = None, categories: Optional[Sequence[str]] = None, *,
            framework: str = "mxnet", warmup: int = 25, runs: int = 100, rounds: int = 3,
            engine: str = "native", dtype: str = "float32", threads: Optional[int] = None, seed: int = 41,
            isolate: bool = True, tiny: bool = False) -> Report:
    """Time operators (names or globs) and/or categories as `opbench --ops … --category …`
    would, with -w `warmup`, -r `runs` over `rounds` rounds; the Report its JSON would hold.

    `isolate=False` runs the cases in this process (faster to start; a crash ends it); `tiny`
    takes toy input sizes (tests). A bad argument raises benchcore.errors.UsageError.
    """
    from benchcore.cli.options import apply_threads, run_plan_from
    from benchcore.execute import sweep

    from . import cli

    argv = ["--framework", framework, "-w", str(warmup), "-r", str(runs), "--rounds", str(rounds),
            "-p", engine, "--dtype", dtype, "--seed", str(seed)]
    argv += ["--ops", ",".join(ops)] if ops else []
    argv += ["--category", ",".join(categories)] if categories else []
    argv += (["--threads", str(threads)] if threads else []) + ([] if isolate else ["--no-isolation"])
    backend = backend_for(framework)
    args = cli.build_parser(backend).parse_args(argv)
    args.tiny, args.size_target_given = tiny, False
    apply_threads(args.threads)
    device = backend.check(args)
    job, plan = cli._job(backend, args, device, checkpoint=None)
    environment, results = sweep.measure(job, run_plan_from(args), cli.PROG, argv, cli._environment_extra(backend, args))[""]
    return annotate(cli.build_report(args, plan, job, environment, results, {}), backend.suite)


def headlines(result: CaseResult) -> Dict[str, Headline]:
    """{phase: Headline} of one case: its median_ms (the median of the round medians), spread,
    rounds and noise, as every view of the report shows them."""
    return _headlines(result, backend_for("mxnet").suite)


def compare(base: Report, new: Report, threshold_pct: float = 5.0, allow_env_mismatch: bool = False) -> Comparison:
    """`opbench compare BASE NEW`: per case and phase a verdict (faster, slower, same, noisy),
    and `.answer` (benchcore.compare.answer.Answer: the change lines and the verdict line)."""
    from benchcore.compare.answer import judged

    return judged(base, new, backend_for("mxnet").suite, threshold_pct, allow_env_mismatch=allow_env_mismatch)
