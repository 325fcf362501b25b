"""Physics-informed residuals: the network gives one value per collocation point (u has
shape [n, 1], row k computed from point k only), so tf.gradients(u, x) is already each
point's derivative, exact and in one reverse pass. No findings."""
import numpy as np
import tensorflow.compat.v1 as tf


class HeatResidual:
    def __init__(self, widths, diffusivity):
        self.x = tf.placeholder(tf.float32, [None, 1])
        self.t = tf.placeholder(tf.float32, [None, 1])
        self.layers = [tf.Variable(0.1 * np.random.randn(m, n).astype(np.float32))
                       for m, n in zip(widths[:-1], widths[1:])]
        self.u = self.net(tf.concat([self.x, self.t], axis=1))
        u_t = tf.gradients(self.u, self.t)[0]
        u_x = tf.gradients(self.u, self.x)[0]
        u_xx = tf.gradients(u_x, self.x)[0]
        self.residual = u_t - diffusivity * u_xx
        self.loss = tf.reduce_mean(tf.square(self.residual))

    def net(self, h):
        for weight in self.layers[:-1]:
            h = tf.tanh(tf.matmul(h, weight))
        return tf.matmul(h, self.layers[-1])


def burgers_residual(net, x, t, nu):
    u = net(tf.concat([x, t], 1))
    u_x = tf.gradients(u, x)[0]
    return tf.gradients(u, t)[0] + u * u_x - nu * tf.gradients(u_x, x)[0]
