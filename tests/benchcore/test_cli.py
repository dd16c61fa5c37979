from pathlib import Path

import pytest

from benchcore.cli.options import (
    ArgumentParser,
    add_run_arguments,
    run_main,
    run_settings_from,
)
from benchcore.errors import UsageError


def test_usage_error_is_one_line_and_exit_2(capsys):
    def main(argv):
        raise UsageError("unknown operator 'foo'; did you mean 'floor'?")

    assert run_main(main, [], "opbench") == 2
    err = capsys.readouterr().err
    assert err == "opbench: error: unknown operator 'foo'; did you mean 'floor'?\n"


def test_bad_flag_is_a_usage_error():
    parser = ArgumentParser(prog="x")
    add_run_arguments(parser, rounds=3)
    with pytest.raises(UsageError, match="--timeout"):
        parser.parse_args(["--timeout", "-3"])
    args = parser.parse_args(["--threads", "2", "--resume"])
    assert args.threads == 2 and args.resume and args.timeout == 600.0


@pytest.mark.parametrize("argv, message", [
    (["--timeout", "nan"], "--timeout: nan must be a finite number greater than 0"),
    (["--timeout", "inf"], "--timeout: inf must be a finite number"),
    (["--memory-limit-gb", "nan"], "--memory-limit-gb"),
    (["--target-precision", "nan"], "--target-precision"),
    (["--min-time", "-1"], "--min-time: -1 must be a finite number >= 0"),
    (["--max-time", "inf"], "--max-time"),
])
def test_numbers_must_be_finite(argv, message):
    parser = ArgumentParser(prog="x")
    add_run_arguments(parser, rounds=3)
    with pytest.raises(UsageError) as info:
        parser.parse_args(argv)
    assert message in str(info.value)


@pytest.mark.parametrize("argv, message", [
    (["--max-time", "3"], "--max-time only applies in adaptive mode; add --target-precision"),
    (["--min-time", "1", "--max-time", "3"], "--min-time and --max-time only apply in adaptive mode"),
    (["--target-precision", "5", "--min-time", "5", "--max-time", "1"], "--min-time 5 is above --max-time 1"),
    (["--target-precision", "0.05"], "0.05 looks like a fraction, but thresholds are in percent"),
    (["--target-precision", "0"], "--target-precision 0"),
])
def test_adaptive_flags_that_would_be_ignored_or_always_cap_are_refused(argv, message):
    parser = ArgumentParser(prog="x")
    add_run_arguments(parser, rounds=3)
    with pytest.raises(UsageError, match=message):
        run_settings_from(parser.parse_args(argv), warmup=1, runs=3)


def test_adaptive_defaults_apply_when_only_the_target_is_given():
    parser = ArgumentParser(prog="x")
    add_run_arguments(parser, rounds=3)
    settings = run_settings_from(parser.parse_args(["--target-precision", "5"]), warmup=1, runs=3)
    assert (settings.target_precision, settings.min_time_s, settings.max_time_s) == (0.05, 0.0, 10.0)


def test_shards_partition_any_case_list():
    from benchcore.cli.options import parse_shard
    from benchcore.execute.rounds import shard_specs
    from benchcore.measure.case import CaseSpec

    specs = [CaseSpec("s", f"c{i}", {"i": i}) for i in range(10)]
    parts = [shard_specs(list(reversed(specs)), parse_shard(f"{k}/3")) for k in (1, 2, 3)]
    assert sorted(s.key for part in parts for s in part) == sorted(s.key for s in specs)
    assert [len(p) for p in parts] == [4, 3, 3]
    assert shard_specs(specs, None) == specs


def test_output_paths_share_one_stem(tmp_path):
    from types import SimpleNamespace

    from benchcore.cli.options import check_output_paths, formats_for, output_paths

    assert output_paths(str(tmp_path / "r.json"), ("json", "md"), "x") == {"json": tmp_path / "r.json", "md": tmp_path / "r.md"}
    assert output_paths(None, ("md",), "mxnet_operator_benchmarks") == {"md": __import__("pathlib").Path("mxnet_operator_benchmarks.md")}
    assert formats_for(SimpleNamespace(output_format=None, output_file="a/b.md")) == ("md",)
    assert formats_for(SimpleNamespace(output_format="md,json", output_file=None)) == ("md", "json")
    assert formats_for(SimpleNamespace(output_format=None, output_file="a/b.csv")) == ("csv",)
    assert output_paths(str(tmp_path / "r.csv"), ("json", "csv"), "x") == {"json": tmp_path / "r.json",
                                                                          "csv": tmp_path / "r.csv"}
    with pytest.raises(UsageError, match="is not json, md, csv or a comma-separated list of them"):
        formats_for(SimpleNamespace(output_format="xml", output_file=None))
    with pytest.raises(UsageError, match="is a folder"):
        check_output_paths({"json": tmp_path}, overwrite=True)


def test_a_format_that_contradicts_the_file_suffix_is_refused():
    from benchcore.cli.options import output_paths

    with pytest.raises(UsageError, match=r"-o y.json names a .json file but the format is md; name it y.md or use -f json"):
        output_paths("y.json", ("md",), "stem")
    assert output_paths("y.txt", ("md",), "stem") == {"md": Path("y.txt")}
