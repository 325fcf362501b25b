"""Per-dimension Laplacians whose u is bound away from the loop. Rewritten: a PINN class's
self.u, and a u bound again for each network in a loop that also holds the Laplacian's
loop. Reported only, since u at the loop may be another tensor than the one the first
gradient was taken of: u bound in a loop the Laplacian is not in (the first gradient kept
from the first pass), an entry of a dict replaced in between, an attribute set again by
setattr. The program's numbers stay the loop's."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

rng = np.random.RandomState(0)
w1 = tf.constant(rng.randn(3, 6), dtype=tf.float64)
w2 = tf.constant(rng.randn(6, 1), dtype=tf.float64)
x = tf.placeholder(tf.float64, [None, 3])


def net(inputs, scale):
    return tf.matmul(tf.tanh(tf.matmul(inputs, w1)), w2) * scale


class Poisson:
    def __init__(self):
        self.x = tf.placeholder(tf.float64, [None, 3])
        self.u = net(self.x, 1.0)
        u_x = tf.gradients(self.u, self.x)[0]
        self.lap = sum(tf.gradients(u_x[:, i], self.x)[0][:, i]  # expect: CG111
                       for i in range(3))


laps = []
for scale in (1.0, 2.0):
    u = net(x, scale)
    u_x = tf.gradients(u, x)[0]
    laps.append(sum(tf.gradients(u_x[:, i], x)[0][:, i] for i in range(3)))  # expect: CG111

for k in range(2):
    v = net(x, k + 1.0)
    if k == 0:
        v_x = tf.gradients(v, x)[0]
lap_first = sum(tf.gradients(v_x[:, i], x)[0][:, i] for i in range(3))  # expect: CG111

outs = {"u": net(x, 1.0)}
w_x = tf.gradients(outs["u"], x)[0]
outs["u"] = tf.sin(outs["u"]) * x[:, :1] ** 3
lap_dict = 0
for i in range(3):  # expect: CG111
    lap_dict += tf.gradients(w_x[:, i], x)[0][:, i]


class Holder:
    pass


held = Holder()
held.value = net(x, 1.0)
h_x = tf.gradients(held.value, x)[0]
setattr(held, "value", held.value * 5.0)  # noqa: B010 (as real programs write it)
lap_attr = sum(tf.gradients(h_x[:, i], x)[0][:, i] for i in range(3))  # expect: CG111

pde = Poisson()
points = rng.uniform(-1.0, 1.0, size=(5, 3))
with tf.Session() as sess:
    result = sess.run([pde.lap, laps, lap_first, lap_dict, lap_attr],
                      {x: points, pde.x: points})
