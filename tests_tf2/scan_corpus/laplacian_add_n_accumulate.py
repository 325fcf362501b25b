"""Score matching and high-dimensional PDE residuals write the Laplacian as tf.add_n of a
list, or as a running sum from lap = 0: over every column of x, over the first columns only
(the rewrite takes those columns of the diagonal), through a u with several outputs per
sample (tf.gradients sums them), the second gradient through a temporary, with independent
and with coupled samples."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

dim = 3
rng = np.random.RandomState(1)
w = tf.constant(rng.randn(dim, 4), dtype=tf.float64)
x = tf.placeholder(tf.float64, [None, dim])

energy = tf.reduce_sum(tf.sin(tf.matmul(x, w)) ** 2, axis=1)  # [b]
score = tf.gradients(energy, x)[0]
lap_add_n = tf.add_n([tf.gradients(score[:, i], x)[0][:, i] for i in range(dim)])  # expect: CG111

outputs = tf.tanh(tf.matmul(x * tf.reduce_mean(x, axis=0), w))  # [b, 4], samples coupled
grad = tf.gradients(outputs, x)[0]
lap = 0
for i in range(dim):  # expect: CG111
    lap += tf.gradients(grad[:, i], x)[0][:, i]

partial = 0.0
for k in range(2):  # expect: CG111
    partial = partial + tf.gradients(grad[:, k], x)[0][:, k]

delta = 0
for i in range(dim):  # expect: CG111
    second = tf.gradients(grad[:, i], x)[0]
    delta += second[:, i]

with tf.Session() as sess:
    result = sess.run([lap_add_n, lap, partial, delta], {x: rng.randn(6, dim)})
