"""What an A/B side's python really is, probed once: the interpreter that runs, and the
environment it runs in.

A side's python is often not an interpreter but a script that starts one: a wrapper
(`#!/bin/bash` + `LD_LIBRARY_PATH=... exec .../python "$@"`, how a library or a framework
variable is switched for one side), a pyenv shim, a conda wrapper. Run as a command it behaves as
its interpreter, so timing workers may start it as it is. Under valgrind it does not: valgrind
counts the program it starts, the shell, and the interpreter that the shell then execs runs
natively (the instruction engine's worker then finds it is not under valgrind, for every case
of that side). So the probe asks the interpreter itself: its sys.executable, its prefix, the
options it was started with (sys.orig_argv) and the environment it sees; the difference from
the environment it was handed is what the wrapper set. The instruction engine then starts that
interpreter under valgrind with those variables (`launcher`), or `for_counting` refuses, in one
line, a side it cannot start that way, before either side runs a case.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from benchcore.errors import UsageError

#: the probe: the imports a side needs (formatted in), then one JSON line after a marker
PROBE = """{imports}
import json, os, sys
print({marker!r} + json.dumps({{"executable": sys.executable, "prefix": sys.prefix,
    "orig_argv": getattr(sys, "orig_argv", None), "environ": dict(os.environ)}}))
"""
MARKER = "benchcore-interpreter:"
#: what a shell sets for itself on the way to exec: not the wrapper's doing, not the interpreter's business
SHELL_VARIABLES = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})
#: the probe's own start-up is slow only where a framework's import is (MXNet: seconds)
TIMEOUT_S = 300


@dataclass(frozen=True)
class Interpreter:
    """A side's python as given, and what runs when it is called."""

    given: str
    executable: str
    prefix: str
    #: variables the wrapper set or changed, and those it removed
    sets: Dict[str, str] = field(default_factory=dict)
    unsets: Tuple[str, ...] = ()
    #: interpreter options the wrapper added before the script's own arguments (`python -X ...`)
    options: Tuple[str, ...] = ()

    @property
    def wrapped(self) -> bool:
        """Whether calling `given` is not simply starting `executable` (a wrapper, a shim)."""
        return (os.path.realpath(self.given) != os.path.realpath(self.executable)
                or bool(self.sets or self.unsets or self.options))

    def launcher(self, prefix: Sequence[str]) -> Tuple[str, ...]:
        """`prefix` (valgrind's, which sets the counting variables itself) preceded by what the
        wrapper sets, so the variables the engine needs for determinism win over the wrapper's."""
        if not (self.sets or self.unsets):
            return tuple(prefix)
        unset = [word for name in self.unsets for word in ("-u", name)]
        return ("env", *unset, *(f"{k}={v}" for k, v in sorted(self.sets.items())), *prefix)

    def to_dict(self) -> dict:
        return {"given": self.given, "executable": self.executable, "prefix": self.prefix, "sets": dict(self.sets),
                "unsets": list(self.unsets), "options": list(self.options)}


_PROBED: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], Interpreter] = {}


def probe(python: str, flag: str, imports: Sequence[str], env: Dict[str, str], who: str = "the benchmarks") -> Interpreter:
    """Run `python` once with `env`, importing `imports`; what it is (cached per path and
    environment, so each side is probed once however often it is asked). A python that does
    not run, cannot import them (for `who`) or is no Python: one line naming the fix."""
    key = (python, tuple(sorted(env.items())))
    if key not in _PROBED:
        _PROBED[key] = _run_probe(python, flag, imports, env, who)
    return _PROBED[key]


def _run_probe(python: str, flag: str, imports: Sequence[str], env: Dict[str, str], who: str) -> Interpreter:
    code = PROBE.format(imports="\n".join(f"import {name}" for name in imports), marker=MARKER)
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"{flag} {python} does not run ({exc}); pass a working Python interpreter") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {done.returncode}"
        raise UsageError(f"{flag} {python} cannot import what {who} needs ({last}); install "
                         f"{', '.join(imports) or 'the dependencies'} in that environment")
    found = [line[len(MARKER):] for line in done.stdout.splitlines() if line.startswith(MARKER)]
    if not found:
        raise UsageError(f"{flag} {python} is not a Python interpreter; pass the python of a virtual environment "
                         "(e.g. venv/bin/python)")
    return read(python, json.loads(found[-1]), env)


def read(python: str, seen: dict, handed: Dict[str, str]) -> Interpreter:
    """The Interpreter from the probe's answer `seen` and the environment it was `handed`."""
    environ = {k: v for k, v in seen["environ"].items() if k not in SHELL_VARIABLES}
    sets = {k: v for k, v in environ.items() if handed.get(k) != v}
    unsets = tuple(sorted(k for k in handed if k not in environ and k not in SHELL_VARIABLES))
    return Interpreter(python, seen["executable"] or "", seen["prefix"], sets, unsets, _options(seen["orig_argv"]))


def _options(orig_argv: Optional[List[str]]) -> Tuple[str, ...]:
    """The interpreter options before the probe's `-c` (none where Python is older than 3.10)."""
    if not orig_argv or "-c" not in orig_argv:
        return ()
    return tuple(orig_argv[1:orig_argv.index("-c")])


def for_counting(interpreter: Interpreter, flag: str) -> Interpreter:
    """The side's interpreter as the instruction engine starts it under valgrind, or one line
    saying why it cannot be."""
    path = interpreter.executable
    if not (path and os.path.isfile(path) and os.access(path, os.X_OK)):
        raise UsageError(f"{flag} {interpreter.given} runs a Python that does not name its own executable "
                         f"(sys.executable {path!r}), which valgrind must start; pass that interpreter itself")
    if interpreter.options:
        raise UsageError(f"{flag} {interpreter.given} starts {path} with options ({' '.join(interpreter.options)}) "
                         "that the instruction engine's workers would not get; pass a wrapper that sets only "
                         "environment variables, or that interpreter itself")
    return interpreter
