"""rnnbench from Python: `rnnbench bench` returned as a Report instead of files.

`measure` runs what `rnnbench bench` runs for the same flags (its parser, runners, rounds in
fresh worker processes, machine reference and report), so `headlines()` of a case are the
figures the CLI reports and `compare` is `rnnbench compare`. Examples: docs/PYTHON_API.md.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from benchcore.compare.verdicts import Comparison
from benchcore.report.model import CaseResult, Report
from benchcore.views.headline import Headline, annotate
from benchcore.views.headline import headlines as _headlines

from .suite import SUITE


def measure(rnns: Sequence[str] = ("cudnn",), *, sizes: Optional[Dict[str, int]] = None, warmup: int = 10,
            nloops: int = 100, rounds: int = 3, device: str = "cpu", threads: Optional[int] = None,
            seed: int = 17, isolate: bool = True) -> Report:
    """Time LSTM runners as `rnnbench bench --group rnns --rnns …` would; `sizes` takes
    fastrnns' names (seqLength, numLayers, inputSize, hiddenSize, miniBatch)."""
    from benchcore.cli.options import run_plan_from
    from benchcore.execute import sweep

    from . import cli

    argv = ["bench", "--group", "rnns", "--rnns", *rnns, "-w", str(warmup), "-r", str(nloops),
            "--rounds", str(rounds), "--device", device, "--seed", str(seed)]
    argv += [part for name, value in (sizes or {}).items() for part in (f"--{name}", str(value))]
    argv += (["--threads", str(threads)] if threads else []) + ([] if isolate else ["--no-isolation"])
    args = cli.build_parser().parse_args(argv)
    cli._split_runner_lists(args)
    cli._check_bench_args(args)
    job, all_specs = cli._job(args, None)
    environment, results = sweep.measure(job, run_plan_from(args), cli.PROG, argv, cli._environment_extra(args),
                                         collect_local=lambda: cli.bench_environment(args, argv))[""]
    return annotate(cli._report(args, job, all_specs, environment, results), SUITE)


def headlines(result: CaseResult) -> Dict[str, Headline]:
    """{phase: Headline} of one runner (see benchcore.views.headline)."""
    return _headlines(result, SUITE)


def compare(base: Report, new: Report, threshold_pct: float = 5.0, allow_env_mismatch: bool = False) -> Comparison:
    """`rnnbench compare BASE NEW`, with `.answer`."""
    from benchcore.compare.answer import judged

    return judged(base, new, SUITE, threshold_pct, allow_env_mismatch=allow_env_mismatch)
