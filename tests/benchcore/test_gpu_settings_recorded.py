"""The settings that change GPU figures are in every report's environment, so two reports taken
with cuDNN's autotuner on and off are told apart: torch.backends.cudnn.benchmark (and
deterministic) in the `torch` block, MXNET_CUDNN_AUTOTUNE_DEFAULT in the `mxnet` block."""

from __future__ import annotations

import torch

from benchcore.execute import environment
from benchcore.report.identity import timing_relevant


def torch_block() -> dict:
    return environment.collect("rnnbench", collectors=("frameworks.torch:collect",))["torch"]


def test_torch_records_cudnn_benchmark_and_deterministic(monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", False)
    assert (torch_block()["cudnn_benchmark"], torch_block()["cudnn_deterministic"]) == (False, False)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    assert (torch_block()["cudnn_benchmark"], torch_block()["cudnn_deterministic"]) == (True, True)
    assert timing_relevant("torch.cudnn_benchmark", ("torch",))


def test_mxnet_records_its_cudnn_autotune_variable(monkeypatch):
    monkeypatch.delenv("MXNET_CUDNN_AUTOTUNE_DEFAULT", raising=False)
    collect = ("frameworks.mxnet:collect",)
    assert environment.collect("opbench", collectors=collect)["mxnet"]["cudnn_autotune_env"] is None  # MXNet's default, 1
    monkeypatch.setenv("MXNET_CUDNN_AUTOTUNE_DEFAULT", "0")
    assert environment.collect("opbench", collectors=collect)["mxnet"]["cudnn_autotune_env"] == "0"
    assert timing_relevant("mxnet.cudnn_autotune_env", ("mxnet",))
