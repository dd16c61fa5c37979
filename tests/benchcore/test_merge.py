"""merge: shards of one sweep join into the unsharded case list; anything else is refused."""

import json

import pytest

from benchcore.errors import UsageError
from benchcore.report.merge import merge, parse_shard
from benchcore.report.model import Report
from tests.benchcore.test_compare import ENV, make_report, op_result, samples

NAMES = ["exp", "log", "sin", "cos", "tan", "dot", "sum"]


def all_results():
    return [op_result(name, samples(1.0 + i, n=5, seed=i)) for i, name in enumerate(NAMES)]


def shard(index, count, results, env=None, style="text", **settings):
    value = f"{index}/{count}" if style == "text" else {"index": index, "count": count}
    return make_report(results, env=env, settings={"runs": 5, "warmup": 1, "shard": value, **settings})


def round_robin(count, style="text"):
    results = all_results()
    return [shard(k + 1, count, results[k::count], style=style) for k in range(count)]


@pytest.mark.parametrize("style", ["text", "dict"])
def test_merge_equals_unsharded_case_list(style):
    shards = round_robin(3, style)
    merged = merge(list(reversed(shards)))  # order of the arguments does not matter
    assert sorted(r.spec.key for r in merged.results) == sorted(r.spec.key for r in all_results())
    assert len(merged.results) == len(NAMES)
    assert merged.settings == {"runs": 5, "warmup": 1, "shard": None}  # as an unsharded run says
    for k, report in enumerate(shards):
        report.settings["output_file"] = f"s{k}.json"  # a shard's own path is not the sweep's
    assert merge(shards).settings["output_file"] is None
    assert [s["shard"] for s in merged.extra["shards"]] == ["1/3", "2/3", "3/3"]
    assert merged.extra["merge"]["missing_shards"] == []
    # a merged report is an ordinary report: it round-trips through JSON
    again = Report.from_dict(json.loads(merged.to_json()))
    assert [r.spec.key for r in again.results] == [r.spec.key for r in merged.results]


def test_each_shard_keeps_its_environment():
    other = dict(ENV, hostname="b", cpu_model="Other CPU")
    results = all_results()
    merged = merge([shard(1, 2, results[:3]), shard(2, 2, results[3:], env=other)])
    assert merged.environment == ENV
    assert [s["environment"]["hostname"] for s in merged.extra["shards"]] == ["a", "b"]
    assert merged.extra["merge"]["environment_differs"] == ["cpu_model"]


def test_overlapping_shards_refused():
    results = all_results()
    with pytest.raises(UsageError, match="is in both a.json and b.json; shards must not overlap"):
        merge([shard(1, 2, results[:4]), shard(2, 2, results[3:])], sources=["a.json", "b.json"])


@pytest.mark.parametrize("change,match", [
    (lambda r: setattr(r, "suite", "rnnbench"), "holds a rnnbench report"),
    (lambda r: r.settings.update(runs=50), r"other settings than report 1 \(runs: 5 vs 50\)"),
    (lambda r: r.settings.update(shard="2/4"), "share N"),
    (lambda r: r.settings.update(shard="1/3"), "are both shard 1/3"),
    (lambda r: r.settings.pop("shard"), "no valid shard"),
    (lambda r: r.settings.update(shard="4/3"), "no valid shard"),
])
def test_inconsistent_shards_refused(change, match):
    shards = round_robin(3)
    change(shards[1])
    with pytest.raises(UsageError, match=match) as info:
        merge(shards)
    assert "\n" not in str(info.value)


def test_missing_shard_refused_unless_partial():
    shards = round_robin(3)
    with pytest.raises(UsageError, match="shards 2/3 are missing.*--allow-partial"):
        merge([shards[0], shards[2]])
    merged = merge([shards[0], shards[2]], allow_partial=True)
    assert merged.extra["merge"]["missing_shards"] == [2]


def test_extras_kept_once_when_equal_else_per_shard():
    shards = round_robin(2)
    for s in shards:
        s.extra["no_benchmark"] = ["Custom"]
    shards[0].extra["note"] = "first"
    shards[1].extra["note"] = "second"
    merged = merge(shards)
    assert merged.extra["no_benchmark"] == ["Custom"]
    assert "note" not in merged.extra
    assert [s["extra"]["note"] for s in merged.extra["shards"]] == ["first", "second"]


def _sorted_with_names(report):
    """A toy suite's finisher: its run sorts results by name and lists the names."""
    results = sorted(report.results, key=lambda r: r.spec.name)
    return Report(suite=report.suite, environment=report.environment, settings=report.settings,
                  results=results, extra={**report.extra, "names": [r.spec.name for r in results]})


def test_suite_finisher_rebuilds_what_depends_on_every_result():
    shards = round_robin(3)
    for s, note in zip(shards, ("a", "b", None)):
        s.suite = "toybench"
        s.extra["names"] = [r.spec.name for r in s.results]  # one shard's view: differs per shard
        if note:
            s.extra["note"] = note
    plain = merge(shards)  # no finisher: shard order, each shard keeps its own view
    assert [r.spec.name for r in plain.results] == ["exp", "cos", "sum", "log", "tan", "sin", "dot"]
    assert "names" not in plain.extra and plain.extra["shards"][2]["extra"] == {"names": ["sin", "dot"]}

    merged = merge(shards, finish=_sorted_with_names)
    assert [r.spec.name for r in merged.results] == merged.extra["names"] == sorted(NAMES)
    # the rebuilt extra replaces the shards' copies; extras it did not rebuild stay per shard
    assert [s.get("extra") for s in merged.extra["shards"]] == [{"note": "a"}, {"note": "b"}, None]


def test_nothing_to_merge():
    with pytest.raises(UsageError, match="nothing to merge"):
        merge([])


def test_parse_shard_forms():
    assert str(parse_shard("2/5")) == "2/5"
    assert parse_shard({"index": 1, "count": 1}).count == 1
    for bad in ("0/3", "a/b", "3", None, {"index": 2}):
        with pytest.raises(UsageError):
            parse_shard(bad)


def test_the_shards_machine_references_join_as_rounds_of_one_machine():
    from tests.benchcore.test_compare import reference_block

    results = all_results()
    envs = [dict(ENV, system={"reference": reference_block(1.0, seed, rounds=3)}) for seed in (1, 2)]
    merged = merge([shard(1, 2, results[:3], env=envs[0]), shard(2, 2, results[3:], env=envs[1])])
    joined = merged.environment["system"]["reference"]
    for part in ("compute", "memory"):
        assert joined[part]["rounds"]["count"] == 6
        assert sorted(joined[part]["samples_ms"]) == sorted(envs[0]["system"]["reference"][part]["samples_ms"]
                                                           + envs[1]["system"]["reference"][part]["samples_ms"])
    envs[1]["system"]["reference"]["status"] = "failed"
    partial = merge([shard(1, 2, results[:3], env=envs[0]), shard(2, 2, results[3:], env=envs[1])])
    assert partial.environment["system"]["reference"] is None  # one shard without it: no joined reference


def test_shards_that_read_the_same_roofs_merge_into_one_block_with_a_headroom_section():
    from benchcore.report.model import Report as R
    from benchcore.suite import Suite
    from benchcore.views import headroom
    from tests.benchcore.test_efficiency import ROOFS

    shards = round_robin(2)
    for k, s in enumerate(shards):
        s.extra["roofs"] = {"torch": {"source": ("taken", "cached")[k], "obtain_s": (6.0, 0.01)[k], "note": None,
                                      "reason": None, "roofs": ROOFS.to_dict()}}
    merged = merge(shards)
    block = merged.extra["roofs"]["torch"]
    assert block["source"] == "cached and taken" and block["obtain_s"] == pytest.approx(6.01)
    assert all("roofs" not in s.get("extra", {}) for s in merged.extra["shards"])
    text = "\n".join(headroom.markdown(R.from_dict(merged.to_dict()), Suite("opbench")))
    assert "## Headroom" in text and "- torch: cached and taken" in text
    # shards on two machines: each shard's roofs, named by its shard
    shards[1].extra["roofs"]["torch"]["roofs"] = dict(ROOFS.to_dict(), taken_at="another day")
    assert set(merge(shards).extra["roofs"]) == {"torch (shard 1/2)", "torch (shard 2/2)"}
