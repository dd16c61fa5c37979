"""Join the reports of a sharded sweep (`--shard K/N`) into one report; or a timing report and a
counted one of the same cases into a report of both kinds (`merge --both`, `merge_kinds`).

A sweep split over machines or processes must come back as one report that reads like the
unsharded run. Joining is only safe when the shards are parts of the *same* sweep, so anything
that says otherwise — another suite, other settings, another shard count, a shard twice, a case
in two shards — is refused with one line naming it. Each shard keeps its own environment
(shards may have run on different machines) under extra["shards"]; the top-level environment
is the first shard's, and the timing-relevant keys on which shards differ are listed.

What a suite derives from its whole result list (its result order, opbench's operators
without a benchmark) cannot be joined shard by shard: the suite's merge command passes a
finisher that rebuilds it from the merged results, and the per-shard copies of the extras it
rebuilt are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence

from benchcore.errors import UsageError
from benchcore.measure import reference
from benchcore.measure.instructions import COUNT_KEYS, any_counted
from benchcore.report.efficiency import ROOFS
from benchcore.report.identity import METHOD_SETTINGS, environment_differences
from benchcore.report.model import CaseResult, Report

#: function(merged Report) → the Report as the suite's unsharded run would write it (result
#: order, extras derived from the results).
Finisher = Callable[[Report], Report]

#: environment keys that say how a figure was taken, which differ between a timing and a counted
#: report of one build by design (with the thread settings: counts run one thread; a counted sweep
#: never holds the idle CPUs polling, which counts do not depend on: benchcore.execute.idle)
KIND_KEYS = ("engine", "timer", "cpu_idle.held")

#: settings that legitimately differ between shards of one sweep
SHARD_VARIANT_SETTINGS = ("shard", "output", "output_file", "checkpoint", "resume", "argv", "command_line")


@dataclass(frozen=True)
class ShardInfo:
    index: int  # 1-based, as on the command line
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(value, source: str = "report") -> ShardInfo:
    """Accept "K/N" or {"index": K, "count": N} (K is 1-based)."""
    index = count = None
    if isinstance(value, str) and value.count("/") == 1:
        left, right = value.split("/")
        try:
            index, count = int(left), int(right)
        except ValueError:
            pass
    elif isinstance(value, dict):
        index, count = value.get("index"), value.get("count")
    if not (isinstance(index, int) and isinstance(count, int) and 1 <= index <= count):
        raise UsageError(f"{source} has no valid shard in its settings (got {value!r}); merge only reports written with --shard K/N")
    return ShardInfo(index, count)


def _sources(reports: Sequence[Report], sources: Optional[Sequence[str]]) -> List[str]:
    if sources is not None and len(sources) == len(reports):
        return [str(s) for s in sources]
    return [f"report {i + 1}" for i in range(len(reports))]


def merge(reports: List[Report], sources: Optional[Sequence[str]] = None, allow_partial: bool = False,
          finish: Optional[Finisher] = None) -> Report:
    """One report from shards of one sweep; `sources` names them in messages (e.g. file paths).

    Missing shards (e.g. 1/3 and 3/3 only) are refused unless allow_partial; a partial merge
    records the missing indices in extra["merge"]["missing_shards"], so it is never mistaken
    for the whole sweep. `finish`, the suite's finisher, rebuilds what the suite derives from
    all its results; without one, results stay in shard order.
    """
    if not reports:
        raise UsageError("nothing to merge; pass the JSON reports of the shards")
    names = _sources(reports, sources)
    shards = [parse_shard(r.settings.get("shard"), name) for r, name in zip(reports, names)]
    _check_consistent(reports, shards, names)
    order = sorted(range(len(reports)), key=lambda i: shards[i].index)
    count = shards[0].count
    missing = sorted(set(range(1, count + 1)) - {s.index for s in shards})
    if missing and not allow_partial:
        listed = ", ".join(f"{k}/{count}" for k in missing)
        raise UsageError(f"shards {listed} are missing; pass them too, or --allow-partial to merge only these")

    results: List[CaseResult] = []
    seen: Dict[str, str] = {}
    for i in order:
        for result in reports[i].results:
            key = result.spec.key
            if key in seen:
                raise UsageError(f"case {key} is in both {seen[key]} and {names[i]}; shards must not overlap")
            seen[key] = names[i]
            results.append(result)

    first = reports[order[0]]
    # the whole sweep: no shard, and no one shard's output path or command line
    settings = {**first.settings, **{k: None for k in SHARD_VARIANT_SETTINGS if k in first.settings}, "shard": None}
    extra, per_shard_extra = _merge_extras([reports[i] for i in order])
    roofs = _merged_roofs([reports[i] for i in order], [shards[i] for i in order])
    if roofs:  # one block for the Headroom section, rather than one per shard
        extra[ROOFS] = roofs
        for slot in per_shard_extra:
            slot.pop(ROOFS, None)
    differences = [environment_differences(first, reports[i]) for i in order[1:]]
    extra["shards"] = [
        {"shard": str(shards[i]), "source": names[i], "cases": len(reports[i].results),
         "environment": reports[i].environment, **({"extra": per_shard_extra[j]} if per_shard_extra[j] else {})}
        for j, i in enumerate(order)
    ]
    extra["merge"] = {
        "shard_count": count,
        "merged_shards": [shards[i].index for i in order],
        "missing_shards": missing,
        "environment_differs": sorted({d["key"] for diff in differences for d in diff}),
    }
    merged = Report(suite=first.suite, environment=_merged_environment([reports[i] for i in order]),
                    settings=settings, results=results, extra=extra, schema_version=first.schema_version)
    return _finished(merged, finish) if finish else merged


def _merged_environment(reports: Sequence[Report]) -> dict:
    """The first shard's environment, with the machine reference of all shards joined (each
    shard's rounds are more rounds of the machine; see benchcore.measure.reference)."""
    environment = dict(reports[0].environment)
    system = environment.get("system")
    if isinstance(system, dict) and "reference" in system:
        blocks = [((r.environment or {}).get("system") or {}).get("reference") for r in reports]
        environment["system"] = dict(system, reference=reference.merged(blocks))
    return environment


def _finished(merged: Report, finish: Finisher) -> Report:
    """The suite's finisher applied; a shard keeps only the extras that were not rebuilt."""
    report = finish(merged)
    for shard in report.extra.get("shards", []):
        kept = {k: v for k, v in shard.pop("extra", {}).items() if k not in report.extra}
        if kept:
            shard["extra"] = kept
    return report


def _check_consistent(reports: Sequence[Report], shards: Sequence[ShardInfo], names: Sequence[str]) -> None:
    first, first_name = reports[0], names[0]
    seen: Dict[int, str] = {}
    for report, shard, name in zip(reports, shards, names):
        if report.suite != first.suite:
            raise UsageError(f"{name} holds a {report.suite} report but {first_name} holds {first.suite}; "
                             "merge shards of one suite")
        if shard.count != shards[0].count:
            raise UsageError(f"{name} is shard {shard} but {first_name} is shard {shards[0]}; shards of one sweep share N")
        if shard.index in seen:
            raise UsageError(f"{seen[shard.index]} and {name} are both shard {shard}; pass each shard once")
        seen[shard.index] = name
        differing = _differing_settings(first.settings, report.settings)
        if differing:
            shown = "; ".join(f"{k}: {first.settings.get(k)!r} vs {report.settings.get(k)!r}" for k in differing)
            raise UsageError(f"{name} was run with other settings than {first_name} ({shown}); merge shards of one sweep")


def _differing_settings(a: dict, b: dict) -> List[str]:
    keys = (set(a) | set(b)) - set(SHARD_VARIANT_SETTINGS)
    return sorted(k for k in keys if a.get(k) != b.get(k))


def _merged_roofs(reports: Sequence[Report], shards: Sequence[ShardInfo]) -> Dict[str, dict]:
    """The shards' roofs blocks (extra.roofs, per framework) as one: where every shard read the
    same roofs (one machine, one cache) one block, with what obtaining them cost all shards;
    where they differ (shards on several machines), each shard's under "framework (shard K/N)",
    as each case's efficiency was read against its own shard's."""
    merged: Dict[str, dict] = {}
    frameworks = []
    for report in reports:
        frameworks += [f for f in (report.extra or {}).get(ROOFS) or {} if f not in frameworks]
    for framework in frameworks:
        found = [(shard, ((r.extra or {}).get(ROOFS) or {}).get(framework)) for r, shard in zip(reports, shards)]
        found = [(shard, block) for shard, block in found if isinstance(block, dict)]
        if all(block.get("roofs") == found[0][1].get("roofs") for _shard, block in found):
            sources = sorted({str(block.get("source")) for _shard, block in found})
            merged[framework] = dict(found[0][1], source=" and ".join(sources),
                                     obtain_s=sum(block.get("obtain_s") or 0.0 for _shard, block in found),
                                     note=next((b["note"] for _s, b in found if b.get("note")), None))
        else:
            merged.update({f"{framework} (shard {shard})": block for shard, block in found})
    return merged


def _merge_extras(reports: Sequence[Report]):
    """Extras equal in every shard that has them are kept once; the rest stay per shard."""
    keys = []
    for r in reports:
        keys += [k for k in r.extra if k not in keys and k not in ("shards", "merge")]
    common, per_shard = {}, [dict() for _ in reports]
    for key in keys:
        values = [r.extra[key] for r in reports if key in r.extra]
        if all(v == values[0] for v in values):
            common[key] = values[0]
        else:
            for slot, r in zip(per_shard, reports):
                if key in r.extra:
                    slot[key] = r.extra[key]
    return common, per_shard


# --------------------------------------------------------------------------- a report of both kinds


def merge_kinds(reports: List[Report], timed_by: Callable[[CaseResult], bool],
                sources: Optional[Sequence[str]] = None) -> Report:
    """One report holding a timing sweep's and a counted sweep's figures of the same cases
    (`merge --both`): each case the timing report's result, with the counted result's counts
    added (instructions.COUNT_KEYS), so `compare` judges it both on time and on counts.

    Counts and times of one case only belong together when they measured the same build: the
    two reports' environments must agree but for thread settings (counts run one thread), the
    engine and the timer (KIND_KEYS). A case measured by one side only, or failed on one, is kept as that side has it
    and listed under extra["kinds"]; nothing is dropped. `timed_by` is the suite's test of a
    result that holds timings (Suite.timings)."""
    names = _sources(reports, sources)
    timed, counted = _kinds(reports, names, timed_by)
    (t_name, t), (c_name, c) = timed, counted
    by_key = {r.spec.key: r for r in c.results}
    results, not_counted = [], []
    for result in t.results:
        other = by_key.pop(result.spec.key, None)
        if result.ok and other is not None and other.ok:
            counts = {k: other.metrics[k] for k in COUNT_KEYS if k in other.metrics}
            results.append(replace(result, metrics={**result.metrics, **counts}))
            continue
        results.append(result)
        not_counted.append({"key": result.spec.key, "status": "absent" if other is None else other.status,
                            **({"error": other.error} if other is not None and other.error else {})})
    results += list(by_key.values())
    settings = {**t.settings, "valgrind": c.settings.get("valgrind"),
                "counted": {k: v for k, v in c.settings.items() if k != "valgrind"}}
    extra = dict(t.extra, kinds={"timed": t_name, "counted": c_name, "counted_environment": c.environment,
                                 "not_counted": not_counted, "not_timed": sorted(by_key)})
    return Report(suite=t.suite, environment=t.environment, settings=settings, results=results, extra=extra,
                  schema_version=t.schema_version)


def _kinds(reports: Sequence[Report], names: Sequence[str], timed_by) -> tuple:
    """((name, timing report), (name, counted report)), or a UsageError naming what is wrong."""
    if len(reports) != 2:
        raise UsageError(f"merge --both joins two reports, a timing one and a counted one (--engine instructions) of "
                         f"the same cases; got {len(reports)}")
    pairs = list(zip(names, reports))
    for name, report in pairs:
        if report.settings.get("shard"):
            raise UsageError(f"{name} is shard {report.settings['shard']} of a sweep; merge its shards first "
                             "(`merge SHARD.json ...`), then merge --both the whole reports")
        if any_counted(report.results) and any(r.ok and timed_by(r) for r in report.results):
            raise UsageError(f"{name} holds both timings and counts already; merge --both a timing report with a "
                             "counted one")
    counted = [pair for pair in pairs if any_counted(pair[1].results)]
    if len(counted) != 1:
        which = "both hold" if counted else "neither holds"
        raise UsageError(f"{names[0]} and {names[1]}: {which} instruction counts; merge --both a timing report with "
                         "one of the same cases measured with --engine instructions")
    timed = next(pair for pair in pairs if pair is not counted[0])
    _check_same_build(timed, counted[0])
    return timed, counted[0]


def _check_same_build(timed: tuple, counted: tuple) -> None:
    if timed[1].suite != counted[1].suite:
        raise UsageError(f"{timed[0]} holds a {timed[1].suite} report but {counted[0]} holds {counted[1].suite}; "
                         "merge --both reports of one suite")
    differing = [d for d in environment_differences(timed[1], counted[1]) if "thread" not in d["key"].lower()
                 and d["key"] not in (*METHOD_SETTINGS, *KIND_KEYS)]
    if differing:
        shown = "; ".join(f"{d['key']}: {d['base']!r} vs {d['new']!r}" for d in differing[:3])
        raise UsageError(f"{timed[0]} and {counted[0]} measured different environments ({shown}); a report of both "
                         "kinds joins the timings and counts of one build: measure both with the same interpreter")
