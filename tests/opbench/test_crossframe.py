"""`opbench crossframe` on a handful of operator pairs, through the real CLI (tiny sizes)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchcore.report.model import Report
from opbench.equivalents import PAIRS, mxnet_for, torch_for

ROOT = Path(__file__).resolve().parents[2]


def crossframe(*args, cwd):
    return subprocess.run([sys.executable, "-m", "opbench", "crossframe", *args], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=600)


def test_the_table_maps_both_ways():
    assert len(PAIRS) >= 30 and len({p.mxnet for p in PAIRS}) == len(PAIRS)
    assert torch_for("broadcast_add") == "add" and torch_for("dot") == "matmul" and torch_for("RNN") == "lstm"
    assert mxnet_for("matmul") == "dot" and mxnet_for("nn.functional.conv2d") == "Convolution"


def test_crossframe_on_a_few_pairs(tmp_path):
    proc = crossframe("--ops", "broadcast_add,softmax,Convolution,Pooling,RNN", "--tiny", "-w", "1", "-r", "3",
                      "--rounds", "1", "-f", "json,md", "-o", "cf.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = Report.load(tmp_path / "cf.json")
    assert all(r.ok for r in report.results), [r.error for r in report.results if not r.ok]
    data = report.extra["crossframe"]
    assert data["versions"]["mxnet"] == "1.9.1" and data["versions"]["torch"].startswith("2.")
    rows = data["rows"]
    assert {r["mxnet"] for r in rows} == {"broadcast_add", "softmax", "Convolution", "Pooling", "RNN"}
    paired = [r for r in rows if r["torch_key"]]
    for row in paired:  # both sides measured, forward and backward (every pair here has a gradient)
        assert row["forward"]["mxnet_ms"] > 0 and row["forward"]["torch_ms"] > 0, row
        assert row["forward"]["ratio"] == pytest.approx(row["forward"]["torch_ms"] / row["forward"]["mxnet_ms"])
    assert {r["torch"] for r in paired} >= {"add", "softmax", "nn.functional.conv2d", "nn.functional.max_pool2d",
                                            "lstm", "gru"}
    unpaired = [r for r in rows if not r["torch_key"]]  # sum pooling has no torch call
    assert unpaired and all(r["mxnet"] == "Pooling" and r["note"] for r in unpaired)
    mxnet_case = next(r for r in report.results if r.spec.params.get("op") == "Convolution")
    torch_case = next(r for r in report.results if r.spec.name == "nn.functional.conv2d")
    assert torch_case.spec.params["crossframe"] == "Convolution" and mxnet_case.spec.params.get("framework") is None
    md = (tmp_path / "cf.md").read_text()
    assert "# MXNet vs PyTorch" in md and "| broadcast_add" in md and "Geometric mean" in md
    assert "thread variables: " in md and "{" not in md.split("\n|")[0]  # no Python dict in the header


def test_unknown_pair_is_one_line(tmp_path):
    proc = crossframe("--pairs", "nosuchop", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no crossframe pair" in proc.stderr


def test_ops_chooses_pairs_and_pairs_is_its_alias(tmp_path):
    """--ops, as in every other opbench command, picks pairs by either name; --pairs still works."""
    by_ops = crossframe("--ops", "dot,nn.functional.conv2d", "--list", cwd=tmp_path)
    by_pairs = crossframe("--pairs", "dot", "--pairs", "nn.functional.conv2d", "--list", cwd=tmp_path)
    assert by_ops.returncode == 0 and by_pairs.returncode == 0, by_ops.stderr + by_pairs.stderr
    assert by_ops.stdout == by_pairs.stdout
    assert "dot" in by_ops.stdout and "matmul" in by_ops.stdout and "Convolution" in by_ops.stdout
    assert "broadcast_add" not in by_ops.stdout
