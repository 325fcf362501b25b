"""Per-dimension Laplacians the scanner reports but does not rewrite, each saying why: x of
a rank the source does not prove, terms collected in a list, a loop count that is not
range(n), tf.gradients with grad_ys, the loop variable read after the loop, a u computed
anew for every dimension, a tf.map_fn whose back_prop is a name (not a literal True or
False), a sum started from
tf.zeros_like(u) (a [b, 1] u would broadcast it against the [b] terms), a u that may be
another tensor at the loop than where its first gradient was taken (the last of a list
appended to in between), a scalar u (reduced without axis), and `lap = 0` sharing its line
with another statement."""
import tensorflow.compat.v1 as tf

x = tf.placeholder(tf.float32, [None, 4])
u = tf.reduce_sum(tf.sin(x) ** 2, axis=1)
g = tf.gradients(u, x)[0]


def residual(inputs, out):
    out_x = tf.gradients(out, inputs)[0]
    return sum(tf.gradients(out_x[:, i], inputs)[0][:, i] for i in range(4))  # expect: CG111


terms = []
for i in range(4):  # expect: CG111
    terms.append(tf.gradients(g[:, i], x)[0][:, i])
lap_list = tf.add_n(terms)

lap_steps = sum(tf.gradients(g[:, i], x)[0][:, i] for i in range(0, 4, 2))  # expect: CG111
twice = 2.0 * tf.ones_like(u)
lap_weighted = tf.add_n([tf.gradients(g[:, i], x, grad_ys=twice)[0][:, i]  # expect: CG111
                         for i in range(4)])

lap_last = 0
for j in range(4):  # expect: CG111
    lap_last += tf.gradients(g[:, j], x)[0][:, j]
last_column = x[:, j]

lap_net = sum(  # expect: CG111
    tf.gradients(tf.gradients(tf.layers.dense(x, 1), x)[0][:, i], x)[0][:, i] for i in range(4))

training = False
frozen = tf.map_fn(lambda i: tf.gradients(g[:, i], x)[0][:, i], tf.range(4),  # expect: CG111
                   dtype=tf.float32, back_prop=training)

ans = tf.zeros_like(u)
for i in range(4):  # expect: CG111
    second = tf.gradients(g[:, i], x)[0]
    ans += second[:, i]

layers = [tf.sin(x)]
top_x = tf.gradients(layers[-1], x)[0]
layers.append(layers[-1] ** 2)
lap_top = sum(tf.gradients(top_x[:, i], x)[0][:, i] for i in range(4))  # expect: CG111

energy = tf.reduce_mean(tf.sin(x) ** 2)
energy_x = tf.gradients(energy, x)[0]
lap_energy = sum(tf.gradients(energy_x[:, i], x)[0][:, i] for i in range(4))  # expect: CG111

n = 4; lap_line = 0  # noqa: E702 (as real programs write it)
for i in range(n):  # expect: CG111
    lap_line += tf.gradients(g[:, i], x)[0][:, i]
