"""The double-gradient trick with tangents of ones: the gradient of g = tf.gradients(U, x,
grad_ys=dummy)[0] with respect to the dummy, without grad_ys, is d(dummy·J)/d(dummy)·1 = J·1
with U's shape whatever the dummy holds, exactly cg.per_element_gradients(U, x), which
--fix writes (deleting g and the dummy when nothing else uses them). The look-alikes it must
leave alone are in forward_trick_lookalikes.py."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

inputs = tf.constant(np.linspace(-1.0, 1.0, 6).reshape(3, 2), tf.float32)
weights = tf.constant([[0.5, -1.0, 0.2], [2.0, 0.3, -0.7]])


def forward_gradients(U, x):
    """Parameters that might be lists at run time: the source is tf.nest.flatten(x)[0]."""
    dummy = tf.ones_like(U)
    g = tf.gradients(U, x, grad_ys=dummy)[0]
    return tf.gradients(g, dummy)[0]  # expect: CG106


def weighted_and_summed(net, points):
    """The weighted gradient is used too: it stays, the seed's values do not matter."""
    outputs = net(points)
    seed = tf.fill(tf.shape(outputs), 3.0)
    weighted = tf.gradients(outputs, points, grad_ys=seed)[0]
    return weighted, tf.gradients(weighted, seed)[0]  # expect: CG106


hidden = tf.tanh(tf.matmul(inputs, weights))
blank = tf.zeros(tf.shape(hidden))
vjp = tf.gradients(hidden, inputs, grad_ys=blank)[0]
per_point = tf.gradients(vjp, blank)[0]  # expect: CG106

with tf.Session() as sess:
    result = sess.run([forward_gradients(hidden ** 2, inputs), per_point,
                       weighted_and_summed(lambda v: tf.sin(v) * v, inputs)])
