"""The A/B run: the same cases under two Python environments, interleaved, judged in one go.

How a change to a framework is checked. Two sweeps run an hour apart differ as a whole by
several percent on a shared machine (docs/COMPARING.md); rounds measure the noise inside a
sweep, not that drift. An A/B run times both environments in one sitting, alternating them case
by case and round by round (ABBA: base new, new base, …; benchcore.execute.rounds.RoundPlan.slots), each
side in its own worker processes, so whatever the machine does hits both sides alike. Both
sides run this suite's benchmark code (put first on their PYTHONPATH) with their own frameworks.

After its planned rounds, an A/B run keeps adding interleaved rounds (two a side at a time) to
the cases whose quantities it has not yet decided, until each is decided (slower, faster, or the
same within the margin), `--max-rounds` is reached or `--budget` is spent. The comparison's error
rates hold under that optional stopping: the looks are fixed in advance and each spends a share
of alpha (benchcore.compare.sequential); the reports record the schedule (settings.sequential).
Where the planned rounds decide a quantity it gets no more rounds: the added time goes where
the answer is still open, as Pinpoint adds attempts to the comparisons it cannot yet decide.

What time leaves undecided after that, `--count-undecided` counts: the instructions of just those
cases, both sides under valgrind (--engine instructions' settings), joined to each side's timings
as `merge --both` joins them, so the Answer says what the counts say where time cannot.

Output, in one folder: base.json and new.json (ordinary reports, each with its own side's
environment), comparison.md and comparison.json.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

from benchcore.cli.commands import (
    add_gate_arguments,
    comparison_text,
    judge,
    report_gate,
)
from benchcore.cli.options import render_report
from benchcore.cli.request import ABRequest, SweepRequest
from benchcore.compare.sequential import Looks
from benchcore.errors import UsageError
from benchcore.execute.rounds import ADDED_ROUND_MS, SHORT_MIN_RUNS, SHORT_MIN_WARMUP
from benchcore.execute.sweep import check_side_python
from benchcore.report.model import (
    Report,
    check_writable,
    ensure_folder,
    write_text_atomic,
)
from benchcore.suite import Suite

SIDES = ("base", "new")
OUTPUT_FILES = ("base.json", "new.json", "comparison.md", "comparison.json")
CHECKPOINT = "ab.checkpoint.jsonl"
#: rounds a side added at a time to the undecided cases (an ABBA pair keeps the sides balanced)
STEP = 2
#: the default budget for added rounds: this multiple of the planned rounds' wall time
DEFAULT_BUDGET = "2x"
#: the default horizon: the planned rounds plus this many; far enough that the budget, not the
#: horizon, ends a default run (a nearer horizon spends all of alpha by rounds the budget would
#: still pay for: with short added rounds a 2x budget reaches 30 and more; tests/benchcore/test_sequential.py)
DEFAULT_EXTRA_ROUNDS = 30


def add_ab_arguments(parser, default_dir: str) -> None:
    group = parser.add_argument_group("A/B run")
    group.add_argument("--base-python", required=True, metavar="PATH",
                       help="the baseline environment's python (e.g. venv-old/bin/python)")
    group.add_argument("--new-python", required=True, metavar="PATH",
                       help="the environment to judge (the same one twice is a valid A/A check)")
    group.add_argument("-o", "--output", "--output-dir", dest="output_dir", default=default_dir, metavar="DIR",
                       help=f"where base.json, new.json and comparison.md/json go (default {default_dir})")
    group.add_argument("--budget", type=budget, default=DEFAULT_BUDGET, metavar="SECONDS|Nx",
                       help="time for rounds added to the cases still undecided after the planned ones, in seconds or "
                            f"as a multiple of the planned rounds' time (default {DEFAULT_BUDGET}; 0: no added rounds)")
    group.add_argument("--max-rounds", type=int, default=None, metavar="N",
                       help=f"the most rounds a side any case gets (default --rounds + {DEFAULT_EXTRA_ROUNDS}); fixed "
                            "before the run, as the error rates' schedule needs")
    group.add_argument("--added-round-ms", type=added_round_ms, default=ADDED_ROUND_MS, metavar="MS",
                       help="an added round times a slow case for about this long, its warmup as long again (at least "
                            f"{SHORT_MIN_RUNS} and {SHORT_MIN_WARMUP} calls, at most a planned round's; default "
                            f"{ADDED_ROUND_MS:g}; 0: added rounds as long as planned ones)")
    group.add_argument("--count-undecided", action="store_true",
                       help="then count the instructions of the cases still undecided on time, both sides under "
                            "valgrind (--cache-sim and --count-workers apply), and judge them on counts too")
    add_gate_arguments(group)


def budget(text: str) -> tuple:
    """--budget: ("s", seconds) or ("x", multiple of the planned rounds' wall)."""
    value = text.strip().lower()
    unit = "x" if value.endswith("x") else "s"
    try:
        number = float(value.rstrip("xs"))
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a budget: give seconds (e.g. 600), a multiple of the planned "
                                         "rounds' time (e.g. 2x), or 0 for no added rounds")
    return unit, number


def added_round_ms(text: str) -> float:
    """--added-round-ms: a finite number of milliseconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a round's length: give milliseconds (e.g. {ADDED_ROUND_MS:g}), "
                                         "or 0 for added rounds as long as planned ones")
    return value


def looks_for(planned: int, sides: ABRequest) -> Optional[Looks]:
    """The schedule of looks an A/B run of `planned` rounds fixes before it starts; None without
    added rounds."""
    horizon = sides.max_rounds if sides.max_rounds is not None else planned + DEFAULT_EXTRA_ROUNDS
    if sides.budget[1] == 0 or planned < 2:
        return None
    if horizon < planned:
        raise UsageError(f"--max-rounds {horizon} is below --rounds {planned}; give at least {planned}")
    return Looks(planned, STEP, horizon) if horizon > planned else None


class AddedRounds:
    """What an A/B run asks after its planned rounds and each added step: which cases get more
    rounds, and how long (rounds.Short: a slow case's added rounds time fewer calls). A case does
    while one of its quantities is undecided on rounds (a test ran: not a clock-step or zero-time
    case), the horizon allows another step, and the budget the next step would take is left.

    The next step's cost is estimated per case: its calls (the round's warmup and runs at its
    calls' medians, both sides) and the set-up every case-round pays (the planned rounds' wall
    beyond their calls, per case-round); after a step, scaled by what the last step really took
    against its estimate."""

    def __init__(self, suite: Suite, sides: ABRequest, looks: Looks, reports_of: Callable[[dict], Dict[str, Report]],
                 cases: int, say: Callable[[str], None], warmup: int = 25, runs: int = 33):
        self.suite, self.sides, self.looks, self.reports_of, self.say = suite, sides, looks, reports_of, say
        self.cases, self.warmup, self.runs = cases, warmup, runs
        self.started = time.perf_counter()
        self.planned_s: Optional[float] = None
        self.setup_s: Optional[float] = None
        self.rounds = looks.planned
        self.last_step: Optional[tuple] = None  # (when it started, its unscaled estimate in s)

    def __call__(self, measured: dict) -> List[tuple]:
        from benchcore.compare.verdicts import compare

        now = time.perf_counter()
        if self.planned_s is None:
            self.planned_s = now - self.started
        reports = stamped(self.reports_of(measured), self.looks)
        comparison = compare(reports["base"], reports["new"], self.suite, threshold=self.sides.threshold / 100,
                             alpha=self.sides.alpha, allow_env_mismatch=True, interleaved=True)
        open_keys = undecided_cases(comparison, lambda m: m.basis == "rounds" and m.p_value is not None)
        quantities = sum(len(case.metrics) for case in comparison.cases)
        undecided = sum(m.verdict == "undecided" for case in comparison.cases for m in case.metrics)
        added = self._added(reports, open_keys)
        estimate_s = self._estimate_s(reports, added)
        step_s = estimate_s * self._scale(now)
        why_not = self._why_not(len(open_keys), now, step_s)
        if why_not:
            if open_keys:
                self.say(f"{undecided} of {quantities} quantities undecided after {self.rounds} rounds a side; {why_not}")
            return []
        shorts = sum(short is not None for _spec, short, _calls in added)
        self.say(f"{undecided} of {quantities} quantities undecided after {self.rounds} rounds a side: adding {STEP} "
                 f"rounds a side to their {len(open_keys)} case(s)" + (f", {shorts} of them short" if shorts else ""))
        self.rounds += STEP
        self.last_step = (now, estimate_s)
        return [(spec, short) for spec, short, _calls in added]

    def _added(self, reports: Dict[str, Report], open_keys: set) -> List[tuple]:
        """(spec, its short round or None, its calls' ms on each side) for each case to add
        rounds to: short from the slower side's calls, so neither side's round is cut below what
        fits."""
        from benchcore.execute.rounds import call_ms, short_round

        new = {r.spec.key: r for r in reports["new"].results}
        found = []
        for result in reports["base"].results:
            if result.spec.key in open_keys:
                calls = [call_ms(result), call_ms(new.get(result.spec.key, result))]
                slowest = max((c for c in calls if c), default=None)
                found.append((result.spec, short_round(slowest, self.warmup, self.runs, self.sides.added_round_ms),
                              calls))
        return found

    def _estimate_s(self, reports: Dict[str, Report], added: List[tuple]) -> float:
        """The next step's wall (s) as the planned rounds' costs predict it."""
        if self.setup_s is None:  # the planned rounds' wall beyond their calls, per case-round
            results = [r for report in reports.values() for r in report.results]
            calls_s = sum((r.metrics or {}).get("timed_total_ms") or 0.0 for r in results) / 1000
            self.setup_s = max(0.0, self.planned_s - calls_s) / max(1, self.cases * self.looks.planned)
        estimate = 0.0
        for _spec, short, calls in added:
            warmup, runs = (short.warmup, short.runs) if short else (self.warmup, self.runs)
            estimate += self.setup_s + sum(c or 0.0 for c in calls) * (warmup + runs) / 1000
        return estimate * STEP

    def _scale(self, now: float) -> float:
        """What the last step really took against its estimate (1 before any)."""
        if self.last_step is None or self.last_step[1] <= 0:
            return 1.0
        return (now - self.last_step[0]) / self.last_step[1]

    def _why_not(self, open_cases: int, now: float, step_s: float) -> Optional[str]:
        """Why no step is added now (None: one is)."""
        if not open_cases:
            return "nothing left to decide"
        if self.rounds + STEP > self.looks.horizon:
            return f"--max-rounds {self.looks.horizon} reached"
        unit, amount = self.sides.budget
        budget_s = amount * self.planned_s if unit == "x" else amount
        if (now - self.started - self.planned_s) + step_s > budget_s:
            return f"--budget {amount:g}{'x' if unit == 'x' else ' s'} spent"
        return None


def undecided_cases(comparison, counts: Callable = lambda metric: True) -> set:
    """The keys of the cases with a quantity undecided on time (of those `counts` accepts)."""
    return {case.key for case in comparison.cases for m in case.metrics if m.verdict == "undecided" and counts(m)}


def stamped(reports: Dict[str, Report], looks: Optional[Looks], added_round_ms: Optional[float] = None) -> Dict[str, Report]:
    """Both sides' reports with the schedule of looks they were judged by (settings.sequential),
    and how long an added round timed a slow case."""
    if looks is not None:
        extra = {} if added_round_ms is None else {"added_round_ms": added_round_ms}
        for report in reports.values():
            report.settings["sequential"] = {**looks.to_dict(), **extra}
    return reports


def measure(suite: Suite, job, run_plan, request: SweepRequest, argv, extra: dict,
            reports_of: Callable[[dict], Dict[str, Report]]) -> Dict[str, Report]:
    """The A/B sweep, `ab` of either suite: the planned rounds, then rounds added to the cases still
    undecided (AddedRounds), as the run's looks allow; both sides' reports."""
    from benchcore.execute import sweep

    looks = looks_for(request.rounds, request.ab)
    say = lambda text: print(f"{suite.name}: {text}", file=sys.stderr)  # noqa: E731
    asks = None
    if looks is not None:
        runs = job.rounds.runs_per_round(job.settings.runs)[-1]  # an added round's: the last planned round's
        asks = AddedRounds(suite, request.ab, looks, reports_of, len(job.specs), say, job.round_settings.warmup, runs)
    measured = sweep.measure(job, run_plan, suite.name, argv, extra, more_rounds=asks, step=STEP)
    return stamped(reports_of(measured), looks, request.ab.added_round_ms)


def plan(request: SweepRequest, suite: Suite) -> Dict[str, str]:
    """Check the flags, both interpreters, valgrind where counting is asked, and the output folder
    before anything runs; side → python."""
    looks_for(request.rounds, request.ab)
    sides = request.ab
    if sides.count_undecided:
        check_counting(request, suite)
    pythons = {side: check_side_python(python, f"--{side}-python", suite)
               for side, python in zip(SIDES, (sides.base_python, sides.new_python))}
    folder = ensure_folder(sides.output_dir, "A/B output folder", "choose a writable folder")
    if not request.resume:
        for name in OUTPUT_FILES:
            check_writable(folder / name, request.overwrite)
    return pythons


def check_counting(request: SweepRequest, suite: Suite) -> None:
    """--count-undecided confirms a timed A/B run: refused on a counted one, and where valgrind
    or the --cache-sim geometry would stop the counting after the timing (valgrind.plan says how)."""
    from benchcore.execute import valgrind
    from benchcore.measure.instructions import ENGINE

    if getattr(request, "engine", None) == ENGINE:
        raise UsageError("--count-undecided counts the cases a timed ab leaves undecided; this ab counts every case "
                         "already (--engine instructions): drop --count-undecided")
    if request.shard:
        raise UsageError("--count-undecided joins counts to a whole A/B run's reports, as merge --both does; drop "
                         "--shard (or drop --count-undecided, and merge --both the shard's counts by hand)")
    valgrind.plan(request.cache_sim, dict(suite.count_environment), request.count_workers)


def counting_request(request: SweepRequest, runs: str = "runs", **pinned):
    """The request that counts the cases `request` times: the instruction engine's defaults
    (INSTRUCTION_DEFAULTS; `runs`: the suite's name for measured calls), no resume, and `pinned`:
    what would otherwise change the cases under the engine (e.g. a size chosen per engine)."""
    import dataclasses

    from benchcore.measure.instructions import ENGINE
    from benchcore.measure.instructions import INSTRUCTION_DEFAULTS as COUNTING

    return dataclasses.replace(request, engine=ENGINE, warmup=COUNTING["warmup"], rounds=COUNTING["rounds"],
                               threads=COUNTING["threads"], no_audit=COUNTING["no_audit"], resume=False,
                               **{runs: COUNTING["runs"]}, **pinned)


def confirm_by_counting(suite: Suite, request: SweepRequest, reports: Dict[str, Report],
                        count: Callable[[set], Dict[str, Report]]) -> Dict[str, Report]:
    """Each side's report with the instruction counts of the cases time leaves undecided
    (`count`: their counted reports, side → Report), joined as `merge --both` joins them; the
    timed reports as they are where nothing is undecided or the counting fails (said on stderr:
    nothing timed is lost)."""
    from benchcore.compare.verdicts import compare
    from benchcore.report.merge import merge_kinds

    comparison = compare(reports["base"], reports["new"], suite, threshold=request.ab.threshold / 100,
                         alpha=request.ab.alpha, allow_env_mismatch=True, interleaved=True)
    keys = undecided_cases(comparison)
    say = lambda text: print(f"{suite.name}: {text}", file=sys.stderr)  # noqa: E731
    if not keys:
        say("--count-undecided: time decided every case; nothing to count")
        return reports
    say(f"--count-undecided: counting the instructions of the {len(keys)} case(s) undecided on time, both sides "
        "under valgrind")
    try:
        counted = count(keys)
        return {side: merge_kinds([reports[side], counted[side]], lambda result: bool(suite.timings(result)),
                                  sources=(f"{side}.json (timed)", f"{side}.json (counted)"))
                for side in SIDES}
    except UsageError as error:
        say(f"warning: --count-undecided: the counting stopped ({error}); the comparison rests on time alone")
        return reports


def checkpoint_path(request: SweepRequest) -> Path:
    return Path(request.ab.output_dir).expanduser() / CHECKPOINT


def warn_code_paths(prog: str, reports: Dict[str, Report]) -> None:
    """Each side's warning where its libraries take other code paths under valgrind than
    natively (its own probes, under its own python: benchcore.execute.code_path)."""
    from benchcore.views import count_report

    for side in SIDES:
        note = count_report.warning((reports[side].settings or {}).get("valgrind"))
        if note:
            print(f"{prog}: warning: {side}: {note}", file=sys.stderr)


def finish(suite: Suite, reports: Dict[str, Report], request: SweepRequest) -> int:
    """Write both reports and their comparison; the exit status (gate, or failed cases)."""
    folder = Path(request.ab.output_dir).expanduser()
    written = []
    for side in SIDES:
        text = render_report(reports[side], "json", None, suite)
        written.append(write_text_atomic(folder / f"{side}.json", text + "\n", request.overwrite))
    result = judge(suite, reports["base"], reports["new"], request.ab,
                   sources=(str(folder / "base.json"), str(folder / "new.json")), allow_env_mismatch=True)
    for name, fmt in (("comparison.md", "md"), ("comparison.json", "json")):
        text = comparison_text(result, fmt, folder / name, None)
        written.append(write_text_atomic(folder / name, text + "\n", request.overwrite))
    sys.stdout.write(comparison_text(result, "md", folder / "comparison.md", None) + "\n")
    for path in written:
        print(f"{suite.name}: wrote {path}", file=sys.stderr)
    status = report_gate(suite.name, result.gate) if result.gate is not None else 0
    failed = any(r.failures for r in reports.values())
    return status or (1 if failed else 0)
