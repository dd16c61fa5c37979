"""Wrap a whole process in an external GPU profiler: Nsight Systems (nsys) or nvprof.

These tools cannot attach to a running Python loop; the suite re-runs its own command line
under the tool (with an internal-run flag) and the tool writes one report file. This module
knows the tools' command lines and failure modes and nothing about any framework.

- nsys: `nsys profile -t cuda,nvtx -o BASE [-f true] CMD…`; nsys appends `.nsys-rep` to BASE
  itself (older releases wrote `.qdrep`), so `-o` gets the name without its extension.
- nvprof: `nvprof -o FILE.nvvp [-f] CMD…`. nvprof does not support GPUs of compute
  capability 8.0 and newer (Ampere, Hopper); those are refused up front with a pointer to nsys.

An existing report is never replaced unless asked (the tool's force flag is passed only then).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from benchcore.errors import UsageError

STDERR_TAIL_CHARS = 2000


@dataclass(frozen=True)
class ExternalTool:
    name: str
    #: extension of the report file, with its dot
    extension: str
    #: the tool appends `extension` to the name given with -o
    appends_extension: bool
    #: first compute capability the tool no longer supports; None: no limit known
    unsupported_from: Optional[Tuple[int, int]] = None
    #: extensions an older release may write instead (looked for when the expected one is absent)
    legacy_extensions: Tuple[str, ...] = field(default_factory=tuple)
    successor: Optional[str] = None

    def output_argument(self, path: Path) -> str:
        """What -o gets for a report meant to land at `path`."""
        text = str(path)
        if self.appends_extension and text.endswith(self.extension):
            return text[: -len(self.extension)]
        return text

    def command(self, output: Path, inner: Sequence[str], overwrite: bool = False, executable: Optional[str] = None) -> List[str]:
        exe = executable or self.name
        if self.name == "nsys":
            cmd = [exe, "profile", "-t", "cuda,nvtx", "-o", self.output_argument(output)]
            if overwrite:
                cmd += ["-f", "true"]
        elif self.name == "nvprof":
            cmd = [exe, "-o", self.output_argument(output)]
            if overwrite:
                cmd += ["-f"]
        else:  # pragma: no cover - only the two tools above are defined
            raise ValueError(self.name)
        return cmd + list(inner)


NSYS = ExternalTool("nsys", ".nsys-rep", appends_extension=True, legacy_extensions=(".qdrep",))
NVPROF = ExternalTool("nvprof", ".nvvp", appends_extension=False, unsupported_from=(8, 0), successor="nsys")
TOOLS = {tool.name: tool for tool in (NSYS, NVPROF)}


class ExternalToolError(Exception):
    """The tool ran and failed (non-zero exit, or no report written). Not a usage error."""

    def __init__(self, message: str, returncode: Optional[int] = None, stderr_tail: str = ""):
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


@dataclass
class ExternalRun:
    command: List[str]
    returncode: int
    output: Path
    stdout_tail: str
    stderr_tail: str


def get_tool(name: str) -> ExternalTool:
    try:
        return TOOLS[name]
    except KeyError:
        raise UsageError(f"unknown external profiler {name!r}; choose one of {', '.join(TOOLS)}") from None


def find_tool(tool: ExternalTool, which: Callable[[str], Optional[str]] = shutil.which,
              alternative: Optional[str] = None) -> str:
    """The tool's path on PATH, or a UsageError saying how to get it (and the suite's `alternative`
    flag that needs no such tool, e.g. rnnbench's `--profiler torch`)."""
    path = which(tool.name)
    if path is None:
        hint = "install Nsight Systems" if tool.name == "nsys" else "install the CUDA toolkit's nvprof (or use nsys)"
        raise UsageError(f"{tool.name} not found on PATH; {hint} and put it on PATH"
                         + (f", or use {alternative}" if alternative else ""))
    return path


def check_supported(tool: ExternalTool, capability: Optional[Tuple[int, int]]) -> None:
    """Refuse a tool on a GPU it does not support (nvprof on compute capability >= 8.0)."""
    if tool.unsupported_from is None or capability is None:
        return
    if tuple(capability) >= tool.unsupported_from:
        major, minor = capability
        limit = ".".join(map(str, tool.unsupported_from))
        raise UsageError(
            f"{tool.name} does not support GPUs of compute capability {limit} and newer (this GPU is "
            f"{major}.{minor}); use --profiler {tool.successor or 'nsys'} (Nsight Systems) instead"
        )


def _tail(text: str) -> str:
    text = (text or "").strip()
    return text[-STDERR_TAIL_CHARS:]


def locate_report(tool: ExternalTool, output: Path) -> Optional[Path]:
    if output.exists():
        return output
    for extension in tool.legacy_extensions:
        candidate = Path(tool.output_argument(output) + extension)
        if candidate.exists():
            return candidate
    return None


def run_external(
    tool: ExternalTool,
    output: Path,
    inner: Sequence[str],
    overwrite: bool = False,
    executable: Optional[str] = None,
    run: Callable = subprocess.run,
    env: Optional[dict] = None,
) -> ExternalRun:
    """Run `inner` under the tool; raise ExternalToolError with the tool's stderr tail on failure."""
    output = Path(output)
    if locate_report(tool, output) is not None and not overwrite:
        raise UsageError(f"profile {output} already exists; pass --overwrite or wait for the next minute's file name")
    command = tool.command(output, inner, overwrite=overwrite, executable=executable)
    try:
        done = run(command, capture_output=True, text=True, env=env)
    except OSError as exc:
        raise UsageError(f"cannot run {tool.name}: {exc.strerror}") from None
    stdout_tail, stderr_tail = _tail(done.stdout), _tail(done.stderr)
    if done.returncode != 0:
        raise ExternalToolError(
            f"{tool.name} exited with status {done.returncode}", returncode=done.returncode,
            stderr_tail=stderr_tail or stdout_tail,
        )
    report = locate_report(tool, output)
    if report is None:
        raise ExternalToolError(f"{tool.name} finished but wrote no report at {output}", returncode=0,
                                stderr_tail=stderr_tail or stdout_tail)
    return ExternalRun(command=command, returncode=0, output=report, stdout_tail=stdout_tail, stderr_tail=stderr_tail)
