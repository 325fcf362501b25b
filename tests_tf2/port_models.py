"""Legacy TF1 functions and TF2 ports of them, right and wrong, for test_port.py.

The legacy functions run in compare_port's TF1 process, which imports this module by name.
"""

import tensorflow as tf


def _dense(name, x, units, seed):
    init = tf.compat.v1.glorot_uniform_initializer(seed=seed)
    with tf.compat.v1.variable_scope(name):
        kernel = tf.compat.v1.get_variable("kernel", [x.shape[-1], units], x.dtype, init)
        bias = tf.compat.v1.get_variable(
            "bias", [units], x.dtype, tf.compat.v1.random_normal_initializer(0.0, 0.5, seed))
    return tf.matmul(x, kernel) + bias


def legacy_mlp(x):
    """(b, 4) -> (b, 3): tanh hidden layer of 5, then a linear layer."""
    with tf.compat.v1.variable_scope("net"):
        return _dense("out", tf.tanh(_dense("hidden", x, 5, seed=1)), 3, seed=3)


def legacy_score(x):
    """One scalar per sample: (b,)."""
    return tf.reduce_sum(legacy_mlp(x) ** 2, axis=1)


def legacy_heads(x):
    """Two outputs by name."""
    logits = legacy_mlp(x)
    return {"logits": logits, "probs": tf.nn.softmax(logits)}


def legacy_damped(x):
    """A stop_gradient that a port can lose: same values, other derivatives."""
    return x * 2.0 + tf.stop_gradient(x ** 2)


def legacy_two_inputs(x, z):
    """Depends on z only through a zero factor: connected, with a zero gradient."""
    return tf.tanh(x) + 0.0 * z


class Dense(tf.Module):
    def __init__(self, n_in, n_out, dtype, name):
        super().__init__(name=name)
        self.kernel = tf.Variable(tf.zeros([n_in, n_out], dtype), name="kernel")
        self.bias = tf.Variable(tf.zeros([n_out], dtype), name="bias")

    def __call__(self, x):
        return tf.matmul(x, self.kernel) + self.bias


class MLP(tf.Module):
    """The TF2 port of `legacy_mlp`."""

    def __init__(self, dtype=tf.float32):
        super().__init__(name="mlp")
        self.hidden, self.out = Dense(4, 5, dtype, "hidden"), Dense(5, 3, dtype, "out")

    def __call__(self, x):
        return self.out(tf.tanh(self.hidden(x)))

    def weights(self) -> dict:
        """{legacy variable name: ported variable}."""
        return {f"net/{layer}/{part}": getattr(getattr(self, layer), part)
                for layer in ("hidden", "out") for part in ("kernel", "bias")}


def legacy_layers(x):
    """The same network with tf.compat.v1.layers (Keras 2 layers in a TF1 graph)."""
    hidden = tf.compat.v1.layers.dense(x, 5, activation=tf.tanh, name="hidden")
    return tf.compat.v1.layers.dense(hidden, 3, name="out")


def keras_weights(model) -> dict:
    """{legacy_layers' variable name: the Keras model's variable}."""
    return {f"{layer.name}/{part}": getattr(layer, part) for layer in model.layers
            for part in ("kernel", "bias")}
