"""Every opbench and rnnbench command that README.md and docs/**/*.md show behaves: it ends with
exit status 0, 1 or 2 and no traceback, or it is still measuring when it is stopped.

Which text is a documented command (the rule; the docs are globbed, never listed):
- in a fenced block tagged bash, sh, shell or console, or not tagged at all: every line (joined
  with its trailing-`\\` continuations) of which one part, split at `&&`, `||`, `;` or `|`,
  begins with the word `opbench` or `rnnbench` (or a path ending in /opbench, /rnnbench; output
  such as `opbench: wrote …` is not a command). The whole line runs in bash, so
  `mkdir -p reports && opbench ...` makes its folder and a `# comment` is a comment;
- in prose: an inline code span that begins with `opbench ` or `rnnbench ` and is a command
  line, not a subcommand's name (`rnnbench test`) or a syntax sketch: it holds a flag and no
  placeholder (`…`, `|`, `<`, `>`, or a word in capitals such as BASE, NEW, ARGS, N).
A command that two docs show (the same words) runs once, where it is shown first.

How each runs, as a user would run it, at toy sizes:
- the tools are this interpreter's (its bin folder first on PATH); a `…/bin/python` the docs
  name (`venv-old/bin/python`, `A/bin/python`) is this interpreter;
- OPBENCH_TINY=1 (opbench's own switch to toy input sizes) and BENCH_PROGRESS=0.1 (the tools'
  progress line as soon as a case-round has finished); no flag of an opbench command is changed;
- rnnbench has no such switch, and at fastrnns' sizes one case-round of an LSTM takes minutes
  on this machine: where an rnnbench command does not give them, RNNBENCH_TINY's flags (toy
  sizes, one warmup call, two timed ones) are added after its own, the ones its subcommand takes;
- the commands of one doc and one tool run in order in a folder of their own (HISTORY's
  `history add` files the report that `history regressions` then reads), which holds first the
  files the docs' commands read: base.json and new.json (tiny sweeps of that tool), shards,
  a timed and a counted report, a nightly report, and for `--framework torch` a manifest of a
  slice of OpInfo (the full discovery takes minutes; OPBENCH_CACHE points at the slice);
- a command that is still running when a progress line says its first case-round finished has
  started measuring: what it printed up to then must hold no traceback, and it is then killed
  with its process group (how a sweep ends on Ctrl-C is the sweeps' own tests' business).

EXCEPTIONS lists the commands this machine cannot run, with the reason; one that no doc shows
any more fails the test, so the list stays true.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TOOLS = ("opbench", "rnnbench")
SHELL_FENCES = ("bash", "sh", "shell", "console", "")
#: a part of the doc's text → why this machine cannot run the commands that hold it
EXCEPTIONS = {
    "--ray auto": "joins the Ray cluster this machine belongs to (`ray start`): there is none",
    "--ray ray://": "a Ray cluster's client address (HEAD:10001): there is none",
    "--ray local": "starts a Ray cluster on this machine (tens of seconds): tests/benchcore/test_cluster.py runs it",
    "--engine instructions": "counts under valgrind: a framework's import alone takes minutes there; the valgrind "
                             "leg runs the engine (tests/benchcore/test_instructions_valgrind.py)",
}
#: rnnbench's flags for toy sizes, added where a command does not give them (-w, -r: their short forms)
RNNBENCH_TINY = {"--seqLength": "2", "--inputSize": "4", "--hiddenSize": "4", "--miniBatch": "2", "--warmup": "1",
                 "--nloops": "2"}
SHORT = {"--warmup": "-w", "--nloops": "-r"}
#: the longest a command may take to end or to start measuring
START_S = 120.0
PROGRESS = re.compile(r"^\w+: \d+/\d+ [\w -]+ \(\d+%\), \S+ elapsed", re.M)
VENV_PYTHON = re.compile(r"\S*/bin/python\S*")
PLACEHOLDER = re.compile(r"…|\||<|>|\b[A-Z]{1,}\b")


@dataclass(frozen=True)
class Documented:
    """One command as a doc shows it: where, and the text that runs."""

    doc: str
    line: int
    text: str

    @property
    def tool(self) -> str:
        return next(_tool(part[0]) for part in _parts(self.text) if part and _tool(part[0]))

    def where(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


def docs() -> List[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def _parts(line: str) -> List[List[str]]:
    """The words of each part of a shell line split at &&, ||, ; and |."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return []
    parts: List[List[str]] = [[]]
    for word in words:
        if word in ("&&", "||", ";", "|"):
            parts.append([])
        else:
            parts[-1].append(word)
    return parts


def _tool(word: str) -> Optional[str]:
    """The tool a command's first word runs (`opbench`, `.venv/bin/opbench`), else None (`opbench/`, `opbench:`)."""
    return next((tool for tool in TOOLS if word == tool or word.endswith("/" + tool)), None)


def _is_command(line: str) -> bool:
    return any(part and _tool(part[0]) for part in _parts(line))


def _fenced(lines: List[str]) -> List[Tuple[int, str]]:
    """(line number, command line) of the shell blocks' lines, continuations joined."""
    found, fence, pending, start = [], None, "", 0
    for number, line in enumerate(lines, 1):
        opening = re.match(r"^\s*```+\s*([\w-]*)", line)
        if opening:
            fence = None if fence is not None else opening.group(1).lower()
            continue
        if fence not in SHELL_FENCES:
            continue
        text = re.sub(r"^\s*\$ ", "", line).rstrip()
        start = start or number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        text, pending = pending + text, ""
        if _is_command(text):
            found.append((start, text.strip()))
        start = 0
    return found


def _inline(lines: List[str]) -> List[Tuple[int, str]]:
    """(line number, span) of the prose's code spans that are commands (the rule above)."""
    found, fence = [], False
    for number, line in enumerate(lines, 1):
        if re.match(r"^\s*```", line):
            fence = not fence
            continue
        if fence:
            continue
        for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", line):
            words = span.split()
            if words[0] in TOOLS and any(w.startswith("-") for w in words) and not PLACEHOLDER.search(span):
                found.append((number, span.strip()))
    return found


def documented_commands() -> List[Documented]:
    commands, seen = [], set()
    for path in docs():
        lines = path.read_text(encoding="utf-8").splitlines()
        doc = str(path.relative_to(ROOT))
        for number, text in sorted(_fenced(lines) + _inline(lines)):
            words = tuple(shlex.split(text, comments=True))
            if words not in seen:
                seen.add(words)
                commands.append(Documented(doc, number, text))
    return commands


def exception_of(command: Documented) -> Optional[str]:
    return next((why for part, why in EXCEPTIONS.items() if part in command.text), None)


COMMANDS = documented_commands()
GROUPS: Dict[Tuple[str, str], List[Documented]] = {}
for _command in COMMANDS:
    if exception_of(_command) is None:
        GROUPS.setdefault((_command.doc, _command.tool), []).append(_command)


# --------------------------------------------------------------------------- the files they read


def _opbench(folder: Path, *args: str) -> None:
    from opbench.cli import main

    assert main([*args, "--tiny", "-w", "1", "-r", "2", "--rounds", "2", "--no-isolation", "--no-audit"]) == 0


def _rnnbench(folder: Path, out: Path) -> None:
    from rnnbench.cli import main

    sizes = ["--seqLength", "2", "--numLayers", "1", "--inputSize", "4", "--hiddenSize", "4", "--miniBatch", "2"]
    assert main(["bench", "--rnns", "py", *sizes, "--warmup", "1", "--nloops", "4", "--rounds", "2", "--device", "cpu",
                 "-o", str(out)]) == 0


@pytest.fixture(scope="module")
def opbench_files(tmp_path_factory) -> Path:
    """What the docs' opbench commands read: reports of tiny sweeps, shards, a counted copy, and
    a torch manifest of a slice of OpInfo where `--framework torch` looks for one."""
    from benchcore.report.model import Report
    from tests.benchcore.test_both_kinds import counted_copy

    folder = tmp_path_factory.mktemp("opbench_files")
    for name in ("base", "new"):
        _opbench(folder, "--ops", "relu,broadcast_add", "-o", str(folder / f"{name}.json"))
    for index in (1, 2, 3):
        _opbench(folder, "--ops", "relu,sigmoid,exp", "--shard", f"{index}/3", "-o", str(folder / f"shard{index}.json"))
    (folder / "reports").mkdir()
    for copy in ("timed.json", "reports/opbench.json", "reports/nightly.json"):
        shutil.copy(folder / "base.json", folder / copy)
    (folder / "counted.json").write_text(counted_copy(Report.load(folder / "base.json")).to_json())
    _torch_manifests(folder)
    return folder


def _torch_manifests(folder: Path) -> None:
    """The slice of OpInfo that tests/opbench/test_torch_backend.py discovers, as the cached
    manifest of a tiny float32 CPU run (under OPBENCH_CACHE) and as old/manifest.json."""
    from opbench.backends.torch import DISCOVERY_SEED
    from opbench.backends.torch.manifest import build, cache_path
    from tests.opbench.test_torch_backend import SLICE, TARGET

    old = folder / "old" / "manifest.json"
    build(old, "float32", "cpu", TARGET, DISCOVERY_SEED, only=[list(key) for key in SLICE])
    saved = os.environ.get("OPBENCH_CACHE")
    os.environ["OPBENCH_CACHE"] = str(folder / "cache")
    try:
        cached = cache_path("float32", "cpu", TARGET, DISCOVERY_SEED)
    finally:
        os.environ.pop("OPBENCH_CACHE") if saved is None else os.environ.update(OPBENCH_CACHE=saved)
    cached.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(old, cached)


@pytest.fixture(scope="module")
def rnnbench_files(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("rnnbench_files")
    (folder / "reports").mkdir()  # as scripts/quickstart leaves it
    for name in ("base", "new"):
        _rnnbench(folder, folder / f"{name}.json")
    return folder


# --------------------------------------------------------------------------- running one


@dataclass
class Outcome:
    status: Optional[int]  # None: stopped while measuring
    output: str
    stopped: bool = False


def _environment(folder: Path) -> Dict[str, str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "OPBENCH_TINY": "1",
           "BENCH_PROGRESS": "0.1", "OPBENCH_CACHE": str(folder / "cache"), "PYTHONUNBUFFERED": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def _reader(stream, lines: "queue.Queue[Optional[str]]") -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _rnnbench_options() -> Dict[str, set]:
    """rnnbench's subcommands → the long options each takes."""
    import argparse

    from rnnbench.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {o for action in sub._actions for o in action.option_strings} for name, sub in commands.choices.items()}


def runnable(command: Documented) -> str:
    """The command line that runs: venv pythons → this one; an rnnbench command at toy sizes."""
    text = VENV_PYTHON.sub(sys.executable, command.text)
    if command.tool != "rnnbench":
        return text
    parts = _parts(text)
    assert len(parts) == 1, f"{command.where()}: an rnnbench line of one command is all this test adds flags to"
    words = parts[0]
    takes = _rnnbench_options().get(words[1] if len(words) > 1 else "", set())
    extra = [word for flag, value in RNNBENCH_TINY.items() if flag in takes
             and flag not in words and SHORT.get(flag) not in words for word in (flag, value)]
    return shlex.join(words + extra)


def run(command: Documented, folder: Path) -> Outcome:
    """Run one command in `folder`; stop it (Ctrl-C) once it has finished a case-round."""
    text = runnable(command)
    proc = subprocess.Popen(["bash", "-c", text], cwd=folder, env=_environment(folder), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace",
                            start_new_session=True)
    lines: "queue.Queue[Optional[str]]" = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    output, deadline = [], time.monotonic() + START_S
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"{command.where()}\nneither ended nor started measuring in {START_S:.0f} s:\n"
                            f"{''.join(output)[-3000:]}")
            if line is None:
                return Outcome(proc.wait(), "".join(output))
            output.append(line)
            if PROGRESS.match(line):
                return Outcome(None, "".join(output), stopped=True)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _outputs(command: Documented, folder: Path) -> List[Path]:
    """The paths the command writes (-o/--output/--output-file) that exist in `folder`."""
    found = []
    for part in _parts(command.text):
        for flag, value in zip(part, part[1:]):
            if flag in ("-o", "--output", "--output-file") and (folder / value).exists():
                found.append(folder / value)
    return found


def run_fresh(command: Documented, folder: Path) -> Outcome:
    """Run it as on a machine where its output does not exist yet (a seeded base.json would be
    refused, never replaced); a seeded file it did not write (it was stopped) is put back for
    the commands that read it."""
    aside = {path: path.with_name(path.name + ".seeded") for path in _outputs(command, folder)}
    for path, moved in aside.items():
        path.rename(moved)
    outcome = run(command, folder)
    for path, moved in aside.items():
        if path.exists():
            shutil.rmtree(moved) if moved.is_dir() else moved.unlink()
        else:
            moved.rename(path)
    return outcome


def check(command: Documented, outcome: Outcome) -> None:
    tail = outcome.output[-3000:]
    assert "Traceback (most recent call last)" not in outcome.output, f"{command.where()}\na traceback:\n{tail}"
    assert outcome.stopped or outcome.status in (0, 1, 2), \
        f"{command.where()}\nexit status {outcome.status}:\n{tail}"


# --------------------------------------------------------------------------- the tests


def test_the_docs_show_commands_of_both_tools_and_the_exceptions_are_shown():
    tools = {command.tool for command in COMMANDS}
    assert tools == set(TOOLS) and len(COMMANDS) >= 40, [c.where() for c in COMMANDS]
    readme = [c.text for c in COMMANDS if c.doc == "README.md"]
    assert "opbench --ops 'broadcast_*' --exclude broadcast_mod -p python -f csv -o bcast.csv" in readme
    for part in EXCEPTIONS:
        assert any(part in command.text for command in COMMANDS), f"no doc shows {part!r} any more: drop its exception"


def test_the_rule_joins_continuations_and_leaves_sketches_out():
    fenced = _fenced(["```bash", "mkdir -p r && opbench -o r/n.json \\", "    --threads 1   # 1. the sweep",
                      "ray start --head", "```", "opbench x", "```", "opbench/   the operator suite",
                      "opbench: wrote r.json", ".venv/bin/rnnbench test", "```"])
    assert fenced == [(2, "mkdir -p r && opbench -o r/n.json      --threads 1   # 1. the sweep"),
                      (10, ".venv/bin/rnnbench test")]
    spans = _inline(["`opbench compare BASE NEW`, `opbench history …`, `rnnbench bench|ab`, `rnnbench test`,",
                     "`opbench --ops relu -o r.json` and `rnnbench --version`"])
    assert spans == [(2, "opbench --ops relu -o r.json"), (2, "rnnbench --version")]


@pytest.mark.parametrize("group", sorted(GROUPS), ids=[f"{doc}-{tool}" for doc, tool in sorted(GROUPS)])
def test_every_documented_command_runs(group, request, tmp_path):
    doc, tool = group
    seeded = request.getfixturevalue(f"{tool}_files")
    folder = tmp_path / "run"
    shutil.copytree(seeded, folder)
    for command in GROUPS[group]:
        check(command, run_fresh(command, folder))
