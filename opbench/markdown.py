"""The pieces both frameworks' Markdown reports of an operator sweep share: the cell formats, the
noise and round-spread cells, the two speeds in words, the sampling sentence, the table
(opbench.backends.mxnet.markdown, opbench.backends.torch.markdown)."""

from __future__ import annotations

from typing import Dict, Optional

from benchcore.measure import modes
from benchcore.measure.measurement import Measurement
from benchcore.report.model import CaseResult
from benchcore.views.rows import inputs_text

MISSING = "---"


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _inputs_text(result: CaseResult) -> str:
    """`lhs (1024,1024), rhs (1024,1), axis=1` (benchcore.views.rows.inputs_text, as in the CSV)."""
    inputs = (result.metrics or {}).get("inputs") or result.spec.params.get("inputs") or {}
    return inputs_text(inputs).replace("|", "\\|")


def _measurement(samples, round_sizes=None) -> Optional[Measurement]:
    return Measurement(samples, round_sizes=round_sizes) if samples else None


def _round_spread(m: Optional[Measurement]) -> str:
    """The rounds' spread, or "bimodal" where the quantity has two speeds (benchcore.measure.modes)."""
    if m is not None and modes.of(m) is not None:
        return "bimodal"
    return MISSING if m is None or m.round_spread is None else f"{m.round_spread * 100:.1f}%"


def _noise(named) -> str:
    """The Noise cell: which phases' IQR/median reach NOISE_THRESHOLD (their medians are then
    worth less than their digits suggest)."""
    noisy = [name for name, m in named if m is not None and m.noisy]
    return "noisy " + "+".join(noisy) if noisy else ""


def bimodal_texts(result: CaseResult, quantities: Dict[str, Optional[Measurement]]) -> Dict[str, Optional[str]]:
    """{name: the two speeds of that Measurement of `result` and their likely cause, in words
    (None: one speed)}; both frameworks' Markdown lists them."""
    records = (result.metrics or {}).get("contention")
    found = {name: modes.described(m, records) if m is not None else None for name, m in quantities.items()}
    return {name: data["text"] if data else None for name, data in found.items()}


def _table(rows, headers) -> str:
    from tabulate import tabulate

    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def capped(result: CaseResult) -> bool:
    """Adaptive sampling ran out of --max-time before reaching the target precision."""
    return bool((result.metrics or {}).get("capped"))


def _sampling_text(settings: dict) -> str:
    """How many iterations ran: the fixed runs, or adaptive mode's stopping rule; and over how
    many rounds."""
    run = settings.get("run_settings") or {}
    rounds = settings.get("rounds") or {}
    if run.get("target_precision") is None:
        text = f"warmup {settings.get('warmup', '?')}; runs {settings.get('runs', '?')}"
    else:
        text = (f"warmup {settings.get('warmup', '?')}; adaptive sampling: runs until IQR/median < "
                f"{run['target_precision']:g} for every timed quantity, after at least {run['min_runs']} "
                f"runs and {run['min_time_s']:g} s, at most {run['max_time_s']:g} s per case "
                f"(Runs: the runs each case took; `capped`: the target was not reached)")
    if rounds.get("rounds", 1) > 1:
        per_round = rounds.get("runs_per_round")  # one number per round (a number in older reports)
        runs = ", ".join(map(str, per_round)) if isinstance(per_round, list) else per_round
        text += (f"; {rounds['rounds']} rounds, each in fresh worker processes and a shuffled case order "
                 f"(seed {rounds.get('order_seed')}), with {runs} runs and "
                 f"{rounds.get('warmup_per_round')} warmup each")
    return text
