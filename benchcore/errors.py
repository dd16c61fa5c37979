"""The exceptions a suite raises on purpose."""


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
