"""The forward Laplacian (compat_grads._src.traces.forward_laplacian) in a TF1 graph, against
tf.hessians and tf.gradients per dimension, in float64."""

import numpy as np
import pytest
import tensorflow as tf

from compat_grads._src.traces import forward_laplacian as fl

RTOL = 1e-10
RNG = np.random.default_rng(0)
W = [RNG.normal(size=shape) for shape in ([3, 8], [8, 8], [8, 8], [8, 1])]
B = [RNG.normal(size=[8]) for _ in range(3)]


def mlp(x):
    for w, b in zip(W[:-1], B):
        x = tf.tanh(tf.matmul(x, w) + b)
    return tf.matmul(x, W[-1])[:, 0]


def poly(x):
    return 3 * x[:, 0] ** 2 * x[:, 1] + x[:, 1] ** 2


def per_dimension_diagonal(y, x, width):
    """[n, b]: d²y_s/dx_sj² by tf.gradients per dimension (y_s depends on x_s only)."""
    gradient = tf.gradients(tf.reduce_sum(y), x)[0]
    return tf.stack([tf.gradients(gradient[:, j], x)[0][:, j] for j in range(width)])


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("f,width", [(mlp, 3), (poly, 2)], ids=["mlp", "3x2y_plus_y2"])
def test_matches_tf1_second_derivatives(f, width, batched):
    value = np.random.default_rng(1).normal(size=[5, width])
    x = tf.compat.v1.placeholder(tf.float64, [5, width])
    y = f(x)
    diagonal = fl.propagate(y, x, batched=batched, summed=False)
    laplacian = fl.propagate(y, x, batched=batched, summed=True)
    if batched:
        want = per_dimension_diagonal(y, x, width)
    else:  # the full Hessian of the sum over the batch: y_s has no cross-sample terms
        hessian = tf.reshape(tf.hessians(tf.reduce_sum(y), x)[0], [5 * width, 5 * width])
        want = tf.linalg.diag_part(hessian)[:, None] * tf.reshape(tf.one_hot(
            tf.range(5 * width) // width, 5, dtype=tf.float64), [5 * width, 5])
    with tf.compat.v1.Session() as session:
        got, got_sum, want = session.run([diagonal, laplacian, want], {x: value})
    scale = RTOL * np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=scale)
    np.testing.assert_allclose(got_sum, want.sum(0), rtol=RTOL, atol=scale)


def test_tf1_cond_on_the_path_is_unsupported():
    x = tf.compat.v1.placeholder(tf.float64, [5, 3])
    y = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.sin(x), lambda: x * x)
    with pytest.raises(fl.Unsupported) as caught:
        fl.propagate(y, x, batched=True, summed=True)
    assert "Switch" in caught.value.reason or "Merge" in caught.value.reason


def test_a_reference_variable_source():
    """TF1's default variables are reference variables, read through an Identity: their
    ref tensor starts the directions (not zeros, as a missed source would give)."""
    with tf.Graph().as_default():
        v = tf.compat.v1.Variable([1.0, 2.0], dtype=tf.float64, use_resource=False)
        y = tf.reduce_sum(v ** 3)
        diagonal = fl.propagate(y, v, batched=False, summed=False)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            np.testing.assert_allclose(session.run(diagonal), [6.0, 12.0], rtol=RTOL)


def test_an_unconnected_source_is_none():
    """A target that does not depend on the source: None, as tf.gradients gives."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float64, [3])
        other = tf.compat.v1.placeholder(tf.float64, [3])
        assert fl.propagate(tf.reduce_sum(other ** 2), x, batched=False, summed=True) is None
