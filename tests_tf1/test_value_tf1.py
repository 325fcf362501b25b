"""has_aux= and return_value= in a TF1 graph: the value and aux come from the forward pass
the derivative is built on (no op of the target is built again, with every strategy, the
loop strategy's v1 while_loop included), and flat=True keeps its static shapes."""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite.value_checks import CASES, IDS, assert_graph_builds_f_no_extra_time


@pytest.mark.parametrize(("name", "f", "extra", "strategy"), CASES, ids=IDS)
def test_tf1_graph_builds_f_no_extra_time(name, f, extra, strategy):
    assert_graph_builds_f_no_extra_time(name, f, extra, strategy)


@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop"])
def test_tf1_flat_hessian_of_a_newton_trainer_keeps_its_static_shape(strategy):
    """A Newton trainer's flat Hessian over two weight blocks: [n, n], n known statically,
    with an unknown batch of inputs fed at run time."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3])
        w1 = tf.compat.v1.Variable(np.full((3, 2), 0.3, np.float32))
        w2 = tf.compat.v1.Variable(np.full((2,), -0.2, np.float32))

        def loss(ws):
            return tf.reduce_mean(tf.tanh(tf.matmul(x, ws[0])) ** 2 * ws[1])

        value, flat = cg.hessian(loss, [w1, w2], strategy=strategy, flat=True,
                                 return_value=True)
        blocks = cg.hessian(loss, [w1, w2], strategy=strategy, unconnected_gradients="zero")
        assert flat.shape.as_list() == [8, 8]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            feed = {x: np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)}
            got, parts, loss_value = session.run([flat, blocks, value], feed)
    joined = np.block([[parts[0][0].reshape(6, 6), parts[0][1].reshape(6, 2)],
                       [parts[1][0].reshape(2, 6), parts[1][1].reshape(2, 2)]])
    np.testing.assert_array_equal(got, joined)
    np.testing.assert_allclose(got, got.T, rtol=1e-5, atol=1e-7)
    assert np.isfinite(loss_value)
