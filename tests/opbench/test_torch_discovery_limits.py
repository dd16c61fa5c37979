"""Torch discovery on a GPU: limited to a sweep's --ops when no full manifest is cached (a full
one discovers ~660 entries), and budgeting the device's memory (the fake torch.cuda of
tests.cuda_fakes: this machine has no GPU)."""

from __future__ import annotations

from opbench.backends.torch import discover
from opbench.backends.torch.manifest import CACHE_ENV, cache_path, obtain
from tests.cuda_fakes import FakeCuda


def test_a_first_discovery_covers_only_the_ops_asked_for(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    said = []
    manifest = obtain(None, "float32", "cpu", 4096, 0, said.append, names=["mul", "nn.functional.relu*"])
    names = {name for name, _variant in manifest.entries} | {i["name"] for i in manifest.left_out}
    assert names == {"mul", "nn.functional.relu", "nn.functional.relu6"}
    assert manifest.header["names"] == ["mul", "nn.functional.relu*"]
    assert "the operators matching --ops mul,nn.functional.relu*" in said[0]
    assert not cache_path("float32", "cpu", 4096, 0).exists()  # the full manifest's name stays free
    again = obtain(None, "float32", "cpu", 4096, 0, said.append, names=["nn.functional.relu*", "mul"])
    assert again.path == manifest.path and len(said) == 1  # cached under the set of patterns


def test_discovery_budgets_device_memory_on_cuda(monkeypatch):
    fake = FakeCuda().install(monkeypatch)
    fake.allocated = 10 * 2**20  # what the process holds already
    held = discover._held_memory("cuda:0")
    fake.matmul_call()  # 4 MiB kept, 1 KiB at the peak
    assert held() == 4 * 2**20 + 1024 and fake.synced == [0]
