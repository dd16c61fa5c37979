"""The head gradients opbench's MXNet backward runs from: ones of each output's shape, dtype and
context, made from the shape (ones_like first reorders an output in oneDNN's blocked layout:
seconds per round for the full sweep's largest Convolution), once per shape."""

import mxnet as mx
import numpy as np

from benchcore.measure.case import CaseSpec
from opbench.backends.mxnet import arrays, executor


def workload_of(op, inputs, **params):
    spec = CaseSpec("opbench", op, {"op": op, "seed": 1, "ctx": "cpu(0)", "run_backward": True,
                                    "inputs": {**inputs, **params}})
    return executor.build_workload(arrays.materialize(spec), with_backward=True)


def test_head_gradients_are_dense_ones_like_the_outputs_made_once_per_shape():
    tensor = {"init": "normal", "dtype": "float32"}
    work = workload_of("Convolution", {"data": dict(tensor, shape=[2, 3, 16, 16]), "weight": dict(tensor, shape=[8, 3, 3, 3]),
                                       "bias": dict(tensor, shape=[8])}, kernel=[3, 3], num_filter=8)
    output = work.forward()
    heads, grads = work.backward_setup(output)
    [head], [grad] = heads, grads
    assert (grad.shape, grad.dtype, grad.context, grad.stype) == (head.shape, head.dtype, head.context, "default")
    assert np.array_equal(grad.asnumpy(), np.ones(head.shape, np.float32))
    assert work.backward_setup(work.forward())[1][0] is grad  # the same shape: made once
    work.backward((heads, grads))
    mx.nd.waitall()


def test_head_gradients_of_a_float16_output_and_of_an_mx_np_output():
    half = executor._ones_of(mx.nd.zeros((3, 4), dtype="float16"))
    assert half.dtype == np.float16 and float(half.sum().asscalar()) == 12.0
    numpy_style = executor._ones_of(mx.np.zeros((2, 5)))
    assert isinstance(numpy_style, mx.np.ndarray) and numpy_style.shape == (2, 5) and float(numpy_style.sum()) == 10.0
    sparse = executor._ones_of(mx.nd.zeros((4, 4)).tostype("row_sparse"))
    assert sparse.shape == (4, 4)
