"""Contention: every worker records, per case and round, how long its threads waited for a CPU
and how busy other processes kept the machine; a bimodal quantity's report names the likely
cause of its two speeds from those records (docs/STEADY_STATE.md, *Why two speeds*)."""

import numpy as np

from benchcore.execute.worker import run_cases
from benchcore.measure.case import CaseSpec
from benchcore.measure.combine import combine_metrics
from benchcore.measure.measurement import Measurement
from benchcore.measure.modes import ACROSS, described, of
from opbench.suite import describe_modes

EXECUTOR = "tests.benchcore.contention_executor:execute"


def test_a_worker_records_the_time_its_case_waited_for_a_cpu():
    crowded, alone = run_cases([CaseSpec("test", "crowded", {}), CaseSpec("test", "alone", {"action": "sleep"})],
                               EXECUTOR, timeout_s=60)
    for result in (crowded, alone):
        assert result.status == "ok", result.error
        [record] = result.metrics["contention"]  # one record: this round's
        assert set(record) >= {"cpu_wait_share", "others_cpus", "steal_share", "load_1min"} and "reason" not in record
        assert 0 <= record["cpu_wait_share"] <= 1 and record["others_cpus"] >= 0 and 0 <= record["steal_share"] <= 1
    # two busy processes on one CPU: each waits for it about half the time (more on a busy machine)
    assert crowded.metrics["contention"][0]["cpu_wait_share"] > 0.3


def test_rounds_keep_one_contention_record_each():
    rounds = [{"contention": [{"cpu_wait_share": share, "others_cpus": 0.1, "load_1min": 1.0}]} for share in (0.1, 0.5)]
    combined = combine_metrics(rounds)
    assert [r["cpu_wait_share"] for r in combined["contention"]] == [0.1, 0.5] and "round_values" not in combined


def test_combined_rounds_name_the_cause_of_a_measurement_with_two_speeds():
    rng = np.random.default_rng(3)
    rounds = [{"forward": Measurement(list(level * (1 + 0.02 * rng.standard_normal(12)))).to_dict(),
               "contention": [{"cpu_wait_share": wait, "others_cpus": 1.0, "load_1min": 2.0}]}
              for level, wait in ((0.4, 0.02), (0.9, 0.5), (0.4, 0.03), (0.9, 0.45))]
    combined = combine_metrics(rounds)
    assert combined["forward"]["modes"]["rounds"] == [2, 4]
    assert combined["forward"]["modes"]["cause"].startswith("likely cause: CPU contention from other processes")


def levels(values, n=12, seed=0):
    rng = np.random.default_rng(seed)
    return Measurement.from_rounds([list(v * (1 + 0.02 * rng.standard_normal(n))) for v in values])


def records(waits, others):
    return [{"cpu_wait_share": w, "others_cpus": o, "load_1min": 1.0} for w, o in zip(waits, others)]


def test_slow_rounds_that_waited_for_a_cpu_are_named_cpu_contention():
    m = levels([0.005, 0.012, 0.005, 0.012])
    assert of(m).kind == ACROSS and of(m).rounds == (2, 4)
    data = described(m, records([0.02, 0.46, 0.03, 0.38], [0.1, 1.2, 0.2, 1.1]))
    assert data["cause"].startswith("likely cause: CPU contention from other processes (the slow rounds' threads "
                                    "waited for a CPU 42% of their time, the fast rounds' 2%; other processes used")
    assert data["text"].startswith("bimodal across processes: ") and data["text"].endswith(data["cause"])


def test_slow_rounds_the_hypervisor_stole_from_are_named_steal():
    # an idle guest: no thread waited, no other process ran; the host took the vCPUs in rounds 2 and 4
    stolen = [dict(r, steal_share=s) for r, s in zip(records([0.01] * 4, [0.05] * 4), (0.0, 0.3, 0.01, 0.25))]
    data = described(levels([0.005, 0.012, 0.005, 0.012]), stolen)
    assert data["cause"].startswith("likely cause: the hypervisor took the VM's CPUs (steal) (")
    assert "the hypervisor stole 28% and 0% of the CPUs' time" in data["cause"]
    # alike steal in every round is not the cause; a record without steal (an older report) skips the test
    alike = [dict(r, steal_share=0.2) for r in records([0.01] * 4, [0.05] * 4)]
    assert described(levels([0.005, 0.012, 0.005, 0.012]), alike)["cause"].startswith("not the machine's load")
    assert "hypervisor" not in described(levels([0.005, 0.012, 0.005, 0.012]), records([0.01] * 4, [0.05] * 4))["cause"]


def test_the_machine_record_parts_steal_from_busy_time(monkeypatch, tmp_path):
    from benchcore.measure import contention

    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 0 50 800 10 0 0 40 7 0\ncpu0 1 2 3\n")
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(stat if path == "/proc/stat" else path, *a, **k))
    assert contention._machine() == (150, 40, 1000)


def test_slow_rounds_that_ran_beside_busier_processes_without_waiting_are_named_their_load():
    data = described(levels([0.005, 0.012, 0.005, 0.012]), records([0.02, 0.03, 0.02, 0.02], [0.1, 1.0, 0.0, 0.9]))
    assert data["cause"].startswith("likely cause: other processes' load sharing the machine")


def test_slow_rounds_like_the_fast_ones_are_not_blamed_on_the_machine():
    data = described(levels([0.005, 0.012, 0.005, 0.012]), records([0.02, 0.03, 0.03, 0.02], [0.1, 0.2, 0.1, 0.1]))
    assert data["cause"].startswith("not the machine's load (") and data["cause"].endswith("cause unknown")


def test_rounds_that_all_waited_much_leave_the_machine_suspected_but_not_proven():
    # at a load of 12 on 2 CPUs every round's threads waited ~80%: the record cannot tell them apart
    data = described(levels([0.005, 0.012, 0.005, 0.012]), records([0.8, 0.8, 0.8, 0.8], [1.8, 1.8, 1.8, 1.8]))
    assert data["cause"].startswith("the machine was busy throughout (") and data["cause"].endswith("not proven")


def test_no_cause_without_a_record_for_every_round_and_no_modes_for_one_speed():
    m = levels([0.005, 0.012, 0.005, 0.012])
    assert "cause" not in described(m, None) and "cause" not in described(m, records([0.1] * 3, [0.1] * 3))
    assert described(levels([0.005, 0.0051, 0.005]), records([0.1] * 3, [0.1] * 3)) is None


def test_opbench_puts_the_two_speeds_and_their_cause_on_the_profiler_phase_it_reports():
    m = levels([0.005, 0.012, 0.005, 0.012])
    metrics = {"profiler": {"forward": {"per_call_ms": list(m.samples_ms), "round_sizes": list(m.round_sizes)},
                            "backward": {"per_call_ms": [0.007] * 48, "round_sizes": [12] * 4}},
               "contention": records([0.02, 0.45, 0.03, 0.40], [0.1, 1.2, 0.2, 1.1])}
    describe_modes(metrics)
    forward = metrics["profiler"]["forward"]["modes"]
    assert forward["kind"] == ACROSS and forward["rounds"] == [2, 4] and forward["cause"].startswith("likely cause: CPU")
    assert "modes" not in metrics["profiler"]["backward"]


def test_each_thread_is_read_through_a_kept_descriptor_that_follows_threads_coming_and_going():
    import os
    import threading
    import time

    from benchcore.measure import contention

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    tid = str(thread.native_id)
    first = contention._threads()
    assert tid in first and set(contention._SCHEDSTAT) == set(first)
    stop.set()
    thread.join()
    # join returns once the thread's Python code is done; the kernel drops the task a moment later
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/self/task/{tid}") and time.monotonic() < deadline:
        time.sleep(0.01)
    second = contention._threads()
    assert tid not in second and set(contention._SCHEDSTAT) == set(second)  # its descriptor closed
    main = str(threading.get_native_id())
    os.close(contention._SCHEDSTAT[main])
    contention._SCHEDSTAT[main] = os.open(os.devnull, os.O_RDONLY)  # as a thread's whose tid a new one took
    run, _ = contention._threads()[main]
    assert run >= second[main][0] > 0  # read anew from the thread's own file
