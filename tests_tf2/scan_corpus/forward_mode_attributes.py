"""The forward-mode double-gradient trick with attribute and subscript operands, as
physics-informed networks write it; matched within one function only."""
import numpy as np
import tensorflow.compat.v1 as tf


class PhysicsNet:
    def __init__(self, x, u):
        self.x, self.u = x, u
        self.dummy = tf.placeholder(tf.float32, [None, 1])
        self.dummies = [tf.placeholder(tf.float32, [None, 1]) for _ in range(2)]

    def forward_gradients(self, u, x):
        g = tf.gradients(u, x, grad_ys=self.dummy)[0]
        return tf.gradients(g, self.dummy)[0]  # expect: CG106

    def forward_gradients_indexed(self, u, x):
        g = tf.gradients(u, x, grad_ys=self.dummies[0])[0]
        return tf.gradients(g, self.dummies[0])[0]  # expect: CG106

    def loss_gradients(self, loss):
        """An ordinary gradient that happens to mention self.dummy: not the trick."""
        return tf.gradients(loss, self.dummy)

    def feed(self, batch):
        return {self.x: batch, self.dummy: np.ones((len(batch), 1), np.float32)}


def forward(u, x, v):
    g = tf.gradients(u, x, grad_ys=v)[0]
    return tf.gradients(g, v)[0]  # expect: CG106


def unrelated(loss, v):
    """Another function's `v`: a plain gradient."""
    return tf.gradients(loss, v)


def weighted_then_listed(losses, tensors):
    """grad_ys and xs that are calls: ordinary gradients, nothing to match."""
    scaled = tf.gradients(losses, tensors, grad_ys=tf.ones_like(losses))
    listed = tf.gradients(losses, tf.nest.flatten(tensors))
    return scaled, listed
