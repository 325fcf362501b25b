"""The TF2 port of legacy_model: a tf.Module, the straight-through estimator written as a
custom gradient."""

import tensorflow as tf


@tf.custom_gradient
def quantize(h):
    def straight_through(upstream):
        return upstream
    return tf.round(h * 4.0) / 4.0, straight_through


class Dense(tf.Module):
    def __init__(self, units_in, units_out, name):
        super().__init__(name=name)
        self.kernel = tf.Variable(tf.zeros([units_in, units_out]), name="kernel")
        self.bias = tf.Variable(tf.zeros([units_out]), name="bias")

    def __call__(self, x):
        return tf.matmul(x, self.kernel) + self.bias


class Net(tf.Module):
    quantize = staticmethod(quantize)

    def __init__(self):
        super().__init__(name="net")
        self.layer1 = Dense(16, 32, "layer1")
        self.layer2 = Dense(32, 32, "layer2")
        self.logits = Dense(32, 10, "logits")

    def __call__(self, x):
        h = self.quantize(tf.nn.relu(self.layer1(x)))
        return self.logits(tf.tanh(self.layer2(h)))

    def legacy_weights(self) -> dict:
        """{the legacy variable's name (v.op.name): the variable that plays its role here}."""
        return {f"net/{layer}/{part}": getattr(getattr(self, layer), part)
                for layer in ("layer1", "layer2", "logits") for part in ("kernel", "bias")}
