"""Hessian-vector products by double tf.gradients (the gradient of a gradient's product
with a vector): with tf.stop_gradient, a placeholder vector, tf.multiply, tf.tensordot, an
inline first gradient of a loss that is not a scalar, a result not indexed; and the forms
left as they are, each saying why: a loss computed through another name, a vector that
depends on the weights, a vector of another shape, and the form over lists of variables
and vectors of TensorFlow's private _hessian_vector_product, written here anew."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

rng = np.random.RandomState(5)
x = tf.placeholder(tf.float64, [None, 3])
w = tf.Variable(tf.random_normal([3], dtype=tf.float64, seed=1))
v = tf.placeholder(tf.float64, [3])
loss = tf.reduce_mean(tf.sin(tf.reduce_sum(x * w, 1)) ** 2 + tf.reduce_sum(w ** 4))

g = tf.gradients(loss, w)[0]
hv_stopped = tf.gradients(tf.reduce_sum(g * tf.stop_gradient(v)), w)[0]  # expect: CG112
hv_multiply = tf.gradients(tf.reduce_sum(tf.multiply(v, g)), w)  # expect: CG112
hv_dot = tf.gradients(tf.tensordot(g, v, 1), w)[0]  # expect: CG112
per_row = tf.tanh(x * w) ** 2  # [b, 3]: tf.gradients sums it
hv_inline = tf.gradients(  # expect: CG112
    tf.reduce_sum(tf.gradients(tf.tanh(x * w) ** 2, w)[0] * v), w)[0]

hidden = tf.tanh(x * w)
deep_loss = tf.reduce_sum(hidden ** 2)
deep_g = tf.gradients(deep_loss, w)[0]
hv_deep = tf.gradients(tf.reduce_sum(deep_g * v), w)[0]  # expect: CG112
hv_moving = tf.gradients(tf.reduce_sum(g * (w * 2.0)), w)[0]  # expect: CG112
scale = tf.placeholder(tf.float64, [1])
hv_broadcast = tf.gradients(tf.reduce_sum(g * scale), w)[0]  # expect: CG112


def hessian_times(ys, xs, vectors):
    first = tf.gradients(ys, xs)
    products = [tf.multiply(d, tf.stop_gradient(t)) for d, t in zip(first, vectors)]
    return tf.gradients(products, xs)  # expect: CG112


b = tf.Variable(0.5, dtype=tf.float64)
hv_list = hessian_times(tf.reduce_sum(tf.sin(tf.reduce_sum(x * w, 1) + b) ** 2), [w, b],
                        [v, tf.constant(2.0, tf.float64)])

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    feed = {x: rng.randn(5, 3), v: rng.randn(3), scale: [0.5]}
    result = sess.run([hv_stopped, hv_multiply, hv_dot, hv_inline, hv_deep, hv_moving,
                       hv_broadcast, hv_list], feed)
