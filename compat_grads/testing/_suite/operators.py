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


def mlp(params, x):
    """The operators' model as `f(params, x)`: Dense(3, tanh) -> Dense(3), params WEIGHTS'
    four arrays (the empirical NTK's network)."""
    w1, b1, w2, b2 = params
    return tf.tanh(x @ w1 + b1) @ w2 + b2


def mlp_jacobian(x, weights=WEIGHTS):
    """`[n, 3, 21]`, numpy: the analytic Jacobian of `mlp`'s outputs in its parameters (in
    WEIGHTS' order, each flattened row-major), never computed by TensorFlow."""
    w1, b1, w2, _ = weights
    h = np.tanh(x @ w1 + b1)  # [n, 3]
    back = w2.T[None] * (1 - h ** 2)[:, None, :]  # [n, a, hidden]: ∂f_a / ∂(pre-activation)
    n, outputs = len(x), w2.shape[1]
    d_w1 = np.einsum("nd,nah->nadh", x, back).reshape(n, outputs, -1)
    d_w2 = np.einsum("nh,ac->nahc", h, np.eye(outputs)).reshape(n, outputs, -1)
    d_b2 = np.broadcast_to(np.eye(outputs), (n, outputs, outputs))
    return np.concatenate([d_w1, back, d_w2, d_b2], axis=2)


def ntk_oracle(x1, x2, trace=True):
    """`J(x1) J(x2)ᵀ` from `mlp_jacobian`: `[n1, n2]` summed over the outputs, or every
    output pair `[n1, n2, 3, 3]`."""
    full = np.einsum("iap,jbp->ijab", mlp_jacobian(x1), mlp_jacobian(x2))
    return np.einsum("ijaa->ij", full) if trace else full
