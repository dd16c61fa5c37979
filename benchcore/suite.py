"""Suite: what a suite tells benchcore about itself, so the core never reads suite-specific fields.

The core runs, compares, charts and merges reports of any suite. Where it needs to know what a
suite's metrics mean (which fields are its headline figures, how its cases group, how a case's
rounds combine, what a merged report derives from all its results), it asks the suite's
declaration instead of reading `metrics["profiler"]` or a params key by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

from benchcore.report.figures import METRICS, Timing, from_measurement

if TYPE_CHECKING:
    from benchcore.measure.case import CaseSpec
    from benchcore.report.model import CaseResult, Report


def measurement_timings(result: "CaseResult") -> Dict[str, Timing]:
    """The default headline figures: the `forward` and `backward` Measurements."""
    metrics = result.metrics or {}
    found = {metric: from_measurement(metrics.get(metric)) for metric in METRICS}
    return {metric: timing for metric, timing in found.items() if timing is not None}


def no_category(result: "CaseResult") -> str:
    return "all"


def never_on_gpu(spec: "CaseSpec") -> bool:
    return False


def params_inputs(result: "CaseResult"):
    """The default description of a case's inputs: its params' `inputs` (an operator's tensors)."""
    return result.spec.params.get("inputs")


def _combine_default(per_round: List[dict]) -> dict:
    from benchcore.measure.combine import combine_metrics

    return combine_metrics(per_round)


@dataclass(frozen=True)
class Suite:
    """A suite's declaration (see the module docstring)."""

    name: str
    #: "package.module:function" a worker calls for each case
    executor: str = ""
    #: frameworks the suite's workers import (checked in another interpreter by `ab`)
    frameworks: Tuple[str, ...] = ()
    #: "package.module:function"s whose dicts join the report's environment (a framework's block:
    #: frameworks.torch:collect); strings, so a side's interpreter or a cluster node calls them too
    collectors: Tuple[str, ...] = ()
    #: result → {"forward"|"backward": Timing}: the figures its reports present
    timings: Callable[["CaseResult"], Dict[str, Timing]] = measurement_timings
    #: result → its group in summaries (an operator category, a runner group)
    category: Callable[["CaseResult"], str] = no_category
    #: per-round metrics → one (benchcore.measure.combine.combine_metrics with the suite's rules)
    combine_rounds: Callable[[List[dict]], dict] = _combine_default
    #: merged Report → the Report as the unsharded run writes it (see benchcore.report.merge)
    finish_merge: Optional[Callable[["Report"], "Report"]] = None
    #: a report's charts (benchcore.views.charts.STYLES): "slowest" (the slowest cases, and the
    #: categories) or "every_case" (one bar pair per case, whiskers over its rounds)
    chart_style: str = "slowest"
    #: what the suite calls a case, in chart titles and file names ("runner": rnnbench_runners.png)
    case_noun: str = "case"
    #: spec → whether it runs on a GPU: a cluster sweep then claims one GPU per shard
    #: (benchcore.execute.cluster.driver) instead of a node's CPUs
    uses_gpu: Callable[["CaseSpec"], bool] = never_on_gpu
    #: (flattened environment key, how to show its value) of the suite's frameworks (GPU, versions),
    #: shown after the CPU in a history's one-line environment summary (benchcore.history.fingerprint)
    summary_keys: Tuple[Tuple[str, str], ...] = ()
    #: result → what its inputs were, for the tidy rows (benchcore.views.rows): tensors, or sizes
    case_inputs: Callable[["CaseResult"], object] = params_inputs
    #: "package.module:function"s → a dict of what decides the suite's frameworks' kernels (oneDNN's
    #: ISA, torch's CPU capability, the BLAS core): run natively and under valgrind by an
    #: instruction sweep, whose report warns where they differ (benchcore.execute.code_path)
    code_path_probes: Tuple[str, ...] = ()
    #: (variable, value) pairs the suite's frameworks need to count instructions deterministically,
    #: added to the valgrind worker's environment (benchcore.execute.valgrind.launcher; MXNet's
    #: NaiveEngine: frameworks.mxnet.COUNT_ENVIRONMENT)
    count_environment: Tuple[Tuple[str, str], ...] = ()


def declared(name: str) -> Suite:
    """The Suite of a report's suite name: `SUITE` in the package `<name>.suite` (opbench.suite,
    rnnbench.suite), so the core reads any suite's reports without a list of suites. Imported only
    where a reader needs what a report does not store (its headlines, before `metrics.headline`)."""
    import importlib

    from benchcore.errors import UsageError

    try:
        module = importlib.import_module(f"{name}.suite") if name.isidentifier() else None
    except ImportError:
        module = None
    suite = getattr(module, "SUITE", None)
    if not isinstance(suite, Suite):
        raise UsageError(f"the report's suite {name!r} is not installed here (no {name}.suite.SUITE); "
                         "read it where its suite is installed")
    return suite
