"""The machine reference: its probes per round, its real workload, and the block a report keeps."""

from benchcore.measure import reference
from benchcore.measure.case import CaseSpec
from benchcore.measure.combine import combine_metrics
from benchcore.measure.measurement import Measurement
from benchcore.report.model import CaseResult


def test_a_round_gets_one_probe_per_cases_per_probe_cases_and_at_least_one():
    assert len(reference.specs(3)) == 1
    probes = reference.specs(3 * reference.CASES_PER_PROBE + 1)
    assert [p.params["probe"] for p in probes] == [0, 1, 2] and len({p.key for p in probes}) == 3
    assert all(reference.is_reference(p) for p in probes) and not reference.is_reference(CaseSpec("opbench", "exp"))


def test_the_real_workload_times_compute_and_memory_in_ms():
    metrics = reference.execute(reference.specs(1)[0], {})
    for part in reference.PARTS:
        m = Measurement.from_dict(metrics[part])
        assert m.n == reference.SETTINGS.runs and m.median > 0


def probe(k, rounds, status="ok", error=None):
    spec = reference.specs((k + 1) * reference.CASES_PER_PROBE)[k]
    per_round = [{part: Measurement([1.0 + r, 1.1 + r]).to_dict() for part in reference.PARTS} for r in range(rounds)]
    return CaseResult(spec, status, combine_metrics(per_round) if status == "ok" else {}, error=error)


def test_every_probe_of_every_round_is_a_round_of_the_block():
    block = reference.block([probe(0, 3), probe(1, 3), probe(2, 1, "crashed", "worker killed by SIGKILL")])
    assert block["status"] == "ok" and block["probes"] == 3 and block["error"] == "worker killed by SIGKILL"
    for part in reference.PARTS:
        assert Measurement.from_dict(block[part]).round_count == 6
    failed = reference.block([probe(0, 1, "failed", "MemoryError")])
    assert failed["status"] == "failed" and failed["compute"] is None
    assert reference.block([]) is None
