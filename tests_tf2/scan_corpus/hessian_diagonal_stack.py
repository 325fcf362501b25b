"""The per-dimension diagonal of the Hessian stacked as columns (tf.stack along axis 1 or
-1), stacked dimension first then summed (a Laplacian), or kept dimension first (the
transposed diagonal); samples independent, and coupled through the batch mean."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

rng = np.random.RandomState(2)
x = tf.placeholder(tf.float64, shape=(None, 3))
w = tf.constant(rng.randn(3, 1), dtype=tf.float64)

u = tf.exp(tf.matmul(x ** 2, w) * 0.1)  # [b, 1]
u_x = tf.gradients(u, x)[0]
u_xx = tf.stack([tf.gradients(u_x[:, i], x)[0][:, i] for i in range(3)], axis=1)  # expect: CG111

c = tf.reduce_sum(tf.sin(x) * tf.reduce_mean(x ** 2, axis=0), axis=1)  # [b], coupled
c_x = tf.gradients(c, x)[0]
c_xx = tf.stack([tf.gradients(c_x[:, j], x)[0][:, j]  # expect: CG111
                 for j in range(x.shape[1])], axis=-1)
c_lap = tf.reduce_sum(  # expect: CG111
    tf.stack([tf.gradients(c_x[:, j], x)[0][:, j] for j in range(3)]), axis=0)
c_rows = tf.stack([tf.gradients(c_x[:, j], x)[0][:, j] for j in range(2)])  # expect: CG111

with tf.Session() as sess:
    result = sess.run([u_xx, c_xx, c_lap, c_rows], {x: rng.randn(4, 3)})
