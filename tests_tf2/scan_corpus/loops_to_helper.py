"""Loops the source alone cannot prove equal to a Jacobian (a parameter or a model output as
the target, a list of targets, a tuple-returning op, a count with side effects, a Python 2
range shim, a reshape around the stack, a comprehension stacked on the next line): --fix
rewrites them to cg.migrate.gradient_rows, which checks at run time and runs the loop itself
where it cannot vectorize."""
# exec: same
import numpy as np
import tensorflow as tf

try:
    xrange  # noqa: B018
except NameError:  # the Python 2 compatibility shim of many TF1 code bases
    xrange = range

x = tf.constant(np.linspace(-1.0, 1.0, 6).reshape(2, 3), dtype=tf.float64)
w = tf.constant([[0.5, -2.0, 1.0], [1.5, 0.3, -0.7], [0.2, 0.1, 0.9]], dtype=tf.float64)


def model(inputs):
    return tf.tanh(tf.matmul(inputs, w))


def rows_of(t, s):
    """The target is a parameter: a list or a tensor, known at run time only."""
    return tf.stack([tf.compat.v1.gradients(t[i], s)[0] for i in range(2)])  # expect: CG102


def class_gradients(inputs, classes):
    """Columns of a model's output, the gradient with respect to the input."""
    logits = model(inputs)
    grads = []
    for k in xrange(classes):
        grads.append(tf.compat.v1.gradients(logits[:, k], inputs)[0])  # expect: CG101
    return tf.reshape(tf.stack(grads), [classes, -1])


def saliency_jacobian(logits, x_in, nb_classes, nb_features):
    """The gradient list kept in a temporary, its first element appended."""
    list_derivatives = []
    for class_ind in xrange(nb_classes):
        derivatives = tf.compat.v1.gradients(logits[:, class_ind], x_in)  # expect: CG101
        list_derivatives.append(derivatives[0])
    return tf.reshape(tf.stack(list_derivatives), shape=[nb_classes, -1, nb_features])


def next_count():
    return 2


loss = tf.reduce_sum(model(x) ** 2)
y = model(x)
losses = [loss, tf.reduce_sum(y)]
per_loss = []
for k in range(len(losses)):
    per_loss.append(tf.compat.v1.gradients(losses[k], x)[0])  # expect: CG101
J_losses = tf.stack(per_loss)

grad = tf.compat.v1.gradients
counted = tf.stack([grad(y[i], w)[0] for i in range(next_count())])  # expect: CG102

m = tf.reshape(tf.tile(x[0], [3]), [3, 3]) + tf.eye(3, dtype=tf.float64)
sl = tf.linalg.slogdet(m)
by_part = tf.stack([tf.compat.v1.gradients(sl[i], x)[0] for i in range(2)])  # expect: CG102

listed = [tf.compat.v1.gradients(y[:, j], [x, w])[1] for j in range(3)]  # expect: CG101
J_listed = tf.transpose(tf.stack(listed), [1, 0, 2])

with tf.compat.v1.Session() as sess:
    result = sess.run([rows_of(y, x), rows_of([loss, loss * 2.0], w), class_gradients(x, 3),
                       J_losses, counted, by_part, J_listed,
                       saliency_jacobian(model(x), x, 3, 3)])
