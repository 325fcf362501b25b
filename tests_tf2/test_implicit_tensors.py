"""Objects TensorFlow converts implicitly (a registered tensor conversion function) as
targets and sources in TF2: eager with a tape, a callable target, tf.function."""

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import tf


class RandomVariable:
    def __init__(self, value):
        self.value, self.dtype, self.shape = value, value.dtype, value.shape


tf.register_tensor_conversion_function(
    RandomVariable, lambda v, dtype=None, name=None, as_ref=False: v.value)
X = np.array([0.3, -1.2, 2.0], np.float32)
EXPECTED = np.diag(2 * np.sin(X) * np.cos(X))


def test_eager_target_with_its_tape():
    x = tf.constant(X)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = RandomVariable(tf.sin(x) ** 2)
    np.testing.assert_allclose(cg.stacked_jacobian(y, x, tape=tape), EXPECTED, rtol=1e-5)


@pytest.mark.parametrize("compiled", [True, False])
def test_callable_returning_a_random_variable(compiled):
    got = cg.stacked_jacobian(lambda x: RandomVariable(tf.sin(x) ** 2), tf.constant(X),
                              compile=compiled)
    np.testing.assert_allclose(got, EXPECTED, rtol=1e-5, atol=1e-6)


def test_inside_tf_function():
    @tf.function
    def jacobian(x):
        rv = RandomVariable(tf.sin(x))
        y = tf.convert_to_tensor(rv) ** 2
        return cg.stacked_jacobian(y, rv), cg.hessian(tf.reduce_sum(y), rv)

    wrt_rv, hessian = jacobian(tf.constant(X))
    np.testing.assert_allclose(wrt_rv, np.diag(2 * np.sin(X)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hessian, 2 * np.eye(3), rtol=1e-6)
