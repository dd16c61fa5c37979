"""An executor for the audit's call-count test: opbench's real MXNet executor, with every call
of the case's operator counted in the worker (`operator_calls`), so a test can see that the
audit adds no forward of its own."""

from opbench.backends.mxnet import arrays, executor


def execute(spec, options):
    calls = []
    real_materialize = arrays.materialize

    def counting_materialize(*args, **kwargs):
        materialized = real_materialize(*args, **kwargs)
        real_call = materialized.call

        def counted():
            calls.append(1)
            return real_call()

        materialized.call = counted
        return materialized

    arrays.materialize = counting_materialize
    try:
        metrics = executor.execute(spec, options)
    finally:
        arrays.materialize = real_materialize
    return {**metrics, "operator_calls": len(calls)}
