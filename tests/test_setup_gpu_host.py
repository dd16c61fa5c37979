"""scripts/setup on a GPU host (nvidia-smi answers): no MXNet unless MXNET_SPEC names a CUDA build,
and no numpy<1.24 pin with it (no wheel for Python >= 3.12). Nothing is installed: the venv's
python is a fake that records each command line, and nvidia-smi a fake on PATH."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SETUP = Path(__file__).resolve().parents[1] / "scripts" / "setup"


def run_setup(tmp_path: Path, gpu: bool, mxnet_spec=None):
    """setup's exit status, stdout, stderr and the pip command lines its venv python was given."""
    bin_dir, venv = tmp_path / "bin", tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1" = -m ]; then printf "%s\\n" "$*" >> {calls}; exit 0; fi\n'
                      'echo "mxnet none torch 2.11.0 numpy 2.2.0"\n')
    if gpu:  # answers `nvidia-smi -L` and nothing else
        (bin_dir / "nvidia-smi").write_text('#!/bin/sh\n[ "$*" = -L ] && echo "GPU 0: NVIDIA H100 80GB HBM3"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    python.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "VENV": str(venv)}
    if mxnet_spec is not None:
        env["MXNET_SPEC"] = mxnet_spec
    done = subprocess.run(["bash", str(SETUP)], env=env, capture_output=True, text=True, timeout=60)
    installs = [line for line in calls.read_text().splitlines() if "--upgrade pip" not in line] if calls.exists() else []
    return done, installs


def test_a_gpu_host_gets_no_mxnet_and_no_numpy_pin_unless_asked(tmp_path):
    done, installs = run_setup(tmp_path, gpu=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("setup: GPU host: no MXNet (MXNET_SPEC=mxnet-cu112==1.9.1 asks")
    assert installs == ["-m pip install -q --disable-pip-version-check torch>=2.1 -e .[torch,plot,dev]"]


def test_a_gpu_host_takes_mxnets_cuda_build_when_asked(tmp_path):
    done, installs = run_setup(tmp_path, gpu=True, mxnet_spec="mxnet-cu112==1.9.1")
    assert done.returncode == 0, done.stderr
    assert "setup: GPU host: MXNet's CUDA build mxnet-cu112==1.9.1, with numpy<1.24 (Python <= 3.11)" in done.stdout
    assert installs == ["-m pip install -q --disable-pip-version-check torch>=2.1 mxnet-cu112==1.9.1 numpy<1.24 "
                        "-e .[torch,plot,dev]"]


@pytest.mark.parametrize("spec", ["mxnet==1.9.1", "mxnet"])
def test_a_gpu_host_refuses_mxnets_cpu_build_in_one_line(tmp_path, spec):
    done, installs = run_setup(tmp_path, gpu=True, mxnet_spec=spec)
    assert done.returncode == 2 and installs == []
    assert done.stderr.strip().splitlines() == [
        f"setup: MXNET_SPEC={spec} is not a CUDA build of MXNet; on a GPU host name one (mxnet-cuXXX, "
        "e.g. mxnet-cu112==1.9.1, matching the CUDA version) or none"]


def test_a_cpu_host_keeps_the_cpu_wheels_and_mxnet(tmp_path):
    done, installs = run_setup(tmp_path, gpu=False)
    assert done.returncode == 0, done.stderr
    assert "GPU host" not in done.stdout and os.path.exists(tmp_path / "venv" / ".setup-stamp")
    assert installs == ["-m pip install -q --disable-pip-version-check torch==2.13.0 mxnet==1.9.1 numpy<1.24 "
                        "-e .[torch,plot,dev]"]
