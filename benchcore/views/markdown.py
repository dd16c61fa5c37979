"""Markdown views of what benchcore itself produces: a Comparison (the suites own their reports' views).

Every view is built from the in-memory object that the JSON also comes from, so the two never
disagree.
"""

from __future__ import annotations

from typing import Optional

from benchcore.compare.answer import short_reason
from benchcore.compare.drift import MIN_QUANTITIES
from benchcore.compare.verdicts import VERDICTS, Comparison, MetricComparison
from benchcore.measure.measurement import percent_change
from benchcore.views import prose

#: what each basis means, for the note under a comparison's header
BASIS_NOTES = {
    "rounds": "*rounds*: each side timed in several worker processes; the figure is the median of the round "
              "medians, and the test (a t-test on log round medians, its variance moderated over all cases) counts "
              "each process once.",
    "one-process": "*one-process*: a report without rounds; the U test on one process's samples cannot separate "
                   "process noise from a change. Time both sides with `--rounds` (or use `ab`).",
    "threshold-only": "*threshold-only*: no raw samples on one side (e.g. opperf's averages); the verdict rests on "
                      "the threshold alone, without a significance test.",
}


def fmt_ms(value: Optional[float], spec: Optional[str] = None) -> str:
    """Times keep 4 significant digits with trailing zeros (1.000, 0.01230), whole ms past 1000."""
    if value is None:
        return "---"
    if spec is None:
        spec = ".0f" if abs(value) >= 1000 else "#.4g"
    return format(value, spec)


def _env_value(value) -> str:
    if value is None:
        return "---"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "(none)"
    return str(value)


def _env_values(base, new) -> tuple:
    """Both sides of an environment difference; two lists (build features, CPU flags) as what
    each holds that the other does not, so the row stays short (the JSON has both lists whole)."""
    if not (isinstance(base, list) and isinstance(new, list)):
        return _env_value(base), _env_value(new)
    shared = len(set(base) & set(new))
    return tuple(", ".join(str(x) for x in side if x not in other) + (f" (and {shared} in both)" if shared else "")
                 for side, other in ((base, new), (new, base)))


def _evidence(m: MetricComparison) -> str:
    """What the verdict rests on, in a table cell."""
    if m.basis == "rounds":
        return f"{m.rounds_base}v{m.rounds_new} rounds"
    if m.basis == "one-process":
        return f"{m.n_base}v{m.n_new} samples, 1 process"
    return "threshold only"


def _header(c: Comparison) -> list:
    out = [f"# Comparison ({c.suite})", ""]
    if c.base_source or c.new_source:
        out += [f"- base: `{c.base_source}`", f"- new: `{c.new_source}`"]
    out += [
        f"- effect threshold: {c.threshold * 100:g}%; significance level {c.alpha:g}",
        "- ratio = new / base; < 1 is faster",
        "- Base and New: each quantity's headline figure `median_ms`, the median of its round medians "
        "(docs/REPORT_FORMAT.md, *Headline figures*)",
    ]
    if c.gate is not None:
        g = c.gate
        failing = [f"{x['label']} ({x['slowdown_pct']:+.1f}%)" for x in g["slower"]] + \
                  [f"{x['label']} ({x['new_status']})" for x in g["broken"]] + \
                  ([f"the build's {g.get('build_wide_group') or 'sweep'} as a whole ({g['build_wide_slowdown_pct']:+.1f}%)"]
                   if g.get("build_wide_slowdown_pct") is not None else [])
        out += [f"- gate (--fail-above {g['fail_above_pct']:g}%): " + ("**passed**" if g["passed"] else
                f"**failed** — {', '.join(failing)}")]
    return out + [""]


def _basis_notes(c: Comparison) -> list:
    return [BASIS_NOTES[b] for b in c.bases] + ([""] if c.bases else [])


def _drift_section(c: Comparison) -> list:
    """What each group of quantities shared, and what of it was divided out before each was judged."""
    d = c.drift
    if d is None or (d.cases_ratio is None and d.reference_ratio is None):
        return []
    from tabulate import tabulate

    out = ["## Drift", "", d.reason + ".", ""]
    if d.reference_ratio is not None:
        out += [f"Machine reference: compute {percent_change(d.compute_ratio)}, memory {percent_change(d.memory_ratio)} "
                f"(together {percent_change(d.reference_ratio)}, 95% bounds {percent_change(d.reference_low)} to "
                f"{percent_change(d.reference_high)}).", ""]
    if d.groups:
        rows = [[g.name, g.quantities, percent_change(g.cases_ratio), percent_change(g.removed_ratio), g.basis,
                 percent_change(g.build_ratio), g.verdict or "---"] for g in d.groups]
        out += [tabulate(rows, ["Group", "Quantities", "Shift together (median)", "Divided out", "Basis",
                                "The build's own", "Verdict"], tablefmt="github", disable_numparse=True), ""]
        if any(" · " not in g.name for g in d.groups):
            out += [f"A category with fewer than {MIN_QUANTITIES} quantities of a phase is judged by that phase's "
                    "shift over all its quantities (the group named by the phase alone, or *all*).", ""]
    elif d.removed_ratio != 1.0:
        out += [f"Divided out of every case: {percent_change(d.removed_ratio)} ({d.basis}).", ""]
    if d.between_sweeps > 0:
        out += [f"Scatter between the sweeps beyond the rounds' errors: ±{d.between_sweeps * 100:.1f}% "
                "(added to every test on rounds).", ""]
    return out


def comparison_markdown(comparison: Comparison, chart_links: str = "") -> str:
    """The Markdown view of a Comparison (tables in GitHub style): the answer first, then the
    evidence (drift, summary, cases, counts) that a reader checks it against."""
    from tabulate import tabulate

    def table(rows, headers):
        return tabulate(rows, headers, tablefmt="github", disable_numparse=True)

    c = comparison
    out = _header(c)
    if c.answer is not None:
        out += ["## Answer", ""] + [row for line in c.answer.lines(limit=None) for row in prose.bullet(line)] + [""]
    out += _basis_notes(c) + _drift_section(c)
    if c.env_differences:
        out += ["## Environment differences", ""]
        if c.env_mismatch_allowed:
            out += ["Compared anyway (--allow-env-mismatch): timings may differ for these reasons.", ""]
        out += [table([[d["key"], *_env_values(d["base"], d["new"])] for d in c.env_differences],
                      ["Key", "Base", "New"]), ""]
    if c.cases or c.counts is None:
        out += _timed_sections(c, table)
    out += _efficiency_section(c, table)
    if c.counts is not None:
        from benchcore.views import count_comparison

        out += count_comparison.markdown(c.counts)
    for title, items in (("Only in base", c.only_in_base), ("Only in new", c.only_in_new)):
        if items:
            out += [f"## {title} ({len(items)})", ""]
            out += [table([[i["label"], i["status"]] for i in items], ["Case", "Status"]), ""]
    if c.unmeasured:
        out += [f"## Not measured on both sides ({len(c.unmeasured)})", ""]
        out += [table([[i["label"], i["reason"]] for i in c.unmeasured], ["Case", "Why"]), ""]
    if chart_links:
        out += [chart_links.rstrip(), ""]
    return "\n".join(out)


def _efficiency_section(c: Comparison, table) -> list:
    """Each case-phase's share of the machine's roof before and after (the JSON's `efficiency`
    has the rates and each side's reason where one is missing)."""
    if not any(row["base_percent_of_roof"] is not None or row["new_percent_of_roof"] is not None
               for row in c.efficiency):
        return []
    pct = lambda v: "---" if v is None else f"{v:.3g}%"  # noqa: E731
    rows = [[row["phase"], row["label"], pct(row["base_percent_of_roof"]), pct(row["new_percent_of_roof"]),
             fmt_ms(row["base_gb_per_s"], ".3g"), fmt_ms(row["new_gb_per_s"], ".3g"),
             fmt_ms(row["base_gflop_per_s"], ".3g"), fmt_ms(row["new_gflop_per_s"], ".3g")] for row in c.efficiency]
    return ["## Efficiency", "", "Each case-phase against its report's measured roofs (% of the roof: the time at the "
            "roof over the median), the phase first.", "",
            table(rows, ["Metric", "Case", "Base % of roof", "New % of roof", "Base GB/s", "New GB/s",
                         "Base GFLOP/s", "New GFLOP/s"]), ""]


def _timed_sections(c: Comparison, table) -> list:
    """The summary per category and the table of timed quantities (left out of a comparison
    judged on counts alone, where they would be empty)."""
    out = ["## Summary", ""]
    rows = [[s.category, s.cases, fmt_ms(s.geomean_ratio), percent_change(s.geomean_ratio)]
            + [s.counts[v] for v in VERDICTS] + [percent_change(s.median_detectable_ratio)] for s in c.summary]
    out += [table(rows, ["Category", "Cases", "Geomean ratio", "Change", *VERDICTS, "Detectable slowdown"]), ""]
    if any(s.median_detectable_ratio is not None for s in c.summary):
        out += ["*Detectable slowdown*: the median over the category's quantities of the smallest slowdown each "
                "catches 9 times in 10 (each quantity's own claim is its `detectable_ratio` in the JSON): a smaller one "
                "can hide in it. `same` means the change is established within the margin; `undecided` means neither "
                "that nor a change is, and says how many more rounds would decide it.", ""]
    out += ["## Cases", ""]
    if c.counts is not None and c.cases:
        out += ["Verdicts in this section rest on time; those under *Instruction counts* below rest on instruction "
                "counts of the same cases.", ""]
    rows = []
    for case in sorted(c.cases, key=lambda k: -(k.ratio or 0)):
        for m in case.metrics:
            why = short_reason(m, c.threshold) if m.verdict == "undecided" else ""  # the full reason: the JSON
            rows.append([case.label, case.category, m.metric, fmt_ms(m.base_ms), fmt_ms(m.new_ms),
                         fmt_ms(m.ratio, ".3f"), percent_change(m.judged_ratio), fmt_ms(m.p_value, ".3g"), m.verdict,
                         _evidence(m), why.replace("|", "\\|")])
    drifted = c.drift is not None and c.drift.removes_anything
    headers = ["Case", "Category", "Metric", "Base (ms)", "New (ms)", "Ratio",
               "Change vs machine" if drifted else "Change", "p", "Verdict", "Evidence", "Why undecided"]
    return out + [table(rows, headers) if rows else "No case measured in both reports.", ""]
