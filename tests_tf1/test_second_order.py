"""Second order in a TF1 graph: independence, per-sample Hessians, the traps."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing import cases, checks, modes, tolerances


@pytest.mark.parametrize("route", ["tf1.tensor", "tf1.callable"])
def test_independent_default_is_wrong_for_coupled_samples_and_exact_is_right(route):
    errors = checks.independence_errors(route)
    for function in ("batch_jacobian", "batch_hessian"):
        assert errors[function, True] > 100 * tolerances.TOLERANCE["float32"], errors
        assert errors[function, False] < tolerances.TOLERANCE["float32"], errors


def test_nested_tapes_on_slices_recipe_vs_batch_hessian():
    """Nested tapes as usually written differentiate with respect to xy[:, 0], a slice made after
    recording: tf.gradients gives None. batch_hessian gives [[6y, 6x], [6x, 2]]."""
    xy_value = np.array([[-6.0, -3.0], [1.0, 8.0], [2.0, 9.0], [4.0, 12.0]], np.float32)
    with tf.Graph().as_default():
        xy = tf.compat.v1.placeholder(tf.float32, [None, 2])
        f = 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2
        assert tf.gradients(f, xy[:, 0]) == [None]
        block = cg.batch_hessian(f, xy)
        with tf.compat.v1.Session() as session:
            value = session.run(block, {xy: xy_value})
    x, y = xy_value[:, 0], xy_value[:, 1]
    want = np.stack([[[6 * b, 6 * a], [6 * a, 2]] for a, b in zip(x, y)])
    assert value.shape == (4, 2, 2)
    np.testing.assert_array_equal(value, want)


def test_tf_hessians_drops_cross_terms_between_sources():
    with tf.Graph().as_default():
        a, b = tf.constant([1.5, 0.5]), tf.constant([2.0, 1.0])
        y = tf.reduce_sum(a ** 2 * b ** 2)
        theirs = tf.hessians(y, [a, b])  # only the diagonal blocks d²/da², d²/db²
        ours = cg.hessian(y, [a, b])
        with tf.compat.v1.Session() as session:
            theirs, ours = session.run([theirs, ours])
    assert [h.shape for h in theirs] == [(2, 2), (2, 2)]
    np.testing.assert_allclose(ours[0][0], theirs[0])
    np.testing.assert_allclose(ours[0][1], np.diag([4 * 1.5 * 2.0, 4 * 0.5 * 1.0]))  # d²/dadb
    np.testing.assert_allclose(ours[1][0], ours[0][1].T)


def test_hvp_is_a_graph_of_constant_size():
    counts = []
    for n in (2000, 8000):
        with tf.Graph().as_default() as graph:
            x = tf.compat.v1.placeholder(tf.float32, [n])
            v = tf.compat.v1.placeholder(tf.float32, [n])
            before = len(graph.get_operations())
            cg.hvp(lambda x: tf.reduce_sum(tf.sin(x) ** 2), x, v)
            counts.append(len(graph.get_operations()) - before)
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize("case", [c for c in cases.CASES if c.second_order], ids=str)
def test_hvp_agrees_with_hessian_times_v(case):
    with warnings.catch_warnings():
        if case.may_fall_back:  # the v1 cond makes the Hessian's loop fall back: declared
            warnings.simplefilter("ignore", cg.VectorizationWarning)
        error = checks.hvp_against_hessian(case, modes.TF1)
    assert error < tolerances.TOLERANCE[case.dtype]


@pytest.mark.parametrize("strategy", ["loop", "reverse", "forward", "auto"])
def test_hessian_of_a_non_scalar_target_never_nests_while_loops(strategy):
    """TF1's control flow cannot differentiate a while_loop inside a while_loop: the
    (element, source element) pairs run in one loop, or none when vectorized."""
    with tf.Graph().as_default() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3])
        hessian = cg.hessian(tf.tanh(x) * x[0], x, strategy=strategy)
        loops = [op for op in graph.get_operations() if op.type == "LoopCond"]
        with tf.compat.v1.Session() as session:
            value = session.run(hessian, {x: [0.5, -1.0, 2.0]})
    assert len(loops) == (1 if strategy == "loop" else 0)
    assert value.shape == (3, 3, 3)
    np.testing.assert_allclose(value, np.transpose(value, (0, 2, 1)), atol=1e-6)


def test_hvp_in_a_graph_is_the_double_tf_gradients():
    """cg.hvp in a TF1 graph is the HVP a TF1 program builds with two tf.gradients calls (the
    gradient of <gradient, v>): the same values and the same heavy ops, no more ops in all
    (forward mode by the double-VJP trick took a third pass, about 1.5 times the ops)."""
    from collections import Counter

    def built(product):
        rng = np.random.default_rng(0)
        with tf.Graph().as_default() as graph:
            x = tf.constant(rng.standard_normal((16, 5)))
            w = tf.Variable(0.3 * rng.standard_normal((5, 5)))
            loss = tf.reduce_sum(tf.tanh(tf.tanh(x @ w) @ w) ** 2)
            v = tf.constant(np.arange(25.0).reshape(5, 5) / 25)
            before = len(graph.get_operations())
            out = product(loss, w, v)
            added = Counter(op.type for op in graph.get_operations()[before:])
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                return added, session.run(out)

    def double_gradients(loss, w, v):
        g = tf.compat.v1.gradients(loss, w)[0]
        return tf.compat.v1.gradients(tf.reduce_sum(g * tf.stop_gradient(v)), w)[0]

    theirs, want = built(double_gradients)
    ours, got = built(lambda loss, w, v: cg.hvp(lambda _: loss, w, v))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    for heavy in ("MatMul", "Tanh", "TanhGrad", "BatchMatMulV2"):
        assert ours[heavy] == theirs[heavy], (heavy, ours, theirs)
    assert sum(ours.values()) <= sum(theirs.values()), (ours, theirs)
