"""Objects TensorFlow converts implicitly (a registered tensor conversion function, as
probabilistic-programming random variables have) are accepted wherever tf.gradients and
tf.hessians accept them, in a TF1 graph."""

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import tf


class RandomVariable:
    """Holds its sample as a tensor, like a probabilistic-programming random variable."""

    def __init__(self, value):
        self.value, self.dtype, self.shape = value, value.dtype, value.shape


class ArrayLike:
    """Converts to a new constant each time: connected to nothing."""

    def __array__(self, dtype=None, copy=None):
        return np.ones(3, np.float32)


tf.register_tensor_conversion_function(
    RandomVariable, lambda v, dtype=None, name=None, as_ref=False: v.value)
X = np.array([0.3, -1.2, 2.0], np.float32)


def _run(*fetches):
    with tf.compat.v1.Session() as session:
        return session.run(fetches)


def test_hessian_of_a_random_variable_matches_tf_hessians():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder_with_default(X, [3])
        rv = RandomVariable(tf.sin(x))
        loss = tf.reduce_sum(tf.convert_to_tensor(rv) ** 3)
        ours, theirs = _run(cg.hessian(loss, rv), tf.hessians(loss, rv)[0])
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    np.testing.assert_allclose(np.diag(ours), 6 * np.sin(X), rtol=1e-5)


@pytest.mark.parametrize("function", ["stacked_jacobian", "per_element_gradients"])
def test_random_variable_as_target_and_as_source(function):
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder_with_default(X, [3])
        rv = RandomVariable(tf.sin(x))
        y = RandomVariable(tf.convert_to_tensor(rv) ** 2)
        of_rv, wrt_rv = _run(getattr(cg, function)(y, x), getattr(cg, function)(y, rv))
    dy_drv = 2 * np.sin(X)
    full = {"stacked_jacobian": np.diag, "per_element_gradients": lambda d: d}[function]
    np.testing.assert_allclose(of_rv, full(dy_drv * np.cos(X)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wrt_rv, full(dy_drv), rtol=1e-5, atol=1e-6)


def test_an_object_converted_to_a_new_constant_is_a_clear_error():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder_with_default(X, [3])
        with pytest.raises(TypeError, match=r"compat_grads.stacked_jacobian: sources must be "
                                            r"a tf.Tensor or tf.Variable, but got ArrayLike"):
            cg.stacked_jacobian(tf.sin(x), ArrayLike())
