"""`distribute=` on the curvature operators, on the logical CPUs of tests_tf2/conftest.py:
each replica (or device) takes an even share of the batch's examples and the products are
added up, so the operator is the one of the whole batch (float64, to 1e-10), in eager code
and a tf.function, with the estimators on it; what it cannot serve is refused by name. The
TF1 graph's device lists are in tests_tf1/test_curvature_operators_tf1.py."""

import functools

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import keras2, tf
from compat_grads.testing._suite.operators import LABELS, TARGETS, WEIGHTS, X, mlp

TOLERANCE = 1e-10
SPARSE = tf.nn.sparse_softmax_cross_entropy_with_logits
DISTRIBUTIONS = {"2 replicas": lambda: _mirrored(2), "3 devices": lambda: [
    "/cpu:0", "/cpu:1", "/cpu:2"]}


@functools.cache
def _mirrored(replicas):
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])


def _params():
    return [tf.constant(w) for w in WEIGHTS]


def _operators(distribute, x, y, labels):
    params = _params()

    def squared(p, x, y):
        return tf.reduce_sum((mlp(p, x) - y) ** 2) + 0.1 * tf.reduce_sum(p[0] ** 4)

    def model(x):
        return mlp(params, x)
    return [cg.hessian_operator(squared, params, data=(x, y), distribute=distribute),
            cg.ggn_operator(SPARSE, model, x, labels, weights=params, distribute=distribute),
            cg.fisher_operator(SPARSE, model, x, labels, weights=params,
                               distribute=distribute)]


def _dense(distribute, x, y, labels):
    return [op.to_dense() for op in _operators(distribute, x, y, labels)]


def _close(got, want):
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= TOLERANCE * max(1.0, np.max(np.abs(want)))


@pytest.mark.parametrize("in_function", [False, True], ids=["eager", "tf.function"])
@pytest.mark.parametrize("where", list(DISTRIBUTIONS))
def test_shares_of_the_batch_add_up_to_the_whole_batchs_operator(where, in_function):
    """6 examples in shares of 3 (2 replicas) or 2 (3 devices): the Hessian (with a term
    of the parameters alone, counted once per share: the sum over shares is the
    operator of that sum), the GGN and the Fisher."""
    arguments = (tf.constant(X), tf.constant(TARGETS), tf.constant(LABELS))
    whole = _dense(None, *arguments)
    split = functools.partial(_dense, DISTRIBUTIONS[where]())
    shared = (tf.function(split) if in_function else split)(*arguments)
    count = 2 if where == "2 replicas" else 3
    regularizer = 0.1 * 12 * np.diag(np.concatenate([WEIGHTS[0].reshape(-1) ** 2,
                                                     np.zeros(15)]))
    _close(shared[0].numpy(), whole[0].numpy() + (count - 1) * regularizer)
    for got, want in zip(shared[1:], whole[1:]):
        _close(got.numpy(), want.numpy())


def test_the_estimators_on_a_distributed_operator():
    """Lanczos on the 2-replica GGN in one tf.function: eigh of the whole batch's."""
    arguments = (tf.constant(X), tf.constant(TARGETS), tf.constant(LABELS))
    whole = _dense(None, *arguments)[1].numpy()

    @tf.function
    def top(x, y, labels):
        return cg.top_eigenvalues(_operators(_mirrored(2), x, y, labels)[1], 3)[0]
    np.testing.assert_allclose(top(*arguments).numpy(), np.linalg.eigvalsh(whole)[::-1][:3],
                               rtol=1e-8, atol=1e-12)


def test_a_keras_model_on_replicas():
    keras = keras2()
    model = keras.Sequential([keras.layers.Dense(3, activation="tanh", dtype="float64"),
                              keras.layers.Dense(3, dtype="float64")])
    model(X)
    model.set_weights(WEIGHTS)
    whole = cg.ggn_operator(SPARSE, model, X, LABELS).to_dense()
    split = cg.ggn_operator(SPARSE, model, X, LABELS, distribute=_mirrored(2)).to_dense()
    _close(split.numpy(), whole.numpy())


@pytest.mark.parametrize("call, error, words", [
    (lambda: cg.hessian_operator(lambda p: tf.reduce_sum(p ** 2), tf.constant([1.0]),
                                 distribute=_mirrored(2)), ValueError, "one batch"),
    (lambda: cg.ggn_operator(SPARSE, lambda x: mlp(_params(), x), tf.data.Dataset
                             .from_tensor_slices((X, LABELS)).batch(3), weights=_params(),
                             distribute=_mirrored(2)), ValueError, "one batch"),
    (lambda: cg.fisher_operator(SPARSE, lambda x: mlp(_params(), x), X, LABELS,
                                weights=_params(), kind="true", distribute=_mirrored(2)),
     ValueError, "kind='true' cannot be split"),
    (lambda: cg.hessian_operator(lambda p, x: tf.reduce_sum(p * x), tf.constant([1.0]),
                                 data=(tf.ones([4, 1]),), distribute="cpu"),
     TypeError, "distribute must be a tf.distribute.Strategy or a list"),
])
def test_what_distribute_cannot_serve_is_refused(call, error, words):
    with pytest.raises(error, match="compat_grads") as raised:
        call()
    assert words in str(raised.value)


def test_a_strategy_in_a_v1_graph_is_a_mode_error():
    with tf.Graph().as_default():
        with pytest.raises(cg.ModeError, match="hessian_operator.*device names"):
            cg.hessian_operator(lambda p, x: tf.reduce_sum(p * x), tf.constant([1.0]),
                                data=(tf.ones([4, 1]),), distribute=_mirrored(2))
