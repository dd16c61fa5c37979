"""benchcore.views.symbols: demangled C++ names from real callgrind runs of MXNet shortened for a
table (tests/benchcore/data/callgrind_names.txt: each name and how it is shown)."""

from pathlib import Path

import pytest

from benchcore.views import symbols

NAMES = Path(__file__).parent / "data" / "callgrind_names.txt"


def pairs():
    """(full name, shown) from the data file: a name, then `-> shown`."""
    lines = [line for line in NAMES.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert all(shown.startswith("-> ") for shown in lines[1::2])
    return [(full, shown[3:]) for full, shown in zip(lines[::2], lines[1::2])]


@pytest.mark.parametrize("full,shown", pairs(), ids=[shown for _full, shown in pairs()])
def test_real_names_read_as_their_qualified_name(full, shown):
    assert symbols.short_name(full) == shown


def test_the_real_names_cover_what_makes_cpp_names_hard():
    fulls = " ".join(full for full, _shown in pairs())
    for part in ("{lambda(", "(anonymous namespace)", "[clone .constprop.0]", "std::function<", "(*)(",
                 "operator<< <", "operator()(", "operator<(", ") const", "> >", "std::enable_if<"):
        assert part in fulls
    assert len(pairs()) >= 35 and max(len(full) for full, _shown in pairs()) > 900


def test_more_template_levels_on_request():
    launch = ("void mxnet::op::mxnet_op::Kernel<mxnet::op::mxnet_op::op_with_req<mxnet::op::mshadow_op::plus, 1>, "
              "mshadow::cpu>::Launch<float*, float*>(mshadow::Stream<mshadow::cpu>*, unsigned long, float*, float*)")
    assert symbols.short_name(launch) == "mxnet::op::mxnet_op::Kernel<…>::Launch<…>(…)"
    assert symbols.short_name(launch, 1) == ("mxnet::op::mxnet_op::Kernel<mxnet::op::mxnet_op::op_with_req<…>, "
                                             "mshadow::cpu>::Launch<float*, float*>(…)")


def test_the_return_type_of_a_function_returning_a_function_pointer_is_left_out():
    # as c++filt writes a function that returns `void (*)(int)`
    assert symbols.short_name("void (*dmlc::Registry<int>::Find(std::string const&))(int)") == \
        "dmlc::Registry<…>::Find(…)"
    assert symbols.short_name("mxnet::TBlob::operator unsigned long() const") == "mxnet::TBlob::operator unsigned long()"


def test_a_name_that_does_not_balance_is_shown_whole():
    odd = "foo<(1<2)>::bar(int"
    assert symbols.short_name(odd) == odd


def test_names_that_would_read_alike_keep_what_tells_them_apart():
    plus, mul = ("void mxnet::op::ElemwiseBinaryOp::Compute<mshadow::cpu, mxnet::op::mshadow_op::" + op
                 + ">(nnvm::NodeAttrs const&, mxnet::OpContext const&)" for op in ("plus", "mul"))
    run = "mxnet::imperative::RunGraph(bool, nnvm::IndexedGraph const&)"
    shown = symbols.distinct([plus, mul, run], width=80)
    assert shown[run] == "mxnet::imperative::RunGraph(…)"
    assert shown[plus] == "…::op::ElemwiseBinaryOp::Compute<mshadow::cpu, mxnet::op::mshadow_op::plus>(…)"
    assert shown[mul].endswith("mshadow_op::mul>(…)")
    overloads = symbols.distinct(["std::vector<int>::at(unsigned long) const", "std::vector<int>::at(unsigned long)"])
    assert overloads == {name: name for name in overloads}  # only the full names differ


def test_fit_cuts_leading_scopes_outside_brackets():
    name = "mxnet::op::mxnet_op::Kernel<mshadow::cpu>::LaunchTuned<…>(…)"
    assert symbols.fit(name, 60) == name
    assert symbols.fit(name, 52) == "…::mxnet_op::Kernel<mshadow::cpu>::LaunchTuned<…>(…)"
    assert symbols.fit(name, 42) == "…::Kernel<mshadow::cpu>::LaunchTuned<…>(…)"
    assert symbols.fit(name, 41) == "…::LaunchTuned<…>(…)"  # never inside Kernel<mshadow::cpu>
    assert symbols.fit(name, 15) == "…::LaunchTuned…"
    assert symbols.fit("x" * 50, 10) == "x" * 9 + "…"


def test_a_stored_key_splits_into_the_name_and_its_object_or_file():
    assert symbols.split_key("operator new(unsigned long) [libstdc++.so.6.0.30]") == \
        ("operator new(unsigned long)", "libstdc++.so.6.0.30")
    assert symbols.split_key("__Pyx_Import(_object*, _object*, int) [clone .constprop.0] [_uarray.so]") == \
        ("__Pyx_Import(_object*, _object*, int) [clone .constprop.0]", "_uarray.so")
    assert symbols.split_key("f(int) [clone .isra.0]") == ("f(int) [clone .isra.0]", "")
    assert symbols.is_unnamed("0x0000000001a00010") and not symbols.is_unnamed("f")
