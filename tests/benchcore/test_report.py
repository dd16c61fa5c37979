import json
import os

import pytest

from benchcore.errors import UsageError
from benchcore.measure.case import CaseSpec
from benchcore.measure.measurement import Measurement
from benchcore.report.model import CaseResult, Report, check_writable, write_text_atomic


def sample_report():
    spec = CaseSpec("opbench", "dot", {"op": "dot", "inputs": {"lhs": [4, 4]}})
    ok = CaseResult(spec, "ok", metrics={"forward": Measurement([1.0, 2.0]).to_dict()}, wall_s=0.1)
    bad = CaseResult(CaseSpec("opbench", "take", {}), "crashed", error="worker killed by SIGSEGV", stderr_tail="boom")
    return Report(suite="opbench", environment={"python": "3.11"}, settings={"warmup": 1}, results=[ok, bad],
                  extra={"no_benchmark": ["Custom"]})


def test_json_round_trip(tmp_path):
    path = tmp_path / "r.json"
    report = sample_report()
    report.write(path)
    loaded = Report.load(path)
    assert loaded.to_dict() == report.to_dict()
    assert [r.status for r in loaded.failures] == ["crashed"]
    data = json.loads(path.read_text())
    assert data["schema"] == "benchcore-report" and data["schema_version"] == 2
    assert data["results"][0]["metrics"]["forward"]["median_ms"] == 1.5


def test_existing_file_is_never_overwritten_without_the_flag(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("precious")
    with pytest.raises(UsageError, match="already exists.*--overwrite"):
        sample_report().write(path)
    assert path.read_text() == "precious"
    sample_report().write(path, overwrite=True)
    assert Report.load(path).suite == "opbench"


def test_missing_folder_and_unwritable_folder_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        check_writable(tmp_path / "nope" / "r.json")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="folder .*file does not exist"):  # a path under a regular file
        write_text_atomic(tmp_path / "file" / "r.json", "{}")
    # /proc refuses new files even to root, who runs this suite and to whom os.access() says yes
    # there: only a real probe finds out, before measuring (check_writable) and when writing
    refused = r"^cannot write /proc/r\.json: folder /proc is not writable \(.+\); choose another path$"
    with pytest.raises(UsageError, match=refused):
        check_writable("/proc/r.json")
    with pytest.raises(UsageError, match=refused):
        write_text_atomic("/proc/r.json", "{}")


def test_atomic_write_leaves_no_temp_file_behind_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text("old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_text_atomic(path, "new", overwrite=True)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.parametrize("content, message", [
    ("not json", "not valid JSON"),
    ('{"hello": 1}', "not a benchcore report"),
    ('{"schema": "benchcore-report", "schema_version": 99, "suite": "x"}', "schema version 99"),
])
def test_bad_reports_are_usage_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UsageError, match=message):
        Report.load(path)


def test_missing_report_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        Report.load(tmp_path / "missing.json")


def test_unknown_status_is_refused():
    with pytest.raises(ValueError):
        CaseResult(CaseSpec("s", "n"), "maybe")


def test_case_key_is_stable_and_order_independent():
    a = CaseSpec("s", "n", {"x": 1, "y": [1, 2]})
    b = CaseSpec("s", "n", {"y": [1, 2], "x": 1})
    assert a.key == b.key
    assert CaseSpec.from_dict(json.loads(json.dumps(a.to_dict()))).key == a.key


def test_written_report_has_ordinary_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_text_atomic(tmp_path / "r.json", "{}")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_reports_suite_is_found_by_its_package_and_an_unknown_one_is_named():
    from benchcore.errors import UsageError
    from benchcore.suite import declared

    assert declared("rnnbench").case_noun == "runner" and declared("opbench").name == "opbench"
    for name in ("nosuchsuite", "os", "../opbench"):
        with pytest.raises(UsageError, match=f"suite {name!r} is not installed here"):
            declared(name)
