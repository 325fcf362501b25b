"""Jacobians built row by row in a tf.while_loop (the forms Levenberg-Marquardt trainers,
Hessian-based optimisers and their copies use): the TensorArray loops get
cg.migrate.row_while_loop in place of tf.while_loop; the concatenating loop is reported
only."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf


def rows_in_tensor_array(y, x, m):
    """Lambdas for cond and body; the rows go into a TensorArray, stacked afterwards."""
    state = [tf.constant(0, tf.int32), tf.TensorArray(tf.float32, size=m)]
    _, rows = tf.while_loop(  # expect: CG109
        lambda i, _: i < m,
        lambda i, acc: (i + 1, acc.write(i, tf.gradients(y[i], x)[0])),
        state)
    return tf.transpose(rows.stack())


def flat_rows_for_a_trainer(errors, params):
    """A named body, a dynamic row count, a list of parameters flattened per row."""
    count = tf.shape(errors)[0]

    def step(index, acc):
        grads = tf.gradients(errors[index], params)
        flat = tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0)
        return index + 1, acc.write(index, flat)

    _, acc = tf.while_loop(lambda index, _: index < count, step,  # expect: CG109
                           [tf.constant(0), tf.TensorArray(tf.float32, size=count)])
    return acc.stack()


def hessian_rows(loss, params):
    """The first gradient is an ordinary one; the rows of its Jacobian are the Hessian."""
    grad = tf.concat([tf.reshape(g, [-1]) for g in tf.gradients(loss, params)], axis=0)
    size = tf.size(grad)

    def step(k, acc):
        row = tf.gradients(grad[k], params)
        return k + 1, acc.write(k, tf.concat([tf.reshape(r, [-1]) for r in row], axis=0))

    _, acc = tf.while_loop(lambda k, _: k < size, step,  # expect: CG109
                           [0, tf.TensorArray(tf.float32, size=size)])
    return acc.stack()


def concatenated_columns(a, x, n):
    """No TensorArray: each row is sliced out and concatenated onto the accumulator."""
    flat = tf.reshape(a, [-1])

    def grow(i, acc):
        piece = tf.slice(flat, [i], [1])
        column = tf.reshape(tf.gradients(piece, x)[0], [-1, 1])
        return i + 1, tf.concat([acc, column], axis=1)

    first = tf.reshape(tf.gradients(flat[0], x)[0], [-1, 1])
    return tf.while_loop(lambda i, _: i < n, grow, [1, first],  # expect: CG109
                         shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, None])])


def tape_rows_in_a_loop(f, x, n):
    """The TF2 spelling of the same loop, with a tape in the body."""
    def body(i, acc):
        with tf.GradientTape() as tape:
            tape.watch(x)
            yi = f(x)[i]
        return i + 1, acc.write(i, tape.gradient(yi, x))

    return tf.while_loop(lambda i, _: i < n, body,  # expect: CG109
                         [0, tf.TensorArray(tf.float32, size=n)])


def gradient_descent_loop(loss_fn, x, steps):
    """Not a Jacobian: the same loss gradient at every step."""
    def body(i, v):
        return i + 1, v - 0.1 * tf.gradients(loss_fn(v), v)[0]

    return tf.while_loop(lambda i, _: i < steps, body, [0, x])


def no_gradients(values, n):
    return tf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + values[i]), [0, 0.0])


# The loop this module replaced, kept as a comment, is not code:
# _, r = tf.while_loop(c, lambda i, a: (i + 1, a.write(i, tf.gradients(y[i], x)[0])), s)


inputs = tf.constant(np.linspace(-1.0, 1.0, 6).reshape(3, 2), dtype=tf.float32)
kernel = tf.constant([[0.5, -1.0, 0.2], [2.0, 0.3, -0.7]])
outputs = tf.tanh(tf.matmul(inputs, kernel))
errors = tf.reduce_sum(outputs, axis=1)
with tf.Session() as sess:
    result = sess.run([
        rows_in_tensor_array(outputs, inputs, 3),
        flat_rows_for_a_trainer(errors, [kernel, inputs]),
        hessian_rows(tf.reduce_sum(errors ** 2), [kernel]),
        concatenated_columns(outputs, inputs, 9)[1],
        tape_rows_in_a_loop(lambda v: tf.tanh(tf.matmul(v, kernel)), inputs, 3)[1].stack(),
        gradient_descent_loop(lambda v: tf.reduce_sum(v ** 2), inputs, 3)[1],
        no_gradients(errors, 3)[1],
    ])
