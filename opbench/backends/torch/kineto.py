"""The kineto profile around a torch case's measured runs, read as what each timed call held.

Each timed call runs inside a record_function range (RANGE_NAME); after the runs, every
host-side operator of the profile becomes a Span (its time, its self time: less its children
on its thread, and on CUDA its kernels' device time), and phase_summaries says what each range
held: a call's figure and every operator by its profiler name.

Two readers make the Spans, with one result:
- kineto's raw events (spans_of_kineto), on CPU: torch's own reading (`function_events`: a
  FunctionEvent of some thirty fields per event, then the tree) took 8 of a 45 s one-round torch
  sweep here, 243 events a case on average and 91,927 for the largest; the raw reader asks each
  event for the six fields a Span needs and builds the same tree by torch's rules (per thread,
  an event is the child of the innermost one whose span holds it; a parent whose only child
  has its name absorbs it);
- torch's FunctionEvents (spans_of_events), on CUDA, where torch matches each kernel to the
  operator that launched it, and on a torch whose raw events lack a field the raw reader needs.
tests/opbench/test_torch_kineto.py holds the two readers to the same Spans on real profiles.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional

#: the profiler range around each timed call
RANGE_NAME = "opbench::call"
#: the profiler's clock step (it records microseconds with a nanosecond fraction)
RESOLUTION_MS = 1e-6
US_PER_MS = 1e3
#: names torch's reader leaves out (torch.autograd.profiler_util._filter_name): the profiler's
#: own bookkeeping and a few tensor-attribute utilities
LEFT_OUT = frozenset({
    "[memory]", "[OutOfMemory]", "profiler::_record_function_enter", "profiler::_record_function_enter_new",
    "profiler::_record_function_exit", "aten::is_leaf", "aten::output_nr", "aten::_version"})
#: kineto's activity types of host-side events that are CUDA API calls (cudaLaunchKernel,
#: cudaMemcpyAsync, cuLaunchKernel, ...): torch's reader keeps them as CPU events beside the
#: operators, but they are what an operator does, not operators
API_ACTIVITIES = frozenset({"cuda_runtime", "cuda_driver"})
#: their names (runtime cudaX, driver cuX), for a torch whose FunctionEvents carry no activity type
API_NAME = re.compile(r"cu(da)?[A-Z]\w*$")
#: what the raw reader asks of each of kineto's events
RAW_FIELDS = ("name", "device_type", "is_async", "start_thread_id", "end_thread_id", "start_ns", "end_ns")


@dataclass
class Span:
    """A host-side operator (or a call's range) as the profile saw it, in microseconds since
    the trace's start."""
    name: str
    start: float
    end: float
    self_us: float = 0.0
    device_us: float = 0.0

    @property
    def total_us(self) -> float:
        return self.end - self.start


def profile(on_cuda: bool):
    """The profiler around a case's measured runs: torch.autograd.profiler.profile under kineto,
    what torch.profiler.profile wraps. Not torch.profiler.profile itself: its first start in a
    process asks `hasattr(torch, "_inductor")`, which imports torch._inductor and torch._dynamo
    (1.3-1.5 s here, paid by every worker, for a setting of inductor's CUDA graphs a case
    never uses). The CUDA switch is `use_device="cuda"` from torch 2.4 (2.14 removed the older
    `use_cuda`, which 2.1-2.3 need)."""
    import torch
    from torch.autograd.profiler import profile as autograd_profile

    return autograd_profile(use_kineto=True, **(cuda_switch(torch.__version__) if on_cuda else {}))


def cuda_switch(version: str) -> dict:
    """torch.autograd.profiler.profile's argument that adds CUDA activity, in torch `version`."""
    from torch.torch_version import TorchVersion

    return {"use_device": "cuda"} if TorchVersion(version) >= (2, 4) else {"use_cuda": True}


def spans(prof, on_cuda: bool) -> List[Span]:
    """The host-side Spans of a finished profile (see the module docstring for the reader)."""
    found = None if on_cuda else spans_of_kineto(prof.kineto_results)
    return found if found is not None else spans_of_events(prof.function_events, on_cuda)


def spans_of_events(events, on_cuda: bool) -> List[Span]:
    """Spans from torch's FunctionEvents: host-side, synchronous operators (with CUDA activity the
    profile also holds each range's device-side copy and the kernels, whose time the operator
    that launched them carries, and the CUDA API calls each operator made)."""
    from torch.autograd import DeviceType

    return [Span(e.name, e.time_range.start, e.time_range.end, e.self_cpu_time_total,
                 _device_us(e) if on_cuda else 0.0)
            for e in events if e.device_type == DeviceType.CPU and not e.is_async and not is_api_call(e)]


def is_api_call(event) -> bool:
    """A CUDA runtime or driver call, by kineto's activity type where torch keeps it, else by name."""
    kind = getattr(event, "activity_type", None)
    return kind in API_ACTIVITIES if kind else bool(API_NAME.match(event.name))


def _device_us(event) -> float:
    value = getattr(event, "self_device_time_total", None)  # torch before 2.4 knows only the old name
    return float(getattr(event, "self_cuda_time_total", 0.0) if value is None else value)


@dataclass(eq=False)
class _Node:
    span: Span
    parent: Optional["_Node"] = None
    children: List["_Node"] = field(default_factory=list)


def spans_of_kineto(result) -> Optional[List[Span]]:
    """Spans from kineto's raw events, as torch's reader would make them on CPU: the events it
    leaves out left out, times relative to the trace's start, and the tree torch builds. None
    where this torch's events lack a field (the caller then reads torch's FunctionEvents)."""
    from torch.autograd import DeviceType

    events = result.events()
    if events and not all(hasattr(events[0], name) for name in RAW_FIELDS):
        return None
    origin = result.trace_start_ns()
    threads: Dict[int, List[_Node]] = defaultdict(list)
    for event in events:
        name = event.name()
        if name in LEFT_OUT or event.device_type() != DeviceType.CPU or event.is_async():
            continue
        thread = event.start_thread_id()
        if thread != event.end_thread_id() or getattr(event, "is_hidden_event", lambda: False)():
            continue
        threads[thread].append(_Node(Span(name, (event.start_ns() - origin) / 1000, (event.end_ns() - origin) / 1000)))
    nodes = [node for thread in threads.values() for node in _nested(thread)]
    kept = _absorb_namesakes(nodes)
    for node in kept:
        node.span.self_us = node.span.total_us - sum(child.span.total_us for child in node.children)
    return [node.span for node in kept]


def _nested(nodes: List[_Node]) -> List[_Node]:
    """One thread's nodes with their parents and children: each the child of the innermost
    earlier node whose span holds it (a partial overlap makes no parent)."""
    nodes.sort(key=lambda node: (node.span.start, -node.span.end))
    stack: List[_Node] = []
    for node in nodes:
        while stack and (node.span.start >= stack[-1].span.end or node.span.end > stack[-1].span.end):
            stack.pop()
        if stack:
            node.parent = stack[-1]
            stack[-1].children.append(node)
        stack.append(node)
    return nodes


def _absorb_namesakes(nodes: List[_Node]) -> List[_Node]:
    """The nodes less each one whose parent has its name and no other child: the parent takes
    its children (torch's reader does the same), until none is left to absorb."""
    while True:
        absorbed = set()
        for node in nodes:
            parent = node.parent
            if parent is not None and parent.span.name == node.span.name and len(parent.children) == 1:
                parent.children = node.children
                for child in node.children:
                    child.parent = parent
                absorbed.add(id(node))
        if not absorbed:
            return nodes
        nodes = [node for node in nodes if id(node) not in absorbed]


def phase_summaries(host: List[Span], phases: List[str], on_device: bool, aten_name: Optional[str]) -> Dict[str, dict]:
    """{phase: summary} from a profile's host-side Spans, the i-th range being the i-th timed
    call (of phase phases[i]): per call, the time of the operators inside its range; plus every
    operator by its profiler name (count, host self and total ms, on a device also its kernels'
    `device_self_ms`) and the entry's own.

    An operator is inside a call when its span lies within the range's, on any thread: on CUDA
    the autograd engine runs backward on a device thread of its own, where nothing nests under
    the range, while the calling thread waits inside the range until it is done. A call's
    figure is, on CUDA, its operators' kernel time; on CPU, the range's time less its own (the
    operators directly under it, without the Python between them)."""
    calls: Dict[str, List[float]] = {}
    names: Dict[str, Dict[str, dict]] = {}
    host = sorted(host, key=lambda span: (span.start, -span.end))
    starts = [span.start for span in host]
    ranges = [span for span in host if span.name == RANGE_NAME]
    if len(ranges) != len(phases):
        raise RuntimeError(f"the profiler recorded {len(ranges)} call ranges for {len(phases)} timed calls")
    for call, phase in zip(ranges, phases):
        inside = _inside(call, host, starts)
        inside_us = sum(op.device_us for op in inside) if on_device else call.total_us - call.self_us
        calls.setdefault(phase, []).append(inside_us / US_PER_MS)
        table = names.setdefault(phase, {})
        for op in inside:
            row = table.setdefault(op.name, {"count": 0, "self_ms": 0.0, "total_ms": 0.0,
                                             **({"device_self_ms": 0.0} if on_device else {})})
            row["count"] += 1
            row["self_ms"] += op.self_us / US_PER_MS
            row["total_ms"] += op.total_us / US_PER_MS
            if on_device:
                row["device_self_ms"] += op.device_us / US_PER_MS
    return {phase: _summary(per_call, names[phase], aten_name) for phase, per_call in calls.items()}


def _inside(call: Span, host: List[Span], starts: List[float]) -> List[Span]:
    """The Spans lying within the call range's, the range itself left out (the device time a
    range may carry is its gpu_user_annotation's span, not an operator's)."""
    low = bisect.bisect_left(starts, call.start)
    high = bisect.bisect_left(starts, call.end, lo=low)
    return [span for span in host[low:high] if span is not call and span.end <= call.end]


def _summary(per_call: List[float], entries: Dict[str, dict], aten_name: Optional[str]) -> dict:
    own = f"aten::{aten_name}" if aten_name else None
    return {"Count": len(per_call), "Total_ms": sum(per_call), "Min_ms": min(per_call), "Max_ms": max(per_call),
            "Avg_ms": sum(per_call) / len(per_call), "calls": len(per_call), "per_call_ms": per_call,
            "resolution_ms": RESOLUTION_MS, "source": "all operators of each call",
            "operator": own if own in entries else None,
            "entries": dict(sorted(entries.items()))}
