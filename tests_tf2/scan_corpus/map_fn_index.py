"""tf.map_fn over indices with tf.gradients inside: it runs (one gradient per element, in a
while_loop); the rewrite gives the same rows."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

x = tf.constant(np.linspace(0.1, 1.2, 6).reshape(3, 2), dtype=tf.float32)
y = tf.tanh(tf.matmul(x, tf.transpose(x)))  # 3 x 3

by_index = tf.map_fn(  # expect: CG103
    lambda i: tf.gradients(y[i], x)[0], tf.range(2), dtype=tf.float32
)
by_column = tf.map_fn(  # expect: CG103
    lambda j: tf.gradients(y[:, j], x)[0], tf.range(tf.shape(y)[1]), dtype=tf.float32
)

with tf.Session() as sess:
    result = sess.run([by_index, by_column])
