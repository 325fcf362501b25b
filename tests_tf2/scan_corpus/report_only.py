"""Legacy idioms without a provably exact rewrite: reported, never rewritten."""
import tensorflow.compat.v1 as tf
import tensorflow.python.ops.parallel_for.gradients as pg  # expect: CG107
from tensorflow.keras import backend as K
from tensorflow.python.ops import gradients_impl  # expect: CG107
from tensorflow.python.ops.parallel_for import control_flow_ops  # expect: CG107
from tensorflow.python.ops.parallel_for import gradients as pfor_gradients  # expect: CG107

x = tf.placeholder(tf.float32, [3])
y = tf.stack([x[0] * x[1], x[1] ** 2, tf.sin(x[2])])
loss = tf.reduce_sum(y)

rows = []
for i in range(3):
    print("row", i)
    rows.append(tf.gradients(y[i], x)[0])  # expect: CG101
J = tf.stack(rows)

by_columns = tf.stack([tf.gradients(y[i], x)[0] for i in range(3)], axis=1)  # expect: CG102
weighted = tf.stack(  # expect: CG102
    [tf.gradients(y[i], x, grad_ys=2.0)[0] for i in range(3)]
)
pairs = tf.reshape(tf.stack([y, y]), [2, 3])
nested = [[tf.gradients(pairs[i, j], x)[0] for j in range(3)] for i in range(2)]  # expect: CG101


def noisy(yi):
    tf.summary.scalar("yi", yi)
    return tf.gradients(yi, x)[0]


mapped = tf.map_fn(noisy, y)  # expect: CG103
summed = tf.hessians([loss, 2 * loss], x)  # expect: CG105

u = tf.ones_like(y)
g = tf.gradients(y, x, grad_ys=u)
forward = tf.gradients(g, u, grad_ys=tf.ones_like(x))  # expect: CG106

k_grads = K.gradients(loss, [x])  # expect: CG108
tf_k_grads = tf.keras.backend.gradients(loss, x)  # expect: CG108
# y[..., i] indexes the LAST axis (not a row or a column): no rewrite.
cube = tf.reshape(tf.tile(y, [4]), [2, 2, 3])
last_axis = tf.stack([tf.gradients(cube[..., i], x)[0] for i in range(3)])  # expect: CG102

# A target computed in the loop (a new model output per row), and a column loop over one:
# evaluated once in a rewrite instead of once per row, so no rewrite.
def model_rows(model, inputs):
    return tf.stack([tf.gradients(model(inputs)[i], inputs)[0] for i in range(3)])  # expect: CG102


def model_columns(model, inputs):
    return tf.stack([tf.gradients(model(inputs)[:, i], inputs)[0]  # expect: CG102
                     for i in range(3)])


KB = tf.keras.backend
kb_grads = KB.gradients(loss, x)  # expect: CG108

J_private = pfor_gradients.jacobian(y, x)  # expect: CG107
H_private = gradients_impl.hessians(loss, x)  # expect: CG107
J_pg = pg.jacobian(y, x)  # expect: CG107
rows_pfor = control_flow_ops.pfor(lambda i: tf.gradients(y[i], x)[0], 3)  # expect: CG107
rows_for = control_flow_ops.for_loop(  # expect: CG107
    lambda i: tf.gradients(y[i], x)[0], tf.float32, 3)
hv = gradients_impl._hessian_vector_product(loss, [x], [tf.ones_like(x)])  # expect: CG107
