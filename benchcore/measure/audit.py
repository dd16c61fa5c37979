"""The audit of what a case computes on: NaN, infinities and subnormal numbers, per tensor.

A benchmark that feeds an operator values that drive it into NaN, infinity or subnormal
arithmetic times a slow path nobody runs in practice: an x86 core takes a microcode assist
for every float32/float64 operation with a subnormal operand or result (unless FTZ/DAZ are
set), and NaN/Inf inputs are a sign that the inputs were out of the operator's domain. So
every timed case is audited once, untimed, right after its last timed call (in one of its
rounds, see RoundAudits; LastCall: what that call produced is counted, no call is added): its
inputs, outputs and input gradients are counted here. The suites (opbench's MXNet and PyTorch
backends, rnnbench) hand numpy arrays in and get plain dicts out; nothing here knows a
framework.

What counts, per tensor, judged by the tensor's own dtype (an index tensor kept in float32 in
a float16 case is a float32 tensor):

- `nan`, `posinf`, `neginf`: any of them flags the tensor.
- `subnormal`: nonzero values below the dtype's smallest normal magnitude (float16 2**-14
  ≈ 6.1035e-5, float32 2**-126 ≈ 1.1755e-38, float64 2**-1022 ≈ 2.2251e-308). Zeros are
  normal here: IEEE hardware computes on zero at full speed, and zeros are everywhere a case
  is right to have them (ReLU outputs, sparse inputs, gradients of max/where/indexing).
  In float32 and float64 one subnormal value flags the tensor. In float16 a tensor is
  flagged only when more than FLOAT16_SUBNORMAL_TOLERANCE of its values are subnormal: MXNet
  and PyTorch compute float16 on a CPU in float32 (where 2**-24 is normal) and NVIDIA GPUs
  handle float16 subnormals at full speed, so a float16 subnormal is a loss of precision, not
  a slow path; and float16 arithmetic on standard-normal data makes them by itself (a
  product of two N(0, 1) values falls below 2**-14 four times in ten thousand, a square of
  one six times in a thousand). Above 1% the values have drifted into that range (a long
  product), which is what the audit is for. The counts are recorded either way.
- integer and boolean tensors hold no non-normal value; other dtypes (bfloat16, which numpy
  lacks) are counted as values only, with `unaudited` saying why.

A case whose non-normal values are inherent to the operator (its rule says why) carries that
reason as `expected`; it is flagged but not a defect.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, Iterable, List, Mapping, Optional

from benchcore.errors import error_summary

#: (unsigned view, exponent mask, smallest normal as raw magnitude bits) per float dtype
_LAYOUT = {
    "float16": ("uint16", 0x7C00, 0x0400),
    "float32": ("uint32", 0x7F800000, 0x00800000),
    "float64": ("uint64", 0x7FF0000000000000, 0x0010000000000000),
}
#: fraction of a float16 tensor's values that may be subnormal before it is flagged (see above)
FLOAT16_SUBNORMAL_TOLERANCE = 0.01
KINDS = ("nan", "posinf", "neginf", "subnormal")
#: values counted at a time: 256 KB of float32, so a chunk's few passes stay in the core's L2
#: cache and each tensor is read from memory once (a chunk of 4 MB made each pass a trip to memory)
CHUNK_VALUES = 1 << 16
#: values a suite copies to the host at a time from a tensor it cannot lend as a numpy view (a
#: GPU tensor): 4 MB of float32, so the largest outputs are never copied whole
TRANSFER_VALUES = 1 << 20


def count(array) -> dict:
    """One tensor's counts: dtype, values, nan, posinf, neginf, subnormal, fraction (of values
    that are any of those) and `flagged` (see the module docstring).

    Works on the bits (an unsigned view), never on float arithmetic, so the counts do not
    depend on the thread's FTZ/DAZ state (with DAZ set, `abs(x) < tiny` would see a
    subnormal as zero) and float16 needs no slow software arithmetic. A suite hands in a numpy
    view of the framework's own buffer where it can (no copy).
    """
    import numpy as np

    values = np.asarray(array)
    dtype = values.dtype.name
    found = {"dtype": dtype, "values": int(values.size), **{kind: 0 for kind in KINDS}, "fraction": 0.0,
             "flagged": False}
    if dtype in _LAYOUT and values.size:
        found.update(_float_counts(np.ascontiguousarray(values).reshape(-1), dtype))
    elif values.dtype.kind not in "biu":
        found["unaudited"] = f"dtype {dtype} is not float16, float32, float64 or an integer type"
    return _finish(found)


def count_many(arrays: Iterable) -> dict:
    """The counts of several arrays of one dtype as one tensor's (a variable-length batch's
    sequences, a list argument), so a report has one entry for them, not one per piece."""
    parts = [count(array) for array in arrays]
    if not parts:
        return count([])
    return _finish(dict(parts[0], values=sum(p["values"] for p in parts),
                        **{kind: sum(p[kind] for p in parts) for kind in KINDS}))


def _float_counts(flat, dtype: str) -> dict:
    """NaN, ±Inf and subnormal counts of a flat float array, CHUNK_VALUES at a time.

    Per chunk, in one scratch buffer: the magnitude bits (sign cleared); their maximum, which
    only NaN and infinities reach (then they are counted: rare); the magnitude minus one, which
    wraps zero round to the top, so its minimum is below the smallest normal's only when a
    subnormal is there (then they are counted: rare). A chunk of normal values and zeros costs
    an AND, a subtraction and two reductions.
    """
    import numpy as np

    unsigned, exponent_mask, smallest_normal = _LAYOUT[dtype]
    kind = np.dtype(unsigned).type
    absolute = kind(exponent_mask | (exponent_mask - 1))  # every bit but the sign
    infinite, below = kind(exponent_mask), kind(smallest_normal - 1)
    bits = flat.view(unsigned)
    scratch = np.empty(min(bits.size, CHUNK_VALUES), unsigned)
    counts = {"nan": 0, "posinf": 0, "neginf": 0, "subnormal": 0}
    for start in range(0, bits.size, CHUNK_VALUES):
        part = bits[start:start + CHUNK_VALUES]
        magnitude = np.bitwise_and(part, absolute, out=scratch[:part.size])
        if magnitude.max() >= infinite:
            _count_special(part, magnitude, infinite, counts)
        np.subtract(magnitude, kind(1), out=magnitude)
        if magnitude.min() < below:
            counts["subnormal"] += int(np.count_nonzero(magnitude < below))
    return counts


def _count_special(bits, magnitude, infinite, counts: dict) -> None:
    """Add a chunk's NaN, +Inf and -Inf to `counts` (magnitude: its bits with the sign cleared)."""
    import numpy as np

    at_infinity = magnitude == infinite
    counts["nan"] += int(np.count_nonzero(magnitude > infinite))
    negative = int(np.count_nonzero(at_infinity & (bits > magnitude)))  # sign bit set
    counts["neginf"] += negative
    counts["posinf"] += int(np.count_nonzero(at_infinity)) - negative


def _finish(counts: dict) -> dict:
    """Fill in a tensor's `fraction` and `flagged` from its counts."""
    bad = sum(counts[kind] for kind in KINDS)
    counts["fraction"] = bad / counts["values"] if counts["values"] else 0.0
    counts["flagged"] = _flagged(counts)
    return counts


def _flagged(counts: dict) -> bool:
    if counts["nan"] or counts["posinf"] or counts["neginf"]:
        return True
    if counts["dtype"] == "float16":
        return counts["subnormal"] > FLOAT16_SUBNORMAL_TOLERANCE * counts["values"]
    return counts["subnormal"] > 0


def audit(groups: Mapping[str, Mapping[str, object]], expected: Optional[str] = None) -> dict:
    """A case's audit from {group: {tensor name: numpy array}} (groups: inputs, outputs,
    gradients): the counts per tensor, the case's totals, `flagged` (any tensor flagged),
    `expected` (the rule's reason, or None) and `defect` (flagged and not expected)."""
    tensors = {group: {name: count(array) for name, array in named.items()} for group, named in groups.items()}
    return summarize_tensors(tensors, expected)


def summarize_tensors(tensors: Mapping[str, Mapping[str, dict]], expected: Optional[str] = None) -> dict:
    """The audit block from counts already made (count() per tensor), grouped as in audit()."""
    every = [counts for named in tensors.values() for counts in named.values()]
    totals = {kind: sum(c[kind] for c in every) for kind in KINDS}
    flagged = any(c["flagged"] for c in every)
    return {**{group: dict(named) for group, named in tensors.items()},
            "values": sum(c["values"] for c in every), **totals,
            "flagged": flagged, "expected": expected, "defect": flagged and expected is None}


def flagged_tensors(block: dict) -> List[tuple]:
    """[(group, name, counts)] of the flagged tensors of an audit block, in report order."""
    return [(group, name, counts) for group in _groups(block)
            for name, counts in block[group].items() if counts.get("flagged")]


def _groups(block: dict) -> List[str]:
    return [key for key, value in block.items() if isinstance(value, dict)]


# --------------------------------------------------------------------------- rounds and sweeps


#: the worker option that tells a slot its case was audited already, in the round it names
AUDITED_IN = "audited_in_round"


def audit_rounds(adaptive: bool) -> str:
    """The settings' `audit_rounds` for a sweep: "first" where every round runs the same seeded
    inputs a fixed number of times (the counts cannot differ, but for an operator that writes
    its inputs in place, whose rounds differ by the one run an uneven split gives some of them
    and by the steady-state detector's extra warmup), "every" under adaptive sampling (an
    in-place operator's inputs then depend on how many calls the round ran)."""
    return "every" if adaptive else "first"


class RoundAudits:
    """Which of a sweep's slots audit their case (benchcore.execute.worker.run_slots asks per slot).

    With `audit_rounds` "first", a case is audited in the first of its slots that comes back ok
    with an audit block, per A/B side (the sides run other builds); every later slot of it is
    told so (AUDITED_IN) and skips the pass. A round that crashed, or whose audit pass failed,
    leaves the audit to the next round. Results read back from a checkpoint count as run."""

    def __init__(self, options: Mapping[str, object]):
        self.once = options.get("audit") is not False and options.get("audit_rounds") == "first"
        self.audited: Dict[tuple, int] = {}

    def options_for(self, slot, options: dict) -> dict:
        found = self.audited.get((slot.side, slot.spec.key)) if self.once else None
        return options if found is None else {**options, AUDITED_IN: found}

    def record(self, slot, result) -> None:
        if self.once and result.ok and (result.metrics or {}).get("audit"):
            self.audited.setdefault((slot.side, slot.spec.key), slot.round)


def needed(options: Mapping[str, object]) -> bool:
    """Whether this round audits its case: not under --no-audit, nor when an earlier round
    audited it (see wanted, which also records why not)."""
    return options.get("audit") is not False and options.get(AUDITED_IN) is None


def wanted(metrics: dict, options: Mapping[str, object]) -> bool:
    """Whether an executor runs the audit pass for its case. Under --no-audit it does not, and
    `metrics` say so (audit null, the reason under `missing`); when an earlier round audited the
    case it does not either, and `metrics` carry no audit (the rounds' combiner takes that
    round's block)."""
    if options.get("audit") is False:
        metrics["audit"] = None
        metrics.setdefault("missing", {})["audit"] = "not asked for (--no-audit)"
        return False
    return needed(options)


class LastCall:
    """A case's audit counted from what its last timed call produced: a suite sets one as its
    measured Workload's `last_call` (benchcore.measure.runner hands it the last iteration's
    output, with that iteration's gradients still in place), so the audit runs no forward or
    backward of its own. `count_block(output)` makes the audit block (without `elapsed_ms`); an
    error it raises is kept, so the timings are never lost to it.

    `deferred`: count_block(output) only takes hold of what is to be counted (the output, the
    gradients the runner is about to reset) and returns a function that counts it, which
    record() runs, after the suite has read its memory figures: what the counting allocates (a
    GPU tensor widened, made dense or contiguous) then never reaches them."""

    def __init__(self, count_block: Callable[[object], object], deferred: bool = False):
        self.count_block = count_block
        self.deferred = deferred
        self.block: Optional[dict] = None
        self.pending: Optional[Callable[[], dict]] = None
        self.error: Optional[BaseException] = None
        self.spent_ms = 0.0

    def __call__(self, output) -> None:
        self._timed(lambda: self._take(self.count_block(output)))

    def _take(self, made) -> None:
        if self.deferred:
            self.pending = made
        else:
            self.block = made

    def _timed(self, step: Callable[[], None]) -> None:
        started = time.perf_counter()
        try:
            step()
        except Exception as exc:  # an audit that fails must not lose the timed figures
            self.error = exc
        self.spent_ms += (time.perf_counter() - started) * 1e3

    def record(self, metrics: dict, options: Mapping[str, object], workload) -> None:
        """metrics["audit"], or null with the reason under `missing` (--no-audit; the audit
        failed); none when an earlier round audited the case (wanted). Where the runner handed
        no last call over (an engine with its own loop: the instruction engine), the audit runs
        one more call of `workload` (one_more_call), and its time is the audit's."""
        if not wanted(metrics, options):
            self.pending = None
            return
        if self.block is None and self.pending is None and self.error is None:
            started, before = time.perf_counter(), self.spent_ms
            try:
                one_more_call(workload, self)
            except Exception as exc:  # an operator that cannot run once more must not lose the timings
                self.error = exc
            self.spent_ms = before + (time.perf_counter() - started) * 1e3  # the call's whole time, counting included
        if self.pending is not None and self.error is None:
            pending, self.pending = self.pending, None
            self._timed(lambda: self._take_block(pending()))
        if self.error is not None:
            metrics["audit"] = None
            metrics.setdefault("missing", {})["audit"] = f"the audit pass failed: {error_summary(self.error)}"
        else:
            metrics["audit"] = dict(self.block, elapsed_ms=self.spent_ms)

    def _take_block(self, block: dict) -> None:
        self.block = block


def one_more_call(workload, counted: LastCall) -> None:
    """One more forward (and backward, where the workload has one) of a timed Workload, its
    output and gradients handed to `counted`, the gradients then reset as after every timed
    backward: the audit's own call, for an engine whose loop hands no last call over."""
    output = workload.forward()
    if workload.backward is not None:
        workload.backward(workload.backward_setup(output) if workload.backward_setup else output)
    workload.sync()
    counted(output)
    if workload.backward is not None and workload.zero_grad:
        workload.zero_grad()


def combine(per_round: List[dict]) -> Optional[dict]:
    """A case's audit over the rounds that audited it (each in its own fresh process): one
    round under `audit_rounds` "first", every round under "every".

    The rounds run the same seeded inputs a fixed number of times, so their counts agree and
    the first round's block stands, with `elapsed_ms` summed (the audit's whole cost) and
    `rounds` the number audited. Where they disagree (adaptive sampling ran a different number
    of in-place updates; an operator that reads unwritten memory), each count is the largest
    any round found and `rounds_differ` is true, so a flag raised in one round is never lost.
    """
    blocks = [block for block in per_round if block]
    if not blocks:
        return None
    elapsed = [block.get("elapsed_ms") for block in blocks]
    first = {k: v for k, v in blocks[0].items() if k != "elapsed_ms"}
    same = all({k: v for k, v in block.items() if k != "elapsed_ms"} == first for block in blocks[1:])
    combined = first if same else _worst(blocks)
    if not same:
        combined["rounds_differ"] = True
    combined["rounds"] = len(blocks)
    combined["elapsed_ms"] = sum(e for e in elapsed if e is not None) if any(e is not None for e in elapsed) else None
    return combined


def combine_with_audit(per_round: List[dict], combine_rest: Callable[[List[dict]], dict]) -> dict:
    """A suite's round combiner around the audit: the metrics without `audit` by
    `combine_rest`, the audit blocks by combine() (so the audit's cost and equal counts do not
    show up as per-round differences)."""
    combined = combine_rest([{k: v for k, v in metrics.items() if k != "audit"} for metrics in per_round])
    if any("audit" in metrics for metrics in per_round):
        combined["audit"] = combine([metrics.get("audit") for metrics in per_round])
    return combined


def _worst(blocks: List[dict]) -> dict:
    tensors: Dict[str, Dict[str, dict]] = {}
    for block in blocks:
        for group in _groups(block):
            for name, counts in block[group].items():
                held = tensors.setdefault(group, {}).get(name)
                tensors[group][name] = counts if held is None else _max_counts(held, counts)
    return summarize_tensors(tensors, blocks[0].get("expected"))


def _max_counts(a: dict, b: dict) -> dict:
    return _finish(dict(a, **{kind: max(a[kind], b[kind]) for kind in KINDS}))


def tally(blocks: Iterable[Optional[dict]]) -> dict:
    """Over a sweep's audit blocks: how many cases were audited, flagged, expected, defects."""
    audited = [block for block in blocks if block]
    flagged = [block for block in audited if block.get("flagged")]
    return {"audited": len(audited), "flagged": len(flagged),
            "expected": sum(1 for block in flagged if block.get("expected")),
            "defects": sum(1 for block in flagged if not block.get("expected")),
            "elapsed_ms": sum(block.get("elapsed_ms") or 0.0 for block in audited)}


def describe(counts: dict) -> str:
    """A tensor's non-normal counts in a few words: "3 NaN, 12 subnormal of 1024 values"."""
    names = {"nan": "NaN", "posinf": "+Inf", "neginf": "-Inf", "subnormal": "subnormal"}
    found = [f"{counts[kind]} {names[kind]}" for kind in KINDS if counts.get(kind)]
    return f"{', '.join(found) or 'none'} of {counts.get('values', 0)} values"


# --------------------------------------------------------------------------- views (text; the CLIs print)


def findings(block: dict) -> str:
    """An audit block's flagged tensors in one line: "outputs 0: 1 subnormal of 1 values; …"."""
    return "; ".join(f"{group} {name}: {describe(counts)}" for group, name, counts in flagged_tensors(block))


def summary_lines(labelled: List[tuple], prog: str) -> List[str]:
    """The stderr summary of a sweep's audit from [(case label, audit block or None)]: one
    line when every audited case computed on normal numbers, else a header and one line per
    flagged case (defects first)."""
    blocks = [block for _label, block in labelled if block]
    if not blocks:
        return []
    counted = tally(blocks)
    timed = any(block.get("elapsed_ms") is not None for block in blocks)
    cost = f" (audit {counted['elapsed_ms'] / 1e3:.1f} s)" if timed else ""
    if not counted["flagged"]:
        return [f"{prog}: audit: all {counted['audited']} audited case(s) computed on normal numbers{cost}"]
    lines = [f"{prog}: audit: {counted['flagged']} of {counted['audited']} case(s) computed on non-normal values"
             f"{cost}: {counted['defects']} unexplained, {counted['expected']} expected:"]
    for label, block in _flagged_cases(labelled):
        why = f" [expected: {block['expected']}]" if block.get("expected") else ""
        lines.append(f"  {label}: {findings(block)}{why}")
    return lines


def _flagged_cases(labelled: List[tuple]) -> List[tuple]:
    """The flagged (label, block) pairs, unexplained ones first, each group in the given order."""
    flagged = [(label, block) for label, block in labelled if block and block.get("flagged")]
    return sorted(flagged, key=lambda item: bool(item[1].get("expected")))


def sweep_lines(labelled_metrics: List[tuple], prog: str) -> List[str]:
    """A sweep's stderr lines from [(case label, its metrics)] of the cases that ran: the audit's
    summary, and, where flushing was asked for or is in force, what the operator threads did."""
    lines = summary_lines([(label, metrics.get("audit")) for label, metrics in labelled_metrics], prog)
    states = [metrics.get("denormals") for _label, metrics in labelled_metrics]
    return lines + ([f"{prog}: {flush_text(states)}"] if flush_notable(states) else [])


MARKDOWN_HEADERS = ["Case", "Tensor", "NaN", "+Inf", "-Inf", "Subnormal", "Values", "Expected"]


def markdown_rows(labelled: List[tuple]) -> List[list]:
    """One row per flagged tensor of the flagged cases (defects first), for a Markdown table."""
    rows = []
    for label, block in _flagged_cases(labelled):
        for group, name, counts in flagged_tensors(block):
            rows.append([label, f"{group} {name}", *(str(counts[kind]) for kind in KINDS), str(counts["values"]),
                         block.get("expected") or "no"])
    return rows


def markdown_intro(labelled: List[tuple]) -> str:
    """The sentence above the table: what was counted, and how many cases it flagged."""
    counted = tally(block for _label, block in labelled)
    if not counted["audited"]:
        return "No case was audited (`--no-audit`, or no case ran)."
    per_round = any((block or {}).get("rounds", 1) > 1 for _label, block in labelled)
    when = ("once per round" if per_round
            else "once per case (in one of its rounds: seeded inputs give every round the same counts)")
    text = (f"NaN, ±Inf and subnormal values counted in every tensor a case computes on or produces (inputs, "
            f"outputs, gradients), {when}, untimed, after the timed runs (subnormal: nonzero and below the "
            f"dtype's smallest normal; a float16 tensor is flagged above {FLOAT16_SUBNORMAL_TOLERANCE:.0%} "
            f"subnormal). {counted['audited']} case(s) audited, {counted['flagged']} flagged")
    if counted["flagged"]:
        text += (f": {counted['defects']} unexplained, {counted['expected']} expected (inherent to the operator, "
                 "for the reason given)")
    return text + "."


def markdown_section(labelled_metrics: List[tuple], audited: bool = True) -> List[str]:
    """A report's *Non-normal values* section from [(case label, its metrics)] of the cases that
    ran: what was counted, the flagged tensors (one row each), and whether subnormals were
    flushed. `audited` False: the run was asked not to audit."""
    from tabulate import tabulate

    labelled = [(label, metrics.get("audit")) for label, metrics in labelled_metrics]
    flush = flush_text(metrics.get("denormals") for _label, metrics in labelled_metrics)
    parts = ["## Non-normal values", "", markdown_intro(labelled) if audited else "Not audited (`--no-audit`)."]
    parts += [flush, ""] if flush else [""]
    rows = [[cell.replace("|", "\\|") for cell in row] for row in markdown_rows(labelled)]
    if rows:
        parts += [tabulate(rows, headers=MARKDOWN_HEADERS, tablefmt="github", disable_numparse=True), ""]
    return parts


def flush_text(states: Iterable[Optional[dict]]) -> Optional[str]:
    """What the workers' `denormals` records say about flushing, in one sentence (None when
    none was recorded): whether it was asked for and what the operator threads did."""
    found = [state for state in states if state]
    if not found:
        return None
    asked = any(state.get("requested") for state in found)
    ftz = [state["operator_threads"]["ftz"] for state in found if state.get("operator_threads")]
    daz = [state["operator_threads"]["daz"] for state in found if state.get("operator_threads")]
    if not ftz:
        return f"Subnormals: flushing {'asked for' if asked else 'not asked for'}; operator threads not probed."
    if min(ftz + daz) == 1.0:
        effect = "flushed to zero in the operator threads (FTZ and DAZ on)"
    elif max(ftz + daz) == 0.0:
        effect = "not flushed in the operator threads (FTZ and DAZ off)"
    else:
        effect = (f"flushed by some operator threads only (FTZ {min(ftz):.0%}-{max(ftz):.0%}, "
                  f"DAZ {min(daz):.0%}-{max(daz):.0%} of probe values)")
    return f"Subnormals: {effect}; --flush-denormal {'given' if asked else 'not given'}."


def flush_notable(states: Iterable[Optional[dict]]) -> bool:
    """Whether flushing was asked for, or is in force in some operator thread anyway: worth a
    line in a sweep's summary."""
    return any(state and (state.get("requested") or any((state.get("operator_threads") or {}).values()))
               for state in states)
