"""A report's extras derived from its results: the operators without a measured case, the
skipped cases, and a merged report's extras rebuilt from every shard's results.

The sweep and the merge of shards (benchcore.report.merge, through the suites' finish_merge) derive
them the same way, for either framework.
"""

from __future__ import annotations

from typing import List

from benchcore.report.model import Report


def operator_of(result) -> str:
    """The operator a case times: MXNet's operator name; a torch case's OpInfo entry
    ("name" or "name.variant": variants of one name are different entries)."""
    if result.spec.params.get("framework") == "torch":
        return result.spec.name
    return result.spec.params.get("op", result.spec.name)


def label_of(result) -> str:
    variant = result.spec.params.get("variant")
    if result.spec.params.get("framework") == "torch" or not variant:
        return operator_of(result)
    return f"{operator_of(result)} [{variant}]"


def no_benchmark(skipped, results) -> List[dict]:
    """Operators in scope without a measured case: no input rule, or every case failed/skipped."""
    items = [{"op": op, "reason": reason} for op, reason in skipped]
    by_op = {}
    for result in results:
        by_op.setdefault(operator_of(result), []).append(result)
    for op, group in by_op.items():
        if not any(r.ok for r in group):
            statuses = sorted({r.status for r in group})
            items.append({"op": op, "reason": f"all {len(group)} case(s) ended {'/'.join(statuses)}"})
    return sorted(items, key=lambda item: item["op"])


def in_report_order(results) -> list:
    return sorted(results, key=lambda r: (operator_of(r), r.spec.key))


def from_results(skipped, results) -> dict:
    """The extras derived from the results (with the operators that got no case)."""
    return {
        "no_benchmark": no_benchmark(skipped, results),
        "skipped": [{"op": operator_of(r), "key": r.spec.key, "reason": r.error} for r in results if r.status == "skipped"],
    }


def finish_merged(report):
    """A merged report as the unsharded run writes it (benchcore.report.merge's finisher for opbench).

    Results in the run's order, and the extras derived from results rebuilt from all shards'
    results: a shard's "all cases failed" note is wrong once another shard measured the
    operator. Operators without any case (no input rule...) are the same in every shard.
    """
    results = in_report_order(report.results)
    with_results = {operator_of(r) for r in results}
    extras = [report.extra] + [shard.get("extra", {}) for shard in report.extra.get("shards", [])]
    without_cases = sorted({(item["op"], item["reason"]) for extra in extras
                            for item in extra.get("no_benchmark", []) if item["op"] not in with_results})
    extra = {**from_results(without_cases, results), **{k: v for k, v in report.extra.items()
                                                         if k not in ("no_benchmark", "skipped")}}
    return Report(suite=report.suite, environment=report.environment, settings=report.settings,
                  results=results, extra=extra, schema_version=report.schema_version)
