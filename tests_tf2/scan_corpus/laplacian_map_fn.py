"""A quantum Monte Carlo kinetic energy: the Laplacian of log|psi| by tf.map_fn over the
coordinates (indices, tf.range), the mapped axis summed, plus |grad log psi|^2; the
diagonal kept dimension first, of a wave function with a factor of the first walker's
coordinate, which couples the walkers of the batch; and the mapped terms of an expanded
column assigned to a name and summed on the next line."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

n_coords = 6
rng = np.random.RandomState(3)
walkers = tf.placeholder(tf.float64, [None, n_coords])
a = tf.constant(rng.randn(n_coords, n_coords) * 0.3, dtype=tf.float64)


def log_psi(r, coupled):
    value = -tf.reduce_sum(tf.tanh(tf.matmul(r, a)) ** 2, axis=-1)
    if coupled:
        value = value + 0.1 * r[:1, 0] * r[:, 0] ** 2  # every walker sees the first
    return value


lp = log_psi(walkers, coupled=False)
grad = tf.gradients(lp, walkers)[0]
lap = tf.reduce_sum(  # expect: CG111
    tf.map_fn(lambda i: tf.gradients(grad[..., i], walkers)[0][..., i], tf.range(n_coords),
              dtype=tf.float64),
    axis=0)
kinetic = -0.5 * (lap + tf.reduce_sum(grad ** 2, axis=-1))

lq = log_psi(walkers, coupled=True)
grad_q = tf.gradients(lq, walkers)[0]
rows_q = tf.map_fn(  # expect: CG111
    lambda k: tf.gradients(grad_q[:, k], walkers)[0][:, k], tf.range(walkers.shape[1]),
    dtype=tf.float64)

elements = tf.map_fn(  # expect: CG111
    lambda i: tf.gradients(tf.expand_dims(grad_q[..., i], -1), walkers)[0][..., i],
    tf.range(n_coords), dtype=tf.float64, parallel_iterations=4)
kinetic_q = -0.5 * (tf.reduce_sum(elements, axis=0) + tf.reduce_sum(grad_q ** 2, axis=-1))

with tf.Session() as sess:
    result = sess.run([kinetic, rows_q, kinetic_q], {walkers: rng.randn(5, n_coords)})
