"""Second order and the transforms in TF2: independence, hvp == hessian @ v on every
second-order case, bad input."""


import warnings

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing import cases, checks, modes, tolerances

SECOND_ORDER = [case for case in cases.CASES if case.second_order]


@pytest.mark.parametrize("route", ["v1_graph.tensor", "v1_graph.callable", "function.tensor",
                                   "function.callable", "eager.callable",
                                   "eager.uncompiled"])
def test_independent_default_is_wrong_for_coupled_samples_and_exact_is_right(route):
    errors = checks.independence_errors(route)
    for function in ("batch_jacobian", "batch_hessian"):
        assert errors[function, True] > 100 * tolerances.TOLERANCE["float32"], errors
        assert errors[function, False] < tolerances.TOLERANCE["float32"], errors


HVP_MODES = (modes.EAGER, modes.FUNCTION, modes.V1_GRAPH)
"""Each second-order case compares hvp with the Hessian in one mode, by turns: every mode
meets a third of the cases (the matrix holds both to the oracle on every mode)."""


@pytest.mark.parametrize("case, mode", [
    pytest.param(case, HVP_MODES[i % len(HVP_MODES)], id=f"{case}-{HVP_MODES[i % len(HVP_MODES)]}")
    for i, case in enumerate(SECOND_ORDER)])
def test_hvp_agrees_with_hessian_times_v(case, mode):
    with warnings.catch_warnings():
        if case.may_fall_back:  # pfor and ForwardAccumulator fail through a cond: declared
            warnings.simplefilter("ignore", cg.VectorizationWarning)
        error = checks.hvp_against_hessian(case, mode)
    assert error < tolerances.TOLERANCE[case.dtype]


def test_per_sample_hessians_3x2y_plus_y2_in_eager_and_function():
    xy = tf.constant(cases.XY_SAMPLES, tf.float32)
    x, y = cases.XY_SAMPLES[:, 0], cases.XY_SAMPLES[:, 1]
    want = np.stack([[[6 * b, 6 * a], [6 * a, 2]] for a, b in zip(x, y)])
    f = lambda xy: 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2  # noqa: E731
    np.testing.assert_array_equal(cg.batch_hessian(f, xy), want)
    traced = tf.function(lambda xy: cg.batch_hessian(f(xy), xy))
    np.testing.assert_array_equal(traced(xy), want)
    assert traced(xy).shape == (4, 2, 2)


X = tf.constant([[1.0, 2.0], [3.0, 4.0]])


def test_batch_hessian_rejects_non_scalar_per_sample_output():
    with pytest.raises(ValueError, match=r"compat_grads\.batch_hessian: target must hold one "
                                         r"scalar per sample, shape \(b,\) or \(b, 1\), but it "
                                         r"has shape \(2, 3\).*hessian"):
        cg.batch_hessian(lambda x: tf.concat([x, x[:, :1]], axis=1), X)


@pytest.mark.parametrize("fn", [cg.hessian, cg.batch_hessian])
def test_second_order_of_an_eager_tensor(fn):
    with pytest.raises(cg.ModeError, match=rf"compat_grads\.{fn.__name__}: target is an eager "
                                           r"tensor, but a second-order derivative needs.*"
                                           r"Pass a callable"):
        fn(tf.reduce_sum(X ** 3, axis=1), X)


@pytest.mark.parametrize("fn", [cg.hessian, cg.batch_hessian])
def test_second_order_of_integer_sources(fn):
    argument = "source" if fn is cg.batch_hessian else "sources"
    with pytest.raises(TypeError, match=rf"{fn.__name__}: {argument} must be floating-point"):
        fn(lambda x: tf.cast(x, tf.float32), tf.constant([[1, 2]]))


@pytest.mark.parametrize("fn, third", [(cg.jvp, X), (cg.vjp, X), (cg.hvp, X)])
def test_transforms_need_a_callable(fn, third):
    with pytest.raises(TypeError, match=rf"compat_grads\.{fn.__name__}: f must be a callable"):
        fn(X ** 2, X, third)


@pytest.mark.parametrize("fn", [cg.jvp, cg.vjp, cg.hvp])
def test_transforms_of_integer_primals(fn):
    with pytest.raises(TypeError, match=rf"{fn.__name__}: primals must be floating-point"):
        fn(lambda x: tf.reduce_sum(tf.cast(x, tf.float32)), tf.constant([1, 2]), 1.0)


def test_hvp_vector_with_the_wrong_structure():
    with pytest.raises(TypeError, match=r"compat_grads\.hvp: vector must have the structure "
                                        r"of the primals.*one of them per leaf"):
        cg.hvp(lambda s: tf.reduce_sum(s[0] * s[1]), [X, X], X)


def test_hvp_vector_with_the_wrong_shape_or_dtype():
    with pytest.raises(ValueError, match=r"hvp: vector must have shape \(2, 2\) like its "
                                         r"counterpart in the primals, but has shape \(3,\)"):
        cg.hvp(lambda x: tf.reduce_sum(x ** 3), X, tf.ones([3]))
    with pytest.raises(TypeError, match=r"hvp: vector must have dtype float32"):
        cg.hvp(lambda x: tf.reduce_sum(x ** 3), X, tf.ones([2, 2], tf.float64))


def test_hvp_of_a_non_scalar():
    with pytest.raises(ValueError, match=r"compat_grads\.hvp: f must return a scalar, but it "
                                         r"returned shape \(2, 2\)"):
        cg.hvp(lambda x: x ** 3, X, X)


def test_jvp_and_vjp_with_nested_outputs():
    out, tangent = cg.jvp(lambda x: {"a": x ** 2, "b": [tf.reduce_sum(x)]}, X, tf.ones([2, 2]))
    assert set(out) == {"a", "b"}
    np.testing.assert_allclose(tangent["a"], 2 * X.numpy())
    np.testing.assert_allclose(tangent["b"][0], 4.0)
    out, grads = cg.vjp(lambda x: (x ** 2, tf.reduce_sum(x)), X, (tf.ones([2, 2]), 1.0))
    np.testing.assert_allclose(grads, 2 * X.numpy() + 1.0)
    with pytest.raises(TypeError, match=r"vjp: cotangents must have the structure of the "
                                        r"outputs of f"):
        cg.vjp(lambda x: (x ** 2, tf.reduce_sum(x)), X, tf.ones([2, 2]))


def test_auto_falls_back_to_reverse_over_reverse_through_a_cond_in_eager():
    def f(x):
        return tf.cond(tf.reduce_sum(x) > 0.0, lambda: tf.reduce_sum(tf.sin(x) * x),
                       lambda: tf.reduce_sum(x ** 2))

    x = tf.constant([0.5, 1.0])
    with pytest.warns(cg.VectorizationWarning) as caught:
        auto = cg.hessian(f, x, compile=False)
    assert any("forward-over-reverse failed" in str(w.message) for w in caught)
    with pytest.warns(cg.VectorizationWarning):  # pfor cannot go through the cond either
        reference = cg.hessian(f, x, strategy="reverse")
    np.testing.assert_allclose(auto, reference, rtol=1e-6)
    with pytest.raises(cg.DerivativeError, match=r"hessian: TensorFlow could not compute this "
                                                 r"derivative.*Try another strategy"):
        with pytest.warns(cg.VectorizationWarning):
            cg.hessian(f, x, strategy="forward", compile=False)


CAPTURED_SOURCE_CALLS = {  # sources the function being built reads from outside it
    "hessian of a variable, loop, compiled": lambda v, c: cg.hessian(
        lambda w: w ** 3, v, strategy="loop"),
    "hessian of a variable, chunk_size=1, compiled": lambda v, c: cg.hessian(
        lambda w: w ** 3, v, chunk_size=1),
    "hessian, loop, tf.function capturing a constant": lambda v, c: tf.function(
        lambda: cg.hessian(c ** 3, c, strategy="loop"), autograph=False)(),
    "hessian, chunk_size=1, tf.function capturing a constant": lambda v, c: tf.function(
        lambda: cg.hessian(c ** 3, c, chunk_size=1), autograph=False)(),
    "stacked_jacobian of the gradient, loop, tf.function": lambda v, c: tf.function(
        lambda: cg.stacked_jacobian(c ** 3, c, strategy="loop"), autograph=False)() * 2 / c,
}


@pytest.mark.parametrize("name", CAPTURED_SOURCE_CALLS)
def test_sources_captured_from_outside_are_differentiated_inside_loops(name):
    """Rows computed in a loop body differentiate the source the target read, not a copy
    of the body's own (which gave None, or zeros with unconnected_gradients='zero')."""
    v, c = tf.Variable([1.0, 2.0]), tf.constant([1.0, 2.0])
    got = CAPTURED_SOURCE_CALLS[name](v, c)
    want = np.diag([6.0, 12.0])  # d²(x³)/dx² = 6x, on the diagonal of each block
    if got.shape.rank == 3:  # the Hessian of a vector: H[i, j, k] = 6 x_i [i == j == k]
        want = np.stack([np.diag([6.0, 0.0]), np.diag([0.0, 12.0])])
    np.testing.assert_allclose(got, want, rtol=1e-6)
