"""The graph does not grow with the number of target elements (a trap of the Python-loop
recipe): same op count for m = 200 and m = 4000, in a v1 Graph inside TF2."""

import pytest
import tensorflow as tf

import compat_grads as cg


def _op_count(m, fn, strategy):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [50])
        w = tf.compat.v1.placeholder(tf.float32, [m, 50])
        y = tf.tanh(tf.linalg.matvec(w, x))
        kwargs = {} if strategy is None else {"strategy": strategy}
        fn(y, x, **kwargs)
    return len(graph.get_operations())


def _assert_flat(fn, strategy=None):
    counts = {m: _op_count(m, fn, strategy) for m in (200, 2000, 4000)}
    assert counts[2000] == counts[4000], counts
    # tf.zeros folds shapes under 1000 elements into one Const instead of a Fill: a constant
    # difference, not growth.
    assert abs(counts[200] - counts[4000]) <= 4, counts


@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop", "auto"])
def test_stacked_jacobian_graph_is_flat_in_m(strategy):
    _assert_flat(cg.stacked_jacobian, strategy)


def test_per_element_gradients_graph_is_flat_in_m():
    _assert_flat(cg.per_element_gradients)
