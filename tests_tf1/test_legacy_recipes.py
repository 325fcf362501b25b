"""The usual TF1 recipes for dy/dx (a Python loop of tf.gradients with expand_dims, map_fn
over the values of y), run as written, next to compat_grads.

Their examples, done right, are matrix cases (matmul_column, scalar_stack). Here
the broken recipes are kept as regression evidence of the traps the library removes.
"""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing import cases, oracle

CASE = cases.get("matmul_column")


def _graph():
    (x_value, consts) = CASE.inputs()
    x = tf.compat.v1.placeholder(tf.float32, [50, 1])
    a = tf.compat.v1.placeholder(tf.float32, [100, 50])
    feed = {x: x_value.astype(np.float32), a: consts["a"].astype(np.float32)}
    return x, tf.matmul(a, x), feed


def test_python_loop_recipe_adds_an_axis_and_grows_the_graph():
    graph = tf.Graph()
    with graph.as_default():
        x, y, feed = _graph()
        before = len(graph.get_operations())
        grads = [tf.expand_dims(tf.gradients(y[i], x)[0], axis=0) for i in range(y.shape[0])]
        loop = tf.expand_dims(tf.stack(grads), axis=1)
        loop_ops = len(graph.get_operations()) - before
        before = len(graph.get_operations())
        ours = cg.stacked_jacobian(y, x)
        our_ops = len(graph.get_operations()) - before
        with tf.compat.v1.Session() as session:
            loop_value, our_value = session.run([loop, ours], feed)
    assert loop_value.shape == (100, 1, 1, 50, 1)  # one axis more than y.shape + x.shape
    assert our_value.shape == (100, 1, 50, 1)
    np.testing.assert_allclose(our_value, oracle.jacobian(CASE)[0], rtol=1e-6)
    assert loop_ops > 10 * our_ops  # one gradient graph per row against one for all rows


def test_map_fn_over_values_recipe_fails_where_ours_runs():
    with tf.Graph().as_default():
        x, y, feed = _graph()
        with pytest.raises((ValueError, TypeError, tf.errors.OpError)):
            recipe = tf.map_fn(lambda y_element: tf.gradients(y_element, x)[0], tf.squeeze(y))
            with tf.compat.v1.Session() as session:
                session.run(recipe, feed)
        ours = cg.per_element_gradients(y, x)
        with tf.compat.v1.Session() as session:
            value = session.run(ours, feed)
    want = oracle.expected(CASE, "per_element_gradients")[0]
    np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5)
    assert value.shape == (100, 1)
