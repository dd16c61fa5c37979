"""The kineto profile's two readers (opbench.backends.torch.kineto): kineto's raw events, read
on CPU, and torch's FunctionEvents, read on CUDA and on a torch whose raw events lack a field,
give the same Spans and the same phase summaries on real profiles."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import record_function

from opbench.backends.torch import kineto
from opbench.backends.torch.kineto import RANGE_NAME


def _profiled(calls):
    """A real CPU profile of `calls` (each a forward callable), each timed call inside a range
    as the native engine runs it: forward, then backward from its output; the phases in order."""
    phases = []
    with kineto.profile(on_cuda=False) as prof:
        for call in calls:
            with record_function(RANGE_NAME):
                out = call()
            with record_function(RANGE_NAME):
                out.backward(torch.ones_like(out))
            phases += ["forward", "backward"]
    return prof, phases


def _workloads():
    x = torch.randn(8, 16, requires_grad=True)
    a = torch.randn(6, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    image = torch.randn(2, 3, 10, 10, requires_grad=True)
    kernel = torch.randn(4, 3, 3, 3, requires_grad=True)
    return [lambda: x * 2, lambda: F.layer_norm(x, (16,)), lambda: torch.linalg.solve(a + 6 * torch.eye(6), b),
            lambda: F.conv2d(image, kernel, padding=1), lambda: torch.sort(x, dim=1).values.cumsum(1)]


def _key(span):
    return (span.name, span.start, span.end)


def test_the_raw_reader_gives_torchs_spans_and_summaries():
    prof, phases = _profiled(_workloads())
    raw = sorted(kineto.spans_of_kineto(prof.kineto_results), key=_key)
    torchs = sorted(kineto.spans_of_events(prof.function_events, on_cuda=False), key=_key)
    assert len(raw) == len(torchs) > 50
    for mine, theirs in zip(raw, torchs):
        assert _key(mine) == _key(theirs)
        assert mine.self_us == pytest.approx(theirs.self_us, abs=1e-6)
    assert kineto.phase_summaries(raw, phases, False, "mul") == kineto.phase_summaries(torchs, phases, False, "mul")
    summary = kineto.phase_summaries(raw, phases, False, "mul")
    assert summary["forward"]["Count"] == 5 and all(ms > 0 for ms in summary["backward"]["per_call_ms"])
    assert summary["forward"]["operator"] == "aten::mul"  # the entry's own operator, picked out
    assert summary["forward"]["entries"]["aten::mul"]["count"] >= 1 and "aten::layer_norm" in summary["forward"]["entries"]


def test_a_parent_absorbs_its_only_child_of_its_own_name_as_torch_does():
    with kineto.profile(on_cuda=False) as prof:
        with record_function(RANGE_NAME):
            with record_function("outer"):
                with record_function("outer"):  # the only child, of its parent's name: absorbed
                    torch.ones(4).add(1)
            with record_function("pair"):
                with record_function("pair"):  # a namesake beside a sibling stays
                    torch.ones(4)
                torch.zeros(4)
    raw = kineto.spans_of_kineto(prof.kineto_results)
    torchs = kineto.spans_of_events(prof.function_events, on_cuda=False)
    assert sorted(map(_key, raw)) == sorted(map(_key, torchs))
    assert [s.name for s in raw].count("outer") == 1 and [s.name for s in raw].count("pair") == 2
    [outer] = [s for s in raw if s.name == "outer"]
    [theirs] = [s for s in torchs if s.name == "outer"]
    assert outer.self_us == pytest.approx(theirs.self_us, abs=1e-6)


def test_a_torch_whose_raw_events_lack_a_field_is_read_through_its_function_events():
    prof, phases = _profiled(_workloads()[:1])
    event = SimpleNamespace(**{name: (lambda: 0) for name in kineto.RAW_FIELDS if name != "end_ns"})
    older = SimpleNamespace(events=lambda: [event], trace_start_ns=lambda: 0)
    assert kineto.spans_of_kineto(older) is None
    stand_in = SimpleNamespace(kineto_results=older, function_events=prof.function_events)
    assert sorted(map(_key, kineto.spans(stand_in, on_cuda=False))) == sorted(
        map(_key, kineto.spans_of_events(prof.function_events, on_cuda=False)))
