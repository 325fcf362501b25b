"""Rows over a name bound to tf.unstack(...): the Hessian as TensorFlow 1.0's own
`hessians` built it (and as projects that copied it still do): unstack the gradient, one
tf.gradients per element, stack the rows."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

x = tf.constant(np.linspace(0.5, 1.5, 4), dtype=tf.float64)
loss = tf.reduce_sum(tf.sin(x) * x**2) + tf.reduce_prod(x)


def hessians(ys, xs):
    result = []
    for x_k in xs:
        _gradients = tf.gradients(ys, x_k)[0]
        _gradients = tf.unstack(_gradients)
        _hess = [tf.gradients(_gradient, x_k)[0] for _gradient in _gradients]  # expect: CG101
        result.append(tf.stack(_hess))
    return result


gradient = tf.gradients(loss, x)[0]
elements = tf.unstack(gradient)
rows = [tf.gradients(g, x)[0] for g in elements]  # expect: CG101
hessian = tf.stack(rows)

with tf.Session() as sess:
    result = sess.run([hessian, hessians(loss, [x])])
