"""A wave function's kinetic energy by tf.map_fn over the coordinates with back_prop=False
(the rewrite stops the gradients through its result too, with tf.stop_gradient): a
log-amplitude built with tf.norm and a Slater determinant (tf.linalg.slogdet of orbitals
times an envelope), whose shape the source does not prove (the divergence of
the loop's gradient), and one of provable shape [b] computed row by row (the Laplacian
itself), summed over the dimensions by a generator; its Hessian diagonal, of the [b, 1]
amplitude, stacked as columns."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

electrons = 3
rng = np.random.RandomState(7)
walkers = tf.placeholder(tf.float64, [None, 3 * electrons])
positions = tf.reshape(walkers, [-1, electrons, 3])
radii = tf.norm(positions, axis=-1)
orbitals = tf.tanh(tf.matmul(positions, rng.randn(3, electrons))) + tf.eye(
    electrons, dtype=tf.float64) * 2.0
slater = tf.linalg.slogdet(orbitals * tf.exp(-radii)[:, :, None])[1]
log_psi = tf.expand_dims(slater + tf.reduce_sum(tf.tanh(radii) ** 2, 1), -1)
d_psi = tf.gradients(log_psi, walkers)[0]
laplacian = tf.reduce_sum(  # expect: CG111
    tf.map_fn(lambda i: tf.gradients(tf.expand_dims(d_psi[..., i], -1), walkers)[0][..., i],
              tf.range(3 * electrons), dtype=tf.float64, back_prop=False), 0)
kinetic = -0.5 * (laplacian + tf.reduce_sum(d_psi ** 2, -1))

mix = tf.reshape(tf.constant(rng.randn(12 * electrons) * 0.3, tf.float64), [3 * electrons, 4])
jastrow = tf.reduce_sum(tf.tanh(tf.matmul(walkers, mix)) ** 2, axis=1)  # [b], row by row
d_jastrow = tf.gradients(jastrow, walkers)[0]
jastrow_lap = sum(  # expect: CG111
    tf.gradients(d_jastrow[:, i], walkers)[0][:, i] for i in range(3 * electrons))
amplitude = tf.expand_dims(jastrow, -1)
a_x = tf.gradients(amplitude, walkers)[0]
a_xx = tf.stack(  # expect: CG111
    [tf.gradients(a_x[:, i], walkers)[0][:, i] for i in range(3 * electrons)], axis=1)

with tf.Session() as sess:
    result = sess.run([kinetic, jastrow_lap, a_xx], {walkers: rng.randn(5, 3 * electrons)})
