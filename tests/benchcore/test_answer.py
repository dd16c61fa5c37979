"""benchcore.compare.answer on synthetic reports: one line per changed quantity, the verdict line with
what the comparison could detect, the settings warning, short reasons."""

import numpy as np

from benchcore.compare.answer import answer, settings_differences, short_reason, times
from benchcore.compare.verdicts import compare
from benchcore.measure.case import CaseSpec
from benchcore.measure.measurement import Measurement
from benchcore.report.model import CaseResult, Report
from benchcore.suite import Suite

SUITE = Suite("opbench", category=lambda r: r.spec.params["category"])
ENV = {"python": "3.11", "cpu_model": "Test CPU", "cpu_count": 2}


def rounds_of(median, rounds=5, per_round=8, seed=0):
    rng = np.random.default_rng(seed)
    return Measurement.from_rounds([list(median * (1 + 0.003 * rng.standard_normal(per_round)))
                                    for _ in range(rounds)]).to_dict()


def case(op, variant, forward_ms, seed):
    params = {"op": op, "category": "binary", "variant": variant, "inputs": {}}
    metrics = {"forward": rounds_of(forward_ms, seed=seed), "backward": rounds_of(2 * forward_ms, seed=seed + 1)}
    return CaseResult(CaseSpec("opbench", op, params), "ok", metrics)


def report(ratios, settings=None, seed=0):
    """One case per ratio: its forward time is 1 ms × ratio, its backward 2 ms (unchanged)."""
    results = []
    for i, ratio in enumerate(ratios):
        r = case(f"op{i}", "(1024,1024)", ratio, seed + 10 * i)
        r.metrics["backward"] = rounds_of(2.0, seed=seed + 10 * i + 1)
        results.append(r)
    return Report("opbench", dict(ENV), dict(settings or {"warmup": 5, "runs": 20, "rounds": {"rounds": 5}}), results)


def test_times_says_how_many_times_slower_or_faster():
    assert times(1.71) == "1.71× slower (+71.0%)"
    assert times(0.8) == "1.25× faster (-20.0%)"


def test_one_line_per_changed_quantity_slowest_first_and_a_verdict():
    base = report([1.0] * 12)
    new = report([1.71, 0.8] + [1.0] * 10, seed=100)
    result = compare(base, new, SUITE, interleaved=True)
    a = answer(result, settings_differences(base, new))
    assert len(a.changes) == 2
    assert a.changes[0] == "op0 forward: 1.71× slower (+71.0%)"
    assert a.changes[1].startswith("op1 forward: 1.25× faster (-")
    same = sum(m.verdict == "same" for c in result.cases for m in c.metrics)
    undecided = sum(m.verdict == "undecided" for c in result.cases for m in c.metrics)
    assert same + undecided == 22 and same >= 18
    assert a.verdict.startswith(f"Verdict: 1 of 24 quantities slower, 1 faster, {same} the same within ±5%; "
                                f"{undecided} undecided; each quantity names the slowdown it catches 9 times in 10 (median +")
    assert a.warnings == []
    assert a.lines()[-1] == a.verdict


def test_settings_that_differ_are_a_warning():
    base = report([1.0] * 3, settings={"warmup": 1, "runs": 3, "rounds": {"rounds": 5}})
    new = report([1.0] * 3, settings={"warmup": 5, "runs": 20, "rounds": {"rounds": 5}}, seed=7)
    a = answer(compare(base, new, SUITE), settings_differences(base, new))
    assert a.settings_differences == [{"setting": "warmup", "base": 1, "new": 5},
                                      {"setting": "runs", "base": 3, "new": 20}]
    assert a.lines()[0] == ("warning: the two sides ran different settings (warmup 1 vs 5, runs 3 vs 20): "
                            "a difference may come from that alone")


def test_rnnbench_settings_are_read_where_rnnbench_keeps_them():
    base = Report("rnnbench", settings={"settings": {"warmup": 10, "runs": 100}, "fuser": "te"})
    new = Report("rnnbench", settings={"settings": {"warmup": 10, "runs": 20}, "fuser": "te"})
    assert settings_differences(base, new) == [{"setting": "runs", "base": 100, "new": 20}]


def test_nothing_compared_says_so():
    a = answer(compare(report([]), report([]), SUITE))
    assert a.verdict == "Verdict: nothing to compare: no case was measured in both reports."


def test_two_counted_reports_get_the_verdict_of_their_counts():
    """Counted reports time nothing: the verdict is their count verdicts' tally, not 'nothing to compare'."""
    from benchcore.compare.count_verdicts import CountComparison, CountVerdict

    c = compare(report([]), report([]), SUITE)
    c.counts = CountComparison(verdicts=[
        CountVerdict("k", "x", "forward", "Ir", 100.0, 90.0, 0.9, 0.05, "faster", [3, 3]),
        CountVerdict("k", "x", "backward", "Ir", 100.0, 100.0, 1.0, 0.05, "same", [3, 3], "new: lazy")])
    assert answer(c).verdict == ("Verdict on instruction counts: 0 of 2 quantities slower, 1 faster, 1 the same "
                                 "within their bands (1 non-repeatable, judged with their own spread); no case was "
                                 "timed on both sides")


def test_reasons_are_short_and_the_statistics_stay_in_the_json():
    base, new = report([1.0] * 12), report([1.71] + [1.0] * 11, seed=100)
    result = compare(base, new, SUITE, interleaved=True)
    for c in result.cases:
        for m in c.metrics:
            short = short_reason(m, result.threshold)
            assert len(short) <= 40 and len(m.reason) > len(short)
    slower = result.cases[0].metrics[0] if result.cases[0].label.startswith("op0") else None
    slower = slower or next(m for c in result.cases for m in c.metrics if m.verdict == "slower")
    assert short_reason(slower, result.threshold).startswith("q=")


# --------------------------------------------------------------------------- answers with counts


def _counted(c, *verdicts):
    """The comparison `c` with count verdicts (key, phase, ratio, verdict) on its cases' keys."""
    from benchcore.compare.count_verdicts import CountComparison, CountVerdict

    keys = {case.label: case.key for case in c.cases}
    c.counts = CountComparison(verdicts=[
        CountVerdict(keys.get(label, label), label, phase, "Ir", 1e6, 1e6 * ratio, ratio, 0.005, verdict, [3, 3])
        for label, phase, ratio, verdict in verdicts])
    return c


def test_counted_reports_get_one_line_per_changed_quantity_saying_it_rests_on_counts():
    c = _counted(compare(report([]), report([]), SUITE),
                 ("broadcast_add (1024,1024)", "forward", 3.2, "slower"),
                 ("relu (1024,1024)", "backward", 0.9, "faster"),
                 ("sum (1024,1024)", "forward", 1.001, "same"))
    a = answer(c)
    assert a.changes == ["broadcast_add (1024,1024) forward: +220.0% instructions (counted)",
                         "relu (1024,1024) backward: -10.0% instructions (counted)"]
    assert a.verdict.startswith("Verdict on instruction counts: 1 of 3 quantities slower, 1 faster, 1 the same")


def test_a_quantity_judged_on_time_and_on_counts_says_whether_they_agree():
    """merge --both: op0 slower on time and on counts (agree); op1 faster on time, counts the same
    (disagree); op2 the same on time, counts +2% within the 5% margin (agree) and op3 +30%
    (disagree); a time-only change says it rests on time."""
    base = report([1.0] * 12)
    new = report([1.71, 0.8] + [1.0] * 10, seed=100)
    c = _counted(compare(base, new, SUITE, interleaved=True),
                 ("op0", "forward", 1.6, "slower"), ("op1", "forward", 1.0, "same"),
                 ("op2", "forward", 1.02, "slower"), ("op3", "forward", 1.3, "slower"))
    verdicts = {case.label: case.metrics[0].verdict for case in c.cases}
    assert verdicts["op2"] == verdicts["op3"] == "same" and verdicts["op0"] == "slower"
    lines = {line.split(":")[0]: line for line in answer(c).changes}
    assert lines["op0 forward"] == ("op0 forward: 1.71× slower (+71.0%) (timed); +60.0% instructions (counted): "
                                    "they agree")
    assert lines["op1 forward"].startswith("op1 forward: 1.25× faster (-")
    assert lines["op1 forward"].endswith("(timed); instructions the same within ±0.50% (counted): they disagree")
    assert lines["op2 forward"] == ("op2 forward: the same within ±5% (timed); +2.0% instructions (counted): "
                                    "they agree")
    assert lines["op3 forward"].endswith("+30.0% instructions (counted): they disagree")
    assert len(lines) == 4  # quantities unchanged both ways get no line
    assert answer(c).changes[0].startswith("op0 forward")  # largest change first
    assert answer(c).verdict.endswith("on instruction counts: 3 of 4 quantities slower, 0 faster, 1 the same "
                                      "within their bands")


def test_time_undecided_leaves_the_answer_to_the_counts():
    from benchcore.compare.answer import quantity_line

    base, new = report([1.0] * 12), report([1.0] * 12, seed=100)
    m = compare(base, new, SUITE, interleaved=True).cases[0].metrics[0]
    m.verdict = "undecided"
    v = _counted(compare(report([]), report([]), SUITE), ("op0", "forward", 1.03, "slower")).counts.verdicts[0]
    assert quantity_line("op0", "forward", m, v, 0.05) == ("op0 forward: undecided on time; +3.0% instructions "
                                                            "(counted): the counts decide it")


def test_the_short_reason_of_an_undecided_quantity_says_what_would_decide_it():
    from benchcore.compare.verdicts import MetricComparison

    def undecided(rounds_to_decide):
        return MetricComparison("forward", 1.0, 1.1, 1.1, "undecided", "rounds", "median of round medians",
                                p_value=0.2, rounds_to_decide=rounds_to_decide, reason="change +10.0% not confirmed")

    assert short_reason(undecided(4), 0.05) == "about 4 more round(s) a side would decide it"
    assert short_reason(undecided(400), 0.05) == "more than 30 more rounds: count instructions"
    assert short_reason(undecided(None), 0.05) == "more rounds cannot decide it: use ab, or count instructions"


def test_the_verdict_says_what_the_counts_call_the_quantities_time_left_undecided():
    """ab --count-undecided: of the undecided quantities, those counted are tallied by their count
    verdict, those not counted are said; quantities decided on time are not in the tally."""
    base, new = report([1.0] * 4), report([1.71, 1.0, 1.0, 1.0], seed=100)
    c = compare(base, new, SUITE, interleaved=True)
    for case in c.cases[1:]:
        for m in case.metrics:
            m.verdict = "undecided"
    c = _counted(c, ("op1", "forward", 1.2, "slower"), ("op1", "backward", 1.0, "same"),
                 ("op2", "forward", 1.0, "same"), ("op2", "backward", 0.8, "faster"))
    assert c.cases[0].metrics[0].verdict == "slower"
    assert answer(c).verdict.endswith("; of the 6 undecided on time, the counts call 1 slower, 1 faster and 2 the same "
                                      "(2 not counted)")
    only_decided_counted = _counted(c, ("op0", "forward", 1.6, "slower"))
    assert "undecided on time" not in answer(only_decided_counted).verdict


def test_the_answer_in_markdown_keeps_its_words_within_the_prose_width():
    """The verdict line with its count tally runs past 200 characters: the Markdown wraps it as
    one bullet (continuation lines indented), every word kept in order."""
    from benchcore.views.markdown import comparison_markdown
    from benchcore.views.prose import WIDTH as PROSE_WIDTH

    base, new = report([1.0] * 4), report([1.71, 1.0, 1.0, 1.0], seed=100)
    c = _counted(compare(base, new, SUITE, interleaved=True), ("op1", "forward", 1.2, "slower"))
    c.answer = answer(c)
    assert len(c.answer.verdict) > PROSE_WIDTH
    md = comparison_markdown(c)
    section = md.split("## Answer\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert max(map(len, section)) <= PROSE_WIDTH and all(line.startswith(("- ", "  ")) for line in section)
    start = next(i for i, line in enumerate(section) if line.startswith("- Verdict: "))
    end = next((i for i in range(start + 1, len(section)) if section[i].startswith("- ")), len(section))
    assert end - start > 1 and " ".join(line[2:] for line in section[start:end]) == c.answer.verdict
