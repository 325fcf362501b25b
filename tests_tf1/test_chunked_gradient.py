"""A chunked Jacobian in a TF1 graph keeps its gradient: tf.gradients through the chunks'
in-place slice updates gives the gradient of every row at once."""

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import tf


@pytest.mark.parametrize("strategy", ["reverse", "forward"])
@pytest.mark.parametrize("function", [cg.stacked_jacobian, cg.batch_jacobian])
def test_a_chunked_jacobian_penalty_has_the_gradient_of_every_row_at_once(function, strategy):
    rng = np.random.default_rng(5)
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [6, 4])
        w = tf.Variable(rng.standard_normal((4, 3)).astype(np.float32) / 2)
        y = tf.tanh(tf.matmul(x, w))
        grads = [tf.gradients(tf.reduce_sum(function(y, x, strategy=strategy,
                                                     chunk_size=chunk) ** 2), w)[0]
                 for chunk in (None, 2)]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            whole, chunked = session.run(grads, {x: rng.standard_normal((6, 4))})
    assert np.all(np.isfinite(whole)) and np.abs(whole).max() > 0
    np.testing.assert_allclose(chunked, whole, rtol=1e-5, atol=1e-6)
