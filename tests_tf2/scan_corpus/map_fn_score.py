"""The score of a density, d log q(x) / dx for each sample, with tf.map_fn differentiating
with respect to its own element (as score-estimator experiments check their estimates):
it works, one element after another; --fix calls cg.migrate.gradient_map_fn in its place,
which maps every element at once when it can and runs map_fn otherwise."""
# exec: same
import numpy as np
import tensorflow as tf

mean = tf.constant(0.3)
log_std = tf.constant(-0.2)


def log_prob(value):
    scaled = (value - mean) / tf.exp(log_std)
    return -0.5 * scaled ** 2 - log_std - 0.5 * np.log(2.0 * np.pi)


samples = tf.constant(np.linspace(-2.0, 2.0, 7), dtype=tf.float32)
true_dlog_qx = tf.map_fn(lambda i: tf.gradients(log_prob(i), i)[0], samples)  # expect: CG103

with tf.compat.v1.Session() as sess:
    result = sess.run(true_dlog_qx)
