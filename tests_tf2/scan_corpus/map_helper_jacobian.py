"""A Jacobian through a small map helper of one's own, built on tf.while_loop (the form an
often-copied answer to "gradient with respect to a matrix" uses): the helper's loop gets
cg.migrate.row_while_loop in place of tf.while_loop (the same edit for both callers)."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf


def loop_map(fn, elems, dtype=tf.float32, parallel_iterations=10):
    count = tf.shape(elems)[0]
    state = [tf.constant(0, count.dtype), tf.TensorArray(dtype, size=count)]
    _, out = tf.while_loop(lambda j, _: j < count,
                           lambda j, acc: (j + 1, acc.write(j, fn(elems[j]))),
                           state, parallel_iterations=parallel_iterations)
    return out.stack()


def map(fn, elems):  # shadows the builtin, as some copies of the helper do
    return loop_map(fn, elems)


def jacobian(fx, x):
    return loop_map(lambda fxi: tf.gradients(fxi, x)[0],  # expect: CG109
                    tf.reshape(fx, [-1]), dtype=x.dtype)


def jacobian_with_the_builtin_name(fx, x):
    def row(value):
        return tf.gradients(value, x)[0]
    return map(row, tf.reshape(fx, [-1]))  # expect: CG109


def squares(values):
    """The helper without gradients: nothing to report."""
    return loop_map(lambda v: v * v, values)


inputs = tf.constant(np.linspace(-1.0, 1.0, 6).reshape(3, 2), dtype=tf.float32)
outputs = tf.sin(tf.matmul(inputs, tf.constant([[0.5, -1.0], [2.0, 0.3]])))
with tf.Session() as sess:
    result = sess.run([jacobian(outputs, inputs), jacobian_with_the_builtin_name(outputs, inputs),
                       squares(tf.reshape(inputs, [-1]))])
