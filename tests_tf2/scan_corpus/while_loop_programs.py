"""The tf.while_loop Jacobians of Levenberg-Marquardt trainers and Hessian-based optimisers,
and a map helper of one's own on tf.while_loop, run as a program: --fix calls
cg.migrate.row_while_loop in their place, which computes the rows at once when it can check
at run time that they are what the loop writes, and runs the loop itself otherwise."""
# exec: same
import numpy as np
import tensorflow as tf

x = tf.constant(np.linspace(-1.0, 1.0, 6).reshape(3, 2), dtype=tf.float32)
w = tf.compat.v1.get_variable("w", initializer=tf.constant([[0.5, -1.0], [2.0, 0.3]]))
b = tf.compat.v1.get_variable("b", initializer=tf.constant([0.1, -0.2]))


def jacobian(y, x, m):
    """Lambdas for cond and body, the size a Python int."""
    loop_vars = [tf.constant(0, tf.int32), tf.TensorArray(tf.float32, size=m)]
    _, jac = tf.while_loop(  # expect: CG109
        lambda i, _: i < m,
        lambda i, res: (i + 1, res.write(i, tf.gradients(y[i], x)[0])),
        loop_vars)
    return jac.stack()


def make_single_vector(parts):
    return tf.concat([tf.reshape(p, [-1]) for p in parts], axis=0)


def compute_jacobian(values, parameters):
    """A named body, a dynamic count, a list of parameters flattened per row."""
    n_samples = tf.shape(values)[0]

    def compute_gradient_per_value(index, result):
        gradients = tf.gradients(values[index], parameters)
        full_gradient = make_single_vector(gradients)
        return index + 1, result.write(index, full_gradient)

    _, jac = tf.while_loop(  # expect: CG109
        lambda index, _: index < n_samples,
        compute_gradient_per_value,
        [tf.constant(0, tf.int32), tf.TensorArray(tf.float32, size=n_samples)])
    return jac.stack()


def find_hessian(loss, parameters):
    """The rows of the gradient's Jacobian: the Hessian."""
    full_gradient = make_single_vector(tf.gradients(loss, parameters))
    size = tf.size(full_gradient)

    def row(k, acc):
        return k + 1, acc.write(k, make_single_vector(tf.gradients(full_gradient[k], parameters)))

    _, hessian = tf.while_loop(lambda k, _: k < size, row,  # expect: CG109
                               [0, tf.TensorArray(tf.float32, size=size)])
    return hessian.stack()


def tf_map(f, elems, dtype=tf.float32, parallel_iterations=10):
    n = tf.shape(elems)[0]
    loop_vars = [tf.constant(0, tf.int32), tf.TensorArray(dtype, size=n)]
    _, fx = tf.while_loop(
        lambda j, _: j < n,
        lambda j, result: (j + 1, result.write(j, f(elems[j]))),
        loop_vars,
        parallel_iterations=parallel_iterations)
    return fx.stack()


def flat_jacobian(fx, x):
    return tf_map(lambda fxi: tf.gradients(fxi, x)[0],  # expect: CG109
                  tf.reshape(fx, [-1]), dtype=x.dtype)


def jacobian_less(y, x):
    """The condition spelled tf.less (the same Less op as `i < n`), a named one tf.math.less."""
    n = tf.shape(y)[0]

    def more(i, _):
        return tf.math.less(i, n)

    _, by_less = tf.while_loop(  # expect: CG109
        lambda i, _: tf.less(i, n),
        lambda i, acc: (i + 1, acc.write(i, tf.gradients(y[i], x)[0])),
        [0, tf.TensorArray(tf.float32, size=n)])
    _, by_math_less = tf.while_loop(  # expect: CG109
        more, lambda i, acc: (i + 1, acc.write(i, tf.gradients(y[i], w)[0])),
        [0, tf.TensorArray(tf.float32, size=n)])
    return by_less.stack(), by_math_less.stack()


y = tf.tanh(tf.matmul(x, w) + b)
errors = tf.reduce_sum(y, axis=1)
loss = tf.reduce_sum(errors ** 2)
squares = tf_map(lambda v: v * v, tf.reshape(x, [-1]))  # a map without gradients

with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    result = sess.run([jacobian(y, x, 3), compute_jacobian(errors, [w, b]),
                       find_hessian(loss, [w, b]), flat_jacobian(y, w), squares,
                       jacobian_less(errors, x)])
