"""Loops that collect tf.gradients rows: plain append, a temporary, columns, a list of
sources, a source of unknown kind inside a function, and aliases of tf.gradients. (A target
of unknown kind, such as a parameter, is report only: it may be a list.)"""
# exec: same
import numpy as np
import tensorflow as tf
from tensorflow.compat.v1 import gradients as grad_fn

x = tf.constant(np.linspace(-1.0, 1.0, 6).reshape(2, 3), dtype=tf.float64)
w = tf.constant([0.5, -2.0], dtype=tf.float64)
y = tf.matmul(tf.sin(x), tf.transpose(x)) * w  # 2 x 2

jac_rows = []
for i in range(2):
    jac_rows.append(tf.compat.v1.gradients(y[i], x)[0])  # expect: CG101
J1 = tf.stack(jac_rows)

cols = []
for k in range(y.shape[1]):  # the columns, with respect to w
    g = grad_fn(y[:, k], [x, w])[1]  # expect: CG101
    cols.append(g)
J2 = tf.stack(cols, axis=0)

params = [x, w]
per_w = []
for i in range(2):
    per_w.append(tf.expand_dims(tf.compat.v1.gradients(y[i], params)[1], 0))  # expect: CG101
J3 = tf.stack(per_w)


def jacobian_of(s):
    out = []
    for r in range(2):
        out.append(tf.compat.v1.gradients(y[r], s)[0])  # expect: CG101
    return tf.stack(out)


J4 = jacobian_of(x)

with tf.compat.v1.Session() as sess:
    result = sess.run([J1, J2, J3, J4])
