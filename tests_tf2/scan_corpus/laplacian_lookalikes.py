"""Second derivatives that are not a per-dimension Laplacian: a loop over another source,
mixed partials, one second derivative without a loop, a first-order loop over columns
(CG101's), the row sums of tf.gradients of tf.gradients, and a loop over the slabs `[:, i]`
of a rank-3 x (CG101's too: its terms are no Hessian diagonal). No CG111."""
import tensorflow.compat.v1 as tf

x = tf.placeholder(tf.float32, [None, 3])
t = tf.placeholder(tf.float32, [None, 3])
u = tf.reduce_sum(tf.sin(x) * tf.cos(t), axis=1)
u_x = tf.gradients(u, x)[0]

cross = sum(tf.gradients(u_x[:, i], t)[0][:, i] for i in range(3))  # expect: CG101
mixed = tf.stack([tf.gradients(u_x[:, i], x)[0][:, j]  # expect: CG102
                  for i in range(3) for j in range(3)])
u_xx0 = tf.gradients(u_x[:, 0], x)[0][:, 0]
y = tf.sin(x) * t
first = tf.stack([tf.gradients(y[:, i], x)[0] for i in range(3)])  # expect: CG102
hessian_rows = []
for i in range(3):
    hessian_rows.append(tf.gradients(u_x[:, i], x)[0])  # expect: CG101
row_sums = tf.gradients(tf.gradients(u, x)[0], x)[0]


def one_column(i):
    return tf.gradients(u_x[:, i], x)[0][:, i]


x3 = tf.placeholder(tf.float32, [None, 4, 3])
g3 = tf.gradients(tf.reduce_sum(tf.sin(x3), [1, 2]), x3)[0]
slabs = sum(tf.gradients(g3[:, i], x3)[0][:, i] for i in range(4))  # expect: CG101
