"""What the history tests share: real tiny sweeps, histories derived from them, a throwaway
PostgreSQL server, a headless Chromium.

Histories are synthetic but derived from real reports: each run is a copy of one real sweep's
report with every time in it (samples, per-call times, their summaries, opperf's averages) scaled
by a seeded per-run, per-case factor, and by a known step from a known run on.
"""

from __future__ import annotations

import copy
import datetime
import grp
import json
import math
import os
import pwd
import random
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[3]
START = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.timezone.utc)
OPBENCH_SWEEP = ["--ops", "broadcast_add,round", "--tiny", "-w", "1", "-r", "3", "--rounds", "2", "--threads", "1"]
# --rounds 1: rnnbench's rounds combiner fails on its own `missing` reasons (see the report to the lead)
RNNBENCH_SWEEP = ["bench", "--seqLength", "5", "--numLayers", "1", "--inputSize", "8", "--hiddenSize", "8",
                  "--miniBatch", "2", "--rnns", "cudnn", "jit", "--group", "rnns", "--nloops", "4", "--warmup", "1",
                  "--device", "cpu", "--rounds", "1", "--threads", "1", "--no-isolation"]
OPPERF_PREFIXES = ("avg_time_", "p50_time_", "p90_time_", "p99_time_")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def env(**extra):
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def run_sweeps(folder: Path) -> dict:
    """One real opbench and one real rnnbench sweep at tiny sizes, side by side: {suite: report path}."""
    jobs = {"opbench": (OPBENCH_SWEEP + ["-o", "opbench.json"]),
            "rnnbench": (RNNBENCH_SWEEP + ["--output-file", "rnnbench.json"])}
    procs = {suite: subprocess.Popen([sys.executable, "-m", suite, *args], cwd=folder, env=env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for suite, args in jobs.items()}
    for suite, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{suite} sweep failed: {err[-3000:]}"
    return {suite: folder / f"{suite}.json" for suite in jobs}


@dataclass(frozen=True)
class Step:
    """Cases whose key `applies` are `factor` times slower from run `at` (0-based) on."""

    applies: Callable[[str], bool]
    at: int
    factor: float
    #: the factor no longer applies from this run on (a fix), None: it stays
    until: Optional[int] = None

    def factor_at(self, key: str, run: int) -> float:
        active = run >= self.at and (self.until is None or run < self.until)
        return self.factor if active and self.applies(key) else 1.0


def scaled(value, factor: float, key: str = ""):
    """A metrics tree with every time scaled: keys ending in _ms (but not the clock's step) and
    opperf's averages, numbers and lists of numbers alike."""
    if isinstance(value, dict):
        return {k: scaled(v, factor, k) for k, v in value.items()}
    timed = (key.lower().endswith("_ms") and key != "resolution_ms") or key.startswith(OPPERF_PREFIXES)
    if not timed:
        return value
    if isinstance(value, list):
        return [x * factor if isinstance(x, (int, float)) and not isinstance(x, bool) else x for x in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value * factor
    return value


def derive_history(report: Path, folder: Path, runs: int, steps=(), noise: float = 0.01, seed: int = 0,
                   environment: Optional[dict] = None, start: datetime.datetime = START) -> List[Path]:
    """`runs` copies of a real report, one day apart (run k: label-free, commit c<k>), each case
    scaled by its own seeded log-normal noise and by the steps."""
    base = json.loads(Path(report).read_text())
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(runs):
        data = copy.deepcopy(base)
        data["environment"].update(environment or {})
        data["environment"]["started_at"] = (start + datetime.timedelta(days=k)).isoformat(timespec="seconds")
        data["environment"]["git_commit"] = f"c{k:02d}" + "0" * 37
        for result in data["results"]:
            factor = math.exp(random.Random(f"{seed}/{k}/{result['key']}").gauss(0.0, noise))
            for step in steps:
                factor *= step.factor_at(result["key"], k)
            result["metrics"] = scaled(result["metrics"], factor)
        path = folder / f"run{k:02d}.json"
        path.write_text(json.dumps(data))
        paths.append(path)
    return paths


# --------------------------------------------------------------------------- PostgreSQL


def postgres_binaries() -> Path:
    """The folder of initdb and pg_ctl: Debian's /usr/lib/postgresql/<version>/bin, else PATH."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
                   if p.parent.parent.name.isdigit() else 0)
    if found:
        return found[-1].parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    pytest.fail("PostgreSQL is not installed (no initdb): scripts/setup installs Debian's postgresql package; "
                "run it as root on Debian, or install PostgreSQL, to run the history store's PostgreSQL tests")


class PostgresServer:
    """A throwaway cluster in a temporary folder, listening on a Unix socket there only."""

    def __init__(self):
        if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
            pytest.fail("/dev/null is not a device (something replaced it with a file: MXNet's profiler did, when "
                        "its trace file was os.devnull); restore it: rm /dev/null && mknod -m 666 /dev/null c 1 3")
        self.bin = postgres_binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="bench-history-pg-"))
        self._as = []
        if os.geteuid() == 0:  # postgres refuses to run as root
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                pytest.fail("running as root and there is no `postgres` user to run the test server as; Debian's "
                            "postgresql package creates it (scripts/setup installs it)")
            os.chown(self.folder, user.pw_uid, grp.getgrgid(user.pw_gid).gr_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        self.data = self.folder / "data"
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale",
                  "--no-sync")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w", "-t", "60", "-o",
                  f"-k {self.folder} -c listen_addresses='' -F", "start")
        self._count = 0

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run([*self._as, str(self.bin / tool), *args], cwd=self.folder, capture_output=True,
                              text=True, timeout=120)
        if done.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text()[-1500:] if log.exists() else ""
            pytest.fail(f"{tool} failed ({done.returncode}): {done.stderr[-1500:]} {tail}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.folder}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        self._count += 1
        name = f"history_{self._count}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


# --------------------------------------------------------------------------- Chromium


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("Chromium is not installed: scripts/setup installs Debian's chromium package (apt-get install "
                "chromium) when run as root on Debian; the dashboard's browser tests need it")


class Page:
    """One loaded page and everything it said on the console."""

    def __init__(self, browser, url: str):
        self.page = browser.new_page(viewport={"width": 1100, "height": 800})
        self.errors: List[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type in (
            "error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url}"))
        self.page.goto(url, wait_until="load")

    def close(self) -> None:
        self.page.close()
