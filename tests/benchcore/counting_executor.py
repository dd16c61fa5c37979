"""An executor for warmup tests: rnnbench's real `py` LSTM runner at tiny sizes, timed by
benchcore's runner with the round's settings, its forward calls counted in the worker."""

from benchcore.measure.runner import RunSettings, run_workload
from benchcore.measure.timers import timer_for
from rnnbench import executor


def execute(spec, options):
    settings = RunSettings.from_dict(options.get("settings") or {})
    with executor.prepared(spec) as prep:
        workload = prep.workload
        calls = []
        real_forward = workload.forward

        def counted():
            calls.append(1)
            return real_forward()

        workload.forward = counted
        outcome = run_workload(workload, settings, timer_for("cpu", workload.sync))
    return {**outcome.to_dict(), "forward_calls": len(calls)}
