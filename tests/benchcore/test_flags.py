"""One spelling per idea across every subcommand of both tools: -f/--format and -o/--output
wherever something is written (old spellings kept), -w/-r for warmup and runs, --version, and
every command listed with its line in --help."""

import argparse

import pytest

from benchcore.cli.commands import build_parser as shared_parser
from opbench.backends import backend_for
from opbench.cli import COMMAND_LINES
from opbench.cli import build_parser as opbench_parser
from opbench.cli import main as opbench
from rnnbench.cli import build_parser as rnnbench_parser
from rnnbench.cli import main as rnnbench


def subcommands(parser):
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def options(parser):
    """{dest: option strings} of a parser."""
    return {a.dest: set(a.option_strings) for a in parser._actions if a.option_strings}


def writers():
    """Every parser that writes a report, a comparison or a table: (name, parser)."""
    shared = subcommands(shared_parser("opbench"))
    history = subcommands(shared["history"])
    rnn = subcommands(rnnbench_parser())
    return [("opbench", opbench_parser(backend_for("mxnet"))), ("opbench torch", opbench_parser(backend_for("torch"))),
            ("compare", shared["compare"]), ("history regressions", history["regressions"]),
            ("rnnbench bench", rnn["bench"])]


@pytest.mark.parametrize("name,parser", writers(), ids=[n for n, _ in writers()])
def test_every_writer_spells_format_and_output_alike(name, parser):
    flags = set().union(*options(parser).values())
    assert {"-f", "--format", "--output-format", "-o", "--output", "--output-file"} <= flags, name


def test_merge_and_the_dashboard_keep_their_spellings():
    shared = subcommands(shared_parser("rnnbench"))
    assert {"-o", "--output"} <= options(shared["merge"])["output"]
    history = subcommands(shared["history"])
    assert {"--site", "-o", "--output", "--output-dir"} == options(history["dashboard"])["site"]
    assert {"-o", "--output", "--output-dir"} == options(shared["plot"])["output_dir"]
    rnn = subcommands(rnnbench_parser())
    assert {"-o", "--output", "--output-dir"} == options(rnn["profile"])["output_dir"]
    assert {"-o", "--output", "--output-dir"} == options(rnn["ab"])["output_dir"]
    assert {"-o", "--output", "--output-dir"} == options(opbench_parser(backend_for("mxnet"), ab=True))["output_dir"]
    assert {"--site", "-d", "--directory"} == options(history["serve"])["site"]


def test_rnnbench_takes_w_and_r_beside_fastrnns_names():
    bench = subcommands(rnnbench_parser())["bench"]
    short = bench.parse_args(["-w", "3", "-r", "7"])
    assert (short.warmup, short.nloops) == (3, 7)
    long = bench.parse_args(["--warmup", "3", "--nloops", "7"])
    assert (long.warmup, long.nloops) == (3, 7)


@pytest.mark.parametrize("tool,commands", [
    (opbench, ["ab", "crossframe", "compare", "plot", "merge", "system", "history"]),
    (rnnbench, ["bench", "ab", "test", "profile", "compare", "plot", "merge", "system", "history"]),
])
def test_help_lists_every_command_with_a_line(tool, commands, capsys):
    assert tool(["--help"]) == 0
    text = capsys.readouterr().out.split("commands:\n", 1)[1]
    listed = [line.split()[0] for line in text.splitlines() if line.strip()]
    assert listed == commands
    assert all(len(line.split()) > 3 for line in text.splitlines() if line.strip())


def test_opbench_command_lines_cover_its_dispatch():
    assert set(COMMAND_LINES) == {"ab", "crossframe", "compare", "plot", "merge", "system", "history"}


@pytest.mark.parametrize("tool,name", [(opbench, "opbench"), (rnnbench, "rnnbench")])
def test_version(tool, name, capsys):
    assert tool(["--version"]) == 0
    assert capsys.readouterr().out.startswith(f"{name} 0.")


def test_an_unknown_format_is_one_line(capsys):
    assert opbench(["--ops", "relu", "-f", "xml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-f/--format 'xml' is not json, md, csv" in err
