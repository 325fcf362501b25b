"""A matrix-free `tf.linalg.LinearOperator` for the curvature estimators' tests of both
suites: the Hessian of a scalar function, one `hvp` per product."""

import tensorflow as tf

import compat_grads as cg


class HessianOf(tf.linalg.LinearOperator):
    """The Hessian of a scalar f at a vector x as an operator: each product one `cg.hvp`,
    never the matrix."""

    def __init__(self, f, x):
        self._f, self._x = f, x
        super().__init__(dtype=x.dtype, is_self_adjoint=True, is_square=True)

    def _shape(self):
        return tf.TensorShape([self._x.shape[0]] * 2)

    def _shape_tensor(self):
        return tf.constant([self._x.shape[0]] * 2)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        columns = tf.unstack(tf.linalg.adjoint(x) if adjoint_arg else x, axis=-1)
        return tf.stack([cg.hvp(self._f, self._x, c) for c in columns], axis=-1)
