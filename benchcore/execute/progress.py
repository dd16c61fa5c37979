"""Progress: how far a sweep is, on stderr, in a terminal and in a CI log alike.

A bar redrawn in place is right for a terminal and useless in a log file (tqdm writes nothing
there, or one line per redraw). Without a terminal the sweep prints a plain line every
`interval_s` seconds instead, and one at the end. Only the suite's cases count: the machine
reference timed among them (benchcore.measure.reference) is not a case the user asked for.

BENCH_PROGRESS chooses (docs/OPBENCH.md, "Progress"):
    unset   a bar on a terminal, else a line every DEFAULT_INTERVAL_S seconds
    0       nothing
    bar     the bar, even without a terminal
    N       a line every N seconds (a number > 0), even on a terminal
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional, TextIO

from benchcore.errors import UsageError

ENV = "BENCH_PROGRESS"
DEFAULT_INTERVAL_S = 30.0


@dataclass(frozen=True)
class Mode:
    """"bar", "lines" (every interval_s seconds) or "off"."""

    kind: str
    interval_s: float = DEFAULT_INTERVAL_S


def mode_from(value: Optional[str], terminal: bool) -> Mode:
    """The progress mode for BENCH_PROGRESS's `value` on a stream that is (or is not) a terminal."""
    text = (value or "").strip().lower()
    if not text:
        return Mode("bar") if terminal else Mode("lines")
    if text in ("0", "off", "no"):
        return Mode("off")
    if text in ("bar", "1"):  # 1: what forced the bar before this module
        return Mode("bar")
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise UsageError(f"{ENV}={value!r} is not 0, bar or a number of seconds; set e.g. {ENV}=60 for a line "
                         "a minute")
    return Mode("lines", seconds)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """Counts finished cases of `total`; `counted(spec)` says whether a spec is a case."""

    def __init__(self, total: int, prog: str, counted: Callable[[object], bool] = lambda spec: True,
                 stream: Optional[TextIO] = None, env=None, clock: Callable[[], float] = time.monotonic,
                 unit: str = "cases"):
        self.total, self.prog, self.counted, self.unit = total, prog, counted, unit
        self.stream = stream or sys.stderr
        self.mode = mode_from((os.environ if env is None else env).get(ENV), self.stream.isatty())
        self.clock, self.done = clock, 0
        self.started = self.last = clock()
        self.bar = None
        if self.mode.kind == "bar" and total > 0:
            from tqdm import tqdm

            self.bar = tqdm(total=total, file=self.stream, unit="case", dynamic_ncols=True)

    def start(self, spec) -> None:
        if self.bar is not None and self.counted(spec):
            self.bar.set_postfix_str(getattr(spec, "name", ""), refresh=True)

    def finish(self, result) -> None:
        """One result came back (a case's round, or the reference's: not counted)."""
        if not self.counted(result.spec):
            return
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.mode.kind == "lines" and (self.clock() - self.last >= self.mode.interval_s or self.done == self.total):
            self.say(self.line())

    def line(self) -> str:
        elapsed = self.clock() - self.started
        text = f"{self.done}/{self.total} {self.unit} ({self.done / self.total:.0%}), {_duration(elapsed)} elapsed"
        if 0 < self.done < self.total:
            text += f", about {_duration(elapsed / self.done * (self.total - self.done))} left"
        return text

    def say(self, text: str) -> None:
        """A line of the sweep's own (a cluster event): above the bar, or plain."""
        self.last = self.clock()
        if self.bar is not None:
            self.bar.write(f"{self.prog}: {text}", file=self.stream)
        else:
            print(f"{self.prog}: {text}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
