"""The empirical NTK in a TF1 graph (v2 behaviour disabled): built over placeholders of
unknown batch, run in one `Session.run`, against the analytic Jacobians of a small tanh
network (numpy); chunks by a while_loop equal the kernel at once; a tf_keras model's
variables as the parameters. The TF2 side is tests_tf2/test_ntk.py."""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads._src.core.tf import keras2
from compat_grads.testing._suite.operators import WEIGHTS, X, mlp, ntk_oracle

TOLERANCE = 1e-10
X2 = np.random.default_rng(2).normal(size=(4, 2))


def _close(got, want):
    assert np.shape(got) == np.shape(want)
    assert np.max(np.abs(got - want)) <= TOLERANCE * max(1.0, np.max(np.abs(want)))


def _held(array):
    return tf.compat.v1.placeholder(tf.float64, (None, *array.shape[1:]))


@pytest.mark.parametrize("method", ["jacobian", "products"])
def test_the_kernel_over_placeholders_in_one_session_run(method):
    with tf.Graph().as_default():
        x1, x2 = _held(X), _held(X2)
        params = [tf.constant(w) for w in WEIGHTS]
        kernels = [cg.empirical_ntk(mlp, params, x1, x2, method=method),
                   cg.empirical_ntk(mlp, params, x1, x2, method=method, trace_outputs=False),
                   cg.empirical_ntk(mlp, params, x1, method=method, chunk_size=4),
                   cg.empirical_ntk(mlp, params, x1, x2, method=method, chunk_size=1)]
        with tf.compat.v1.Session() as session:
            summed, pairs, gram, chunked = session.run(kernels, {x1: X, x2: X2})
            small = session.run(kernels[2], {x1: X[:3]})  # another batch, the same graph
    _close(summed, ntk_oracle(X, X2))
    _close(pairs, ntk_oracle(X, X2, trace=False))
    _close(gram, ntk_oracle(X, X))
    _close(chunked, ntk_oracle(X, X2))
    _close(small, ntk_oracle(X[:3], X[:3]))


def test_a_tf_keras_models_variables():
    with tf.Graph().as_default():
        keras = keras2()
        model = keras.Sequential([
            keras.layers.Dense(3, activation="tanh", dtype="float64", input_shape=(2,)),
            keras.layers.Dense(3, dtype="float64")])
        x1 = _held(X)
        kernel = cg.empirical_ntk(lambda params, x: model(x), model.trainable_weights, x1)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            model.set_weights(WEIGHTS)
            value = session.run(kernel, {x1: X})
    _close(value, ntk_oracle(X, X))
