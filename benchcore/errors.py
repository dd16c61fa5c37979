"""The exceptions a suite raises on purpose, and the one-line summary of any exception."""

import re


class UsageError(Exception):
    """A bad flag, unknown operator or runner, bad shape, unwritable path or missing tool.

    The CLI layers turn it into a one-line message and exit status 2. The message must name
    the problem and the fix, because it is all the user sees.
    """


class SkipCase(Exception):
    """Raised by an executor for a case that cannot run here (e.g. CUDA-only on a CPU machine).

    The case is recorded with status `skipped` and this message as its reason; it is not a
    failure.
    """


_FRAME_LINE = re.compile(r'^(Traceback \(most recent call last\):|File ".*", line \d+|\[bt\]|Stack trace|During handling)')
_RAISED_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\s*:")


def error_summary(exc: BaseException, limit: int = 2000) -> str:
    """One line that says what went wrong: `Type: message`.

    Python exceptions keep the first line of their message. Framework errors that embed a
    formatted traceback (MXNetError's text starts with "Traceback (most recent call last):"
    and a C++ file line, and ends with "MXNetError: Check failed: …") give their last raised
    line instead; the first line would only say that a traceback follows.
    """
    lines = [line.strip() for line in str(exc).splitlines()]
    lines = [line for line in lines if line and not _FRAME_LINE.match(line)]
    if not lines:
        return type(exc).__name__
    raised = [line for line in lines if _RAISED_LINE.match(line)]
    return (raised[-1] if raised else f"{type(exc).__name__}: {lines[0]}")[:limit]
