"""Sweeps on a Ray cluster (`--ray`): bad input, claims and shards, and real sweeps on a local
two-node cluster (`ray start` twice on this machine, one CPU each, shared by the module).

The tests marked `ray` start Ray (about 20 s for the cluster on two busy cores, then seconds per
sweep); `scripts/test -m "not ray"` leaves them out while iterating.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List

import pytest

from benchcore.cli.options import ArgumentParser, add_run_arguments, add_shard_argument, run_plan_from
from benchcore.compare.verdicts import compare
from benchcore.errors import UsageError
from benchcore.execute import sweep
from benchcore.execute.checkpoint import Slot
from benchcore.execute.cluster.driver import (
    SLOT_RESOURCE,
    cut_shards,
    eligible_nodes,
    environment_groups,
    mismatch_message,
    parse_address,
)
from benchcore.execute.rounds import RoundPlan
from benchcore.execute.sweep import SweepJob
from benchcore.measure.case import CaseSpec
from benchcore.measure.runner import RunSettings
from benchcore.report.model import CaseResult, Report
from benchcore.suite import Suite

ROOT = Path(__file__).resolve().parents[2]
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
OPBENCH = ["--tiny", "-w", "1", "-r", "2", "--rounds", "1"]
RNNBENCH = ["bench", "--seqLength", "3", "--numLayers", "1", "--inputSize", "4", "--hiddenSize", "4",
            "--miniBatch", "2", "--group", "rnns", "--rnns", "cudnn", "jit", "py", "--nloops", "3", "--warmup", "1",
            "--rounds", "1", "--device", "cpu"]
START_TIMEOUT_S = 180


def _env(**extra) -> dict:
    return {**os.environ, **RAY_ENV, "PYTHONPATH": str(ROOT), **extra}


def _one_line_error(text: str, prog: str, *needles: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), text
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------- bad input (no cluster)


@pytest.mark.parametrize("flags,message", [
    (["--ray", "auto", "--shards", "0"], "--shards: 0 must be at least 1"),
    (["--ray", "auto", "--shard", "1/2"], "drop --shard K/N"),
    (["--ray", "auto", "--no-isolation"], "drop --no-isolation"),
    (["--shards", "2"], "--shards only applies with --ray"),
    (["--allow-env-mismatch"], "--allow-env-mismatch only applies with --ray"),
    (["--ray", "somewhere"], "is not an address; use auto, local, ray://HOST:10001 or HOST:6379"),
])
def test_bad_cluster_flags_are_one_line_before_anything_runs(flags, message, tmp_path, capsys):
    from opbench.cli import main

    assert main(["--ops", "round", *OPBENCH, "-o", str(tmp_path / "r.json"), *flags]) == 2
    _one_line_error(capsys.readouterr().err, "opbench", message)
    assert list(tmp_path.iterdir()) == []  # no report, no checkpoint


def test_without_ray_installed_it_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    from opbench.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as where it is absent
    assert main(["--ops", "round", *OPBENCH, "-o", str(tmp_path / "r.json"), "--ray", "auto"]) == 2
    _one_line_error(capsys.readouterr().err, "opbench", "--ray needs Ray", "pip install '.[ray]'")


@pytest.mark.ray
@pytest.mark.parametrize("address", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}"])
def test_an_address_that_does_not_answer_is_one_line(address, tmp_path, capsys):
    from rnnbench.cli import main

    address = address.format(port=_free_port())
    assert main([*RNNBENCH, "--output-file", str(tmp_path / "r.json"), "--ray", address]) == 2
    _one_line_error(capsys.readouterr().err, "rnnbench", f"--ray {address}: no Ray cluster answers there")
    assert not (tmp_path / "r.json").exists()


def test_the_slurm_script_runs_each_array_task_as_a_shard_and_merges_them(tmp_path):
    """scripts/slurm_sweep.sh under the variables Slurm sets for an array task."""
    script = str(ROOT / "scripts" / "slurm_sweep.sh")
    env = _env(SLURM_SUBMIT_DIR=str(ROOT), SLURM_ARRAY_TASK_COUNT="2", SWEEP_DIR=str(tmp_path),
               VENV=str(Path(sys.executable).parent.parent))
    for task in ("1", "2"):
        done = subprocess.run(["bash", script, "opbench", "--ops", "round,floor", *OPBENCH, "--no-isolation"],
                              env={**env, "SLURM_ARRAY_TASK_ID": task}, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    done = subprocess.run(["bash", script, "merge", "opbench", "2"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    shards = [Report.load(tmp_path / f"opbench-{k}-of-2.json") for k in (1, 2)]
    assert [s.settings["shard"] for s in shards] == ["1/2", "2/2"]
    merged = Report.load(tmp_path / "opbench.json")
    assert sorted(_keys(merged)) == sorted(key for s in shards for key in _keys(s)) and len(merged.results) == 6
    assert merged.extra["merge"]["missing_shards"] == []


@pytest.mark.ray
def test_an_address_where_another_server_answers_is_one_line(tmp_path, capsys):
    """Not Ray (an HTTP server, as the dashboard's port would be): ray.init would wait for ever."""
    from http.server import HTTPServer, SimpleHTTPRequestHandler
    from threading import Thread

    from rnnbench.cli import main

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Quiet)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        assert main([*RNNBENCH, "--output-file", str(tmp_path / "r.json"), "--ray", address]) == 2
    finally:
        server.shutdown()
        server.server_close()
    _one_line_error(capsys.readouterr().err, "rnnbench", f"--ray {address}: something answers there, but not Ray")


# --------------------------------------------------------------------------- claims, shards, environments


def _node(node_id: str, address: str = "10.0.0.1", **resources) -> dict:
    return {"NodeID": node_id * 4, "NodeManagerAddress": address, "Alive": True, "Resources": resources}


def test_gpu_cases_claim_one_gpu_each_and_cpu_cases_a_whole_node_or_a_bench_slot():
    nodes = [_node("aa", "10.0.0.1", CPU=16, GPU=2), _node("bb", "10.0.0.2", CPU=8), _node("cc", "10.0.0.3", CPU=0)]
    gpu, claim = eligible_nodes(nodes, gpu=True)
    assert claim == "gpu" and [(n.label, n.capacity, n.num_gpus, n.num_cpus) for n in gpu] == [("10.0.0.1", 2, 1, 8)]
    cpu, claim = eligible_nodes(nodes, gpu=False)
    assert claim == "cpu"
    assert [(n.label, n.capacity, n.num_cpus) for n in cpu] == [("10.0.0.1", 1, 16), ("10.0.0.2", 1, 8)]
    slotted = nodes + [_node("dd", "10.0.0.4", CPU=32, **{SLOT_RESOURCE: 4})]
    slots, claim = eligible_nodes(slotted, gpu=False)
    assert claim == SLOT_RESOURCE
    assert [(n.label, n.capacity, n.num_cpus, n.resources) for n in slots] == [("10.0.0.4", 4, 0, {SLOT_RESOURCE: 1})]


def test_nodes_sharing_an_address_are_told_apart_and_dead_ones_left_out():
    dead = dict(_node("cc", "10.0.0.2", CPU=4), Alive=False)
    found, _ = eligible_nodes([_node("aa", CPU=1), _node("bb", CPU=1), dead], gpu=False)
    assert [n.label for n in found] == ["10.0.0.1/aaaaaaaa", "10.0.0.1/bbbbbbbb"]


def test_addresses():
    assert parse_address("ray://head:10001").kind == "client"
    assert (parse_address("10.1.2.3:6379").host, parse_address("10.1.2.3:6379").port) == ("10.1.2.3", 6379)
    assert parse_address("auto").kind == "auto" and parse_address("local").kind == "local"
    for bad in ("head", "ray://head", "head:99999", ":6379"):
        with pytest.raises(UsageError, match="is not an address"):
            parse_address(bad)


def test_shards_partition_the_missing_slots_by_case_keeping_each_cases_rounds_together():
    specs = [CaseSpec("t", f"c{i}") for i in range(5)]
    missing = [slot for slot in RoundPlan(2).slots(specs) if slot.key != Slot(specs[0], 1).key]
    shards = cut_shards(missing, 2)
    assert [s.label for s in shards] == ["1/2", "2/2"]
    assert sorted(slot.key for s in shards for slot in s.slots) == sorted(slot.key for slot in missing)
    for shard in shards:
        names = {slot.spec.name for slot in shard.slots}
        assert all(any(o.spec.name == n for o in shard.slots if o.round == 2) for n in names)
    assert len(cut_shards(missing[:1], 4)) == 1  # never an empty shard


def test_nodes_are_grouped_by_environment_and_a_mismatch_names_what_differs():
    base = {"python": "3.11.7", "torch": {"version": "2.13.0"}, "hostname": "a", "cpu_model": "Xeon"}
    groups = environment_groups("rnnbench", {"a": base, "b": dict(base, hostname="b"),
                                             "c": dict(base, hostname="c", torch={"version": "2.12.0"})})
    assert [g.nodes for g in groups] == [["a", "b"], ["c"]]
    assert groups[0].differs == {"torch.version": "2.13.0"} and groups[1].differs == {"torch.version": "2.12.0"}
    message = mismatch_message(groups)
    assert "torch.version: '2.13.0' on a, '2.12.0' on c" in message and "--allow-env-mismatch" in message


def test_a_case_names_its_node_or_each_round_names_its_own():
    from benchcore.execute.rounds import combine_case

    spec = CaseSpec("t", "x")
    ran = lambda *nodes: [(Slot(spec, k + 1), CaseResult(spec, "ok", {"v": 1}, node=n), 0)  # noqa: E731
                          for k, n in enumerate(nodes)]
    same, moved = combine_case(spec, ran("a", "a"), lambda ms: ms[0]), combine_case(spec, ran("a", "b"), lambda ms: ms[0])
    assert same.node == "a" and moved.node is None and [r["node"] for r in moved.rounds] == ["a", "b"]
    assert CaseResult.from_dict(same.to_dict()).node == "a" and "node" not in CaseResult(spec, "ok").to_dict()


def test_a_killed_shards_folder_is_removed_by_the_next_shard_on_the_node(tmp_path, monkeypatch):
    from benchcore.execute.cluster.node import SHARD_FOLDER_PREFIX, remove_orphans

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = tmp_path / f"{SHARD_FOLDER_PREFIX}{gone.stdout.strip()}-x"
    alive = tmp_path / f"{SHARD_FOLDER_PREFIX}{os.getpid()}-y"
    for folder in (dead, alive):
        folder.mkdir()
        (folder / "checkpoint.jsonl").write_text("{}\n")
    remove_orphans()
    assert not dead.exists() and alive.exists()


def _mixed_report(nodes_env: dict, results: List[CaseResult]) -> Report:
    groups = environment_groups("t", nodes_env)
    cluster = {"environment_groups": [g.to_dict() for g in groups],
               "nodes": [{"node": label, "group": g.number, "environment": g.environment}
                         for g in groups for label in g.nodes]}
    return Report("t", environment=dict(groups[0].environment, cluster=cluster), results=results)


def _timed(name: str, node: str, level: float) -> CaseResult:
    samples = [level * (1 + 0.001 * i) for i in range(8)]
    return CaseResult(CaseSpec("t", name), "ok", metrics={"forward": {"samples_ms": samples}}, node=node)


def test_compare_judges_each_case_in_the_environment_its_node_had():
    a100 = {"torch": {"version": "2.13.0", "gpu": {"name": "A100"}}}
    h100 = {"torch": {"version": "2.13.0", "gpu": {"name": "H100"}}}
    base = _mixed_report({"n1": a100, "n2": h100}, [_timed("x", "n1", 1.0), _timed("y", "n2", 1.0)])
    new = _mixed_report({"n3": a100, "n4": h100}, [_timed("x", "n3", 1.0), _timed("y", "n3", 1.0)])
    result = compare(base, new)  # no refusal: the reports' top-level environments are not what counts
    assert [(c.name, c.category) for c in result.cases] == [("x", "all @ torch.gpu.name=A100")]
    assert [u["name"] for u in result.unmeasured] == ["y"]
    assert "different environments (torch.gpu.name differ)" in result.unmeasured[0]["reason"]
    assert result.env_differences == []  # every case compared ran in like environments
    anyway = compare(base, new, allow_env_mismatch=True)
    assert sorted(c.name for c in anyway.cases) == ["x", "y"]
    assert [d["key"] for d in anyway.env_differences] == ["torch.gpu.name"]


# --------------------------------------------------------------------------- a real local cluster


@dataclass
class Cluster:
    address: str
    temp_dir: str
    processes: List[subprocess.Popen]

    def add_node(self, log: Path, **env) -> subprocess.Popen:
        """Another node on this machine (one CPU), with `env` in its environment."""
        return _start_node(["--address", self.address], log, self, env)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_node(role: List[str], log: Path, cluster: Cluster, env: dict) -> subprocess.Popen:
    ray = str(Path(sys.executable).with_name("ray"))
    command = [ray, "start", *role, "--num-cpus", "1", "--temp-dir", cluster.temp_dir, "--disable-usage-stats",
               "--block"]
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=_env(**env),
                                   start_new_session=True)
    cluster.processes.append(process)
    deadline = time.monotonic() + START_TIMEOUT_S
    while "Ray runtime started" not in log.read_text():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.25)
    return process


def _stop(process: subprocess.Popen, grace_s: float = 5.0) -> None:
    """`ray start --block` stops its node's processes on SIGTERM; a head's GCS server takes half a
    minute to, so after `grace_s` the node's process group (the node started in its own
    session) is killed."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # whatever of the node is left
    except ProcessLookupError:
        pass
    process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head node and one worker node on this machine, one CPU each."""
    try:
        import ray  # noqa: F401
    except ImportError:
        pytest.fail("the Ray tests need the ray extra: scripts/setup installs it (or deselect them: -m 'not ray')")
    logs = tmp_path_factory.mktemp("ray-logs")
    found = Cluster(f"127.0.0.1:{_free_port()}", tempfile.mkdtemp(prefix="rt", dir="/tmp"), [])
    port = found.address.rsplit(":", 1)[1]
    try:
        _start_node(["--head", "--port", port, "--include-dashboard=false"], logs / "head.log", found, {})
        found.add_node(logs / "node2.log")
        os.environ.update(RAY_ENV)  # for the drivers run in this process
        yield found
    finally:
        for process in reversed(found.processes):
            _stop(process)
        shutil.rmtree(found.temp_dir, ignore_errors=True)


def _keys(report: Report) -> list:
    return [(r.spec.key, r.status) for r in report.results]


def _two_nodes_ran(report: Report) -> None:
    cluster = report.environment["cluster"]
    labels = [node["node"] for node in cluster["nodes"]]
    assert len(labels) == 2 and all(node["environment"]["python"] for node in cluster["nodes"])
    ran_on = {r.node for r in report.results if r.node} | {x["node"] for r in report.results for x in r.rounds or ()}
    assert ran_on == set(labels)  # each shard on its own node
    assert cluster["shards"] == 2 and cluster["lost"] == [] and len(cluster["environment_groups"]) == 1


@pytest.fixture(scope="module")
def rnnbench_unsharded(tmp_path_factory):
    """In a fresh process: its environment is compared with the nodes' (this one's torch may
    have had its threads changed by the tests before)."""
    path = tmp_path_factory.mktemp("rnnbench") / "one.json"
    done = subprocess.run([sys.executable, "-m", "rnnbench", *RNNBENCH, "--no-isolation", "--output-file", str(path)],
                          env=_env(), capture_output=True, text=True, timeout=START_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return Report.load(path)


@pytest.mark.ray
def test_rnnbench_in_two_shards_gives_the_cases_of_the_unsharded_run(cluster, rnnbench_unsharded, tmp_path, capsys):
    from rnnbench.cli import main

    out = str(tmp_path / "ray.json")
    assert main([*RNNBENCH, "--ray", cluster.address, "--shards", "2", "--output-file", out]) == 0
    ray = Report.load(tmp_path / "ray.json")
    assert _keys(ray) == _keys(rnnbench_unsharded)
    _two_nodes_ran(ray)
    assert ray.settings["runners"] == rnnbench_unsharded.settings["runners"]
    capsys.readouterr()


@pytest.fixture(scope="module")
def killed(cluster, tmp_path_factory):
    """A sweep in which c4 kills its shard's actor once and c5 every time, with --max-retries 1."""
    folder = tmp_path_factory.mktemp("killed")
    suite = Suite("clustertest", executor="tests.benchcore.cluster_executor:execute")
    kills = {4: "once", 5: "always"}
    specs = [CaseSpec(suite.name, f"c{i}", {"value": i, "kill": kills.get(i), "marker": str(folder / f"c{i}.killed"),
                                            "delay_s": 1}) for i in range(6)]
    parser = ArgumentParser(prog="clustertest")
    add_run_arguments(parser, rounds=1)
    add_shard_argument(parser)
    args = parser.parse_args(["--ray", cluster.address, "--shards", "2", "--max-retries", "1", "--timeout", "120"])
    job = SweepJob(suite, specs, RunSettings(warmup=0, runs=1), RoundPlan(1), {}, checkpoint=folder / "c.jsonl")
    with contextlib.redirect_stderr(io.StringIO()) as err:
        environment, results = sweep.measure(job, run_plan_from(args), "clustertest", [], {})[""]
    lines = [json.loads(line) for line in (folder / "c.jsonl").read_text().splitlines()[1:]]
    return environment, {r.spec.name: r for r in results}, lines, err.getvalue()


@pytest.mark.ray
def test_a_shard_whose_task_is_killed_runs_again_elsewhere_and_nothing_is_lost(killed):
    environment, results, checkpoint, err = killed
    assert [results[f"c{i}"].status for i in range(5)] == ["ok"] * 5
    assert [results[f"c{i}"].metrics["value"] for i in range(5)] == list(range(5))
    # shard 1 (c0, c2, c4 in key order) lost its actor at c4: c0 and c2 were kept, only c4 ran again
    first = next(lost for lost in environment["cluster"]["lost"] if lost["shard"] == "1/2")
    assert (first["attempt"], first["slots_kept"], first["slots_left"]) == (1, 2, 1)
    assert "ActorDiedError" in first["reason"]
    names = [line["spec"]["name"] for line in checkpoint]
    assert sorted(names) == ["c0", "c1", "c2", "c3", "c4"]  # each finished slot once; c5 never finished
    assert results["c4"].node and results["c4"].node != first["node"]  # re-run on the other node
    assert re.search(r"clustertest: ray: shard 1/2 lost on \S+ \(ActorDiedError: .*\); 2 finished slots kept, 1 to run "
                     r"again \|", err), err


@pytest.mark.ray
def test_after_max_retries_the_cases_of_a_lost_shard_are_recorded_as_failed_with_the_reason(killed):
    environment, results, _checkpoint, err = killed
    c5 = results["c5"]
    assert c5.status == "failed" and c5.node is None
    assert "not run: shard 2/2 was given up after 2 attempt(s) (--max-retries 1): lost on" in c5.error
    assert "ActorDiedError" in c5.error
    assert [lost["attempt"] for lost in environment["cluster"]["lost"] if lost["shard"] == "2/2"] == [1, 2]
    assert "clustertest: ray: shard 2/2: 1 slots recorded as failed" in err


@dataclass
class Resumed:
    """An opbench sweep in two shards whose driver was killed, then resumed; and the same
    sweep unsharded on this machine."""

    unsharded: Report
    report: Report
    #: the results the killed driver had checkpointed
    kept: List[dict]
    stderr: str
    checkpoint: Path


@pytest.fixture(scope="module")
def resumed(cluster, tmp_path_factory) -> Resumed:
    folder = tmp_path_factory.mktemp("resumed")
    sweep_flags = ["--tiny", "--ops", "round,floor", "-w", "1", "-r", "10", "--rounds", "2"]
    opbench = [sys.executable, "-m", "opbench", *sweep_flags]
    one = subprocess.run([*opbench, "--no-isolation", "-o", "one.json"], cwd=folder, env=_env(), capture_output=True,
                         text=True, timeout=START_TIMEOUT_S)
    assert one.returncode == 0, one.stderr
    command = [*opbench, "--ray", cluster.address, "--shards", "2", "-o", "ray.json"]
    checkpoint = folder / "ray.json.checkpoint.jsonl"
    driver = subprocess.Popen(command, cwd=folder, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not (checkpoint.exists() and len(checkpoint.read_text().splitlines()) >= 3):  # header + 2 results
        assert driver.poll() is None and time.monotonic() < deadline, driver.stderr.read().decode()
        time.sleep(0.05)
    driver.kill()
    driver.wait()
    driver.stderr.close()
    kept = [record for record in map(_record, checkpoint.read_text().splitlines()[1:]) if record]
    done = subprocess.run([*command, "--resume"], cwd=folder, env=_env(), capture_output=True, text=True,
                          timeout=START_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return Resumed(Report.load(folder / "one.json"), Report.load(folder / "ray.json"), kept, done.stderr, checkpoint)


@pytest.mark.ray
def test_opbench_in_two_shards_gives_the_cases_of_the_unsharded_run(resumed):
    assert _keys(resumed.report) == _keys(resumed.unsharded) and len(resumed.report.results) == 6
    _two_nodes_ran(resumed.report)
    assert re.search(r"opbench: ray: shard 1/2 \(\d+ slots\) started on \S+ \| ", resumed.stderr), resumed.stderr
    assert resumed.stderr.count("finished on") == 2 and "0 running 1 finished" in resumed.stderr
    assert not resumed.checkpoint.exists()


@pytest.mark.ray
def test_resume_after_the_driver_is_killed_submits_only_what_is_missing(resumed):
    report, kept = resumed.report, resumed.kept
    total = 2 * len(report.results)  # two rounds
    assert 0 < len(kept) < total
    assert f"{total - len(kept)} of {total} slots to run in 2 shard(s)" in resumed.stderr
    assert f"{len(kept)} taken from the checkpoint" in resumed.stderr
    assert report.environment["cluster"]["resumed_slots"] == len(kept)
    by_key = {r.spec.key: r for r in report.results}
    for line in kept:  # what the killed driver had received is in the report as it was measured
        samples = line["metrics"]["profiler"]["forward"]["per_call_ms"]
        joined = by_key[line["key"]].metrics["profiler"]["forward"]["per_call_ms"]
        assert any(joined[i:i + len(samples)] == samples for i in range(len(joined)))


def _record(line: str):
    """A checkpoint line, or None for a torn one (the driver was killed mid-write)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


@pytest.fixture(scope="module")
def third_node(cluster, tmp_path_factory):
    """A node without MXNet (a module shadows it) and with another MXNet thread setting: the
    tests using it come last, since a stopped node stays listed for a while."""
    folder = tmp_path_factory.mktemp("third")
    (folder / "mxnet").mkdir()
    (folder / "mxnet" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'mxnet'\")\n")
    process = cluster.add_node(folder / "node3.log", PYTHONPATH=str(folder), MXNET_CPU_WORKER_NTHREADS="1")
    yield
    _stop(process)


@pytest.mark.ray
def test_a_node_without_the_framework_is_refused_naming_it(cluster, third_node, tmp_path, capsys):
    from opbench.cli import main

    assert main(["--ops", "round", *OPBENCH, "--ray", cluster.address, "-o", str(tmp_path / "r.json")]) == 2
    line = _one_line_error(capsys.readouterr().err, "opbench", "mxnet (ModuleNotFoundError: No module named 'mxnet')")
    assert re.search(r"--ray: node \S+ cannot run opbench: mxnet", line), line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.ray
def test_nodes_whose_environments_differ_are_refused_unless_allowed_then_compare_judges_each_apart(
        cluster, third_node, rnnbench_unsharded, tmp_path, capsys):
    from rnnbench.cli import main

    ray = [*RNNBENCH, "--ray", cluster.address, "--shards", "3", "--output-file", str(tmp_path / "ray.json")]
    assert main(ray) == 2
    _one_line_error(capsys.readouterr().err, "rnnbench", "the nodes' environments differ",
                    "threads_env.MXNET_CPU_WORKER_NTHREADS: ", "None on", "'1' on", "--allow-env-mismatch")
    assert main([*ray, "--allow-env-mismatch"]) == 0
    report = Report.load(tmp_path / "ray.json")
    groups = report.environment["cluster"]["environment_groups"]
    assert sorted(len(g["nodes"]) for g in groups) == [1, 2]
    assert len({r.node for r in report.results}) == 3  # which case ran where
    odd = next(g for g in groups if len(g["nodes"]) == 1)
    on_odd = {r.spec.key for r in report.results if r.node in odd["nodes"]}
    result = compare(rnnbench_unsharded, report, allow_env_mismatch=False)
    assert {u["key"] for u in result.unmeasured} == on_odd
    assert {c.key for c in result.cases} == {r.spec.key for r in report.results} - on_odd
    assert all(c.category.endswith("@ threads_env.MXNET_CPU_WORKER_NTHREADS=None") for c in result.cases)
    capsys.readouterr()


@pytest.mark.ray
@pytest.mark.valgrind
def test_an_instruction_sweep_counts_on_the_nodes_under_their_own_valgrind(cluster, tmp_path):
    """--ray with the instruction engine: each shard's workers run under the launcher its node
    built (framework-free cases, tests/benchcore/count_executor.py: seconds under valgrind)."""
    from benchcore.execute import valgrind
    from benchcore.measure.instructions import counts_of

    suite = Suite("counttest", executor="tests.benchcore.count_executor:execute")
    specs = [CaseSpec(suite.name, "sum", {"n": n}) for n in (20000, 20200)]
    parser = ArgumentParser(prog="counttest")
    add_run_arguments(parser, rounds=1)
    add_shard_argument(parser)
    args = parser.parse_args(["--ray", cluster.address, "--shards", "2", "--timeout", "15"])
    job = SweepJob(suite, specs, RunSettings(warmup=2, runs=2), RoundPlan(1), {}, checkpoint=tmp_path / "c.jsonl")
    valgrind.apply(job, valgrind.plan("off"))
    with contextlib.redirect_stderr(io.StringIO()):
        environment, results = sweep.measure(job, run_plan_from(args), "counttest", [], {})[""]
    assert all(r.ok for r in results), [(r.status, r.error) for r in results]
    small, large = (counts_of(r.metrics, "forward") for r in results)
    assert len(small.samples) == 2 and 1.005 < large.median / small.median < 1.02  # 1% more work, 1% more counted
    assert all("AVX512F" not in r.metrics["code_path"]["cpu_features"] for r in results)  # valgrind's emulated CPU
    assert len({r.node for r in results}) == 2 and environment["cluster"]["shards"] == 2
