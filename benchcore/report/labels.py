"""Labels: short, distinct names for a report's cases, for tables and charts.

A case's key is exact but unreadable (suite/name/all params as JSON); its name alone is
readable but not unique (opbench has several cases per operator, rnnbench a runner at several
sizes). A label is the name plus only what tells same-named cases apart.
"""

from __future__ import annotations

import json
from typing import Dict, List, Sequence

from benchcore.report.model import CaseResult


def case_labels(results: Sequence[CaseResult], max_len: int = 60) -> Dict[str, str]:
    """Labels by case key: the name alone when unique, else the name plus only the params that
    differ between same-named cases (a runner's sizes, an operator's input shapes).

    Fixed settings repeated on every row (device, fuser, seed) only push the numbers off screen.
    A suite's own short label, params["variant"] (opbench: "(1024,1024)"), stands for all the
    differing params when it tells the cases apart by itself.
    """
    groups: Dict[str, List[CaseResult]] = {}
    for r in results:
        groups.setdefault(r.spec.name, []).append(r)
    labels: Dict[str, str] = {}
    for name, group in groups.items():
        keys = sorted({k for r in group for k in r.spec.params})
        differing = [k for k in keys if len({_compact(r.spec.params.get(k)) for r in group}) > 1]
        if "variant" in differing:
            if len({_compact(r.spec.params.get("variant")) for r in group}) == len(group):
                differing = ["variant"]
            else:  # the variant names the inputs; other differences (dtype, ctx) stay visible
                differing = [k for k in differing if k != "inputs"]
        texts = [_label_text(r.spec.params, differing, max_len) for r in group]
        if len(set(texts)) < len(texts):  # cut to the same text: number them, never merge them
            texts = [f"{text} #{i}" for i, text in enumerate(texts, 1)]
        for r, text in zip(group, texts):
            labels[r.spec.key] = f"{name} {text}".strip()
    return labels


def _label_text(params: dict, keys: List[str], max_len: int) -> str:
    parts = [_compact(params.get(k)) if k in ("inputs", "variant") else f"{k}={_compact(params.get(k))}"
             for k in keys]
    text = " ".join(parts)
    return text if len(text) <= max_len else text[: max_len - 1] + "…"


def _compact(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
