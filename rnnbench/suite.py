"""rnnbench's declaration to benchcore: runner groups, rounds rules, merge order, chart style, and
the torch adapter's environment block."""

from __future__ import annotations

from typing import List

import frameworks.torch
from benchcore.measure import audit
from benchcore.measure.combine import combine_metrics, median
from benchcore.report.model import CaseResult
from benchcore.suite import Suite

SUITE_NAME = "rnnbench"
EXECUTOR = "rnnbench.executor:execute"

#: A runner's one-off costs are paid again by every round's fresh process: report the typical one.
ROUND_RULES = {"build_ms": median, "compile_ms": median, "compile_forward_ms": median, "compile_backward_ms": median}


def category(result: CaseResult) -> str:
    return result.spec.params.get("group") or "lstm"


def combine_rounds(per_round: List[dict]) -> dict:
    """Rounds by ROUND_RULES; the audit by its own rule (benchcore.measure.audit.combine)."""
    return audit.combine_with_audit(per_round, lambda rest: combine_metrics(rest, ROUND_RULES))


def uses_gpu(spec) -> bool:
    return str(spec.params.get("device", "cpu")).startswith("cuda")


def runner_sizes(result: CaseResult) -> dict:
    """A runner's inputs are its sizes (the tidy rows' `inputs` column)."""
    params = result.spec.params
    return {k: params[k] for k in ("seqLength", "numLayers", "inputSize", "hiddenSize", "miniBatch") if k in params}


def _finish_merge(report):
    from .views import finish_merged

    return finish_merged(report)


SUITE = Suite(name=SUITE_NAME, executor=EXECUTOR, frameworks=("torch",), collectors=("frameworks.torch:collect", "frameworks.mxnet:thread_settings"),
              summary_keys=frameworks.torch.SUMMARY_KEYS, category=category, combine_rounds=combine_rounds,
              finish_merge=_finish_merge, chart_style="every_case", case_noun="runner", uses_gpu=uses_gpu,
              case_inputs=runner_sizes, code_path_probes=("frameworks.torch:code_path",))
