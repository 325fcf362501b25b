"""Hessian rows and Jacobian rows stacked with TensorFlow's private spellings of tf.stack and
tf.unstack (array_ops_stack, TensorFlow 2.13 on; array_ops.pack / unpack, the pre-1.0
names copied TF1 code keeps), found as the public forms are; a Python loop over the first
rows of a vector; Hessian rows over range(n) of a gradient, all of them and the first ones.
Where the shapes prove the target a vector (or the weights one) the rewrite is the short
call: no row sums, cg.hessian for the rows of a gradient."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.python.ops import array_ops

try:
    from tensorflow.python.ops import array_ops_stack
except ImportError:  # TensorFlow 2.12: stack and unstack live in array_ops
    from tensorflow.python.ops import array_ops as array_ops_stack

rng = np.random.RandomState(6)
w = tf.Variable(tf.random_normal([3], dtype=tf.float64, seed=2))
loss = tf.reduce_sum(tf.sin(w) ** 2 * tf.reduce_prod(w))
g = tf.gradients(loss, w)[0]

H = array_ops_stack.stack(  # expect: CG102
    [tf.gradients(r, w)[0] for r in array_ops_stack.unstack(g)])
H_old = array_ops.pack([tf.gradients(r, w)[0] for r in array_ops.unpack(g, 3)])  # expect: CG102
H_all = tf.stack([tf.gradients(g[i], w)[0] for i in range(3)])  # expect: CG102
H_top = tf.stack([tf.gradients(g[i], w)[0] for i in range(2)])  # expect: CG102

x = tf.placeholder(tf.float64, [6])
y = tf.sin(x) * tf.reduce_sum(x ** 2)
rows = []
for i in range(4):
    rows.append(tf.gradients(y[i], x)[0])  # expect: CG101
J = tf.stack(rows)

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    result = sess.run([H, H_old, H_all, H_top, J], {x: rng.randn(6)})
