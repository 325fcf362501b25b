"""Derivatives built inside the body of the user's own TF1 `tf.while_loop` (an attack that
computes its class Jacobian once per iteration): the loop around the call is not a loop the
target runs, so every function and strategy works there, and equals the loop of
`tf.gradients` built in the same place. A target that does run a TF1 while_loop is still
told apart, inside a loop as outside."""

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads.migrate import gradient_row_list, gradient_rows

RNG = np.random.RandomState(3)
X0 = RNG.randn(3, 5).astype(np.float32)
W = RNG.randn(5, 4).astype(np.float32)
STEPS = 2


def _logits(x):
    """(3 samples, 4 classes), through weights made outside the loop (they enter its body
    through Enter ops, as a model's variables do)."""
    (weights,) = tf.compat.v1.get_collection("test_weights")
    return tf.matmul(tf.tanh(x), weights)


def _graph():
    """A new graph holding the model's weights, a variable made outside every loop."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.add_to_collection("test_weights", tf.Variable(W))
    return graph


def _class_rows(logits, x):
    """The legacy loop: one tf.gradients per class, stacked: (4, 3, 5)."""
    return tf.stack([tf.compat.v1.gradients(logits[:, c], x)[0] for c in range(4)])


def _attack(rows_of):
    """x after STEPS iterations of a while_loop whose body computes `rows_of(logits, x)`."""
    def body(i, x):
        rows = rows_of(_logits(x), x)
        return i + 1, x + 0.01 * tf.reduce_sum(tf.reshape(rows, [-1, 3, 5]), 0)
    return tf.compat.v1.while_loop(lambda i, x: i < STEPS, body, [0, tf.constant(X0)])[1]


def _run(*tensors):
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        return session.run(list(tensors))


STRATEGIES = ["auto", "reverse", "forward", "loop"]
FORMS = {
    **{f"stacked_jacobian-{s}": lambda y, x, s=s: cg.stacked_jacobian(
        tf.reduce_sum(y, 0), x, strategy=s) for s in STRATEGIES},
    **{f"stacked_jacobian of a callable-{s}": lambda y, x, s=s: cg.stacked_jacobian(
        lambda x: tf.reduce_sum(_logits(x), 0), x, strategy=s) for s in STRATEGIES},
    **{f"batch_jacobian-{s}": lambda y, x, s=s: tf.transpose(
        cg.batch_jacobian(y, x, strategy=s), [1, 0, 2]) for s in STRATEGIES},
    "gradient_rows": lambda y, x: gradient_rows(y, x, range(4), axis=1),
    "gradient_row_list": lambda y, x: tf.stack(gradient_row_list(y, x, range(4), axis=1)),
}


@pytest.mark.parametrize("form", FORMS)
def test_class_jacobian_inside_a_while_loop_body_equals_the_loop(form):
    with _graph().as_default():
        got, want = _run(_attack(FORMS[form]), _attack(_class_rows))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _largest_difference_inside_a_loop(difference):
    """max |difference(x)| over the iterations of a while_loop whose body computes it."""
    with _graph().as_default():
        x0 = tf.constant(X0)

        def body(i, worst):
            x = x0 * tf.cast(i + 1, tf.float32)
            return i + 1, tf.maximum(worst, tf.reduce_max(tf.abs(difference(x))))
        (worst,) = _run(tf.compat.v1.while_loop(lambda i, w: i < STEPS, body, [0, 0.0])[1])
    return worst


def test_per_element_gradients_inside_a_while_loop_body():
    def difference(x):  # samples are independent: J·1[b, c] = sum_j rows[c, b, j]
        y = _logits(x)
        return cg.per_element_gradients(y, x) - tf.transpose(
            tf.reduce_sum(_class_rows(y, x), 2))
    assert _largest_difference_inside_a_loop(difference) < 1e-5


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_hessian_inside_a_while_loop_body(strategy):
    def difference(x):
        y = tf.reduce_sum(_logits(x) ** 2)
        return cg.hessian(y, x, strategy=strategy) - tf.compat.v1.hessians(y, x)[0]
    assert _largest_difference_inside_a_loop(difference) < 1e-4


def _cubed_by_a_loop(x):
    """x³, elementwise, by a TF1 while_loop: a target that runs a loop of its own."""
    _, y = tf.compat.v1.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a * x), [0, x])
    return y


def test_a_target_that_runs_a_while_loop_is_still_told_apart_inside_one():
    with _graph().as_default():
        def body(i, x):
            y = _cubed_by_a_loop(x)
            with pytest.raises(cg.DerivativeError, match=r"runs a TF1 tf\.while_loop"):
                cg.stacked_jacobian(y, x)
            return i + 1, x
        tf.compat.v1.while_loop(lambda i, x: i < 1, body, [0, tf.constant([1.0, 2.0])])


def test_helpers_run_the_loop_where_compat_grads_cannot_vectorize():
    """A target through a TF1 while_loop: compat_grads needs a callable for its Jacobian,
    the loop of tf.gradients builds one gradient per row: the helpers run that loop."""
    with tf.Graph().as_default():
        x = tf.constant([1.0, 2.0, 3.0])
        y = _cubed_by_a_loop(x)
        rows, listed = gradient_rows(y, x, range(3)), gradient_row_list(y, x, range(3))
        got, got_list, want = _run(rows, tf.stack(listed), tf.stack(
            [tf.compat.v1.gradients(y[i], x)[0] for i in range(3)]))
    np.testing.assert_allclose(got, np.diag(3 * np.array([1.0, 2.0, 3.0]) ** 2), rtol=1e-6)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_list, want)
