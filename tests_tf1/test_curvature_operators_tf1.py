"""The curvature operators in a TF1 graph (v2 behaviour disabled): built once over
placeholders (the batch unknown until it is fed), run in a Session against oracles built in
the same graph (`cg.hessian` flat, `cg.stacked_jacobian` of a tf_keras model's outputs with
the analytic loss Hessian, `cg.per_example_gradients`); a Dataset of uneven batches read by
`Dataset.reduce`; the true Fisher's seed as an int or a fed tensor; the estimators on the
operators in one `Session.run`; bad input when the graph is built. The TF2 side is
tests_tf2/test_curvature_operators.py."""

import functools

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads._src.core.tf import keras2
from compat_grads.testing._suite.operators import CLASSES, LABELS, TARGETS, WEIGHTS, N, X

TOLERANCE = 1e-10
RNG = np.random.default_rng(1)  # the vectors (the model's data: _suite.operators)


def _model():
    """Dense(3, tanh) -> Dense(3) on 2 inputs, float64, with the weights WEIGHTS."""
    keras = keras2()
    init = iter(WEIGHTS)
    return keras.Sequential([keras.layers.Dense(
        units, activation=activation, dtype="float64", input_shape=(2,) if units == 3 else (),
        kernel_initializer=keras.initializers.Constant(next(init)),
        bias_initializer=keras.initializers.Constant(next(init)))
        for units, activation in ((3, "tanh"), (CLASSES, None))])


def _sparse():
    return functools.partial(keras2().losses.sparse_categorical_crossentropy,
                             from_logits=True)


def _hand_written_sparse(y, p):
    return -tf.reduce_sum(tf.one_hot(y, CLASSES, dtype=p.dtype) * tf.nn.log_softmax(p), -1)


def _loss(params, x, y):
    """A two-parameter loss with cross terms, summed over examples."""
    w, b = params
    return tf.reduce_sum((tf.tanh(x @ w + b) - y) ** 2) + 0.1 * tf.reduce_sum(w ** 4)


def _held(array, unknown_batch=False):
    shape = (None, *array.shape[1:]) if unknown_batch else array.shape
    return tf.compat.v1.placeholder(tf.as_dtype(array.dtype), shape)


def _run(fetches, feeds):
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        return session.run(fetches, feeds)


def _close(got, want, tolerance=TOLERANCE):
    assert np.shape(got) == np.shape(want)
    assert np.max(np.abs(got - want)) <= tolerance * max(1.0, np.max(np.abs(want)))


def _softmax_hessians(logits):
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return np.einsum("bk,kl->bkl", p, np.eye(CLASSES)) - np.einsum("bk,bl->bkl", p, p)


def test_the_hessian_and_its_top_eigenpairs_in_one_session_run():
    """Parameters and a batch of unknown size fed; Lanczos's n = 9 steps: exact."""
    with tf.Graph().as_default():
        w, b = _held(WEIGHTS[0]), _held(WEIGHTS[1])
        x, y = _held(X, True), _held(TARGETS, True)
        op = cg.hessian_operator(_loss, [w, b], data=(x, y))
        assert op.shape == (9, 9) and op.is_self_adjoint and op.dtype == tf.float64
        v = tf.constant(RNG.normal(size=9))
        fetches = (cg.hessian(lambda p: _loss(p, x, y), [w, b], flat=True), op.to_dense(),
                   op.matvec(v), v, cg.top_eigenvalues(op, 3, which="LM"))
        feeds = {w: WEIGHTS[0], b: WEIGHTS[1], x: X, y: TARGETS}
        oracle, dense, product, vector, (values, vectors) = _run(fetches, feeds)
    _close(dense, oracle)
    _close(product, oracle @ vector)
    exact = np.linalg.eigvalsh(oracle)
    _close(values, exact[np.argsort(-np.abs(exact))[:3]], 1e-8)
    _close(oracle @ vectors, vectors * values, 1e-7)


def test_a_dataset_of_uneven_batches_is_the_whole_batch():
    """Batches of 4 and 2 by Dataset.reduce in the graph: the sum of their Hessians (the
    regularizer counted once per batch), and of their Gauss-Newton matrices."""
    with tf.Graph().as_default():
        w, b = tf.constant(WEIGHTS[0]), tf.constant(WEIGHTS[1])
        data = tf.data.Dataset.from_tensor_slices((X, TARGETS)).batch(4)
        twice = lambda p, x, y: _loss(p, x, y) + 0.1 * tf.reduce_sum(p[0] ** 4)  # noqa: E731
        model, loss_fn = _model(), _sparse()
        pairs = tf.data.Dataset.from_tensor_slices((X, LABELS)).batch(4)
        x, y = tf.constant(X), tf.constant(LABELS)
        fetches = (cg.hessian_operator(_loss, [w, b], data=data).to_dense(),
                   cg.hessian_operator(twice, [w, b], data=(X, TARGETS)).to_dense(),
                   cg.ggn_operator(loss_fn, model, pairs).to_dense(),
                   cg.ggn_operator(loss_fn, model, x, y).to_dense())
        by_batches, whole, ggn_by_batches, ggn_whole = _run(fetches, None)
    _close(by_batches, whole)
    _close(ggn_by_batches, ggn_whole)


def test_the_ggn_and_fisher_with_a_batch_fed_at_run_time():
    """One graph, fed 6 then 4 examples: the GGN in closed form and by products equals
    Σ JᵀHJ from the stacked Jacobian, the empirical Fisher Σ g gᵀ."""
    with tf.Graph().as_default():
        model = _model()
        x, y = _held(X, True), _held(LABELS, True)
        ops = [cg.ggn_operator(_sparse(), model, x, y),
               cg.ggn_operator(_hand_written_sparse, model, x, y),
               cg.fisher_operator(_sparse(), model, x, y)]
        jacobian = cg.stacked_jacobian(lambda ws: model(x), model.trainable_weights,
                                       flat=True)
        grads = cg.per_example_gradients(_sparse(), model, x, y)
        fetches = ([op.to_dense() for op in ops], model(x), jacobian, grads)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for count in (6, 4):
                (closed, products, fisher), logits, j, g = session.run(
                    fetches, {x: X[:count], y: LABELS[:count]})
                j = j.reshape(count, CLASSES, N)
                ggn = np.einsum("bkn,bkl,blm->nm", j, _softmax_hessians(logits), j)
                rows = np.concatenate([each.reshape(count, -1) for each in g], axis=1)
                _close(closed, ggn)
                _close(products, ggn)
                _close(fisher, rows.T @ rows)


def test_the_true_fisher_is_one_matrix_per_seed_an_int_or_a_fed_tensor():
    """The seed fed or given as an int, the same products in two runs; over 3 inputs
    repeated 400 times, the draws' Fisher divided by 400 is near the 3 inputs' GGN (a few
    standard errors of 400 draws: about 3 / sqrt(400))."""
    with tf.Graph().as_default():
        model = _model()
        x, y = _held(X, True), _held(LABELS, True)
        seed = tf.compat.v1.placeholder(tf.int64, [])
        v = tf.constant(RNG.normal(size=N))
        products = [cg.fisher_operator(_sparse(), model, x, y, kind="true", seed=s).matvec(v)
                    for s in (seed, 3, 4)]
        given = cg.fisher_operator(_sparse(), model, x, y).matvec(v)
        dense = (cg.fisher_operator(_sparse(), model, x, y, kind="true", seed=seed).to_dense(),
                 cg.ggn_operator(_sparse(), model, x, y).to_dense())
        feeds = {x: X, y: LABELS, seed: 3}
        repeated = {x: np.repeat(X[:3], 400, 0), y: np.repeat(LABELS[:3], 400, 0), seed: 3}
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            (fed, three, four), empirical = session.run((products, given), feeds)
            np.testing.assert_array_equal(session.run(products[1], feeds), three)
            fisher = session.run(dense[0], repeated)
            ggn = session.run(dense[1], {x: X[:3], y: LABELS[:3]})
    np.testing.assert_array_equal(fed, three)
    assert np.max(np.abs(three - four)) > 1e-6
    assert np.max(np.abs(three - empirical)) > 1e-6
    assert np.linalg.norm(fisher / 400 - ggn) / np.linalg.norm(ggn) < 0.15


def test_solve_and_trace_on_the_operators_in_a_session():
    with tf.Graph().as_default():
        model = _model()
        x, y = _held(X, True), _held(LABELS, True)
        rhs = RNG.normal(size=N)
        ggn, fisher = (cg.ggn_operator(_sparse(), model, x, y),
                       cg.fisher_operator(_sparse(), model, x, y))
        fetches = (ggn.to_dense(), cg.solve(ggn, rhs, damping=0.1, tol=1e-12),
                   fisher.to_dense(), cg.trace_estimate(fisher, num_samples=30,
                                                        return_std=True))
        dense, solution, dense_fisher, (trace, error) = _run(fetches, {x: X, y: LABELS})
    _close(solution, np.linalg.solve(dense + 0.1 * np.eye(N), rhs), 1e-7)
    assert abs(trace - np.trace(dense_fisher)) <= 4 * error


def test_bad_input_is_raised_when_the_graph_is_built():
    with tf.Graph().as_default():
        w = _held(WEIGHTS[0])
        op = cg.hessian_operator(lambda w: w * 2, w)
        with pytest.raises(ValueError, match=r"hessian_operator: f must return a scalar"):
            op.matvec(tf.zeros([6], tf.float64))
        with pytest.raises(TypeError, match=r"params must share one dtype"):
            cg.hessian_operator(lambda p: p[0][0, 0] * p[1], [w, tf.constant(1.0)])
        with pytest.raises(ValueError, match=r"params must have a static shape"):
            cg.hessian_operator(tf.reduce_sum, _held(X, True))
        with pytest.raises(TypeError, match=r"data must be a non-empty tuple"):
            cg.hessian_operator(_loss, [w, w], data={"x": X})
        with pytest.raises(ValueError, match=r"fisher_operator: kind must be one of"):
            cg.fisher_operator(_sparse(), _model(), X, LABELS, kind="model")


def test_a_device_list_splits_the_fed_batch():
    """distribute= on three devices, the batch unknown until it is fed (6 examples: shares
    of 2): the GGN and the Fisher equal one device's, in one Session.run."""
    with tf.Graph().as_default():
        model, devices = _model(), ["/cpu:0", "/cpu:0", "/cpu:0"]
        x, y = _held(X, True), _held(LABELS, True)
        fetches = [op.to_dense() for op in (
            cg.ggn_operator(_sparse(), model, x, y),
            cg.ggn_operator(_sparse(), model, x, y, distribute=devices),
            cg.fisher_operator(_sparse(), model, x, y),
            cg.fisher_operator(_sparse(), model, x, y, distribute=devices))]
        ggn, ggn_split, fisher, fisher_split = _run(fetches, {x: X, y: LABELS})
    _close(ggn_split, ggn)
    _close(fisher_split, fisher)
    assert np.abs(ggn).max() > 0 and np.abs(fisher).max() > 0
