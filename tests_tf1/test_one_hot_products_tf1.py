"""TF1 graph mode: one-hot tangents and cotangents start at the first / last matrix product
of a tensor target (the shortcut every graph route shares), against analytic Jacobians."""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads._src.jacobians import one_hot_products as _one_hot_products
from compat_grads.testing._suite import spies

RNG = np.random.default_rng(11)
A = RNG.standard_normal((7, 5))
X = RNG.standard_normal(5)
BATCH = RNG.standard_normal((4, 7))


@pytest.fixture
def used(monkeypatch):
    """The calls to the shortcut, and whether each one served (a row or column function)."""
    return spies.served(monkeypatch, _one_hot_products, ("rows", "columns"))


@pytest.mark.parametrize("strategy", ["forward", "reverse"])
@pytest.mark.parametrize("source", ["placeholder", "resource variable", "reference variable"])
def test_a_tensor_target_gets_the_analytic_jacobian(source, strategy, used):
    with tf.Graph().as_default():
        if source.endswith("variable"):
            x = tf.compat.v1.Variable(X, use_resource=source == "resource variable")
            feed = {}
        else:
            x = tf.compat.v1.placeholder(tf.float64, [5])
            feed = {x: X}
        y = tf.tanh(tf.linalg.matvec(A, x))
        jacobian = cg.stacked_jacobian(y, x, strategy=strategy)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            got = session.run(jacobian, feed)
    want = (1 - np.tanh(A @ X) ** 2)[:, None] * A
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert used == [True]


@pytest.mark.parametrize("strategy", ["forward", "reverse"])
def test_a_dense_layers_batch_jacobian_is_its_weights_scaled_per_sample(strategy, used):
    weights = RNG.standard_normal((7, 3))
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float64, [4, 7])
        y = tf.sigmoid(x @ weights)
        block = cg.batch_jacobian(y, x, strategy=strategy)
        with tf.compat.v1.Session() as session:
            got = session.run(block, {x: BATCH})
    s = 1 / (1 + np.exp(-(BATCH @ weights)))
    want = (s * (1 - s))[:, :, None] * weights.T[None]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert used == [True]
