"""The MXNet release handling that needs no old MXNet (the installed 1.9.1 suffices): version
checks, the registry's C API path, what a release has, the profiler's per-release dump forms.
The same paths on a real old release: tests/opbench/test_old_mxnet_release.py under
scripts/test-old-mxnet."""

import mxnet as mx
import pytest

from benchcore.errors import UsageError
from opbench.backends.mxnet import registry, releases
from opbench.backends.mxnet.profiler import parse_text

#: `mx.profiler.dumps(reset=True)` of mxnet 1.4.1 after one mx.nd.exp on a (256, 256) float32
#: array (captured from the real release): the memory rows carry five numbers, and the call is
#: recorded twice.
DUMP_1_4_1 = (
    "\nProfile Statistics.\n\tNote that counter items are counter values and not time units.\nDevice Storage\n"
    "=================\nName                          Total Count        Time (ms)    Min Time (ms)    Max Time (ms)"
    "    Avg Time (ms)\n----                          -----------        ---------    -------------    -------------"
    "    -------------\nMemory: cpu/0                           1         262.1440         262.1440         262.1440"
    "           0.0000\n\noperator\n=================\nName                          Total Count        Time (ms)"
    "    Min Time (ms)    Max Time (ms)    Avg Time (ms)\n----                          -----------        ---------"
    "    -------------    -------------    -------------\nexp                                     2           0.6250"
    "           0.3120           0.3130           0.3125\n\n")


@pytest.mark.parametrize("text, release", [
    ("1.9.1", (1, 9, 1)), ("1.7.0.post2", (1, 7, 0)), ("1.8.0.post0", (1, 8, 0)), ("1.4.1", (1, 4, 1)),
    ("1.6.0+cu101", (1, 6, 0)), ("2.0.0b1", (2, 0, 0)), ("1.5", (1, 5, 0))])
def test_release_strings_are_read_as_their_release(text, release):
    assert releases.parse_release(text) == release
    assert releases.check_release(text) == release


@pytest.mark.parametrize("text", ["1.4.0", "1.3.1", "1.0.0.post4", "0.12.1"])
def test_a_release_before_1_4_1_is_refused_with_the_fix(text):
    with pytest.raises(UsageError) as caught:
        releases.check_release(text)
    message = str(caught.value)
    assert f"mxnet {text} is older than opbench supports (1.4.1 to 1.9.1)" in message
    assert "pip install 'mxnet>=1.4.1,<2'" in message and "\n" not in message


def test_an_unreadable_version_is_a_usage_error():
    with pytest.raises(UsageError, match="cannot read the MXNet version 'master'"):
        releases.parse_release("master")


def test_the_installed_release_is_the_reference_and_has_every_part():
    assert releases.current() == releases.REFERENCE == releases.parse_release(mx.__version__)
    assert releases.installed_version() == releases.recorded_version() == mx.__version__
    releases.refuse_recorded_release()  # 1.9.1 passes
    assert releases.features() is not None and "INT64_TENSOR_SIZE" not in releases.features()
    assert releases.has_feature("LAPACK") and not releases.has_feature("CUDA")
    assert releases.numpy_api() is None and releases.is_numpy_array(mx.np.ones((2,)))
    assert not releases.is_numpy_array(mx.nd.ones((2,)))
    assert releases.profiler_records_per_call() == 1 and not releases.warmup_under_profiler()


def test_the_c_api_registry_equals_mxnets_own_helpers():
    """The path every release has (MXListAllOpNames, MXSymbolGetAtomicSymbolInfo) answers what
    mx.operator's helpers (1.6 on) answer, for every registered operator."""
    names = releases.operator_names()
    assert sorted(names) == sorted(mx.operator.get_all_registered_operators())
    for name in names:
        expected = mx.operator.get_operator_arguments(name)
        assert releases.operator_arguments(name) == (tuple(expected.names), tuple(expected.types), expected.narg)
    assert len(registry.scan()) == len(names) and len(registry.selected_names()) == 256


def test_a_dump_of_mxnet_1_4_is_read_with_its_memory_and_each_call_once():
    dump = parse_text(DUMP_1_4_1)
    assert dump.memory["cpu/0"].max_bytes == 256 * 256 * 4 == dump.memory["cpu/0"].min_bytes
    assert dump.operators["exp"].count == 2  # as the table says: each call twice before 1.6
    once = dump.per_call(2)
    assert once.operators["exp"].count == 1
    assert once.operators["exp"].total_ms == pytest.approx(0.3125)
    assert once.operators["exp"].min_ms == 0.312 and once.operators["exp"].max_ms == 0.313
    assert once.memory == dump.memory
    assert dump.per_call(1) is dump



def test_a_gradient_one_release_lacks_is_listed_with_the_other_side_reason():
    """`ab` between releases: the new side times a backward the old side's MXNet cannot take
    (1.4's choose_element_0index); the comparison judges the forward and names the backward
    as measured on one side only, with the old side's reason."""
    from benchcore.compare.verdicts import compare
    from benchcore.measure.case import CaseSpec
    from benchcore.measure.measurement import Measurement
    from benchcore.report.model import CaseResult, Report

    def report(backward):
        metrics = {"forward": Measurement([1.0, 1.1, 0.9]).to_dict(), "missing": {}}
        if backward:
            metrics["backward"] = Measurement([2.0, 2.1, 1.9]).to_dict()
        else:
            metrics["missing"]["backward"] = registry.NO_FGRADIENT
        spec = CaseSpec("opbench", "choose_element_0index", {"op": "choose_element_0index", "category": "binary_misc"})
        return Report(suite="opbench", environment={}, settings={}, results=[CaseResult(spec, "ok", metrics)])

    result = compare(report(False), report(True))
    assert [m.metric for case in result.cases for m in case.metrics] == ["forward"]
    (item,) = result.unmeasured
    assert item["reason"] == f"backward: measured on the new side only (other side: {registry.NO_FGRADIENT})"
    assert (item["base_status"], item["new_status"]) == ("ok", "ok")
    (item,) = compare(report(True), report(False)).unmeasured
    assert item["reason"].startswith("backward: measured on the base side only")
