"""Rows and columns of targets of known and unknown rank (a placeholder without a shape): the
rewrite sums rows with tf.rank, so it runs for both, and keeps the static shapes where they
are known. A map_fn summing tf.expand_dims(g, 0) keeps its [n] shape. The import the rewrite
needs must run before the rewritten module-level code, not after the later import below."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

known = tf.placeholder(tf.float32, [3, 2])
unknown = tf.placeholder(tf.float32)
y_known = tf.sin(known) * known
y_unknown = tf.sin(unknown) * unknown  # rank unknown until it runs (2 here)

rows = []
for i in range(3):
    rows.append(tf.gradients(y_known[i], known)[0])  # expect: CG101
J_known = tf.stack(rows)

rows_u = []
for i in range(3):
    rows_u.append(tf.gradients(y_unknown[i], unknown)[0])  # expect: CG101
J_unknown = tf.stack(rows_u)

cols_u = tf.stack([tf.gradients(y_unknown[:, j], unknown)[0] for j in range(2)])  # expect: CG102
sums = tf.map_fn(  # expect: CG103
    lambda i: tf.reduce_sum(tf.expand_dims(tf.gradients(y_known[i], known)[0], 0)),
    tf.range(3), dtype=tf.float32,
)

import math  # noqa: E402  (a later import, after module-level code that is rewritten)

value = np.linspace(-math.pi, math.pi, 6).reshape(3, 2).astype(np.float32)
static = [J_known.shape.as_list(), sums.shape.as_list(),
          -1 if J_unknown.shape.rank is None else J_unknown.shape.rank]
with tf.Session() as sess:
    result = [sess.run([J_known, J_unknown, cols_u, sums], {known: value, unknown: value}),
              static]
