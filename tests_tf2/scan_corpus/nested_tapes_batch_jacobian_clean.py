"""Per-sample Hessians with nested tapes and batch_jacobian as a TF1 graph program:
no legacy gradient idiom, no findings (f is kept 2-D: batch_jacobian rejects a rank-1
target)."""
import numpy as np
import tensorflow.compat.v1 as tf

x = np.array([[-6.0, 1.0, 2.0, 4.0]])
y = np.array([[-3.0, 8.0, 9.0, 12.0]])
xy = tf.convert_to_tensor(np.concatenate([x.T, y.T], axis=1))

with tf.GradientTape() as tape2:
    tape2.watch(xy)
    with tf.GradientTape() as tape:
        tape.watch(xy)
        f = 3 * xy[:, 0:1] ** 2 * xy[:, 1:2] + xy[:, 1:2] ** 2
    df = tf.squeeze(tape.batch_jacobian(f, xy), axis=1)

d2f = tape2.batch_jacobian(df, xy)
with tf.Session() as sess:
    result = sess.run(d2f)
