"""The scripts a user or CI runs (scripts/) and those that back the lab notes (lab/figures/): every
Python one is linted, and every one that parses arguments still starts (its imports resolve: a
module it needs that moved fails here, not on the day someone measures). Python scripts carry no
.py suffix, so ruff reaches them only when pyproject.toml names them; a new script that is not
named would go unchecked."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAB_FIGURES = sorted((ROOT / "lab" / "figures").iterdir())


def python_scripts():
    """Every file of scripts/ and lab/figures/ whose first line runs Python."""
    files = [*(ROOT / "scripts").iterdir(), *LAB_FIGURES]
    return sorted(f for f in files if f.is_file() and "python" in f.read_text(encoding="utf-8").split("\n", 1)[0])


def ruff_includes():
    """The paths pyproject.toml's [tool.ruff] extend-include names."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    listed = re.search(r"^extend-include = \[(.*?)\]", text, re.MULTILINE | re.DOTALL)
    assert listed, "pyproject.toml has no [tool.ruff] extend-include"
    return set(re.findall(r'"([^"]+)"', listed.group(1)))


def test_every_python_script_is_linted():
    scripts = {str(f.relative_to(ROOT)) for f in python_scripts() if f.suffix != ".py"}
    assert {"scripts/speed_figures", "lab/figures/modes_figures"} <= scripts  # the finder finds them
    assert scripts <= ruff_includes(), f"add to [tool.ruff] extend-include: {sorted(scripts - ruff_includes())}"
    assert ruff_includes() <= scripts, f"no such Python script: {sorted(ruff_includes() - scripts)}"


def test_the_test_script_lints_every_folder_that_holds_python():
    line = next(x for x in (ROOT / "scripts" / "test").read_text(encoding="utf-8").splitlines() if " check " in x)
    assert set(line.split(" check ", 1)[1].split()) >= {"scripts", "lab", "tests", "benchcore", "opbench", "rnnbench"}


WITH_ARGUMENTS = [f for f in python_scripts() if "argparse" in f.read_text(encoding="utf-8")]


@pytest.mark.parametrize("script", WITH_ARGUMENTS, ids=[str(f.relative_to(ROOT)) for f in WITH_ARGUMENTS])
def test_a_script_starts(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
