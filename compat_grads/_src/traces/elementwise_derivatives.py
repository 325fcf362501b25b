"""The elementwise ops of the forward Laplacian (`compat_grads._src.traces.forward_laplacian`): the
first and second derivatives it pushes through with an explicit formula (op type ->
`(a, y) -> (g'(a), g''(a))`, given the op's input a and output y; None: zero), those it takes
from `tf.gradients`, and the activations' gradient ops (first order), with their rules."""

from __future__ import annotations

import math

from compat_grads._src.core.tf import tf
from compat_grads._src.traces.linear_jets import rank_of

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

# The gradient ops of activations, as `tf.gradients` builds them (a divergence of a
# gradient walks them): y = dy · c(a), by op type (input of dy, input of a, c, c' or None).
GRADIENTS = {
    "TanhGrad": (1, 0, lambda y: 1 - y * y, lambda y: -2 * y),
    "SigmoidGrad": (1, 0, lambda y: y * (1 - y), lambda y: 1 - 2 * y),
    "ReluGrad": (0, 1, lambda f: tf.cast(f > 0, f.dtype), None),
    "Relu6Grad": (0, 1, lambda f: tf.cast((f > 0) & (f < 6), f.dtype), None),
    "EluGrad": (0, 1, lambda o: tf.where(o > 0, tf.ones_like(o), o + 1),
                lambda o: tf.cast(o <= 0, o.dtype)),
    # of y = sqrt(a), rsqrt(a), 1 / a: functions of y (their first input), as TensorFlow
    # writes them: dy · 0.5 / y, dy · -0.5 y³, dy · -y²
    "SqrtGrad": (1, 0, lambda y: 0.5 / y, lambda y: -0.5 / (y * y)),
    "RsqrtGrad": (1, 0, lambda y: -0.5 * y * y * y, lambda y: -1.5 * y * y),
    "ReciprocalGrad": (1, 0, lambda y: -y * y, lambda y: -2 * y),
    "InvGrad": (1, 0, lambda y: -y * y, lambda y: -2 * y),
}


# Elementwise ops whose g' and g'' come from tf.gradients (one input, of y's shape).
GENERIC = frozenset({"Asinh", "Acosh", "Atanh", "Asin", "Acos", "Erfc",
                      "LeakyRelu", "Relu6", "Lgamma", "Digamma"})


def explicit(walk, op, jets):
    a, y = op.inputs[0], op.outputs[0]
    d1, d2 = DERIVATIVES[op.type](a, y)
    return walk.chain(jets[0], d1, d2, rank_of(y))


def generic(walk, op, jets):
    a, y = op.inputs[0], op.outputs[0]
    d1 = tf.gradients(y, a, grad_ys=tf.ones_like(y))[0]
    d2 = tf.gradients(d1, a, grad_ys=tf.ones_like(a))[0] if walk.second else None
    return walk.chain(jets[0], d1, d2, rank_of(y))


def activation_gradient(walk, op, jets):
    """First order only: J = J_dy c(a) + dy c'(a) J_a."""
    at_dy, at_a, c, dc = GRADIENTS[op.type]
    a = op.inputs[at_a]
    jet_c = None if jets[at_a] is None or dc is None else walk.chain(
        jets[at_a], dc(a), None, rank_of(a))
    return walk.bilinear(tf.multiply, op.inputs[at_dy], c(a), [jets[at_dy], jet_c],
                         rank_of(op.outputs[0]))
