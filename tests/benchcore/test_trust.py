"""The views' opening section on how far to trust the figures, and their section on steady
state and two speeds (rnnbench's Markdown, from a synthetic report)."""

from benchcore.measure.case import CaseSpec
from benchcore.measure.measurement import Measurement
from benchcore.report.model import CaseResult, Report
from benchcore.views.trust import section
from rnnbench.views import markdown_report


def rounds(levels, n=12):
    return Measurement.from_rounds([[level * (1 + 0.001 * i) for i in range(n)] for level in levels])


def steady(*extra, reached=True):
    return [{"warmup_calls": 5 + e, "extra_warmup": e, "reached": reached, "reason": None if reached else "why"}
            for e in extra]


ADVICE = {"system": {"start": {"advice": [{"check": "load average", "found": "8.2 over the last minute"},
                                          {"check": "ASLR", "found": "on"}]}}}


def test_the_section_says_threads_warmup_spread_two_speeds_and_the_machine():
    lines = section([rounds([1.0, 1.1, 1.05]), rounds([0.005, 0.012, 0.005])],
                    [{"steady": steady(0, 2, 0)}], {"threads": 1, "rounds": {"warmup_per_round": 5}}, ADVICE)
    text = "\n".join(lines)
    assert lines[0] == "## How far to trust these figures"
    assert "Threads: 1 per framework (`--threads`)" in text
    assert "Warmup: 5 call(s) in every worker process before its timed calls; 1 of 3 case-rounds" in text
    assert "every case-round reached steady state" in text
    assert "Rounds: 3 fresh processes per case; the round medians of a quantity lie 10% apart" in text
    assert "1 quantity runs at two speeds" in text
    assert "Machine: not quiet at the start — load average: 8.2 over the last minute." in text
    assert "ASLR" not in text
    assert "CPU contention" not in text  # no records: a report written before they existed


def test_the_section_says_how_long_the_workers_waited_for_a_cpu():
    records = [{"cpu_wait_share": w, "others_cpus": 1.5, "load_1min": 3.0} for w in (0.02, 0.04, 0.6)]
    text = "\n".join(section([rounds([1.0, 1.1, 1.05])], [{"contention": records}], {}, {}))
    assert ("CPU contention: the workers' threads waited for a CPU 4% of their time (median case-round; 90th "
            "percentile 49%) while other processes used 1.5 CPUs; at such a load a call can be preempted") in text


def test_the_section_says_how_much_cpu_time_the_hypervisor_took():
    # the quickstart of 2026-12-03 10:43: no thread waited, no other process ran, and the
    # hypervisor took a seventh of the VM's time in one case-round of ten
    quiet = [{"cpu_wait_share": 0.0, "others_cpus": 0.0, "steal_share": s, "load_1min": 0.4}
             for s in (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1, 0.33)]
    text = "\n".join(section([rounds([1.0, 1.1, 1.05])], [{"contention": quiet}], {}, {}))
    assert ("while other processes used 0.0 CPUs; the hypervisor took 0% of the VM's CPU time (steal: median "
            "case-round; 90th percentile 12%); at such a load a call can be preempted") in text
    calm = [dict(r, steal_share=0.0) for r in quiet]
    text = "\n".join(section([rounds([1.0, 1.1, 1.05])], [{"contention": calm}], {}, {}))
    assert "steal: median case-round; 90th percentile 0%)." in text and "preempted" not in text


def test_without_threads_or_rounds_the_section_says_what_is_missing():
    text = "\n".join(section([Measurement([1.0, 1.1])], [{}], {}, {"system": {"start": {"advice": []}}}))
    assert "Threads: not set" in text and "pass `--threads N`" in text
    assert "Rounds: one process per case" in text and "Machine: no warning" in text


def test_rnnbench_markdown_opens_with_trust_and_shows_two_speeds_as_bimodal():
    metrics = {"forward": rounds([0.005, 0.012, 0.005]).to_dict(), "backward": rounds([2.0, 2.1, 2.05]).to_dict(),
               "steady": steady(0, 0, 0, reached=True)[:2] + [{"warmup_calls": 5, "extra_warmup": 0,
                                                               "reached": False, "reason": "why"}]}
    result = CaseResult(CaseSpec("rnnbench", "jit", {}), "ok", metrics)
    report = Report(suite="rnnbench", environment=ADVICE, results=[result],
                    settings={"threads": 1, "rounds": {"rounds": 3, "warmup_per_round": 5}})
    md = markdown_report(report)
    assert md.index("## How far to trust these figures") < md.index("| Runner")
    (row,) = [line for line in md.splitlines() if line.startswith("| jit")]
    assert "| bimodal" in row
    assert "- `jit`: not steady in round(s) 3: why" in md
    assert "- `jit` forward: bimodal across processes: 5.03 µs and 12.1 µs (round 2 slow)" in md


def test_the_sweep_line_says_the_sections_figures_in_one_line():
    from benchcore.suite import Suite
    from benchcore.views.trust import sweep_line

    def case(name, levels, steady_records, steal):
        metrics = {"forward": rounds(levels).to_dict(), "steady": steady_records,
                   "contention": [{"cpu_wait_share": 0.0, "others_cpus": 0.0, "steal_share": steal}] * len(levels)}
        return CaseResult(CaseSpec("rnnbench", name, {}), "ok", metrics)

    results = [case("a", [1.0, 1.1, 1.05], steady(0, 0, 0), 0.0), case("b", [0.005, 0.012, 0.005], steady(0, 0, 0), 0.0),
               case("c", [2.0, 2.4, 2.2], steady(0, 1, 0, reached=False), 0.2)]
    line = sweep_line(results, Suite("rnnbench"), "rnnbench")
    assert line == ("rnnbench: trust: 3 rounds, round medians 14% apart (median; 90th percentile 17%); 1 quantity at "
                    "two speeds; 3 case-rounds not steady; the hypervisor took 20% of the CPU time (steal, 90th "
                    "percentile case-round) (the Markdown report: *How far to trust these figures*)")
    one_round = [CaseResult(CaseSpec("rnnbench", "a", {}), "ok", {"forward": Measurement([1.0, 1.1]).to_dict()})]
    assert sweep_line(one_round, Suite("rnnbench"), "rnnbench") is None
