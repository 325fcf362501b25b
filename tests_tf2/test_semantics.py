"""Semantics that hold in every mode, beyond what the matrix table states."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads._src.call import options as _options
from compat_grads._src.stacking import stack as _stacking


@pytest.mark.parametrize("value, expect_none", [
    ("none", True), ("zero", False), (tf.UnconnectedGradients.NONE, True),
    (tf.UnconnectedGradients.ZERO, False)])
def test_unconnected_gradients_enum_and_string(value, expect_none):
    x, z = tf.constant([1.0, 2.0]), tf.constant([[3.0]])
    jac = cg.stacked_jacobian(lambda s: s[0] ** 2, [x, z], unconnected_gradients=value)
    per = cg.per_element_gradients(lambda s: s[0] ** 2, [x, z], unconnected_gradients=value)
    if expect_none:
        assert jac[1] is None and per[1] is None
    else:
        np.testing.assert_array_equal(jac[1], np.zeros((2, 1, 1)))
        np.testing.assert_array_equal(per[1], np.zeros(2))


def test_results_keep_tuple_and_dict_types():
    a, b = tf.constant([1.0, 2.0]), tf.constant(3.0)
    out = cg.stacked_jacobian(lambda s: s[0] * s[1], (a, b))
    assert isinstance(out, tuple) and out[1].shape == (2,)
    out = cg.per_element_gradients(lambda s: s["a"] * s["b"], {"b": b, "a": a})
    assert isinstance(out, dict) and set(out) == {"a", "b"}
    np.testing.assert_allclose(out["b"], [1.0, 2.0])


def test_variable_source_in_eager_and_function():
    v = tf.Variable([1.0, 2.0, 3.0])
    want = np.diag([2.0, 4.0, 6.0])
    np.testing.assert_allclose(cg.stacked_jacobian(lambda v: v ** 2, v), want)

    @tf.function
    def traced():
        return cg.stacked_jacobian(v ** 2, v, strategy="loop")

    np.testing.assert_allclose(traced(), want)


def test_strategies_agree_on_a_wide_target():
    w = tf.constant(np.random.default_rng(0).standard_normal((7, 3)), tf.float32)
    x = tf.constant([0.1, -0.2, 0.3])
    f = lambda x: tf.sin(tf.linalg.matvec(w, x))  # noqa: E731
    results = [cg.stacked_jacobian(f, x, strategy=s).numpy()
               for s in ("reverse", "forward", "loop", "auto")]
    for other in results[1:]:
        np.testing.assert_allclose(other, results[0], rtol=1e-6, atol=1e-7)


def test_forward_fallback_warns_once_and_matches_reverse():
    x = tf.constant([0.5, 1.0, 1.5])

    def f(x):
        return tf.cond(tf.reduce_sum(x) > 0.0, lambda: tf.sin(x) * x, lambda: x ** 2)

    with pytest.warns(cg.VectorizationWarning, match=r"stacked_jacobian: could not vectorize.*"
                                                     r"StatelessIf.*strategy='loop'") as caught:
        forward = cg.stacked_jacobian(f, x, strategy="forward")
    assert len(caught) == 1
    np.testing.assert_allclose(forward, cg.stacked_jacobian(f, x, strategy="loop"), rtol=1e-6)


class _FailingOnce:
    """A stand-in backend whose rows fail to vectorize the first time they are traced."""

    function = "stacked_jacobian"

    def __init__(self):
        self.calls = 0

    def cannot_vectorize(self):
        return None

    def forward_per_row(self):
        return None

    def row(self, i):
        self.calls += 1
        if self.calls == 1:
            raise ValueError("No pfor vectorization defined for FancyOp\nmore")
        return [tf.cast(i, tf.float32) * tf.ones([2])]


HOW = _options.How("reverse", "none", chunk_size=None)  # a stand-in backend: no graph to size


def test_failed_vectorization_falls_back_to_the_loop_with_one_warning():
    backend = _FailingOnce()
    with pytest.warns(cg.VectorizationWarning, match=r"pfor failed with ValueError: more"):
        (out,) = _stacking.stack(backend, backend.row, 3, [tf.ones([2])], HOW)
    np.testing.assert_array_equal(out, [[0, 0], [1, 1], [2, 2]])


def test_failed_vectorization_with_a_spent_tape_says_how_to_fix_it():
    backend = _FailingOnce()
    with pytest.raises(RuntimeError, match=r"could not vectorize.*non-persistent tape cannot "
                                           r"be used again.*persistent=True.*strategy='loop'"):
        _stacking.stack(backend, backend.row, 3, [tf.ones([2])], HOW, reusable=False)


class _Recurrent:
    """A recurrent model written with tf.while_loop (no Keras): h ← tanh(h W + x_t b)."""

    def __init__(self):
        rng = np.random.default_rng(7)
        self.w = tf.Variable(rng.standard_normal((3, 3)).astype(np.float32) / 2)
        self.b = tf.Variable(rng.standard_normal(3).astype(np.float32))
        self.trainable_weights = [self.w, self.b]

    def __call__(self, x):  # x: [batch, steps]
        def step(t, h):
            return t + 1, tf.tanh(h @ self.w + x[:, t:t + 1] * self.b)
        h0 = tf.zeros([tf.shape(x)[0], 3])
        return tf.while_loop(lambda t, h: t < x.shape[1], step, (0, h0))[1]


def _squared(y_true, y_pred):
    return tf.reduce_sum((y_pred - y_true) ** 2, -1)


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_rows_that_differentiate_a_loop_go_to_the_while_loop_without_a_pfor_attempt(
        mode, pfor_conversions):
    """Per-example gradients through a loop: each row runs the loop and its gradient, which
    pfor cannot vectorize (it would convert the forward loop first, seconds for a Keras
    LSTM, and then fail). The row is refused before pfor converts anything, with a warning
    that names the loop, and the values are the Python loop's over examples."""
    model = _Recurrent()
    x = tf.constant(np.random.default_rng(8).standard_normal((4, 5)).astype(np.float32))
    y = tf.constant(np.random.default_rng(9).standard_normal((4, 3)).astype(np.float32))
    run = lambda: cg.per_example_gradients(_squared, model, x, y)  # noqa: E731
    with pytest.warns(cg.VectorizationWarning, match=r"per_example_gradients: could not "
                      r"vectorize.*each row differentiates a loop it runs \(the "
                      r"(Stateless)?While op '[^']*while[^']*'\)"):
        grads = run() if mode == "eager" else tf.function(run)()
    assert not pfor_conversions, "pfor converted a row it cannot vectorize"
    for s in range(4):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_squared(y[s:s + 1], model(x[s:s + 1])))
        for got, want in zip(grads, tape.gradient(loss, model.trainable_weights)):
            np.testing.assert_allclose(got[s], want, rtol=1e-5, atol=1e-6)


def test_a_loop_whose_gradient_is_outside_the_rows_still_vectorizes(pfor_conversions):
    """A Jacobian through a loop run once: the rows hold the loop's gradient only (its
    forward run is outside them), which pfor vectorizes; no warning."""
    model = _Recurrent()
    x = tf.constant(np.random.default_rng(8).standard_normal((4, 5)).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error", cg.VectorizationWarning)
        jacobian = cg.stacked_jacobian(model, x, strategy="reverse")
    assert pfor_conversions, "the rows were not vectorized"
    want = cg.stacked_jacobian(model, x, strategy="loop")
    np.testing.assert_allclose(jacobian, want, rtol=1e-5, atol=1e-6)
