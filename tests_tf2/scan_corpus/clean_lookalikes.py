"""Look-alikes: a user function named gradients, a map_fn from another library, a method
called gradients, numpy imported as tf. No findings."""
from functools import reduce as map_fn

import numpy as tf


def gradients(ys, xs):
    return [ys[0] * 0 + x for x in xs]


y = tf.arange(6.0).reshape(2, 3)
x = tf.ones(3)
rows = tf.stack([gradients(y[i], [x])[0] for i in range(2)])
total = map_fn(lambda a, b: a + b, [gradients(y[i], [x])[0] for i in range(2)])
hess = [tf.outer(x, x) for _ in range(2)]


class Model:
    def gradients(self, target, sources):
        return sources

    def hessians(self, target, sources):
        return sources


model = Model()
again = [model.gradients(y[i], x) for i in range(2)]
h = model.hessians(y, x)
