"""A Poisson PINN's residual: the Laplacian of u(x, y) summed over the dimensions, one pair
of tf.gradients graphs per dimension (a generator, and the first gradient inline), for a
network whose samples are independent and for one whose batch-norm-like centring couples
them: the rewrite gives the loop's numbers for both."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

rng = np.random.RandomState(0)
w1 = tf.constant(rng.randn(2, 8), dtype=tf.float64)
w2 = tf.constant(rng.randn(8, 1), dtype=tf.float64)
x_tf = tf.placeholder(tf.float64, shape=[None, 1])
y_tf = tf.placeholder(tf.float64, shape=[None, 1])
X = tf.concat([x_tf, y_tf], 1)


def net(inputs, coupled):
    h = tf.tanh(tf.matmul(inputs, w1))
    if coupled:  # centred over the batch, as batch norm in training mode does
        h = h - tf.reduce_mean(h, axis=0, keepdims=True)
    return tf.matmul(tf.sin(h), w2)


u = net(X, coupled=False)
u_X = tf.gradients(u, X)[0]
lap_u = sum(tf.gradients(u_X[:, i], X)[0][:, i] for i in range(2))  # expect: CG111
f_u = lap_u + tf.sin(np.pi * X[:, 0])

v = net(X, coupled=True)
lap_v = sum([tf.gradients(tf.gradients(v, X)[0][:, i], X)[0][:, i]  # expect: CG111
             for i in range(X.shape[1])])

points = rng.uniform(-1.0, 1.0, size=(5, 2))
with tf.Session() as sess:
    result = sess.run([f_u, lap_v], {x_tf: points[:, :1], y_tf: points[:, 1:]})
