"""Semantics that hold in every mode, beyond what the matrix table states."""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads import _options, _stacking


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
