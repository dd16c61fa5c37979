"""opbench's MXNet executor with a planted change: the cases options["planted"] names (by case
key) run with the leading dimension of their inputs grown by options["planted_factor"], under
the same case key, so a report holds more work for an unchanged case (the instruction engine's
tests and lab/figures/instruction_figures). With options["planted_second_time"], a case is grown only
the second time this worker runs it: one valgrind process then counts both sizes."""

import math

from benchcore.measure.case import CaseSpec
from opbench.backends.mxnet.executor import WORKER_PRELOAD  # noqa: F401  (MXNet imported alike)
from opbench.backends.mxnet.executor import execute as mxnet_execute


def grown(spec: CaseSpec, factor: float) -> CaseSpec:
    """The spec with every input's first dimension above 1 multiplied by factor (rounded up)."""
    params = dict(spec.params)
    inputs = {}
    for name, value in (params.get("inputs") or {}).items():
        if isinstance(value, dict) and value.get("shape") and value["shape"][0] > 1:
            shape = list(value["shape"])
            shape[0] = math.ceil(shape[0] * factor)
            value = dict(value, shape=shape)
        inputs[name] = value
    params["inputs"] = inputs
    return CaseSpec(spec.suite, spec.name, params)


_SEEN = set()


def execute(spec, options):
    seen = spec.key in _SEEN
    _SEEN.add(spec.key)
    if spec.key in (options.get("planted") or ()) and (seen or not options.get("planted_second_time")):
        spec = grown(spec, float(options.get("planted_factor", 2.0)))
    return mxnet_execute(spec, options)
