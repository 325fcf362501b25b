"""tf.stack of tf.gradients per row, per unstacked element and per column: rank-3 rows and a
partial range show why a rewrite must sum the rows (tf.gradients sums its target)."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

x = tf.constant(np.linspace(0.5, 2.0, 6).reshape(3, 2), dtype=tf.float64)
y = tf.reshape(tf.tile(tf.reshape(x, [-1]), [4]) ** 2, [4, 3, 2])  # rows are 3 x 2
v = tf.reduce_sum(x**3, axis=1)
m = tf.matmul(x, tf.transpose(x))

rows = tf.stack([tf.gradients(y[i], x)[0] for i in range(3)])  # expect: CG102
vector = tf.stack([tf.gradients(vi, x)[0] for vi in tf.unstack(v)])  # expect: CG102
columns = tf.stack(  # expect: CG102
    [tf.gradients(m[:, j], x)[0] for j in range(m.shape[1])], axis=0
)

with tf.Session() as sess:
    result = sess.run([rows, vector, columns])
