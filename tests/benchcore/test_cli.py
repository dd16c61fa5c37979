import pytest

from benchcore.cli import ArgumentParser, add_run_arguments, run_main
from benchcore.errors import UsageError


def test_usage_error_is_one_line_and_exit_2(capsys):
    def main(argv):
        raise UsageError("unknown operator 'foo'; did you mean 'floor'?")

    assert run_main(main, [], "opbench") == 2
    err = capsys.readouterr().err
    assert err == "opbench: error: unknown operator 'foo'; did you mean 'floor'?\n"


def test_bad_flag_is_a_usage_error():
    parser = ArgumentParser(prog="x")
    add_run_arguments(parser)
    with pytest.raises(UsageError, match="--timeout"):
        parser.parse_args(["--timeout", "-3"])
    args = parser.parse_args(["--threads", "2", "--resume"])
    assert args.threads == 2 and args.resume and args.timeout == 600.0
