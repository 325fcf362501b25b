"""The first and second derivatives of the elementwise ops the forward Laplacian
(`compat_grads._forward_laplacian`) pushes through with an explicit formula: op type ->
`(a, y) -> (g'(a), g''(a))`, given the op's input a and output y (None: zero)."""

from __future__ import annotations

import math

from compat_grads._tf import tf

_SELU_SCALE, _SELU_ALPHA = 1.0507009873554805, 1.6732632423543772

# Elementwise y = g(a): (a, y) -> (g'(a), g''(a)), each broadcasting against y.
DERIVATIVES = {
    "Tanh": lambda a, y: (d := 1 - y * y, -2 * y * d),
    "Sigmoid": lambda a, y: (d := y * (1 - y), d * (1 - 2 * y)),
    "Sin": lambda a, y: (tf.cos(a), -y),
    "Cos": lambda a, y: (-tf.sin(a), -y),
    "Exp": lambda a, y: (y, y),
    "Log": lambda a, y: (d := 1 / a, -d * d),
    "Log1p": lambda a, y: (d := 1 / (1 + a), -d * d),
    "Expm1": lambda a, y: (y + 1, y + 1),
    "Square": lambda a, y: (2 * a, 2),
    "Sqrt": lambda a, y: (d := 0.5 / y, -0.5 * d / a),
    "Rsqrt": lambda a, y: (d := -0.5 * y * y * y, -1.5 * d * y * y),
    "Reciprocal": lambda a, y: (-y * y, 2 * y * y * y),
    "Inv": lambda a, y: (-y * y, 2 * y * y * y),
    "Softplus": lambda a, y: (d := tf.sigmoid(a), d * (1 - d)),
    "Relu": lambda a, y: (tf.cast(a > 0, a.dtype), None),
    "Elu": lambda a, y: (tf.where(a > 0, tf.ones_like(y), y + 1), tf.where(a > 0, 0 * y, y + 1)),
    "Selu": lambda a, y: (tf.where(a > 0, _SELU_SCALE + 0 * y, y + _SELU_SCALE * _SELU_ALPHA),
                          tf.where(a > 0, 0 * y, y + _SELU_SCALE * _SELU_ALPHA)),
    "Erf": lambda a, y: (d := 2 / math.sqrt(math.pi) * tf.exp(-a * a), -2 * a * d),
    "Tan": lambda a, y: (d := 1 + y * y, 2 * y * d),
    "Atan": lambda a, y: (d := 1 / (1 + a * a), -2 * a * d * d),
    "Sinh": lambda a, y: (tf.cosh(a), y),
    "Cosh": lambda a, y: (tf.sinh(a), y),
    "Abs": lambda a, y: (tf.sign(a), None),
    "Softsign": lambda a, y: ((d := 1 / (1 + tf.abs(a))) * d, -2 * tf.sign(a) * d * d * d),
}
