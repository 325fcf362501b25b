"""Hessian-vector products written with TensorFlow's private spellings, as code copied from
TensorFlow's _hessian_vector_product writes them: gradients imported from
tensorflow.compat.v1, gradients_impl.gradients, math_ops.multiply, math_ops.reduce_sum and
array_ops.stop_gradient. A product the source proves is rewritten; a helper that takes the
loss as a parameter (over lists, or one tensor) and the products summed by tf.add_n are
reported; the gradient of such a sum with respect to the input (a mixed second
derivative, not a Hessian-vector product) is not."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.compat.v1 import gradients
from tensorflow.python.ops import array_ops, gradients_impl, math_ops  # expect: CG107

rng = np.random.RandomState(7)
inputs = tf.placeholder(tf.float64, [None, 2])
kernel = tf.Variable(tf.random_normal([2], dtype=tf.float64, seed=3))
offset = tf.Variable(0.25, dtype=tf.float64)
direction = tf.placeholder(tf.float64, [2])
shift = tf.placeholder(tf.float64, [])
risk = tf.reduce_mean(tf.cos(tf.reduce_sum(inputs * kernel, 1)) ** 2 + tf.reduce_sum(kernel ** 4))

slope = gradients_impl.gradients(risk, kernel)[0]
curved = gradients_impl.gradients(  # expect: CG112
    math_ops.reduce_sum(math_ops.multiply(slope, array_ops.stop_gradient(direction))),
    kernel)[0]


def curvature_times(objective, weights, directions):
    """The product of the Hessian of `objective` with `directions`, over lists."""
    if len(weights) != len(directions):
        raise ValueError("one direction per weight")
    firsts = gradients(objective, weights)
    dots = [
        math_ops.multiply(d, array_ops.stop_gradient(u))
        for d, u in zip(firsts, directions) if d is not None
    ]
    seconds = gradients(dots, weights)  # expect: CG112
    return [s if s is not None else tf.zeros_like(p) for p, s in zip(weights, seconds)]


def curvature_along(objective, weight, vector):
    first = tf.gradients(objective, weight)[0]
    return tf.gradients(tf.reduce_sum(first * tf.stop_gradient(vector)), weight)[0]  # expect: CG112


mixed = tf.sin(tf.reduce_sum(inputs * kernel, 1) + offset) ** 2
pair = [kernel, offset]
both = curvature_times(tf.reduce_sum(mixed), pair, [direction, shift])
along = curvature_along(risk, kernel, direction)
firsts = tf.gradients(tf.reduce_sum(mixed), pair)
summed = tf.add_n([tf.reduce_sum(tf.multiply(a, array_ops.stop_gradient(u)))
                   for a, u in zip(firsts, [direction, shift])])
summed_hv = tf.gradients(summed, pair)  # expect: CG112
toward_inputs = tf.gradients(summed, inputs)[0]

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    feed = {inputs: rng.randn(4, 2), direction: rng.randn(2), shift: 0.5}
    result = sess.run([curved, both, along, summed_hv, toward_inputs], feed)
