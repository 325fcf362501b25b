"""tf.map_fn over the values of y with the per-element derivative summed over x: fails at run
time as written; the rewrite (per_element_gradients) matches the oracle, the row sums of A."""
# exec: crashes
import numpy as np
import tensorflow.compat.v1 as tf

A_value = np.random.RandomState(1).normal(size=(20, 5)).astype(np.float32)
oracle = A_value.sum(axis=1)

A = tf.constant(A_value)
x = tf.Variable(np.ones((5, 1), np.float32))
y = tf.reshape(tf.matmul(A, x), [-1])


def d_total(yi):
    """The derivative of one element of y, summed over x."""
    return tf.reduce_sum(tf.gradients(yi, x)[0])


per_element = tf.map_fn(d_total, y)  # expect: CG103

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    result = sess.run(per_element)
