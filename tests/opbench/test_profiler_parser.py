"""The MXNet profiler dump parser, on dumps the real profiler produces inside each test."""

import json
import os
from pathlib import Path

import mxnet as mx
import pytest

from opbench.backends.mxnet.profiler import (
    MEMORY_UNIT_BYTES,
    MXNetProfiler,
    PhaseStats,
    parse_json,
    parse_text,
    peak_bytes,
    profiler_names,
    summarize_phase,
)


def parse_dump(text: str):
    """Either form of `mx.profiler.dumps()`; JSON is recognised by its opening brace."""
    return parse_json(text) if text.lstrip().startswith("{") else parse_text(text)


def find_backward(dump, op: str):
    """The `_backward_<op>` entry of a dump under any of the operator's names, or None."""
    for name in profiler_names(op):
        for candidate in (f"_backward_{name}", f"_backward_{name.lstrip('_')}"):
            if candidate in dump.operators:
                return candidate, dump.operators[candidate]
    return None


@pytest.fixture()
def profiler():
    prof = MXNetProfiler()
    prof.start()
    yield prof
    if prof.running:
        prof.stop()


def _record(fn):
    """Run fn under the profiler; return both dump forms of the same period."""
    from mxnet import profiler as mxprof

    MXNetProfiler()  # configure once (trace file in a temporary folder)
    mxprof.set_state("run")
    mxprof.dumps(reset=True)
    try:
        fn()
        mx.nd.waitall()
        text = mxprof.dumps(reset=False)
        as_json = mxprof.dumps(format="json", reset=True)
    finally:
        mxprof.set_state("stop")
    return text, as_json


def test_aliases_are_exact_and_found_in_real_dumps():
    a = mx.nd.ones((8, 8))

    def run():
        mx.nd.cast(a, dtype="float16")
        mx.nd.concat(a, a, dim=0)
        mx.nd.split(a, num_outputs=2)
        mx.nd.pad(a.reshape((1, 1, 8, 8)), mode="constant", pad_width=(0, 0, 0, 0, 1, 1, 1, 1))
        mx.nd.linalg_gemm2(a, a)

    text, as_json = _record(run)
    for dump in (parse_text(text), parse_json(as_json), parse_dump(text), parse_dump(as_json)):
        for op, recorded in (("cast", "Cast"), ("concat", "Concat"), ("split", "SliceChannel"),
                             ("pad", "Pad"), ("linalg_gemm2", "_linalg_gemm2")):
            name, stats = dump.find(op)
            assert name == recorded
            assert stats.count == 1 and stats.total_ms >= 0
    dump = parse_text(text)
    # exact matching only: "Cast" must not match "amp_cast", "add" must not match "add_n"
    assert dump.find("amp_cast") is None
    assert dump.find("add") is None
    assert "SliceChannel" in profiler_names("split") and "split" in profiler_names("split")


# Records one 64x64 float32 array (16384 bytes) in a fresh process and prints both dump forms.
# A fresh process, because MXNet's storage counter is process-wide: in a long test run it
# carries storage earlier tests allocated while profiling, and their frees (garbage collection,
# the engine finishing queued work) land inside any window this test opens. Here nothing but
# the array can move the counter, so the figures can be asserted exactly.
_FRESH_RECORDING = """
import json
import mxnet as mx
from mxnet import profiler as mxprof
from opbench.backends.mxnet.profiler import MXNetProfiler
MXNetProfiler()
mx.nd.waitall()
mxprof.set_state("run")
mxprof.dumps(reset=True)
x = mx.nd.ones((64, 64))
x.wait_to_read()
del x
mx.nd.waitall()
text = mxprof.dumps(reset=False)
as_json = mxprof.dumps(format="json", reset=True)
mxprof.set_state("stop")
print(json.dumps({"text": text, "json": as_json}))
"""


def test_json_and_text_agree_and_memory_is_bytes():
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-c", _FRESH_RECORDING], capture_output=True, text=True,
                          timeout=120, cwd=root, env={**os.environ, "PYTHONPATH": root})
    assert proc.returncode == 0, proc.stderr
    dumps = json.loads(proc.stdout.strip().splitlines()[-1])
    t, j = parse_text(dumps["text"]), parse_json(dumps["json"])
    # the counter starts at 0, goes up by exactly the array and back down when it is freed
    memory = t.memory["cpu/0"]
    assert (memory.min_bytes, memory.max_bytes) == (0, 64 * 64 * 4)  # the text table is exact
    # the JSON form carries 4 significant digits (16.38 kB): close, not exact
    assert j.memory["cpu/0"].min_bytes == 0
    assert abs(j.memory["cpu/0"].max_bytes - 64 * 64 * 4) < 0.001 * 64 * 64 * 4
    assert MEMORY_UNIT_BYTES == 1000
    assert set(t.operators) == set(j.operators) and t.operators


def test_batch_dot_backward_counts_as_backward(profiler):
    """batch_dot's gradient is two more batch_dot calls: attributed by phase, not by name."""
    a = mx.nd.random.normal(shape=(2, 8, 8))
    b = mx.nd.random.normal(shape=(2, 8, 8))
    a.attach_grad()
    b.attach_grad()
    mx.nd.waitall()
    forward, backward = PhaseStats(), PhaseStats()
    for _ in range(3):
        profiler.dump()
        with mx.autograd.record():
            out = mx.nd.batch_dot(a, b)
        mx.nd.waitall()
        forward.dumps.append(profiler.dump())
        head = mx.nd.ones_like(out)
        mx.nd.waitall()
        profiler.dump()
        out.backward(head)
        mx.nd.waitall()
        backward.dumps.append(profiler.dump())
    fwd, reason = summarize_phase(forward, "batch_dot")
    assert reason is None and fwd["Count"] == 3 and fwd["source"] == "entry batch_dot"
    bwd, reason = summarize_phase(backward, None)
    assert reason is None
    assert bwd["entries"]["batch_dot"]["count"] == 6  # two gradient products per call
    assert bwd["Count"] == 3 and len(bwd["per_call_ms"]) == 3


def test_backward_entry_and_missing_phase(profiler):
    x = mx.nd.ones((16, 16))
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.broadcast_add(x, x)
    y.backward(mx.nd.ones_like(y))
    mx.nd.waitall()
    dump = profiler.dump()
    assert find_backward(dump, "broadcast_add")[0] == "_backward_broadcast_add"
    summary, reason = summarize_phase(PhaseStats(), "broadcast_add")
    assert summary is None and reason


def test_peak_is_per_case_not_accumulated(profiler):
    """Storage allocated while profiling and freed while stopped stays on MXNet's counter;
    a per-case baseline keeps one case's peak from including earlier cases."""
    sync = mx.nd.waitall
    leaked = mx.nd.ones((256, 256))  # 256 KiB, allocated while profiling ...
    leaked.wait_to_read()
    profiler.dump()
    profiler.stop()
    del leaked  # ... and freed while stopped: the counter keeps it
    sync()
    profiler.start()
    baseline = profiler.baseline_bytes(mx.cpu(), sync)
    assert baseline >= 256 * 256 * 4
    small = mx.nd.ones((10, 10))
    small.wait_to_read()
    dumps = [profiler.dump()]
    peak, reason = peak_bytes(dumps, "cpu/0", baseline)
    assert reason is None and peak == 10 * 10 * 4


def test_empty_dumps_parse():
    assert parse_text("\nProfile Statistics:\n\tNote the difference in units for different entries.\n").operators == {}
    empty = json.dumps({"Time": {}, "Memory": {}, "Unit": {"Time": "ms", "Memory": "kB"}})
    assert parse_json(empty).memory == {}
    assert peak_bytes([], "cpu/0", None) == (0, None)


def test_no_stray_profile_file(tmp_path):
    import subprocess
    import sys

    code = ("from opbench.backends.mxnet.profiler import MXNetProfiler; import mxnet as mx; p = MXNetProfiler(); "
            "p.start(); mx.nd.ones((2,2)).wait_to_read(); p.dump(); p.stop()")
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True,
                   env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert list(tmp_path.iterdir()) == []
