"""MXNet's generated operator functions, compiled once per build and reused by every process.

At import, MXNet writes the Python source of a function for each operator (ndarray, symbol and
the numpy modules alike, through mxnet.ndarray.register `_make_ndarray_function` and
mxnet.symbol.register `_make_symbol_function`) and runs it with `exec(code, None, local)`:
~2,560 compiles, 40-50% of MXNet's import. The sources differ between processes in one place
only: the operator's handle, a C pointer (moved by address-space randomisation), written as
the first argument of the function's last line, `return _imperative_invoke(<handle>, …)` or
`return _symbol_creator(<handle>, …)`. Here that literal is replaced by a sentinel; the template
is compiled once, stored (marshal, one file per MXNet build and bytecode version), and each
later import takes the stored code object and puts the real handle back in place of the
sentinel constant. The functions are those MXNet's own compile makes: the same code, the same
handle; the docstrings, names and defaults are set by MXNet around the `exec`, as before.
"""

from __future__ import annotations
import __future__

import builtins
import contextlib
import hashlib
import importlib.util
import marshal
import re
import sys
from pathlib import Path
from types import CodeType
from typing import Iterator, Optional

#: the handle argument of a generated function's last line (ndarray: _imperative_invoke; symbol:
#: _symbol_creator; MXNet 1.4.1 to 1.9.1). Anchored at the source's end, so a match is code: a
#: docstring quoting such a line is followed by the body, and a source ending inside a string
#: does not compile
HANDLE = re.compile(r"\n    return (?:_imperative_invoke|_symbol_creator)\((\d+), [^\n]*\)\Z")
#: the digit a template's sentinel repeats: the sentinel takes the handle's place with as many
#: digits, so the code's column positions (co_linetable) are those of the real source
SENTINEL_DIGIT = "7"
#: the __future__ flags a string given to exec inherits from its caller's code (less the obsolete
#: nested_scopes flag, which CPython leaves out too)
FUTURE_FLAGS = sum(getattr(__future__, feature).compiler_flag
                   for feature in __future__.all_feature_names) & ~__future__.CO_NESTED
#: the real exec, which OperatorCode.exec ends in and `reused` puts back
builtins_exec = builtins.exec


class OperatorCode:
    """The stored templates (`stored`, digest → code object), those this import used, and
    whether it compiled any anew."""

    def __init__(self, stored: dict):
        self.stored = stored
        self.used: dict = {}
        self.compiled_new = False

    def exec(self, source, globals=None, locals=None, /, **options):
        """builtins.exec, with the generated operator functions' code taken from the store: a
        default namespace is the caller's (as exec's own), a string inherits the caller's
        __future__ flags, code objects pass straight through."""
        caller = sys._getframe(1)
        if globals is None:
            globals = caller.f_globals
            locals = caller.f_locals if locals is None else locals
        if isinstance(source, (str, bytes)):
            source = self.code_of(source, caller.f_code.co_flags & FUTURE_FLAGS)
        return builtins_exec(source, globals, locals, **options)

    def code_of(self, source, flags: int) -> CodeType:
        """`source` compiled as exec compiles it; a generated operator function from its
        template (stored, or compiled and kept for the store) with the real handle put back."""
        match = HANDLE.search(source) if isinstance(source, str) else None
        sentinel = SENTINEL_DIGIT * len(match.group(1)) if match else None
        if match is None or sentinel in source:
            return compile(source, "<string>", "exec", flags, dont_inherit=True)
        template = source[:match.start(1)] + sentinel + source[match.end(1):]
        key = hashlib.sha256(f"{flags}\0{template}".encode()).digest()
        code = self.used.get(key) or self.stored.get(key) or self.compiled(template, flags, int(sentinel))
        if code is None:  # the sentinel is not the template's one such constant (a folded expression)
            return compile(source, "<string>", "exec", flags, dont_inherit=True)
        self.used[key] = code
        return with_constant(code, int(sentinel), int(match.group(1)))

    def compiled(self, template: str, flags: int, sentinel: int) -> Optional[CodeType]:
        code = compile(template, "<string>", "exec", flags, dont_inherit=True)
        if constant_count(code, sentinel) != 1:
            return None
        self.compiled_new = True
        return code


def with_constant(code: CodeType, old: int, new: int) -> CodeType:
    """`code` with the integer constant `old` replaced by `new`, in nested code objects too."""
    return code.replace(co_consts=tuple(
        new if type(constant) is int and constant == old
        else with_constant(constant, old, new) if isinstance(constant, CodeType)
        else constant
        for constant in code.co_consts))


def constant_count(code: CodeType, value: int) -> int:
    """How many times the integer constant `value` is among `code`'s constants, nested ones too."""
    return sum(1 if type(constant) is int and constant == value
               else constant_count(constant, value) if isinstance(constant, CodeType)
               else 0
               for constant in code.co_consts)


def store_file(build: Optional[str], folder: Path) -> Optional[Path]:
    """The store of MXNet build `build` (frameworks.mxnet.build_name; None: no store) for this
    Python's bytecode (marshal's format follows it)."""
    if build is None:
        return None
    return folder / f"mxnet-operator-code-{build}-py{importlib.util.MAGIC_NUMBER.hex()}.marshal"


def read_store(path: Optional[Path]) -> dict:
    """The stored templates; empty where there is no file or it is not one this module wrote
    (corrupt, truncated, another format): the import then compiles, as without a store."""
    try:
        stored = marshal.loads(path.read_bytes()) if path else {}
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    valid = isinstance(stored, dict) and all(
        isinstance(key, bytes) and isinstance(code, CodeType) for key, code in stored.items())
    return stored if valid else {}


@contextlib.contextmanager
def reused(path: Optional[Path]) -> Iterator[None]:
    """builtins.exec replaced by the store's (OperatorCode.exec) inside the block, restored
    after it. Where the block compiled a template anew, the store is rewritten with exactly the
    templates it used, so it never grows past one import's functions."""
    from frameworks import cache

    operator_code = OperatorCode(read_store(path))
    builtins.exec = operator_code.exec
    try:
        yield
    finally:
        builtins.exec = builtins_exec
    if path and operator_code.compiled_new:
        cache.write_bytes(path, marshal.dumps(operator_code.used))
