"""`python -m opbench` in subprocesses: flags, reports, bad input, a crashing worker, resume.

Crashing and hanging workers come from the test side: `python -m tests.opbench.faults` is the
real command line with an executor that faults on the case an environment variable names.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mxnet  # noqa: F401  (plainly: a broken MXNet fails these tests instead of skipping them)
import pytest

from benchcore.measure import reference
from benchcore.report.model import Report
from opbench import cli
from opbench.backends.mxnet.markdown import opperf_view, to_markdown
from tests.opbench import faults

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--tiny", "-w", "1", "-r", "2"]
FAULTY = [sys.executable, "-m", "tests.opbench.faults"]


def _env(crash=None, hang=None, **extra):
    """This environment with the suite on the path and, for FAULTY runs, the case to fault on."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    for name, case in ((faults.CRASH_ENV, crash), (faults.HANG_ENV, hang)):
        env.pop(name, None)
        if case:
            env[name] = case
    return env


def opbench(*args, cwd, env=None, timeout=120, faulty=False):
    command = FAULTY if faulty else [sys.executable, "-m", "opbench"]
    return subprocess.run([*command, *args], cwd=cwd, env=env or _env(),
                          capture_output=True, text=True, timeout=timeout)


def _one_line_error(proc):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("opbench: error: "), proc.stderr
    assert "Traceback" not in proc.stderr


def test_sweep_writes_json_and_markdown(tmp_path):
    proc = opbench("--ops", "broadcast_add,round", *FAST, "-f", "json,md", "-o", "r.json",
                   cwd=tmp_path, env=_env(BENCH_PROGRESS="1"))
    assert proc.returncode == 0, proc.stderr
    assert "benchmarked 2 operators" in proc.stderr
    assert "round" in proc.stderr and "/" in proc.stderr  # progress bar: case name, done/total
    report = Report.load(tmp_path / "r.json")
    assert report.suite == "opbench" and report.environment["mxnet"]["version"]
    assert report.settings["warmup"] == 1 and report.settings["runs"] == 2 and report.settings["seed"] == 41
    ops = [r.spec.params["op"] for r in report.results]
    assert ops == sorted(ops) and set(ops) == {"broadcast_add", "round"}
    assert all(r.status == "ok" for r in report.results)
    assert "no_benchmark" in report.extra and "skipped" in report.extra
    view = opperf_view(report)
    assert list(view) == ["broadcast_add", "round"]
    assert len(view["broadcast_add"]) == sum(op == "broadcast_add" for op in ops)
    assert "max_storage_mem_alloc_cpu/0" in view["round"][0]
    md = (tmp_path / "r.md").read_text()
    assert md == to_markdown(report) + "\n"
    assert "# Runtime Features" in md and "# Benchmark Results" in md
    assert "| Operator " in md and "Max Mem Usage (Storage) (Bytes)" in md and "IQR (ms)" in md
    assert not (tmp_path / "r.json.checkpoint.jsonl").exists()


def test_python_engine_and_selection_flags(tmp_path):
    proc = opbench("--category", "rounding", "--exclude", "c*,fix", "-p", "python", "--dtype", "float64",
                   "--ctx", "cpu(0)", "--int64-tensor", "OFF", "--threads", "1", "--timeout", "60",
                   "--seed", "7", "--rounds", "1", *FAST, "-f", "json,md", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "mxnet_operator_benchmarks.md").read_text()
    header = [cell.strip() for cell in md.split("# Benchmark Results")[1].split("\n| ")[1].split("|")]
    assert header[:6] == ["Operator", "Avg Time (ms)", "P50 Time (ms)", "P90 Time (ms)", "P99 Time (ms)", "Inputs"]
    assert "floor" in md and "ceil" not in md and "| fix" not in md
    # each flag reaches the report: settings, environment, every case and the worker that ran it
    report = Report.load(tmp_path / "mxnet_operator_benchmarks.json")
    assert {key: report.settings[key] for key in ("profiler", "dtype", "threads", "seed", "timeout_s", "isolation")} == \
        {"profiler": "python", "dtype": "float64", "threads": 1, "seed": 7, "timeout_s": 60, "isolation": True}
    assert report.environment["threads"] == 1 and report.environment["seed"] == 7
    assert report.environment["threads_env"]["OMP_NUM_THREADS"] == "1"  # what the workers inherited
    assert report.results and all(r.status == "ok" for r in report.results)
    assert {(r.spec.params["seed"], r.spec.params["dtype"], r.metrics["engine"], r.metrics["threads"])
            for r in report.results} == {(7, "float64", "python", 1)}
    # the seed draws the inputs: the same case at the default seed starts from other values
    from opbench.backends.mxnet.arrays import materialize
    from opbench.backends.mxnet.cases import generate_cases

    floor7 = next(r.spec for r in report.results if r.spec.name == "floor")
    floor41 = generate_cases(ops=["floor"], dtype="float64", tiny=True)[0][0]
    assert floor41.params["seed"] == 41
    assert not (materialize(floor7).arrays["data"].asnumpy() == materialize(floor41).arrays["data"].asnumpy()).all()


def test_default_output_and_overwrite(tmp_path):
    assert opbench("--ops", "round", *FAST, "--no-isolation", cwd=tmp_path).returncode == 0
    out = tmp_path / "mxnet_operator_benchmarks.json"
    data = json.loads(out.read_text())
    assert data["settings"]["profiler"] == "native"
    _one_line_error(opbench("--ops", "round", *FAST, cwd=tmp_path))  # exists: refused
    assert opbench("--ops", "round", *FAST, "--overwrite", "--no-isolation", cwd=tmp_path).returncode == 0


def test_shards_partition_the_cases(tmp_path):
    keys = []
    for k in (1, 2):
        proc = opbench("--ops", "broadcast_add", *FAST, "--no-isolation", "--shard", f"{k}/2", "-o", f"s{k}.json",
                       cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        report = Report.load(tmp_path / f"s{k}.json")
        assert report.settings["shard"] == f"{k}/2"
        keys.append({r.spec.key for r in report.results})
    assert keys[0] and keys[1] and not keys[0] & keys[1]
    proc = opbench("merge", "s1.json", "s2.json", "-o", "all.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert {r.spec.key for r in Report.load(tmp_path / "all.json").results} == keys[0] | keys[1]


def test_list(tmp_path):
    proc = opbench("--list", cwd=tmp_path)
    assert proc.returncode == 0
    header = proc.stdout.splitlines()[0].split()
    assert header == ["operator", "category", "backward_op", "backward_timed", "cases"]
    rows = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()[2:] if line.strip()}
    assert rows["Convolution"][:3] == ["convolution", "own", "yes"]
    assert rows["batch_dot"][:3] == ["gemm", "shared", "yes"]  # opperf's has_backward no, timed yes
    assert rows["split"][1:3] == ["shared", "yes"]
    assert rows["Convolution"][3].isdigit() and rows["batch_dot"][3].isdigit()  # how many cases, not "yes"
    assert " ".join(rows["sgd_update"][2:5]) == "no: not differentiable"
    assert " ".join(rows["Embedding"][2:6]) == "no: off (opperf's list)"
    assert rows["LeakyReLU"][2:6] == ["5", "of", "6", "cases"]  # rrelu's backward crashes
    assert " ".join(rows["round"][2:5]) == "no: zero gradient"  # differentiable, gradient all zeros
    assert "has_backward (opperf: a _backward_<name> operator) 130, differentiable 214, backward timed 171" \
        in proc.stderr
    proc = opbench("--list", "--all", cwd=tmp_path)
    assert proc.returncode == 0
    assert "_backward_" in proc.stdout and "deprecated alias" in proc.stdout


BAD_INPUTS = [
    ["--ops", "no_such_operator"],
    ["--ops", "nosuch*"],
    ["--exclude", "no_such_operator"],
    ["--ctx", "gpu(x)"],
    ["--ctx", "tpu"],
    ["--ctx", "gpu"],  # this MXNet has no CUDA
    ["--dtype", "float8"],
    ["-p", "bogus"],
    ["--int64-tensor", "on"],  # the pip wheel lacks INT64_TENSOR_SIZE
    ["--int64-tensor", "maybe"],
    ["--category", "nonsense"],
    ["-f", "xml"],
    ["--shard", "3/2"],
    ["-w", "-1"],
    ["-o", "missing_folder/x.json"],
    ["-o", "afile/x.json"],  # parent is a file
    ["-o", "/proc/x.json"],  # a folder that refuses new files, even to root
    ["--all"],
]


@pytest.mark.parametrize("args", BAD_INPUTS, ids=lambda a: " ".join(a))
def test_bad_input_is_one_line_and_exit_2(tmp_path, args):
    (tmp_path / "afile").write_text("")
    extra = [] if "--ops" in args else ["--ops", "round"]
    proc = opbench(*args, *extra, *FAST, cwd=tmp_path, timeout=60)
    _one_line_error(proc)
    assert not list(tmp_path.glob("mxnet_operator_benchmarks*"))


def test_a_selection_left_empty_by_the_dtype_says_so(tmp_path):
    proc = opbench("--ops", "dot", "--dtype", "int64", *FAST, cwd=tmp_path, timeout=60)  # dot: float only on CPU
    _one_line_error(proc)
    assert "--dtype" in proc.stderr


def test_gpu_message_names_the_cuda_package(tmp_path):
    proc = opbench("--ctx", "gpu(0)", "--ops", "round", *FAST, cwd=tmp_path)
    _one_line_error(proc)
    assert "no CUDA" in proc.stderr and "mxnet-cu" in proc.stderr


def _first_case(op):
    from opbench.backends.mxnet.cases import generate_cases

    spec = generate_cases(ops=[op], tiny=True)[0][0]
    return f"{op}[{spec.params['variant']}]", spec.key


def test_killed_worker_still_reports_every_other_case(tmp_path):
    label, key = _first_case("round")
    proc = opbench("--ops", "broadcast_add,round", *FAST, "-o", "r.json", cwd=tmp_path, env=_env(crash=label),
                   faulty=True)
    assert proc.returncode == 1, proc.stderr
    report = Report.load(tmp_path / "r.json")
    statuses = {r.spec.key: r.status for r in report.results}
    assert statuses.pop(key) == "crashed"
    assert len(statuses) >= 3 and set(statuses.values()) == {"ok"}  # every other case, measured
    assert "SIGKILL" in proc.stderr and "failed 1 case" in proc.stderr


def _children(pid):
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _refused_changes(capsys, argv):
    """Run the CLI in this process on argv; it must refuse the resume: the option keys it names."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "was measured with other settings (" in err, err
    changes = err.split("was measured with other settings (", 1)[1].rsplit("); resume with", 1)[0]
    return {change.split(": ", 1)[0] for change in changes.split("; ")}


def test_resume_after_interruption(tmp_path, capsys, monkeypatch, restored_environ):
    label, key = _first_case("round")
    args = ["--ops", "broadcast_add,round", *FAST, "-o", "r.json"]
    process = subprocess.Popen([*FAULTY, *args], cwd=tmp_path, env=_env(hang=label),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = tmp_path / "r.json.checkpoint.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and process.poll() is None:  # broadcast_add's cases done, round hangs
        if checkpoint.exists() and len(checkpoint.read_text().splitlines()) >= 4:  # header + 3
            break
        time.sleep(0.05)
    assert process.poll() is None, "the sweep ended before it could be interrupted"
    workers = _children(process.pid)
    process.send_signal(signal.SIGKILL)  # the harshest interruption: no cleanup at all
    process.wait()
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    done_before = {json.loads(line).get("key") for line in checkpoint.read_text().splitlines()} - {None}
    assert key not in done_before and not (tmp_path / "r.json").exists()
    probes = {done for done in done_before if done.startswith("benchcore/machine_reference/")}
    assert probes, "the round's first machine-reference probe is checkpointed with the cases"

    _one_line_error(opbench(*args, cwd=tmp_path))  # a checkpoint is there: --resume or delete it
    # a resume under other settings would mix their samples into one report: refused, naming each
    monkeypatch.chdir(tmp_path)
    kept = checkpoint.read_bytes()
    resume = [*args, "--resume"]
    assert _refused_changes(capsys, [*resume, "-p", "python"]) == {"profiler"}
    assert _refused_changes(capsys, [*resume, "--threads", "1"]) == {"threads"}
    assert _refused_changes(capsys, [*resume, "--seed", "7"]) == {"seed", "rounds.order_seed"}
    # fewer rounds: each round's share of the runs (rounds.runs_per_round) and of the --max-time cap change too
    assert _refused_changes(capsys, [*resume, "--rounds", "2"]) == {"rounds.rounds", "rounds.runs_per_round",
                                                                     "settings.max_time_s"}
    assert _refused_changes(capsys, [*resume, "-r", "9"]) == {"settings.runs", "rounds.runs_per_round"}
    assert checkpoint.read_bytes() == kept and not (tmp_path / "r.json").exists()
    proc = opbench(*args, "--resume", "--no-isolation", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = Report.load(tmp_path / "r.json")
    keys = {r.spec.key for r in report.results}
    assert done_before - probes < keys and key in keys and len(keys) == len(report.results)
    assert reference.of_report(report)["probes"] >= len(probes), "the checkpointed probes reach the report"
    assert not checkpoint.exists()


def test_sigterm_stops_the_worker_and_keeps_the_checkpoint(tmp_path):
    """A CI job's timeout sends SIGTERM: treated as Ctrl-C, not a death that strands the worker."""
    label, _key = _first_case("round")
    process = subprocess.Popen([*FAULTY, "--ops", "round", *FAST, "-o", "r.json"], cwd=tmp_path,
                               env=_env(hang=label), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not _children(process.pid):
        time.sleep(0.05)
    workers = _children(process.pid)
    time.sleep(1.0)  # the worker is in the hanging case
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130 and "rerun with --resume" in err
    assert workers and all(not Path(f"/proc/{pid}").exists() for pid in workers)
    assert (tmp_path / "r.json.checkpoint.jsonl").exists()


def test_report_commands_are_dispatched(tmp_path):
    proc = opbench("--ops", "round", *FAST, "--no-isolation", "-o", "a.json", "-f", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = opbench("compare", "a.json", "a.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "round" in proc.stdout
    _one_line_error(opbench("compare", "a.json", "missing.json", cwd=tmp_path))


def test_plot_option_writes_charts_and_links_them(tmp_path):
    proc = opbench("--ops", "broadcast_add", *FAST, "-f", "json,md", "-o", "r.json", "--plot", "charts", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in ("opbench_slowest.png", "opbench_categories.png"):
        assert (tmp_path / "charts" / name).read_bytes()[:4] == b"\x89PNG"
        assert f"](charts/{name})" in (tmp_path / "r.md").read_text()


def _listed(proc):
    assert proc.returncode == 0, proc.stderr
    return {line.split()[0]: line for line in proc.stdout.splitlines()[2:] if line.strip()}


def test_list_shows_what_a_run_with_the_same_flags_runs(tmp_path):
    # --category takes opperf's membership in both: reshape_like lives in "shape" but is in
    # opperf's binary_misc too, and a run of binary_misc runs it
    listed = _listed(opbench("--list", "--category", "binary_misc", cwd=tmp_path))
    assert set(listed) == {"choose_element_0index", "reshape_like"}
    assert opbench("--category", "binary_misc", *FAST, "--no-isolation", "-o", "r.json", cwd=tmp_path).returncode == 0
    assert {r.spec.params["op"] for r in Report.load(tmp_path / "r.json").results} == set(listed)
    proc = opbench("--list", "--category", "unary", cwd=tmp_path)
    assert len(_listed(proc)) == 57 and "\n57 selected operators" in proc.stderr
    assert _listed(proc)["round"].split()[1] == "rounding"  # its one home category
    # --ops, --exclude and --dtype apply as well
    listed = _listed(opbench("--list", "--ops", "broadcast_*", "--exclude", "broadcast_mod", "--dtype", "int32",
                             cwd=tmp_path))
    assert "broadcast_mod" not in listed and "broadcast_div" in listed
    assert "no: integer dtype" in listed["broadcast_div"]


def test_adaptive_markdown_states_the_sampling_and_capped_cases(tmp_path):
    # --max-time far below one iteration: every case stops after its first run, capped
    proc = opbench("--ops", "round", "--tiny", "-w", "0", "-r", "3", "--target-precision", "1",
                   "--max-time", "0.000001", "--no-isolation", "-f", "md", "-o", "r.md", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "r.md").read_text()
    header = md.split("# Benchmark Results")[1].strip().splitlines()[0]
    assert "runs 3" not in header
    assert "adaptive sampling: runs until IQR/median < 0.01" in header and "at most 1e-06 s per case" in header
    table = [line for line in md.splitlines() if line.startswith("| round ")]
    # the default 3 rounds, each stopped after its first run
    assert len(table) == 3 and all(line.rstrip(" |").endswith("3 (capped)") for line in table)
    columns = [cell.strip() for cell in md.split("\n| Operator")[1].splitlines()[0].split("|")]
    assert columns[-2] == "Runs"
    assert "3 case(s) capped" in proc.stderr and proc.stderr.count("  round [") == 3


def test_merged_shards_equal_the_unsharded_report(tmp_path):
    # dot is left out at int32 (a no-case operator every shard reports); broadcast_add has one
    # case per shard, and the crashed one leaves its shard with no measured broadcast_add
    label, _ = _first_case("broadcast_add")
    args = ["--ops", "broadcast_add,round,dot", "--dtype", "int32", "--tiny", "-w", "0", "-r", "2"]
    env = _env(crash=label)
    for k in (1, 2, 3):
        opbench(*args, "--shard", f"{k}/3", "-o", f"s{k}.json", cwd=tmp_path, env=env, faulty=True)
    assert opbench(*args, "-o", "all.json", cwd=tmp_path, env=env, faulty=True).returncode == 1
    shards = [Report.load(tmp_path / f"s{k}.json") for k in (1, 2, 3)]
    assert any("broadcast_add" in {i["op"] for i in s.extra["no_benchmark"]} for s in shards)  # the stale note
    proc = opbench("merge", "s1.json", "s2.json", "s3.json", "-o", "merged.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    merged, whole = Report.load(tmp_path / "merged.json"), Report.load(tmp_path / "all.json")
    assert [r.spec.key for r in merged.results] == [r.spec.key for r in whole.results]
    assert [r.status for r in merged.results] == [r.status for r in whole.results]
    for key in ("no_benchmark", "skipped", "excluded"):
        assert merged.extra[key] == whole.extra[key], key
    assert [item["op"] for item in merged.extra["no_benchmark"]] == ["dot"]
    assert not any("no_benchmark" in s.get("extra", {}) for s in merged.extra["shards"])


def test_a_name_only_the_other_framework_knows_points_to_it():
    """The backends do not import each other: the CLI asks the other backend's knows()."""
    from opbench.backends.mxnet.cases import unknown_operator
    from opbench.cli import pointed_elsewhere

    assert str(pointed_elsewhere(unknown_operator("heaviside"), "mxnet")) == (
        "heaviside is a PyTorch operator, not an MXNet one; add --framework torch")
    close = unknown_operator("frexp")  # MXNet has names close to it: those are the hint
    assert pointed_elsewhere(close, "mxnet") is close and "did you mean exp" in str(close)
    unknown = unknown_operator("nosuchop_xyz")
    assert pointed_elsewhere(unknown, "mxnet") is unknown
