"""The legacy TF1 model: a small classifier whose first layer's activations are quantized,
with a straight-through estimator so that training still sees a gradient."""

import tensorflow as tf


def quantize(h, levels=4.0):
    """Rounds to steps of 1/levels; the gradient passes straight through (identity)."""
    return h + tf.stop_gradient(tf.round(h * levels) / levels - h)


def dense(name, x, units, seed):
    with tf.compat.v1.variable_scope(name):
        kernel = tf.compat.v1.get_variable(
            "kernel", [x.shape[-1], units],
            initializer=tf.compat.v1.glorot_uniform_initializer(seed=seed))
        bias = tf.compat.v1.get_variable(
            "bias", [units], initializer=tf.compat.v1.random_normal_initializer(0.0, 0.1, seed))
    return tf.matmul(x, kernel) + bias


def legacy_net(x):
    """x: (batch, 16) -> logits (batch, 10)."""
    with tf.compat.v1.variable_scope("net"):
        h = quantize(tf.nn.relu(dense("layer1", x, 32, seed=1)))
        h = tf.tanh(dense("layer2", h, 32, seed=2))
        return dense("logits", h, 10, seed=3)
