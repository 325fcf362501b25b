"""A loop over tf.unstack(y) whose body does more than collect the gradient rows: reported
only, with the reason (the scanner must not stop on it)."""
import tensorflow.compat.v1 as tf

w = tf.Variable(tf.ones([3]))
norms = []
rows = []
for ek in tf.unstack(w * 2.0):
    rows.append(tf.gradients(ek, w)[0])  # expect: CG101
    norms.append(tf.norm(rows[-1]))
J = tf.stack(rows)
