"""The instruction engine's logic without valgrind: geometry, the missing tool, dump parsing,
verdicts on synthetic count reports (the real valgrind runs: test_instructions_valgrind.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchcore.compare import count_verdicts
from benchcore.errors import UsageError
from benchcore.execute import valgrind
from benchcore.measure import callgrind
from benchcore.measure.case import CaseSpec
from benchcore.measure.instructions import DUMPS, Counts, quantities, read_dumps
from benchcore.report.model import CaseResult, Report
from benchcore.views import count_comparison

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- geometry


def test_default_and_off_geometry():
    assert valgrind.parse_geometry("default") == valgrind.DEFAULT_GEOMETRY
    assert valgrind.parse_geometry("off") is None
    assert valgrind.DEFAULT_GEOMETRY.flags() == ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64"]


def test_custom_geometry_in_any_order():
    found = valgrind.parse_geometry("LL=1048576,16,64:I1=65536,4,64:D1=49152,12,64")
    assert found.to_dict() == {"I1": "65536,4,64", "D1": "49152,12,64", "LL": "1048576,16,64"}


@pytest.mark.parametrize("text, words", [
    ("I1=32768,8,64:D1=32768,8,64", "lacks LL"),
    ("I1=32768,8:D1=32768,8,64:LL=8388608,16,64", "is not a cache"),
    ("I1=32768,8,64:D1=32768,8,60:LL=8388608,16,64", "line a power of two"),
    ("I1=1000,8,64:D1=32768,8,64:LL=8388608,16,64", "size = sets x ways x line"),
    ("I1=32768,8,64:I1=32768,8,64:LL=8388608,16,64", "is not a cache"),
])
def test_malformed_geometry_names_the_fix(text, words):
    with pytest.raises(UsageError) as error:
        valgrind.parse_geometry(text)
    assert words in str(error.value) and "use" in str(error.value)


def test_launcher_pins_the_environment_and_the_caches():
    prefix = valgrind.launcher(valgrind.DEFAULT_GEOMETRY, "/x/shim.so", "/usr/bin/valgrind")
    assert prefix[0] == "env" and "PYTHONHASHSEED=0" in prefix
    assert "OMP_NUM_THREADS=1" in prefix and f"{valgrind.SHIM_ENV}=/x/shim.so" in prefix
    tool = prefix[prefix.index("/usr/bin/valgrind"):]
    assert tool[:4] == ["/usr/bin/valgrind", "--tool=callgrind", "--quiet", "--collect-atstart=no"]
    assert "--callgrind-out-file=%q{BENCHCORE_WORKER_SCRATCH}/callgrind.out.%p" in tool
    assert tool[-4:] == ["--cache-sim=yes", "--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64"]
    assert "--cache-sim=yes" not in valgrind.launcher(None, "/x/shim.so", "/usr/bin/valgrind")


# --------------------------------------------------------------------------- the missing tool


def _run(argv, path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PATH=path, OPBENCH_TINY="1")
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


@pytest.mark.parametrize("argv", [
    ["-m", "opbench", "--engine", "instructions", "--ops", "broadcast_add"],
    ["-m", "opbench", "--framework", "torch", "--engine", "instructions", "--ops", "add"],
    ["-m", "rnnbench", "bench", "--engine", "instructions", "--rnns", "aten", "--group", "rnns"],
])
def test_missing_valgrind_is_one_line_and_exit_2(tmp_path, argv):
    out = tmp_path / "r.json"
    done = _run([*argv, "-o" if "opbench" in argv else "--output-file", str(out)], str(tmp_path))  # no valgrind on PATH
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "valgrind, which is not on PATH" in lines[0] and "apt-get install valgrind" in lines[0]
    assert not out.exists() and not list(tmp_path.glob("*.checkpoint.jsonl"))


def test_malformed_geometry_on_the_command_line(tmp_path):
    done = _run(["-m", "opbench", "--engine", "instructions", "--ops", "broadcast_add", "--cache-sim", "I1=1,2",
                 "-o", str(tmp_path / "r.json")], os.environ["PATH"])
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "--cache-sim 'I1=1,2'" in done.stderr


# --------------------------------------------------------------------------- dumps

DUMP = """# callgrind format
version: 1
positions: line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
summary: 1000 300 100 10 20 5 1 2 1

ob=(1) /opt/build-a/lib/libmxnet.so
fl=(1) /opt/build-a/mxnet/src/operator/tensor/elemwise.cc
fn=(1) mxnet::op::Compute
0 600 200 50 5 10 2 1 1
cfn=(2) mxnet::op::Kernel
calls=3 0
0 300 100 50 5 10 3 0 1
fn=(2)
0 300 100 50 5 10 3
fl=(2) ???
fn=(3) memcpy
5 100 0 0 0 0
"""


def test_dump_totals_functions_and_stripped_paths(tmp_path):
    path = tmp_path / "callgrind.out.1.1"
    path.write_text(DUMP)
    dump = callgrind.read(path)
    assert dump.totals["Ir"] == 1000 and dump.totals["DLmw"] == 0 + 1
    compute = "mxnet::op::Compute [operator/tensor/elemwise.cc]"  # without the build's /opt/build-a/mxnet/src
    kernel = "mxnet::op::Kernel [operator/tensor/elemwise.cc]"
    assert dump.functions[compute][0]["Ir"] == 600 and dump.functions[compute][1]["Ir"] == 900
    assert dump.functions[kernel][0]["Ir"] == 300
    assert dump.functions["memcpy [libmxnet.so]"][0] == {"Ir": 100}
    assert callgrind.read(path, with_functions=False).functions == {}
    rows = {row["function"]: row for row in dump.profile()}
    assert rows[compute] == {"function": compute, "self": 600, "inclusive": 900}


def _dump(folder, name, ir):
    path = folder / name
    path.write_text(DUMP.replace("summary: 1000", f"summary: {ir}"))
    return str(path)


def test_the_parent_reads_a_workers_dumps_and_removes_them(tmp_path):
    """The worker answers with its dumps' paths (benchcore.measure.instructions.count_workload);
    the parent turns them into counts, the last repeat's profile and the overhead."""
    dumps = {"overhead": _dump(tmp_path, "o", 2400), "backward": [],
             "forward": [_dump(tmp_path, f"f{k}", ir) for k, ir in enumerate((1000, 1002, 1001))]}
    answer = read_dumps({"status": "ok", "metrics": {"engine": "instructions", DUMPS: dumps}})
    metrics = answer["metrics"]
    assert answer["status"] == "ok" and DUMPS not in metrics
    assert metrics["counts"]["forward"]["Ir"]["samples"] == [1000, 1002, 1001]
    assert metrics["counts"]["backward"] is None and metrics["count_overhead"]["Ir"] == 2400
    assert metrics["profile"]["forward"][0]["function"].startswith("mxnet::op::Compute")
    assert not list(tmp_path.iterdir())


def test_a_dump_the_parent_cannot_read_fails_the_case_with_the_reason(tmp_path):
    dumps = {"overhead": _dump(tmp_path, "o", 2400), "forward": [str(tmp_path / "gone")], "backward": []}
    answer = read_dumps({"status": "ok", "metrics": {DUMPS: dumps}})
    assert answer["status"] == "failed" and "could not read the case's callgrind dumps" in answer["error"]
    assert not list(tmp_path.iterdir())
    timing = {"status": "ok", "metrics": {"forward": {"samples_ms": [1.0]}}}
    assert read_dumps(dict(timing)) == timing


def test_quantities_and_estimated_cycles():
    found = quantities({"Ir": 1000, "Dr": 300, "Dw": 100, "I1mr": 10, "D1mr": 20, "D1mw": 5,
                        "ILmr": 1, "DLmr": 2, "DLmw": 1})
    # 1400 accesses, 35 L1 misses, 4 of them to RAM: 1365 L1 hits + 5 * 31 LL hits + 35 * 4
    assert found == {"Ir": 1000, "L1_misses": 35, "LL_misses": 4, "cycles_est": 1365 + 5 * 31 + 35 * 4}
    assert quantities({"Ir": 7}) == {"Ir": 7}


def test_profile_delta_names_the_functions_that_moved():
    base = [{"function": "a", "self": 100, "inclusive": 500}, {"function": "b", "self": 50, "inclusive": 50}]
    new = [{"function": "a", "self": 100, "inclusive": 700}, {"function": "c", "self": 200, "inclusive": 200}]
    delta = callgrind.profile_delta(base, new)
    assert delta["inclusive"][0] == {"function": "a", "base": 500, "new": 700, "change": 200}
    assert [r["function"] for r in delta["self"]] == ["c", "b"]


def _stripped(first: str, second: str, inner: int) -> str:
    """A dump of a call into a stripped libmxnet.so: one exported function, two functions named
    by their address (`first`, `second`); and in libc memcpy and an unnamed function."""
    return f"""# callgrind format
version: 1
positions: line
events: Ir
summary: {100 + 500 + inner + 50}

ob=(1) /venv/lib/python3.11/site-packages/mxnet/libmxnet.so
fl=(1) ???
fn=(1) MXImperativeInvoke
0 100
cfn=(2) {first}
calls=1 0
0 {500 + inner}
fn=(2)
0 500
cfn=(3) {second}
calls=1 0
0 {inner}
fn=(3)
0 {inner}
ob=(2) /lib/x86_64-linux-gnu/libc.so.6
fn=(4) memcpy
0 30
fn=(5) 0x0000000000012340'2
0 20
"""


def test_a_stripped_objects_unnamed_functions_are_summed_per_object(tmp_path):
    """callgrind names a stripped object's unexported functions by address; the dump keeps every
    object's exclusive cost, in all and in its unnamed functions (one named `0x…'2`, a recursion
    level, is unnamed too)."""
    path = tmp_path / "callgrind.out.1"
    path.write_text(_stripped("0x0000000001a00010", "0x0000000001b00020", 300))
    rows = {row["object"]: row for row in callgrind.read(path).object_rows()}
    assert rows["libmxnet.so"] == {"object": "libmxnet.so", "self": 900, "unnamed_self": 800, "unnamed_functions": 2}
    assert rows["libc.so.6"] == {"object": "libc.so.6", "self": 50, "unnamed_self": 20, "unnamed_functions": 1}
    assert [r["object"] for r in callgrind.read(path).object_rows()] == ["libmxnet.so", "libc.so.6"]
    assert callgrind.read(path, with_functions=False).objects == {}


def test_the_delta_of_a_stripped_object_says_how_much_its_unnamed_functions_moved(tmp_path):
    """Two builds: the same functions at other addresses, the inner one 200 instructions cheaper.
    By function the delta can only pair addresses that do not line up; by object it says where."""
    dumps = []
    for name, text in (("a", _stripped("0x0000000001a00010", "0x0000000001b00020", 300)),
                       ("b", _stripped("0x0000000001c00010", "0x0000000001d00020", 100))):
        (tmp_path / name).write_text(text)
        dumps.append(callgrind.read(tmp_path / name))
    delta = callgrind.profile_delta(dumps[0].profile(), dumps[1].profile(), 10,
                                    dumps[0].object_rows(), dumps[1].object_rows())
    assert {r["function"] for r in delta["self"]} == {"0x0000000001b00020 [libmxnet.so]",
                                                      "0x0000000001d00020 [libmxnet.so]"}
    # the outer unnamed function counts 500 itself in both builds: the same function, moved; left
    # out of `self` (its inclusive count changed with the inner one's: kept there)
    assert delta["paired"] == [{"kind": "self", "base_function": "0x0000000001a00010 [libmxnet.so]",
                                "new_function": "0x0000000001c00010 [libmxnet.so]", "count": 500}]
    assert "0x0000000001a00010 [libmxnet.so]" in {r["function"] for r in delta["inclusive"]}
    assert delta["objects"] == [
        {"function": "libmxnet.so: all its code", "object": "libmxnet.so", "part": "all", "base": 900, "new": 700,
         "change": -200},
        {"function": "libmxnet.so: unnamed functions (2 → 2)", "object": "libmxnet.so", "part": "unnamed",
         "base": 800, "new": 600, "change": -200, "functions": [2, 2]}]
    # profiles stored before objects were kept: no object rows, the functions as before
    assert callgrind.profile_delta(dumps[0].profile(), dumps[1].profile())["objects"] == []


# --------------------------------------------------------------------------- verdicts


def _result(name, forward, backward=None, profile=None, objects=None):
    counts = {"forward": {"Ir": Counts(forward).to_dict()},
              "backward": {"Ir": Counts(backward).to_dict()} if backward else None}
    return CaseResult(CaseSpec("opbench", name, {"op": name}), "ok",
                      {"engine": "instructions", "counts": counts, "profile": profile or {},
                       **({"objects": objects} if objects else {})})


def _report(*results):
    return Report(suite="opbench", settings={"valgrind": {"version": "valgrind-3.19.0"}}, results=list(results))


def _verdicts(base, new):
    return {(v.label, v.phase): v for v in count_verdicts.compare_counts(base, new).verdicts}


def test_a_change_at_the_floor_is_same_and_beyond_it_is_judged_both_ways():
    base = _report(_result("at", [1000000] * 3), _result("up", [1000000] * 3), _result("down", [1000000] * 3),
                   _result("small", [100000] * 3), _result("small_up", [100000] * 3))
    new = _report(_result("at", [1005000] * 3), _result("up", [1006000] * 3), _result("down", [994000] * 3),
                  _result("small", [102400] * 3), _result("small_up", [102600] * 3))
    found = _verdicts(base, new)
    # a small call's band is the absolute floor: 2,500 instructions of 100,000
    assert found[("small", "forward")].verdict == "same" and found[("small", "forward")].band == 0.025
    assert found[("small_up", "forward")].verdict == "slower"
    assert found[("at", "forward")].verdict == "same"
    assert found[("up", "forward")].verdict == "slower"
    assert found[("down", "forward")].verdict == "faster"
    assert all(v.non_repeatable is None for v in found.values())


def test_without_the_absolute_floor_a_small_call_is_judged_on_the_floor():
    base, new = _report(_result("small", [100000] * 3)), _report(_result("small", [101000] * 3))
    assert count_verdicts.compare_counts(base, new).verdicts[0].verdict == "same"
    alone = count_verdicts.compare_counts(base, new, absolute_floor=0).verdicts[0]
    assert alone.verdict == "slower" and alone.band == count_verdicts.FLOOR


def test_a_non_repeatable_quantity_is_named_and_judged_with_its_own_spread():
    base = _report(_result("dropout", [100000, 102000, 101000]), _result("lazy", [150000, 100000, 100000]))
    new = _report(_result("dropout", [102500, 103000, 101500]), _result("lazy", [100000, 100000, 100000]))
    found = _verdicts(base, new)
    dropout = found[("dropout", "forward")]
    assert dropout.verdict == "same" and dropout.band == pytest.approx(2000 / 101000 + 1500 / 102500)
    assert "vary by 1.98% between repeats" in dropout.non_repeatable and dropout.non_repeatable.startswith("base:")
    lazy = found[("lazy", "forward")]
    assert "first repeat counted 50.00% more" in lazy.non_repeatable
    # beyond its own spread, a non-repeatable quantity still gets a verdict
    far = _verdicts(base, _report(_result("dropout", [110000, 110500, 110200])))[("dropout", "forward")]
    assert far.verdict == "slower" and far.non_repeatable


def test_one_repeat_is_judged_on_the_floor_and_says_so():
    found = _verdicts(_report(_result("x", [1000000])), _report(_result("x", [1010000])))[("x", "forward")]
    assert found.verdict == "slower" and "counted once" in found.non_repeatable


def test_changed_quantities_carry_the_functions_behind_them():
    profile = {"forward": [{"function": "k", "self": 90000, "inclusive": 95000}]}
    grown = {"forward": [{"function": "k", "self": 95000, "inclusive": 100000}]}
    found = _verdicts(_report(_result("x", [100000] * 3, profile=profile)),
                      _report(_result("x", [105000] * 3, profile=grown)))[("x", "forward")]
    assert found.functions["self"] == [{"function": "k", "base": 90000, "new": 95000, "change": 5000}]
    same = _verdicts(_report(_result("x", [100000] * 3, profile=profile)), _report(_result("x", [100000] * 3)))
    assert same[("x", "forward")].functions is None


def test_changed_quantities_carry_the_objects_behind_them_and_the_markdown_shows_them():
    objects = [{"object": "libmxnet.so", "self": 90000, "unnamed_self": 80000, "unnamed_functions": 40}]
    grown = [{"object": "libmxnet.so", "self": 95000, "unnamed_self": 84000, "unnamed_functions": 41}]
    found = count_verdicts.compare_counts(_report(_result("x", [100000] * 3, objects={"forward": objects})),
                                          _report(_result("x", [105000] * 3, objects={"forward": grown})))
    rows = found.verdicts[0].functions["objects"]
    assert [(r["part"], r["change"]) for r in rows] == [("all", 5000), ("unnamed", 4000)]
    text = "\n".join(count_comparison.markdown(found))
    assert "| unnamed functions (40 → 41) | libmxnet.so | 80,000 | 84,000 | +4,000   | 80%     |" in text


def test_the_markdown_says_which_unnamed_functions_only_moved():
    kernel = [{"function": "0x0000000000000a10 [libmxnet.so]", "self": 90000, "inclusive": 90000},
              {"function": "f [libmxnet.so]", "self": 10000, "inclusive": 100000}]
    moved = [{"function": "0x0000000000000b20 [libmxnet.so]", "self": 90000, "inclusive": 90000},
             {"function": "f [libmxnet.so]", "self": 15000, "inclusive": 105000}]
    found = count_verdicts.compare_counts(_report(_result("x", [100000] * 3, profile={"forward": kernel})),
                                          _report(_result("x", [105000] * 3, profile={"forward": moved})))
    functions = found.verdicts[0].functions
    assert [r["function"] for r in functions["self"]] == ["f [libmxnet.so]"]
    assert [p["kind"] for p in functions["paired"]] == ["inclusive", "self"]
    text = " ".join(count_comparison.markdown(found))
    assert ("Left out: 2 unnamed function(s) counted alike at another address in the other build (moved, not "
            "changed), e.g. 0xa10 in libmxnet.so → 0xb20 in libmxnet.so (inclusive 90,000)." in text)


def test_counts_against_a_timing_only_report_is_a_usage_error():
    timed = Report(suite="opbench", results=[CaseResult(CaseSpec("opbench", "x", {"op": "x"}), "ok",
                                                        {"forward": {"samples_ms": [1.0, 1.1]}})])
    with pytest.raises(UsageError, match="holds only timings; measure NEW's cases with --engine instructions"):
        count_verdicts.check_comparable(_report(_result("x", [1000])), timed)
    assert count_verdicts.check_comparable(timed, timed) is False


def _write(path, report):
    path.write_text(report.to_json())
    return str(path)


def test_compare_command_gates_on_counts_and_shows_them(tmp_path, capsys):
    from benchcore.cli.commands import main
    from benchcore.suite import Suite

    base = _write(tmp_path / "base.json", _report(_result("x", [100000] * 3, [50000] * 3), _result("y", [1000] * 3)))
    new = _write(tmp_path / "new.json", _report(_result("x", [103000] * 3, [50000] * 3), _result("y", [1000] * 3)))
    assert main(Suite("opbench"), ["compare", base, new, "--fail-above", "2"]) == 1
    out, err = capsys.readouterr()
    assert "## Instruction counts" in out and "+3.00%" in out and "slower" in out
    assert "x forward (+3.0%)" in err
    assert main(Suite("opbench"), ["compare", base, new, "--fail-above", "5", "-f", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["instructions"]["verdicts"] == {"slower": 1, "faster": 0, "same": 2}
    assert data["unmeasured"] == []


def test_compare_command_refuses_counts_against_timings(tmp_path, capsys):
    from benchcore.cli.commands import main
    from benchcore.suite import Suite

    timed = Report(suite="opbench", results=[CaseResult(CaseSpec("opbench", "x", {"op": "x"}), "ok",
                                                        {"forward": {"samples_ms": [1.0, 1.1]}})])
    assert main(Suite("opbench"), ["compare", _write(tmp_path / "t.json", timed),
                                   _write(tmp_path / "c.json", _report(_result("x", [1000])))]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "holds only timings" in err


def test_rounds_of_counts_combine_into_one_counts():
    from benchcore.measure.combine import combine_metrics

    combined = combine_metrics([{"c": Counts((5, 5)).to_dict()}, {"c": Counts((6,)).to_dict()}])
    assert combined["c"]["samples"] == [5, 5, 6] and combined["c"]["round_sizes"] == [2, 1]


def test_a_ray_shard_counts_with_the_launcher_its_node_builds(monkeypatch, tmp_path):
    """The nodes of a --ray sweep get the geometry as the flag spells it and build their own
    launcher (their valgrind, their shim); a node without valgrind is refused at the probe."""
    from types import SimpleNamespace

    from benchcore.execute.cluster.driver import counting_of
    from benchcore.execute.cluster.node import NodeSetup, ProbeRequest, ShardTask, counting_missing

    custom = "I1=65536,4,64:D1=49152,12,64:LL=1048576,16,64"
    for cache_sim in ("default", "off", custom):
        geometry = valgrind.parse_geometry(cache_sim)
        job = SimpleNamespace(worker_options={"valgrind": {"cache_sim": geometry.to_dict() if geometry else None}})
        assert valgrind.parse_geometry(counting_of(job)) == geometry
    assert counting_of(SimpleNamespace(worker_options={})) is None
    task = ShardTask("1/2", "x:y", {}, [], 10.0, None, NodeSetup(), counting="off")
    assert ShardTask.from_dict(task.to_dict()).counting == "off"
    request = ProbeRequest("opbench", "x:y", (), [], {}, NodeSetup(), (), "off")
    assert ProbeRequest.from_dict(request.to_dict()).counting == "off"
    monkeypatch.setenv("PATH", str(tmp_path))  # a node without valgrind
    missing = counting_missing("off")
    assert missing.startswith("valgrind for --engine instructions") and "apt-get install valgrind" in missing


def test_the_engine_runs_no_audit_by_default_and_says_why():
    from opbench.backends import backend_for
    from opbench.cli import build_parser

    backend = backend_for("mxnet")
    assert build_parser(backend, engine="instructions").parse_args([]).no_audit is True
    assert build_parser(backend, engine="native").parse_args([]).no_audit is False
    assert "100x slower" in valgrind.settings_record(["valgrind"], None)["audit"]


def test_the_suites_framework_declares_what_it_needs_to_count_and_the_launcher_sets_it():
    """MXNet's NaiveEngine comes from its adapter (the core names no framework); torch adds nothing."""
    from opbench.backends import backend_for

    mxnet_env = dict(backend_for("mxnet").suite.count_environment)
    assert mxnet_env == {"MXNET_ENGINE_TYPE": "NaiveEngine"}
    assert backend_for("torch").suite.count_environment == ()
    prefix = valgrind.launcher(None, "/tmp/shim.so", "/usr/bin/valgrind", mxnet_env)
    assert "MXNET_ENGINE_TYPE=NaiveEngine" in prefix and "OMP_NUM_THREADS=1" in prefix
    assert not any(arg.startswith("MXNET_") for arg in valgrind.launcher(None, "/tmp/shim.so", "/usr/bin/valgrind"))
    assert valgrind.settings_record(prefix, None, mxnet_env)["environment"] == mxnet_env


def test_mxnet_refuses_to_count_under_a_threaded_engine(monkeypatch):
    """Under MXNet's threaded engine the operator runs on a thread the count does not hold: a
    case counted there would read the Python around the call (a doubled input counted the same)."""
    from benchcore.measure.runner import RunSettings
    from opbench.backends.mxnet.executor import execute

    monkeypatch.delenv("MXNET_ENGINE_TYPE", raising=False)
    spec = CaseSpec.from_dict({"suite": "opbench", "name": "broadcast_add", "params": {
        "op": "broadcast_add", "category": "binary_broadcast", "inputs": {
            "lhs": {"shape": [4, 6], "init": "normal", "dtype": "float32"},
            "rhs": {"shape": [4, 6], "init": "normal", "dtype": "float32"}},
        "dtype": "float32", "ctx": "cpu(0)", "run_backward": True, "seed": 41}})
    options = {"profiler": "instructions", "settings": RunSettings(warmup=1, runs=1).to_dict(), "audit": False}
    with pytest.raises(UsageError, match="needs MXNET_ENGINE_TYPE=NaiveEngine"):
        execute(spec, options)


def _top(extra):
    """A stored profile of 25 functions (callgrind.TOP_FUNCTIONS): 23 shared ones and `extra`."""
    rows = [{"function": f"f{i}", "self": 9000 + 100 * i, "inclusive": 9000 + 100 * i} for i in range(23)]
    return rows + [{"function": name, "self": count, "inclusive": count} for name, count in extra.items()]


def test_a_function_below_one_sides_stored_top_is_not_read_as_zero():
    """It was: Tuple::assign read 1,300 -> 0 where the full dumps said 1,300 -> 1,144."""
    assert callgrind.TOP_FUNCTIONS == 25
    base = _top({"Tuple::assign": 1300, "x": 1250})
    new = _top({"h": 5000, "g": 1144})
    new[0] = dict(new[0], self=9050, inclusive=9050)
    found = count_verdicts.compare_counts(_report(_result("c", [100000] * 3, profile={"forward": base})),
                                          _report(_result("c", [105000] * 3, profile={"forward": new})))
    functions = found.verdicts[0].functions
    for kind in ("self", "inclusive"):
        rows = {r["function"]: r for r in functions[kind]}
        assert rows["Tuple::assign"] == {"function": "Tuple::assign", "base": 1300, "new": None, "change": None,
                                         "below_top": {"side": "new", "top": 25, "at_most": 1144},
                                         "change_range": [-1300, -156]}
        assert rows["h"]["base"] is None and rows["h"]["below_top"] == {"side": "base", "top": 25, "at_most": 1250}
        assert rows["h"]["change_range"] == [3750, 5000]
        assert rows["g"]["change_range"] == [-106, 1144]  # may not have moved at all
        # ordered by the least each may have moved: h >= 3,750, Tuple::assign >= 156, x >= 106, f0 50, g 0
        assert [r["function"] for r in functions[kind]] == ["h", "Tuple::assign", "x", "f0", "g"]
        assert rows["f0"] == {"function": "f0", "base": 9000, "new": 9050, "change": 50}
    text = "\n".join(count_comparison.markdown(found))
    cells = [[c.strip() for c in line.strip("|").split("|")][:5] for line in text.splitlines()
             if line.startswith("| ") and "Function" not in line]
    assert ["Tuple::assign", "", "1,300", "below top 25 (≤ 1,144)", "-1,300 to -156"] in cells
    assert ["h", "", "below top 25 (≤ 1,250)", "5,000", "+3,750 to +5,000"] in cells
    assert ["f0", "", "9,000", "9,050", "+50"] in cells
    assert not [c for c in cells if c[3] in ("0", "") or c[4] == "-1,300"]  # no move to 0
    assert "below that top on a side shows the bound and a range" in " ".join(text.splitlines())


def test_a_side_that_stored_every_function_reads_a_missing_one_as_zero():
    few = [{"function": "a", "self": 100, "inclusive": 500}, {"function": "b", "self": 50, "inclusive": 50}]
    delta = callgrind.profile_delta(few, [{"function": "a", "self": 100, "inclusive": 500}])
    assert delta["self"] == [{"function": "b", "base": 50, "new": 0, "change": -50}]
    # nothing to compare against a side without a profile
    assert callgrind.profile_delta(few, [])["self"] == []


class _DumpingCollector:
    """Stands in for valgrind's client requests (the real ones run in the valgrind leg,
    test_instructions_valgrind): each counted call writes a dump whose header holds the next
    count of its phase, as callgrind's do."""

    def __init__(self, folder, counts):
        self.folder, self.counts, self.written = folder, {k: list(v) for k, v in counts.items()}, []

    def count(self, fn):
        fn()
        phase = "forward" if len(self.written) % 2 == 0 or not self.counts.get("backward") else "backward"
        path = self.folder / f"dump.{len(self.written)}"
        path.write_text(f"# callgrind format\nversion: 1\npositions: line\nevents: Ir\nsummary: {self.counts[phase].pop(0)}\n")
        self.written.append(path)
        return None, path


def test_the_warmup_ends_once_the_counts_settle_and_leaves_no_dump(tmp_path):
    from benchcore.measure.instructions import warm_up

    forward = backward = lambda: None  # noqa: E731
    steps = (lambda: None, backward, lambda: None)
    # the forward settles at the 5th iteration (1000, 1000, 1000), the backward at the 6th (2000, 2001, 2000)
    counts = {"forward": [1500, 1200, 1000, 1000, 1000, 1001, 1000, 1000],
              "backward": [3000, 2500, 2100, 2000, 2001, 2000, 2000, 2000]}
    collector = _DumpingCollector(tmp_path, counts)
    assert warm_up(forward, steps, collector, 8) == 6
    assert not any(path.exists() for path in collector.written)
    # counts that keep falling run the whole warmup asked
    falling = _DumpingCollector(tmp_path, {"forward": [2000 - 10 * k for k in range(8)]})
    assert warm_up(forward, None, falling, 8) == 8
    # counts that move with the data (a sampler's) but no longer fall end it after two windows
    noisy = _DumpingCollector(tmp_path, {"forward": [1500, 995, 1010, 1000, 1008, 992, 1003, 997]})
    assert warm_up(forward, None, noisy, 8) == 7


def test_settled_means_the_last_three_counts_within_a_tenth_of_a_percent():
    from benchcore.measure.instructions import settled

    assert settled([5000, 1000, 1000, 1001]) and not settled([1000, 1000]) and not settled([1000, 1000, 1002])
    # counts that move by a percent with their data settle once their median stops falling…
    assert settled([995, 1010, 1000, 1008, 992, 1003]) and not settled([995, 1010, 1000])
    # …and not while it falls (a warmup's extra work shrinking), nor with one window alone
    assert not settled([1100, 1090, 1080, 1070, 1060, 1050]) and not settled([1000, 1020, 990, 1010])
