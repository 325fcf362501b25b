"""The graph does not grow with the number of target elements (a trap of the Python-loop
recipe): same op count for m = 200 and m = 4000, in a TF1 graph."""

import pytest

import compat_grads as cg
from compat_grads.testing.checks import assert_flat_graph


@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop", "auto"])
def test_stacked_jacobian_graph_is_flat_in_m(strategy):
    assert_flat_graph(cg.stacked_jacobian, strategy)


def test_per_element_gradients_graph_is_flat_in_m():
    assert_flat_graph(cg.per_element_gradients)


@pytest.mark.parametrize("strategy", ["reverse", "forward"])
def test_chunked_jacobian_is_one_loop_writing_in_place(strategy):
    """chunk_size: one while_loop over chunks, each chunk written in place into one buffer
    already in the result's layout (no TensorArray of chunks to concatenate, no whole-result
    transpose after the loop: either would double the peak memory)."""
    import numpy as np
    import tensorflow as tf

    with tf.Graph().as_default() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [7])
        w = tf.compat.v1.placeholder(tf.float32, [11, 7])
        y = tf.tanh(tf.linalg.matvec(w, x))
        chunked = cg.stacked_jacobian(y, x, strategy=strategy, chunk_size=3)
        types = [op.type for op in graph.get_operations()]
        whole = cg.stacked_jacobian(y, x, strategy=strategy)
        with tf.compat.v1.Session() as session:
            feed = {x: np.linspace(-1, 1, 7), w: np.linspace(-1, 1, 77).reshape(11, 7)}
            chunked, whole = session.run([chunked, whole], feed)
    assert types.count("LoopCond") == 1
    assert "TensorStridedSliceUpdate" in types and "TensorArrayV3" not in types
    np.testing.assert_array_equal(chunked, whole)
