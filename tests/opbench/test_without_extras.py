"""opbench where an extra is not installed (a GPU image with numpy 2 has no MXNet; expecttest
may be missing): one line naming the extra, exit status 2. The package is hidden from a child
process by a None in sys.modules, which is how Python says "not importable"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def opbench_without(module: str, args, cwd: Path, **env) -> subprocess.CompletedProcess:
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            "from opbench.cli import main\n"
            f"sys.exit(main({list(args)!r}))")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_the_default_framework_without_mxnet_names_the_extra(tmp_path):
    done = opbench_without("mxnet", ["--ops", "broadcast_add"], tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("opbench: error: --framework mxnet (opbench's default) needs MXNet, which is not installed: "
                           "pip install -e '.[mxnet]' (mxnet 1.9.1, which needs numpy<1.24), or run PyTorch's "
                           "operators with --framework torch\n")
    assert not list(tmp_path.iterdir())  # nothing written


def test_torch_discovery_without_expecttest_says_so(tmp_path):
    done = opbench_without("expecttest", ["--framework", "torch", "--ops", "add"], tmp_path,
                           OPBENCH_CACHE=str(tmp_path / "cache"))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "needs expecttest: pip install expecttest" in done.stderr and "--manifest" in done.stderr
