"""A framework-free executor for the instruction engine's tests: a Workload of pure-Python work
whose size is params["n"] (forward: a sum; backward: a sorted copy), counted under valgrind
in seconds instead of the minutes a framework's import takes there."""

from benchcore.execute.valgrind import Collector
from benchcore.measure.case import Workload
from benchcore.measure.instructions import count_workload
from benchcore.measure.runner import RunSettings


def execute(spec, options):
    n = int(spec.params["n"])
    values = list(range(n, 0, -1))
    workload = Workload(forward=lambda: sum(values), backward=lambda _output: sorted(values))
    return count_workload(workload, RunSettings.from_dict(options["settings"]), Collector.in_worker())
