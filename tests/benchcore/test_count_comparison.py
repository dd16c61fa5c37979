"""The counted half of a comparison as Markdown (benchcore.views.count_comparison), on a real
counted case: MXNet 1.8.0's broadcast_add as `ab -p instructions` stored it (its profile and
objects, tests/benchcore/data), against a copy with a planted regression (+220% in the kernel,
as the issue's pair of releases showed) and a few smaller moves."""

import copy
import json
import subprocess
import sys
from pathlib import Path

from benchcore.cli.commands import main
from benchcore.compare import count_verdicts
from benchcore.measure.case import CaseSpec
from benchcore.report.model import CaseResult, Report
from benchcore.suite import Suite
from benchcore.views import count_comparison

ROOT = Path(__file__).resolve().parents[2]
CASE = json.loads((Path(__file__).parent / "data" / "mxnet_counted_broadcast_add.json").read_text())
KERNEL = ("void mxnet::op::ElemwiseBinaryOp::Compute<mshadow::cpu, mxnet::op::mshadow_op::plus>(nnvm::NodeAttrs "
          "const&, mxnet::OpContext const&, std::vector<mxnet::TBlob, std::allocator<mxnet::TBlob> > const&, "
          "std::vector<mxnet::OpReqType, std::allocator<mxnet::OpReqType> > const&, std::vector<mxnet::TBlob, "
          "std::allocator<mxnet::TBlob> > const&) [libmxnet.so]")
GROWTH = 2.2  # +220%
UNNAMED = "0x0000000001234560 [libmxnet.so]"


def _grow(metrics: dict, function: str, by: int, phase: str = "forward") -> None:
    """`function` counts `by` more itself; so do its callers inclusively, the call and its object."""
    rows = {row["function"]: row for row in metrics["profile"][phase]}
    inclusive = rows[function]["inclusive"] if function in rows else 0
    for row in metrics["profile"][phase]:
        if row["function"] == function or (inclusive and row["inclusive"] > inclusive):
            row["inclusive"] += by
    if function in rows:
        rows[function]["self"] += by
    else:
        metrics["profile"][phase].append({"function": function, "self": by, "inclusive": by})
    ir = metrics["counts"][phase]["Ir"]
    ir["samples"] = [s + by for s in ir["samples"]]
    ir.update(median=ir["median"] + by, min=ir["min"] + by, max=ir["max"] + by)
    where = function.rpartition(" [")[2][:-1]
    for row in metrics["objects"][phase]:
        if row["object"] == where:
            row["self"] += by
            if function.startswith("0x"):
                row["unnamed_self"] += by
                row["unnamed_functions"] += function not in rows


def _reports(regressed: bool = True):
    base = CaseResult(CaseSpec.from_dict(CASE["spec"]), "ok", copy.deepcopy(CASE["metrics"]))
    metrics = copy.deepcopy(CASE["metrics"])
    if regressed:
        _grow(metrics, KERNEL, round(GROWTH * CASE["metrics"]["counts"]["forward"]["Ir"]["median"]))
        _grow(metrics, UNNAMED, 4000)  # a stripped libmxnet.so's function, named by its address
        python = [row["function"] for row in metrics["profile"]["forward"] if "Python-3.11.7" in row["function"]]
        for k, function in enumerate(python[:10]):  # small moves in the interpreter
            _grow(metrics, function, 300 + 50 * k)
        metrics["profile"]["forward"] = [r for r in metrics["profile"]["forward"]
                                         if not r["function"].startswith("initialize_locals")]  # below new's top
    new = CaseResult(CaseSpec.from_dict(CASE["spec"]), "ok", metrics)
    settings = {"valgrind": {"version": "valgrind-3.19.0"}}
    return Report("opbench", settings=dict(settings), results=[base]), Report("opbench", settings=settings,
                                                                              results=[new])


def _forward(found):
    return next(v for v in found.verdicts if v.phase == "forward")


def test_the_functions_that_explain_a_change_are_listed_first_short_with_their_object():
    found = count_verdicts.compare_counts(*_reports())
    v = _forward(found)
    assert v.verdict == "slower" and 220 < v.change_pct < 221.5  # the kernel, the unnamed function, the interpreter
    rows = count_comparison.explaining(v, 5)
    assert rows[0]["function"] == KERNEL and len(rows) == 5
    assert rows[1]["function"] == "unnamed functions (7 → 8)" and rows[1]["object"] == "libmxnet.so"
    assert UNNAMED not in [r["function"] for r in rows]  # summed in its object's row
    text = "\n".join(count_comparison.markdown(found))
    kernel_row = next(line for line in text.splitlines() if "ElemwiseBinaryOp" in line)
    cells = [cell.strip() for cell in kernel_row.strip("|").split("|")]
    assert cells[:2] == ["mxnet::op::ElemwiseBinaryOp::Compute<…>(…)", "libmxnet.so"]
    assert cells[5] == "100%"  # of the quantity's whole change (99.6%)
    assert "std::allocator" not in text and "these 5 hold 100% of it" in text
    # the JSON keeps the full name
    assert found.to_dict()["quantities"][0]["functions"]["self"][0]["function"] == KERNEL


def test_every_table_row_stays_within_160_characters():
    base, new = _reports()
    deep = "/".join(["a-very-long-build-folder-name"] * 6) + "/memmove-vec-unaligned-erms.S"
    long_name = "void " + "::".join(["mxnet::op::mxnet_op::Kernel<mxnet::op::mxnet_op::op_with_req<x, 1>, cpu>"] * 4) \
        + "::LaunchTuned<float, float*>(mshadow::Stream<mshadow::cpu>*, unsigned long, float*) [" + deep + "]"
    _grow(new.results[0].metrics, long_name, 900_000)
    text = "\n".join(count_comparison.markdown(count_verdicts.compare_counts(base, new)))
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert max(map(len, rows)) <= count_comparison.ROW_WIDTH
    assert max(map(len, text.splitlines())) <= count_comparison.ROW_WIDTH
    assert any(row.startswith("| …::") and "::Kernel<…>::LaunchTuned<…>(…) | …/memmove-vec-unaligned-erms.S |" in row
               and "| 28% " in row for row in rows)  # its leading scopes and folders cut
    assert any("below top 25 (≤ " in row and " to " in row for row in rows)  # the function only base stored


def _write(tmp_path):
    base, new = _reports()
    paths = []
    for name, report in (("base.json", base), ("new.json", new)):
        (tmp_path / name).write_text(report.to_json())
        paths.append(str(tmp_path / name))
    return paths


def _function_rows(text: str) -> list:
    """The rows of the forward quantity's function table."""
    part = text.split("**broadcast_add** forward", 1)[1].split("\n\n", 2)[1]
    return [line for line in part.splitlines() if line.startswith("| ") and "Function" not in line]


def test_compare_opens_with_the_answer_and_lists_more_functions_when_asked(tmp_path, capsys):
    base, new = _write(tmp_path)
    assert main(Suite("opbench"), ["compare", base, new]) == 0
    text = capsys.readouterr().out
    assert text.index("## Answer") < text.index("## Instruction counts") < text.index("### Functions behind")
    assert "- broadcast_add forward: +220.9% instructions (counted)" in text
    assert "## Summary" not in text  # nothing timed: no empty timing tables
    assert len(_function_rows(text)) == count_verdicts.FUNCTIONS == 5
    assert main(Suite("opbench"), ["compare", base, new, "--functions", "9"]) == 0
    assert len(_function_rows(capsys.readouterr().out)) == 9
    assert main(Suite("opbench"), ["compare", base, new, "--functions", "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--functions: 0 must be at least 1" in err


def test_the_json_keeps_as_many_functions_as_the_view_shows(tmp_path, capsys):
    base, new = _write(tmp_path)
    assert main(Suite("opbench"), ["compare", base, new, "-f", "json", "--functions", "12"]) == 0
    counted = json.loads(capsys.readouterr().out)["instructions"]
    assert counted["functions_shown"] == 12
    assert len(counted["quantities"][0]["functions"]["self"]) == 12


def test_the_size_script_measures_a_counted_pair(tmp_path):
    base, new = _write(tmp_path)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "count_markdown_size"), base, new],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "quantities judged on counts: 2 {'slower': 1, 'faster': 0, 'same': 1}" in done.stdout
    assert "Answer before the counts: True" in done.stdout and "targets met" in done.stdout


def _at_shape(result: CaseResult, shape) -> CaseResult:
    spec = copy.deepcopy(CASE["spec"])
    for side in ("lhs", "rhs"):
        spec["params"]["inputs"][side]["shape"] = list(shape)
    spec["params"]["variant"] = "({},{})".format(*shape)
    return CaseResult(CaseSpec.from_dict(spec), "ok", copy.deepcopy(result.metrics))


def test_a_change_the_same_functions_explain_is_listed_under_the_first():
    """The same regression at a second shape (and the backward, unchanged) gets no table of its own;
    a change another function explains does."""
    base, new = _reports()
    base.results.append(_at_shape(base.results[0], (256, 512)))
    new.results.append(_at_shape(new.results[0], (256, 512)))
    base.results.append(_at_shape(base.results[0], (16384, 8)))
    other = _at_shape(_reports(regressed=False)[1].results[0], (16384, 8))
    _grow(other.metrics, "mxnet::Tuple<long>::SetDim(int) [libmxnet.so]", 400_000)
    new.results.append(other)
    text = "\n".join(count_comparison.markdown(count_verdicts.compare_counts(base, new)))
    tables = [line for line in text.splitlines() if line.startswith("**")]
    assert tables == ["**broadcast_add (131072,1)** forward: slower +220.87% (1,059,785 → 3,400,562); these 5 hold 100% "
                      "of it",
                      "**broadcast_add (16384,8)** forward: slower +37.74% (1,059,785 → 1,459,785); these 1 hold 100% "
                      "of it"]
    assert "Alike: broadcast_add (256,512) forward (+220.87%)." in text


def test_the_share_of_functions_below_a_sides_top_is_a_range_and_so_is_their_sum():
    """A kernel unnamed in one build and named in the other (MXNet 1.5.0's stripped wheel against
    1.9.1's) moves out of the object's unnamed functions into a named one stored on one side only."""
    base, new = _reports(regressed=False)
    named = "void mxnet::op::mxnet_op::Kernel<mxnet::op::mxnet_op::op_with_req<mxnet::op::mshadow_op::plus, 1>, " \
            "mshadow::cpu>::Launch<float*, float*, float*>(mshadow::Stream<mshadow::cpu>*, unsigned long, float*, " \
            "float*, float*) [libmxnet.so]"
    _grow(base.results[0].metrics, UNNAMED, 700_000)
    _grow(new.results[0].metrics, named, 917_000)
    text = "\n".join(count_comparison.markdown(count_verdicts.compare_counts(base, new)))
    assert "slower +12.33% (1,759,785 → 1,976,785); these 2 hold 99% to 100% of it" in text
    rows = [line for line in text.splitlines() if "::Launch<…>(…)" in line or "unnamed functions" in line]
    assert "| below top 25 (≤ 1,403) | 917,000 | +915,597 to +917,000 | 422 to 423% |" in rows[0]
    assert "| unnamed functions (8 → 7)" in rows[1] and "| -700,000 " in rows[1] and "| -323% " in rows[1]


def test_environment_lists_show_what_each_side_has_that_the_other_lacks():
    from benchcore.views.markdown import _env_values

    base = ["CPU_AVX", "CPU_SSE", "CPU_SSE4_1", "F16C", "LAPACK"]
    new = ["BLAS_OPEN", "CPU_SSE", "LAPACK", "MKLDNN"]
    assert _env_values(base, new) == ("CPU_AVX, CPU_SSE4_1, F16C (and 2 in both)", "BLAS_OPEN, MKLDNN (and 2 in both)")
    assert _env_values("1.5.0", "1.9.1") == ("1.5.0", "1.9.1")
