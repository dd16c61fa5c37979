"""Choosing a GPU: MXNet's --ctx checks (a kernel probe on the chosen GPU; no GPU at all) and
which cases claim GPUs from a Ray cluster. This machine has neither a GPU nor a CUDA build of
MXNet: the fakes are MXNet's answers about the GPU (its CUDA feature flag, GPU count and
compute capability as libcuda gives it, and the kernel failure the 1.9.1 CUDA wheels give on Hopper)."""

from __future__ import annotations

import mxnet as mx
import pytest

from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec
from opbench.backends.mxnet.device import check_ctx
from opbench.suite import uses_gpu

HOPPER_ERROR = ("Traceback (most recent call last):\n  File \"../src/engine/threaded_engine.cc\", line 331\n"
                "MXNetError: Check failed: err == cudaSuccess (209 vs. 0) : Name: mxnet_generic_kernel "
                "ErrStr:no kernel image is available for execution on the device")


@pytest.fixture
def cuda_mxnet(monkeypatch, request):
    """A CUDA build of MXNet that sees `gpus` GPUs of compute capability `capability` (90: an
    H100/H200). The backend reads the build's features once per process (releases.features is
    cached): the cache is emptied before the fake and after it."""
    from opbench.backends.mxnet import releases

    releases.features.cache_clear()
    request.addfinalizer(releases.features.cache_clear)

    class Feature:  # as mxnet.runtime.Feature: a name and whether the build has it
        def __init__(self, name, enabled):
            self.name, self.enabled = name, enabled

    class Features(dict):  # as mxnet.runtime.Features: an ordered dict of name → Feature
        def __init__(self):
            super().__init__((name, Feature(name, name == "CUDA")) for name in ("CUDA", "CUDNN", "MKLDNN"))

        def is_enabled(self, name):
            return self[name].enabled

    monkeypatch.setattr(mx.runtime, "Features", Features)

    def gpus(count, capability=90):
        def read(ctx):  # as mx.util: libcuda's answer; OSError where libcuda cannot be loaded
            if capability is None:
                raise OSError("could not load any of: libcuda.so libcuda.dylib cuda.dll")
            return capability
        monkeypatch.setattr(mx.util, "get_cuda_compute_capability", read)
        monkeypatch.setattr(mx.context, "num_gpus", lambda: count)
    return gpus


def test_a_hopper_gpu_is_refused_from_its_capability_before_any_kernel_or_handle(cuda_mxnet, monkeypatch):
    cuda_mxnet(1, capability=90)
    touched = []
    monkeypatch.setattr(mx.nd, "ones", lambda *args, **kwargs: touched.append(args))  # the probe's first call
    with pytest.raises(UsageError) as caught:
        check_ctx("gpu(0)")
    message = str(caught.value)
    assert touched == [] and "\n" not in message
    assert message == (f"--ctx gpu(0): mxnet {mx.__version__} has no kernels for this GPU (sm_90): its CUDA wheels "
                       "carry code up to sm_86 and no PTX; use a GPU of sm_89 or older (Ada runs sm_86 code) "
                       "or --ctx cpu")


@pytest.mark.parametrize("capability", [89, 86, 70])
def test_ada_ampere_and_older_go_on_to_the_kernel_probe(cuda_mxnet, capability):
    cuda_mxnet(1, capability=capability)  # the real kernel of this CPU build then fails on a GPU context
    with pytest.raises(UsageError, match=r"^--ctx gpu\(0\): a one-element kernel failed there \("):
        check_ctx("gpu(0)")


def test_a_gpu_mxnet_has_no_kernels_for_is_refused_in_one_line(cuda_mxnet, monkeypatch):
    cuda_mxnet(1, capability=None)  # capability unreadable: the probe's kernel tells

    def hopper_kernel(*args, **kwargs):
        raise mx.base.MXNetError(HOPPER_ERROR)

    monkeypatch.setattr(mx.nd, "ones", hopper_kernel)
    with pytest.raises(UsageError) as caught:
        check_ctx("gpu(0)")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"--ctx gpu(0): mxnet {mx.__version__} has no kernels for this GPU (architecture unknown)")
    assert "sm_89 or older" in message and "--ctx cpu" in message


def test_any_other_probe_failure_is_one_line_with_mxnets_own_words(cuda_mxnet):
    cuda_mxnet(1, capability=80)  # the real kernel of this CPU build fails on a GPU context, in MXNet's words
    with pytest.raises(UsageError) as caught:
        check_ctx("gpu")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("--ctx gpu(0): a one-element kernel failed there (")
    assert "not implemented for GPU" in message


def test_no_gpu_at_all_is_said_so(cuda_mxnet):
    cuda_mxnet(0)
    with pytest.raises(UsageError, match=r"MXNet sees no GPU .* or use --ctx cpu$") as caught:
        check_ctx("gpu(0)")
    assert "gpu(-1)" not in str(caught.value)
    cuda_mxnet(2)
    with pytest.raises(UsageError, match=r"MXNet sees 2 GPU\(s\); choose gpu\(0\)..gpu\(1\)"):
        check_ctx("gpu(2)")


@pytest.mark.parametrize("params, gpu", [
    ({"ctx": "gpu(0)"}, True), ({"ctx": "cpu(0)"}, False),
    ({"device": "cuda"}, True), ({"device": "cuda:1"}, True), ({"device": "cpu"}, False), ({}, False)])
def test_torch_and_mxnet_cases_claim_gpus(params, gpu):
    assert uses_gpu(CaseSpec("opbench", "x", params)) is gpu


def test_flush_l2_needs_a_cuda_device(tmp_path, capsys, monkeypatch):
    from opbench.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["--framework", "torch", "--device", "cpu", "--flush-l2", "--ops", "add"]) == 2
    assert capsys.readouterr().err == ("opbench: error: --flush-l2 evicts a GPU's L2 cache; it needs --device cuda "
                                       "(or cuda:N)\n")
    assert not list(tmp_path.iterdir())
