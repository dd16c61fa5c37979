"""Faithfulness: what decides the frameworks' kernels, probed in a real native process (MXNet's
oneDNN and OpenBLAS, torch's CPU capability), the valgrind probe's command, and the report's
record of where native and valgrind differ. The probe under real valgrind:
test_instructions_valgrind.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

from benchcore.execute import code_path, valgrind
from benchcore.measure.instructions import faithfulness

ROOT = Path(__file__).resolve().parents[2]


def probe(*probes):
    done = subprocess.run(code_path.native_command(probes), capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.strip().splitlines()) == 1  # oneDNN's verbose lines were captured, not printed
    return json.loads(done.stdout)


def test_the_mxnet_probe_reads_onednn_and_openblas_in_a_real_process():
    found = probe("frameworks.mxnet:code_path")
    assert found["onednn_version"].startswith("oneDNN v")
    assert "inner_product:x64:" in found["onednn_implementations"][0]
    # oneDNN's ISA follows the CPU features this process sees
    assert ("AVX-512" in found["onednn_isa"]) == ("AVX512F" in found["cpu_features"])
    assert found["openblas"]["core"] and found["openblas"]["config"].startswith("OpenBLAS")
    assert found["openblas_threads"] >= 1


def test_the_torch_probe_reads_the_cpu_capability_in_a_real_process():
    found = probe("frameworks.torch:code_path")
    assert found["torch_cpu_capability"] in ("DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "SVE256")
    assert (found["torch_cpu_capability"] == "AVX512") == ("AVX512F" in found["cpu_features"])
    assert found["torch_threads"] >= 1 and found["torch_blas"]


def test_the_valgrind_probe_runs_under_the_workers_launcher_with_the_none_tool():
    launcher = valgrind.launcher(valgrind.DEFAULT_GEOMETRY, "/x/shim.so", "/usr/bin/valgrind")
    command = code_path.valgrind_command(launcher, ["frameworks.mxnet:code_path"])
    at = command.index("/usr/bin/valgrind")
    assert command[:at] == launcher[:at]  # the workers' environment: one thread, NaiveEngine, no ASLR
    assert command[at + 1:at + 3] == ["--tool=none", "--quiet"] and "--cache-sim=yes" not in command
    assert command[at + 3:] == code_path.native_command(["frameworks.mxnet:code_path"])


def test_a_different_code_path_is_warned_about_and_threads_are_only_recorded():
    native = {"onednn_isa": "Intel AVX-512", "openblas": {"core": "SkylakeX"}, "openblas_threads": 2,
              "threads_env": {"OMP_NUM_THREADS": None}}
    under = {"onednn_isa": "Intel AVX2", "openblas": {"core": "Haswell"}, "openblas_threads": 1,
             "threads_env": {"OMP_NUM_THREADS": "1"}}
    found = faithfulness({"native": native, "valgrind": under}, [{"cpu_features": ["AVX2"]}])
    assert [d["key"] for d in found["differences"]] == ["onednn_isa", "openblas"]
    assert "onednn_isa: Intel AVX-512 natively, Intel AVX2 under valgrind" in found["warning"]
    assert "openblas: SkylakeX natively, Haswell under valgrind" in found["warning"]
    assert found["valgrind"]["cpu_features"] == ["AVX2"]  # what the counted worker saw itself is kept
    same = dict(under, openblas_threads=4, threads_env={"OMP_NUM_THREADS": "4"})
    assert faithfulness({"native": same, "valgrind": under}, [])["warning"] is None


def test_a_failed_probe_is_recorded_not_fatal():
    found = faithfulness({"native": {"error": "the probe failed (exit 1): ImportError"}, "valgrind": {"error": "x"}}, [])
    assert found["differences"] == [] and found["native"]["error"].startswith("the probe failed")


class _Recorded:
    """A probe process that answers at once; the command it was started with is kept."""

    commands = []

    def __init__(self, command, **_kwargs):
        self.command, self.returncode = list(command), 0
        _Recorded.commands.append(self.command)

    def communicate(self, timeout=None):
        return json.dumps({"python": self.command[self.command.index("-m") - 1]}) + "\n", ""


def test_each_ab_side_probes_under_its_own_python(monkeypatch):
    """opbench ab: base.json's code path is base's python's, new.json's new's (it was the driver's)."""
    from types import SimpleNamespace

    from benchcore.cli import run as sweep_path
    from benchcore.cli.request import SweepRequest

    _Recorded.commands = []
    monkeypatch.setattr(code_path, "subprocess", SimpleNamespace(Popen=_Recorded, PIPE=subprocess.PIPE,
                                                                 DEVNULL=subprocess.DEVNULL,
                                                                 TimeoutExpired=subprocess.TimeoutExpired))
    launcher = valgrind.launcher(valgrind.DEFAULT_GEOMETRY, "/x/shim.so", "/usr/bin/valgrind")
    pythons = {"base": "/venv-mx18/bin/python", "new": "/venv-mx19/bin/python"}
    job = SimpleNamespace(worker_options={"valgrind": {"launcher": launcher}}, pythons=pythons,
                          suite=SimpleNamespace(code_path_probes=("frameworks.mxnet:code_path",)),
                          settings=SimpleNamespace(to_dict=dict), settings_record=dict)
    request = SweepRequest(seed=0, threads=1, timeout=1)
    reports = {side: SimpleNamespace(settings=sweep_path.run_record(request, job, [], side)) for side in pythons}
    at = launcher.index("/usr/bin/valgrind")
    for side, python in pythons.items():
        block = reports[side].settings["valgrind"]["code_path"]
        assert block["native"]["python"] == block["valgrind"]["python"] == python
    native = [c for c in _Recorded.commands if "/usr/bin/valgrind" not in c]
    under = [c for c in _Recorded.commands if "/usr/bin/valgrind" in c]
    assert native == [code_path.native_command(["frameworks.mxnet:code_path"], python) for python in pythons.values()]
    assert [c[at + 3] for c in under] == list(pythons.values())  # valgrind --tool=none --quiet PYTHON -m ...
    assert all(c[:at] == launcher[:at] for c in under)
    # a sweep of one environment probes under its own interpreter, as before
    _Recorded.commands = []
    sweep_path.run_record(request, SimpleNamespace(**dict(vars(job), pythons={})), [])
    assert {c[c.index("-m") - 1] for c in _Recorded.commands} == {sys.executable}


def test_a_probe_records_the_interpreter_it_ran_under_natively_and_under_valgrind(tmp_path, monkeypatch):
    """A real second interpreter (a link to a python outside its venv), the core's probe only: cheap."""
    import shutil

    assert shutil.which("valgrind"), "valgrind is not installed (scripts/test-system installs it)"
    other = tmp_path / "other-python"
    other.symlink_to(os.path.realpath(sys.executable))
    launcher = valgrind.launcher(None, "/x/shim.so", shutil.which("valgrind"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    found = code_path.probe_both(launcher, [], str(other))
    assert found["native"]["python"] == found["valgrind"]["python"] == str(other), found
    assert "AVX512F" not in (found["valgrind"]["cpu_features"] or [])
