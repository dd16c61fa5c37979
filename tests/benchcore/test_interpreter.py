"""A side's python that is a wrapper script (how one side switches a library path or a framework
variable; what pyenv shims and conda wrappers are): probed once for its real interpreter and the
environment it sets; under the instruction engine that interpreter is what valgrind starts, with
those variables; a wrapper it cannot start so is refused in one line before either side runs a case.
The counted `ab` through such a wrapper under real valgrind: test_ab_wrapper_valgrind.py."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchcore.errors import UsageError
from benchcore.execute import interpreter
from benchcore.execute.sweep import count_sides, side_env
from opbench.backends import backend_for

ROOT = Path(__file__).resolve().parents[2]


def wrapper(folder: Path, body: str, name: str = "python") -> str:
    """An executable `#!/bin/bash` script in `folder`: `body` then nothing else."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)
    return str(path)


def setting(folder: Path, variable: str = "BENCH_WRAPPED", value: str = "1") -> str:
    return wrapper(folder, f'{variable}={value} exec {sys.executable} "$@"')


def probed(python: str) -> interpreter.Interpreter:
    return interpreter.probe(python, "--new-python", ("benchcore",), side_env(os.environ))


def test_a_wrapper_is_resolved_to_its_interpreter_and_the_variables_it_sets(tmp_path):
    found = probed(setting(tmp_path / "new"))
    assert os.path.realpath(found.executable) == os.path.realpath(sys.executable)
    assert found.sets == {"BENCH_WRAPPED": "1"} and found.unsets == () and found.options == ()
    assert found.wrapped
    assert found.launcher(("valgrind", "--tool=callgrind")) == ("env", "BENCH_WRAPPED=1", "valgrind", "--tool=callgrind")


def test_a_plain_interpreter_is_taken_as_it_is(tmp_path):
    found = probed(sys.executable)
    assert not found.wrapped and found.sets == {} and found.launcher(("valgrind",)) == ("valgrind",)


def test_a_wrapper_that_removes_a_variable_has_it_removed_under_valgrind_too(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DROPPED", "yes")
    found = probed(wrapper(tmp_path, f'unset BENCH_DROPPED; exec {sys.executable} "$@"'))
    assert found.unsets == ("BENCH_DROPPED",) and found.sets == {}
    assert found.launcher(("valgrind",)) == ("env", "-u", "BENCH_DROPPED", "valgrind")


def test_each_python_is_probed_once(tmp_path):
    calls = tmp_path / "calls"
    python = wrapper(tmp_path / "w", f'echo run >> {calls}; exec {sys.executable} "$@"')
    assert probed(python) is probed(python)
    assert calls.read_text().count("run") == 1


def test_a_wrapper_that_passes_interpreter_options_is_refused_for_counting(tmp_path):
    found = probed(wrapper(tmp_path, f'exec {sys.executable} -X utf8 "$@"'))
    assert found.options == ("-X", "utf8")
    with pytest.raises(UsageError, match=r"--new-python .* starts .* with options \(-X utf8\)"):
        interpreter.for_counting(found, "--new-python")


def test_count_sides_gives_the_wrapped_side_its_interpreter_and_variables(tmp_path):
    job = SimpleNamespace(suite=backend_for("mxnet").suite, launcher=("valgrind", "--tool=callgrind"), worker_pythons={},
                          side_launchers={}, pythons={"base": sys.executable, "new": setting(tmp_path / "new")})
    count_sides(job)
    assert list(job.worker_pythons) == ["new"]
    assert os.path.realpath(job.worker_pythons["new"]) == os.path.realpath(sys.executable)
    assert job.side_launchers == {"new": ("env", "BENCH_WRAPPED=1", "valgrind", "--tool=callgrind")}


def _ab(tmp_path, base: str, new: str):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPBENCH_TINY="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", "opbench", "ab", "-p", "instructions", "--ops", "relu", "--tiny",
                           "--base-python", base, "--new-python", new, "-o", str(tmp_path / "ab")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def _refused_before_any_case(proc, tmp_path, *words):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("opbench: error: "), proc.stderr
    assert all(word in lines[0] for word in words), lines[0]
    assert not list((tmp_path / "ab").glob("*.json*")), "nothing measured, nothing written"


def test_a_broken_wrapper_is_refused_in_one_line_before_any_case(tmp_path):
    broken = wrapper(tmp_path / "new", 'exec /nonexistent/bin/python "$@"')
    _refused_before_any_case(_ab(tmp_path, sys.executable, broken), tmp_path, "--new-python", broken)


def test_both_sides_are_checked_before_the_base_side_is_counted(tmp_path):
    """The new side's wrapper cannot be counted: refused before the base side runs a case
    (valgrind is checked first: scripts/test installs it, scripts/test-system)."""
    with_options = wrapper(tmp_path / "new", f'exec {sys.executable} -X utf8 "$@"')
    _refused_before_any_case(_ab(tmp_path, sys.executable, with_options), tmp_path, "--new-python", "-X utf8")


def test_a_timed_ab_runs_the_wrapper_as_it_is_and_records_what_it_ran(tmp_path):
    out = tmp_path / "ab"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "opbench", "ab", "--ops", "relu", "--tiny", "-w", "1", "-r", "2",
                           "--rounds", "2", "--budget", "0", "--base-python", sys.executable, "--new-python",
                           setting(tmp_path / "new"), "-o", str(out)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    new = json.loads((out / "new.json").read_text())["environment"]
    assert new["python_wrapper"]["sets"] == {"BENCH_WRAPPED": "1"}
    assert "python_wrapper" not in json.loads((out / "base.json").read_text())["environment"]
