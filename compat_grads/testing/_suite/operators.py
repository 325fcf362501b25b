"""The curvature tests' shared pieces, for both suites: a matrix-free
`tf.linalg.LinearOperator` (the Hessian of a scalar function, one `hvp` per product), and
the data and weights of the operators' small model (Dense(3, tanh) -> Dense(3) on 2
inputs, float64)."""

import numpy as np
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


CLASSES = 3
_RNG = np.random.default_rng(0)
X = _RNG.normal(size=(6, 2))
LABELS = np.array([0, 2, 1, 1, 0, 2])
TARGETS = _RNG.normal(size=(6, CLASSES))
WEIGHTS = [_RNG.normal(size=shape) for shape in ((2, 3), (3,), (3, CLASSES), (CLASSES,))]
N = sum(w.size for w in WEIGHTS)  # 21
