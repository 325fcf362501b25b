"""The diagonal of a square Jacobian taken one column at a time (a divergence's terms, as
kernel Stein estimators write it): reported with the divergence as the advice, never
rewritten to a Jacobian, whose shape it is not."""
import numpy as np
import tensorflow.compat.v1 as tf

points = tf.constant(np.linspace(-1.0, 1.0, 12).reshape(4, 3), dtype=tf.float64)
field = tf.tanh(tf.matmul(points, tf.constant(np.eye(3) + 0.5, dtype=tf.float64)))
terms = tf.stack([tf.gradients(field[:, k], points)[0][:, k] for k in range(3)])  # expect: CG102
trace = tf.reduce_sum(terms, axis=0)
last = tf.stack(  # expect: CG102
    [tf.gradients(field[..., k], points)[0][..., k] for k in range(3)], axis=0)
rows = tf.stack([tf.gradients(field[:, k], points)[0] for k in range(3)])  # expect: CG102
