"""tf.hessians through three spellings: it sums ys, returns one x.shape + x.shape block per
source and never the cross terms."""
# exec: same
import numpy as np
import tensorflow as tf
from tensorflow.compat import v1

x = tf.constant([0.3, -1.2, 2.0], dtype=tf.float64)
w = tf.constant(np.linspace(-1.0, 1.0, 6).reshape(3, 2), dtype=tf.float64)
b = tf.constant([0.1, 0.2], dtype=tf.float64)
y = tf.sin(x) * x**2
loss = tf.reduce_sum(tf.tanh(tf.linalg.matvec(w, x, transpose_a=True) + b) ** 2)

h_x = tf.hessians(y, x)  # expect: CG105
h_wb = tf.compat.v1.hessians(loss, [w, b])  # expect: CG105
h_w = v1.hessians(ys=loss, xs=w, name="h")  # expect: CG105

with v1.Session() as sess:
    result = sess.run([h_x, h_wb, h_w])
