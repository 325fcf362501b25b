"""The runtime-checked migration helpers in TF2: eagerly they run the code they replace
(errors included); in a `tf.function` they vectorize and equal that code."""

import numpy as np
import pytest
import tensorflow as tf

from compat_grads import migrate

N = 12  # rows: more than compat_grads._src.stacking.cost.LOOP_ROWS, which keep the loop
X = np.linspace(-1.0, 1.0, 2 * N).reshape(N, 2).astype(np.float32)
W = np.array([[0.5, -1.0, 0.3], [2.0, 0.3, -0.4]], np.float32)
LOOPS = {"While", "StatelessWhile"}


def _tape_loop(loop, x, w):
    """Rows of a tanh layer's Jacobian, one tape per while_loop step."""
    def body(i, acc):
        with tf.GradientTape() as tape:
            tape.watch(x)
            row = tf.tanh(tf.matmul(x, w))[i]
        return i + 1, acc.write(i, tape.gradient(row, x))

    return loop(lambda i, _: i < N, body, [0, tf.TensorArray(tf.float32, size=N)])


def _oracle():
    """d sum_j tanh(x_i w)_j / dx, row i nonzero only: (1 - tanh^2) w^T."""
    rows = np.zeros((N, N, 2), np.float32)
    local = (1.0 - np.tanh(X @ W) ** 2) @ W.T
    for i in range(N):
        rows[i, i] = local[i]
    return rows


@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_row_while_loop_equals_the_loop_and_the_oracle(mode):
    def both(x, w):
        ours = _tape_loop(migrate.row_while_loop, x, w)
        theirs = _tape_loop(tf.while_loop, x, w)
        return ours[0], ours[1].stack(), theirs[0], theirs[1].stack()

    run = tf.function(both) if mode == "tf.function" else both
    i, rows, j, want = run(tf.constant(X), tf.constant(W))
    assert int(i) == int(j) == N
    np.testing.assert_allclose(rows.numpy(), want.numpy(), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(rows.numpy(), _oracle(), rtol=2e-5, atol=1e-6)


def test_row_while_loop_vectorizes_in_a_tf_function():
    def ours(x, w):
        return _tape_loop(migrate.row_while_loop, x, w)[1].stack()

    graph = tf.function(ours).get_concrete_function(
        tf.TensorSpec([N, 2], tf.float32), tf.TensorSpec([2, 3], tf.float32)).graph
    # pfor may loop over the one op it cannot vectorize (the gradient of `y[i]`, a cheap
    # scatter), inside its own scope; the body's own loop is gone
    loops = [op.name for op in graph.get_operations() if op.type in LOOPS]
    assert all("/pfor/" in name for name in loops), loops
    theirs = tf.function(lambda x, w: _tape_loop(tf.while_loop, x, w)[1].stack())
    graph = theirs.get_concrete_function(
        tf.TensorSpec([N, 2], tf.float32), tf.TensorSpec([2, 3], tf.float32)).graph
    assert {op.type for op in graph.get_operations()} & LOOPS


def test_row_while_loop_traces_the_body_once_when_it_vectorizes(pfor_conversions):
    """The static rule reads the row pfor traces: no second trace of the body to decide."""
    traced = []

    def counted(loop, x, w):
        def body(i, acc):
            traced.append(i)
            with tf.GradientTape() as tape:
                tape.watch(x)
                row = tf.tanh(tf.matmul(x, w))[i]
            return i + 1, acc.write(i, tape.gradient(row, x))
        return loop(lambda i, _: i < N, body, [0, tf.TensorArray(tf.float32, size=N)])

    graph = tf.function(lambda x, w: counted(migrate.row_while_loop, x, w)[1].stack())
    graph.get_concrete_function(tf.TensorSpec([N, 2]), tf.TensorSpec([2, 3]))
    assert len(traced) == 1 and pfor_conversions


def test_a_body_that_differentiates_a_loop_runs_the_while_loop_without_pfor(
        pfor_conversions):
    """Each row runs a tf.while_loop inside a function it calls (as a Keras LSTM layer
    does) and differentiates it, which pfor cannot vectorize: the traced row shows it, and
    the while_loop runs, with its values."""
    recurrent = tf.function(lambda h, w: tf.while_loop(
        lambda k, h: k < 3, lambda k, h: (k + 1, tf.tanh(h @ w[:, :2])), (0, h))[1])

    def rows(loop, x, w):
        def body(i, acc):
            with tf.GradientTape() as tape:
                tape.watch(x)
                row = tf.reduce_sum(recurrent(x, w)[i])
            return i + 1, acc.write(i, tape.gradient(row, x))
        return loop(lambda i, _: i < N, body, [0, tf.TensorArray(tf.float32, size=N)])[1].stack()

    ours = tf.function(lambda x, w: rows(migrate.row_while_loop, x, w))
    theirs = tf.function(lambda x, w: rows(tf.while_loop, x, w))
    x2 = tf.constant(X)
    np.testing.assert_allclose(ours(x2, tf.constant(W)), theirs(x2, tf.constant(W)),
                               rtol=1e-6, atol=1e-7)
    assert not pfor_conversions, "pfor converted a row it cannot vectorize"


@pytest.mark.parametrize("helper, call", [
    ("gradient_rows", lambda y, x: migrate.gradient_rows(y, x, range(2))),
    ("gradient_row_list", lambda y, x: migrate.gradient_row_list(y, x, range(2))),
    ("fill_gradient_rows", lambda y, x: migrate.fill_gradient_rows([None, None], y, x, [0])),
    ("gradient_map_fn", lambda y, x: migrate.gradient_map_fn(
        lambda e: tf.compat.v1.gradients(tf.sin(e), e)[0], x)),
])
def test_eagerly_tf_gradients_fails_as_in_the_original(helper, call):
    """tf.gradients has no eager mode: the helper runs the original code, which raises."""
    x = tf.constant([1.0, 2.0])
    with pytest.raises(RuntimeError, match="eager"):
        tf.compat.v1.gradients(tf.sin(x)[0], x)
    with pytest.raises(RuntimeError, match="eager"):
        call(tf.sin(x) * x, x)


def test_gradient_map_fn_in_a_tf_function_equals_map_fn_and_the_oracle():
    values = np.linspace(-2.0, 2.0, 7).astype(np.float32)

    def score(v):
        return tf.compat.v1.gradients(-0.5 * v * v + tf.sin(v), v)[0]

    @tf.function
    def both(x):
        return migrate.gradient_map_fn(score, x), tf.map_fn(score, x)

    ours, theirs = both(tf.constant(values))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours.numpy(), -values + np.cos(values), rtol=1e-5, atol=1e-6)


def test_gradient_rows_in_a_tf_function_equals_the_loop():
    @tf.function
    def both(x, w):
        y = tf.tanh(tf.matmul(x, w))
        ours = migrate.gradient_row_list(y, x, range(3), axis=1)
        theirs = [tf.compat.v1.gradients(y[:, k], x)[0] for k in range(3)]
        return ours, theirs

    ours, theirs = both(tf.constant(X), tf.constant(W))
    assert len(ours) == len(theirs) == 3
    for got, want in zip(ours, theirs):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=1e-6)
