"""The manifest: which OpInfo entries a torch sweep times, on what inputs, and why others not.

Built by discovery (opbench.backends.torch.discover) in processes of its own, once per torch
version, dtype, device kind, size target, seed and version of the discovery code, and cached
(OPBENCH_CACHE, default ~/.cache/opbench); `--manifest PATH` reads (or builds) one at a given path, e.g. the one an
older report names, so two torch versions time the same cases. One JSON file:

    {"format": "opbench-torch-manifest", "version": 1, "torch": "2.13.0+cpu", "dtype": "float32",
     "device": "cpu", "size_target": 1048576, "seed": 0, "built_at": …, "build_s": …,
     "entries": [{"name", "variant", "category", "kind", "aten_name", "call", "strategy",
                  "sample", "samples", "scale": {"k", "ints"}, "tree", "inputs", "elements",
                  "call_ms", "differentiable", "backward", "no_backward_reason", "tried", …}],
     "left_out": [{"name", "variant", "category", "reason"}],
     "data": {content hash: {"dtype", "shape", "b64"}}}

Entries are keyed by (name, variant), OpInfo's identity. Discovery runs each entry once at the
chosen size, so the build costs a pass over every operator (about a minute on 2 cores, most
of it importing op_db and drawing samples); a process that dies on an entry is restarted past
it, and that entry is left out with the signal.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from benchcore.errors import UsageError
from frameworks import cache

FORMAT = "opbench-torch-manifest"
VERSION = 1
CACHE_ENV = cache.CACHE_ENV
#: a discovery process silent for this long on one entry is killed and the entry left out
ENTRY_TIMEOUT_S = 300.0
DISCOVER_MODULE = "opbench.backends.torch.discover"

Key = Tuple[str, str]


def torch_version() -> str:
    """The installed torch's version, read without importing it (the CLI never imports torch
    for a CPU sweep: a worker's timings must not depend on what the parent loaded)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        raise UsageError("--framework torch needs PyTorch, and it is not installed; pip install -e '.[torch]'") from None


#: the modules whose code decides what discovery writes (samples, scaling, overrides, calls)
DISCOVERY_SOURCES = tuple(Path(__file__).with_name(name) for name in
                          ("discover.py", "sample.py", "overrides.py", "callables.py", "categories.py"))


def discovery_digest() -> str:
    """A short hash of the discovery code (frameworks.cache.code_digest): part of the cached
    manifest's name, so a change to an override or to the scaling is never served the inputs an
    older checkout discovered."""
    return cache.code_digest(DISCOVERY_SOURCES)


def cache_path(dtype: str, device: str, size_target: int, seed: int) -> Path:
    kind = device.split(":")[0]
    return cache.root() / (f"torch-{torch_version()}-{dtype}-{kind}-{size_target}-seed{seed}-v{VERSION}-"
                   f"{discovery_digest()}.json")


def key_of(entry: dict) -> Key:
    return entry["name"], entry.get("variant") or ""


def entry_digest(entry: dict, data: Dict[str, dict]) -> str:
    """A short hash of what a worker rebuilds from an entry (its call, sample, scale and the
    values it tiles): a case's key holds it, so a changed manifest never passes for the same case."""
    from .sample import descriptors

    used = {d["data"]: data.get(d["data"]) for d in descriptors(entry["tree"]) if "data" in d}
    text = json.dumps({"call": entry["call"], "tree": entry["tree"], "scale": entry["scale"], "data": used},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Manifest:
    path: Path
    header: dict
    entries: Dict[Key, dict]
    left_out: List[dict]
    data: Dict[str, dict]
    sha256: str
    digests: Dict[Key, str] = field(default_factory=dict)

    def entry(self, name: str, variant: str) -> Optional[dict]:
        return self.entries.get((name, variant))

    def names(self) -> List[str]:
        return sorted({name for name, _ in self.entries} | {item["name"] for item in self.left_out})

    def record(self) -> dict:
        """What a report keeps of its manifest: where, which, and its hash."""
        return {"path": str(self.path), "sha256": self.sha256, **{k: self.header.get(k) for k in
                ("torch", "dtype", "device", "size_target", "seed", "built_at")},
                "entries": len(self.entries), "left_out": len(self.left_out)}


def load(path: Path) -> Manifest:
    """Read and check a manifest; anything else is one UsageError naming the fix."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise _corrupt(path, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _corrupt(path, f"not an {FORMAT} file")
    if data.get("version") != VERSION:
        raise _corrupt(path, f"format version {data.get('version')!r}, this opbench reads {VERSION}")
    try:
        entries = {key_of(e): e for e in data["entries"]}
        for entry in entries.values():
            _check_entry(entry, data["data"])
        left_out = [dict(item, reason=str(item["reason"])) for item in data["left_out"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _corrupt(path, f"a malformed entry ({type(exc).__name__}: {exc})") from None
    header = {k: v for k, v in data.items() if k not in ("entries", "left_out", "data")}
    manifest = Manifest(path, header, entries, left_out, data["data"], hashlib.sha256(raw).hexdigest())
    manifest.digests = {key: entry_digest(entry, manifest.data) for key, entry in entries.items()}
    return manifest


def _check_entry(entry: dict, data: dict) -> None:
    from .sample import descriptors

    for field_ in ("call", "tree", "scale", "category", "backward"):
        if field_ not in entry:
            raise KeyError(f"{entry.get('name')!r} has no {field_!r}")
    for desc in descriptors(entry["tree"]):
        if "data" in desc and desc["data"] not in data:
            raise ValueError(f"{entry['name']!r} names data {desc['data']!r} that the file lacks")


def _corrupt(path: Path, why: str) -> UsageError:
    return UsageError(f"manifest {path} is unreadable ({why}); delete it to have it rebuilt, "
                      "or pass another --manifest")


def check_matches(manifest: Manifest, dtype: str, device: str) -> None:
    """A manifest given by --manifest must be for this run's dtype and device kind."""
    for name, want in (("dtype", dtype), ("device", device.split(":")[0])):
        have = str(manifest.header.get(name, "")).split(":")[0]
        if have != want:
            raise UsageError(f"manifest {manifest.path} was built for {name} {have}, this run asks for {want}; "
                             f"pass --{name} {have} or another --manifest")


# --------------------------------------------------------------------------- building


def build(path: Path, dtype: str, device: str, size_target: int, seed: int,
          only: Optional[List[Key]] = None, python: Optional[str] = None,
          say: Callable[[str], None] = lambda text: None, names: Optional[List[str]] = None) -> Manifest:
    """Run discovery (restarting it past an entry that kills it) and write the manifest; `only`
    (name, variant) keys, or `names` (--ops patterns), limit it to those entries."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    progress = path.with_name(path.name + ".progress.jsonl")
    progress.unlink(missing_ok=True)
    started = time.perf_counter()
    entries: Dict[Key, dict] = {}
    left_out: Dict[Key, dict] = {}
    while True:
        done = list(entries) + list(left_out)
        command = [python or sys.executable, "-m", DISCOVER_MODULE, "--dtype", dtype, "--device", device,
                   "--size-target", str(size_target), "--seed", str(seed), "--progress", str(progress),
                   "--skip", json.dumps(done)] + (["--only", json.dumps(only)] if only is not None else []) \
            + (["--names", json.dumps(names)] if names else [])
        status, stderr = _run_discovery(command, progress)
        last = _read_progress(progress, entries, left_out)
        if status == 0:
            break
        if last is None:
            raise UsageError(f"operator discovery failed before its first entry ({stderr}); "
                             "check that torch and expecttest import (pip install -e '.[torch]')")
        why = "timed out" if status is None else f"exit status {status}" if status > 0 else f"signal {-status}"
        left_out[last] = {"name": last[0], "variant": last[1], "category": None,
                          "reason": f"killed the discovery process ({why}); {stderr}".strip("; ")}
        say(f"discovery: {last[0]} {last[1]} {why}; going on past it")
    progress.unlink(missing_ok=True)
    document = {"format": FORMAT, "version": VERSION, "torch": torch_version(), "dtype": dtype, "device": device,
                "size_target": size_target, "seed": seed, "names": names, "built_at": _now(),
                "build_s": round(time.perf_counter() - started, 1), "python": sys.version.split()[0],
                "entries": [], "left_out": sorted(left_out.values(), key=lambda i: (i["name"], i["variant"])), "data": {}}
    for key in sorted(entries):
        entry = dict(entries[key])
        document["data"].update(entry.pop("data", {}))
        document["entries"].append(entry)
    from benchcore.report.model import write_text_atomic

    write_text_atomic(path, json.dumps(document, allow_nan=False, separators=(",", ":")) + "\n", overwrite=True)
    return load(path)


def _run_discovery(command: List[str], progress: Path) -> Tuple[Optional[int], str]:
    """(exit status, or None when an entry ran past ENTRY_TIMEOUT_S; last line of stderr)."""
    import tempfile

    with tempfile.TemporaryFile(mode="w+") as err:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=_discovery_env())
        seen, last_change = -1, time.monotonic()
        while True:
            try:
                status: Optional[int] = process.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                size = progress.stat().st_size if progress.exists() else 0
                if size != seen:
                    seen, last_change = size, time.monotonic()
                elif time.monotonic() - last_change > ENTRY_TIMEOUT_S:
                    process.kill()
                    process.wait()
                    status = None
                    break
        err.seek(0)
        lines = [line for line in err.read().splitlines() if line.strip()]
    return status, (lines[-1][:300] if lines and status != 0 else "")


def _discovery_env() -> Dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _read_progress(progress: Path, entries: Dict[Key, dict], left_out: Dict[Key, dict]) -> Optional[Key]:
    """Fold the progress lines into entries/left_out; the key started last without a result."""
    pending: Optional[Key] = None
    if not progress.exists():
        return None
    for line in progress.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if "start" in record:
            pending = tuple(record["start"])
        elif "entry" in record:
            entries[key_of(record["entry"])] = record["entry"]
            pending = None
        elif "left_out" in record:
            left_out[key_of(record["left_out"])] = record["left_out"]
            pending = None
    progress.unlink()
    return pending


def _now() -> str:
    from benchcore.execute.environment import now_iso

    return now_iso()


def require_expecttest() -> None:
    """Discovery reads OpInfo (torch.testing._internal), which imports expecttest: a small extra
    (in `.[torch]`) that only building a manifest needs; a sweep on a given manifest runs without it."""
    import importlib.util

    if importlib.util.find_spec("expecttest") is None:
        raise UsageError("discovering torch's operators reads OpInfo, which needs expecttest: pip install expecttest "
                         "(or pip install -e '.[torch]'), or pass --manifest with a manifest built where it is installed")


def obtain(path: Optional[str], dtype: str, device: str, size_target: int, seed: int,
           say: Callable[[str], None], names: Optional[List[str]] = None) -> Manifest:
    """--manifest PATH (read it; build it there if it does not exist), else the cached one
    for this torch, dtype, device kind, size target and seed (built on first use).

    `names` (a sweep's --ops patterns): where no full cached manifest exists, only the entries
    they name are discovered, into a cached manifest of their own: a first run on a GPU, where
    discovering all ~660 entries takes long, then costs what its operators cost."""
    target = Path(path).expanduser() if path else cache_path(dtype, device, size_target, seed)
    if not target.exists() and names and not path:
        digest = hashlib.sha256(json.dumps(sorted(names)).encode()).hexdigest()[:10]
        target = target.with_name(f"{target.stem}-ops-{digest}.json")
    if target.exists():
        manifest = load(target)
        check_matches(manifest, dtype, device)
        return manifest
    require_expecttest()
    which = f"the operators matching --ops {','.join(names)}" if names and not path else "PyTorch operators"
    say(f"discovering {which} for {dtype} on {device} (size target {size_target}); "
        f"once per torch version, cached in {target}")
    return build(target, dtype, device, size_target, seed, names=names if not path else None, say=say)
