"""scripts/gpu_check where things go wrong as on a GPU image: expecttest missing (blocked by a
sitecustomize on the interpreter's path), a command that overruns its limit, a report that does
not parse. Every item must still end in a verdict and the archive must still be written."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import stat
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_check(monkeypatch, out: Path, python: Path, device: str = "cpu"):
    """The script as a module, its outputs under `out`, its commands run by `python`."""
    monkeypatch.setenv("OUT", str(out))
    monkeypatch.setenv("DEVICE", device)
    monkeypatch.setenv("PYTHON", str(python))
    loader = importlib.machinery.SourceFileLoader("gpu_check", str(ROOT / "scripts" / "gpu_check"))
    spec = importlib.util.spec_from_loader("gpu_check", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    (module.OUT / "logs").mkdir(parents=True)
    return module


def fake_python(folder: Path, on_module: str) -> Path:
    """An interpreter as the GPU image has it: the real one without expecttest for `-c` code (a
    sitecustomize makes its import fail), and `on_module` (shell) run in place of `-m` commands."""
    blocker = folder / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['expecttest'] = None\n")
    script = folder / "python3"
    script.write_text(f'#!/bin/sh\nif [ "$1" = -m ]; then\n{on_module}\nfi\n'
                      f'PYTHONPATH="{blocker}:$PYTHONPATH" exec {sys.executable} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


#: for `-m` commands: write "{" to the file after --output-file and succeed
BAD_JSON = ('while [ $# -gt 0 ]; do [ "$1" = --output-file ] && printf "{" > "$2"; shift; done\n'
            'mkdir -p profile && printf "{" > profile/x.keyavg.json\nexit 0')


def test_every_item_gets_a_verdict_and_the_archive_is_written_when_reports_do_not_parse(tmp_path, monkeypatch, capsys):
    check = load_check(monkeypatch, tmp_path / "out", fake_python(tmp_path, BAD_JSON))
    check.TORCH_OPS = [("add", "")]
    assert check.main() == 1
    verdicts = (check.OUT / "verdicts.txt").read_text().splitlines()
    states = {line.split(None, 1)[1].split(":")[0]: line.split()[0] for line in verdicts[:-1]}
    # discovery ran through OpInfo although expecttest could not be imported
    assert states["environment"] == "ok" and states["torch manifest of 1 operators built through OpInfo"] == "ok"
    manifest = json.loads((check.OUT / "torch_manifest.json").read_text())
    assert [e["name"] for e in manifest["entries"]] == ["add"]
    assert "expecttest is missing" in (check.OUT / "logs" / "torch_manifest.log").read_text()
    assert "expecttest missing" in capsys.readouterr().out
    unparsed = [line for line in verdicts if "does not parse" in line]
    assert {line.split()[0] for line in unparsed} == {"FAIL"}
    assert {"opbench torch native", "rnnbench bench on cpu"} <= {line.split(None, 1)[1].split(":")[0] for line in unparsed}
    assert all(line.split()[0] in ("ok", "FAIL", "n/a") for line in verdicts[:-1])
    assert any("MXNet on the GPU: a CPU run" in line for line in verdicts)  # the last item ran
    with tarfile.open(tmp_path / "out" / "gpu_check.tar.gz") as archive:
        assert {"gpu_check/verdicts.txt", "gpu_check/logs/torch_manifest.log"} <= set(archive.getnames())


def test_a_command_past_its_limit_is_killed_with_its_children_and_fails_its_item(tmp_path, monkeypatch):
    pids = tmp_path / "grandchild.pid"
    check = load_check(monkeypatch, tmp_path / "out", fake_python(tmp_path, f"sleep 60 &\necho $! > {pids}\nsleep 60"))
    check.STEP_TIMEOUT_S = 1
    started = time.perf_counter()
    check.check_rnnbench_test()
    assert time.perf_counter() - started < 30
    (state, item, why), = check.verdicts
    assert state == "FAIL" and why == "exit 124: gpu_check: timed out after 1 s"
    assert "# exit 124" in (check.OUT / "logs" / "rnnbench_test.log").read_text()
    grandchild = int(pids.read_text())
    for _ in range(50):  # killed with its group; gone once the kernel has reaped it
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        stat_line = Path(f"/proc/{grandchild}/stat").read_text()
        assert stat_line.split(")")[1].split()[0] == "Z", "the command's own child outlived the timeout"


def test_environment_without_torch_fails_once_and_every_other_item_says_why(tmp_path, monkeypatch):
    broken = tmp_path / "python3"
    broken.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n")
    broken.chmod(0o755)
    check = load_check(monkeypatch, tmp_path / "out", broken)
    assert check.main() == 1
    lines = (check.OUT / "verdicts.txt").read_text().splitlines()[:-1]
    assert lines[0].startswith("FAIL environment") and "No module named 'torch'" in lines[0]
    assert len(lines) == 1 + len(check.checks({})) and all(line.startswith("n/a ") for line in lines[1:])
    assert (tmp_path / "out" / "gpu_check.tar.gz").exists()


def report(flush: bool, medians: dict) -> dict:
    return {"results": [{"spec": {"name": name}, "metrics": {"flush_l2": flush, "forward": {"median_ms": ms}}}
                        for name, ms in medians.items()]}


@pytest.mark.parametrize("cold, problem", [
    ({"add": 0.0105, "matmul": 0.050}, None),  # add's inputs no longer come from L2
    ({"add": 0.0079, "matmul": 0.051}, "no case slower cold than warm (at most matmul: 1.02x): the flush changed nothing"),
])
def test_the_l2_flush_item_asks_that_the_flush_changed_a_median(tmp_path, monkeypatch, cold, problem):
    check = load_check(monkeypatch, tmp_path / "out", Path(sys.executable), device="cuda")
    found = check.flush_effect(report(False, {"add": 0.0080, "matmul": 0.050}), report(True, cold))
    assert found == problem
    assert check.flush_effect(report(False, {"add": 1}), report(False, {"add": 2})) == "cases run without the flush: add"


def test_mxnet_not_installed_is_told_from_mxnet_failing_to_import(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "mxnet").mkdir(parents=True)  # shadows the venv's MXNet, failing as 1.9.1 fails under numpy 2
    (site / "mxnet" / "__init__.py").write_text("raise AttributeError(\"module 'numpy' has no attribute 'bool'\")\n")
    wrapper = tmp_path / "python3"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}:$PYTHONPATH" exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    check = load_check(monkeypatch, tmp_path / "out", wrapper, device="cuda")
    problem, _ = check.mxnet_state()
    assert problem == "MXNet is installed but fails to import: AttributeError: module 'numpy' has no attribute 'bool'"
    (site / "mxnet" / "__init__.py").unlink()
    (site / "mxnet").rmdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['mxnet'] = None\n")  # as if never installed
    assert check.mxnet_state() == ("n/a: MXNet is not installed", None)


def test_the_roofs_item_takes_real_roofs_and_holds_a_device_to_its_rated_bandwidth(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPBENCH_ROOFS_TINY", "1")  # toy-sized probes: the item's path, not the figures
    check = load_check(monkeypatch, tmp_path / "out", Path(sys.executable))
    check.check_roofs()
    assert check.verdicts[-1][0] == "ok", check.verdicts
    taken = json.loads((check.OUT / "roofs.json").read_text())
    assert taken["device"] == "cpu" and taken["flops_per_s"]["float32"] > 0
    cuda = load_check(monkeypatch, tmp_path / "gpu", Path(sys.executable), device="cuda")
    device = dict(taken, plateaus={"L1": None, "L2": 5e12, "LLC": None, "DRAM": 3.9e12},
                  spec={"name": "NVIDIA H100 80GB HBM3", "memory_bytes_per_s": 3.35e12})
    assert cuda.roofs_problem(device) == "DRAM 3900 GB/s measured above the device's rated 3350 GB/s"
    assert cuda.roofs_problem(dict(device, plateaus=dict(device["plateaus"], DRAM=3.0e12))) is None
    assert cuda.roofs_problem(dict(device, spec=None)) == "no device figures beside the measured roofs"
    assert check.roofs_problem(dict(taken, flops_per_s={"float32": None})).startswith("no float32 peak")
