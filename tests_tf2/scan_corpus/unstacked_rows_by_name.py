"""Rows over a name bound to tf.unstack(...): the Hessian as TensorFlow 1.0's own
`hessians` built it (and as projects that copied it still do): unstack the gradient, one
tf.gradients per element, stack the rows. Also the inline unstack of a gradient, rows under
enumerate (reported only when the loop uses the index too) and rows read with tf.gather."""
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

inline = tf.stack([tf.gradients(g, x)[0]  # expect: CG102
                   for g in tf.unstack(tf.gradients(loss, x)[0])])
numbered = []
for k, element in enumerate(tf.unstack(gradient)):  # noqa: B007 (as real programs write it)
    numbered.append(tf.gradients(element, x)[0])  # expect: CG101
by_enumerate = tf.stack(numbered)
gathered = tf.stack([tf.gradients(tf.gather(gradient, i), x)[0]  # expect: CG102
                     for i in range(4)])
scaled = []
for j, element in enumerate(tf.unstack(gradient)):
    scaled.append(tf.gradients(element, x)[0] * float(j))  # expect: CG101
by_index = tf.stack(scaled)

with tf.Session() as sess:
    result = sess.run([hessian, hessians(loss, [x]), inline, by_enumerate, gathered, by_index])
