"""`compat_grads.migrate.gradient_rows` has the exact semantics of the loop it replaces, in
a TF1 graph: values, shape, dtype, errors, whether it vectorizes or runs the loop."""

import numpy as np
import pytest

from compat_grads._tf import tf
from compat_grads.migrate import gradient_rows

RNG = np.random.RandomState(0)


def _loop(ys, xs, indices, axis=0, index=0):
    return tf.stack([tf.compat.v1.gradients(ys[i] if axis == 0 else ys[:, i], xs)[index]
                     for i in indices])


def _graph(build):
    """(helper, loop) values and the helper's static shape, from `build()` in a new graph."""
    with tf.Graph().as_default():
        helper, loop = build()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            got, want = session.run([helper, loop])
        return got, want, helper.shape.as_list(), loop.shape.as_list(), helper.dtype


def _model(x, w):
    return tf.tanh(tf.einsum("bi,ijk->bjk", x, w))  # (4, 3, 2): rows have rank 2


CASES = {
    "rows of a rank-3 output": (0, lambda y: range(4)),
    "columns": (1, lambda y: range(3)),
    "some rows, negative and repeated": (0, lambda y: [3, -1, 0, 0]),
    "six-style range object": (0, lambda y: iter(range(2))),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_vectorized_rows_equal_the_loop(name, dtype):
    axis, indices = CASES[name]

    def build():
        x = tf.constant(RNG.randn(4, 5), dtype)
        w = tf.constant(RNG.randn(5, 3, 2), dtype)
        y = _model(x, w)
        return (gradient_rows(y, [w, x], indices(y), axis=axis, index=1),
                _loop(y, [w, x], indices(y), axis, 1))

    got, want, shape, loop_shape, out_dtype = _graph(build)
    assert shape == loop_shape and got.shape == want.shape and out_dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == tf.float64 else 2e-5,
                               atol=1e-6)


def test_it_vectorizes_instead_of_building_a_loop():
    with tf.Graph().as_default() as graph:
        x = tf.constant(RNG.randn(200, 3), tf.float32)
        y = tf.sin(x) * 2.0
        before = len(graph.get_operations())
        gradient_rows(y, x, range(200))
        vectorized = len(graph.get_operations()) - before
        before = len(graph.get_operations())
        _loop(y, x, range(200))
        looped = len(graph.get_operations()) - before
    assert vectorized < looped / 10, (vectorized, looped)


def test_a_variable_source_and_an_unknown_batch():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3])
        v = tf.compat.v1.get_variable("v", initializer=tf.constant(RNG.randn(3, 2), tf.float32))
        y = tf.matmul(x, v) ** 2
        feed = {x: RNG.randn(5, 3)}
        helper, loop = gradient_rows(y, v, range(5)), _loop(y, v, range(5))
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            got, want = session.run([helper, loop], feed)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ys_kind", ["list of tensors", "integer tensor"])
def test_what_cannot_vectorize_runs_the_loop(ys_kind):
    def build():
        x = tf.constant(RNG.randn(3), tf.float32)
        ys = ([x[0] * x[1], x[2] ** 2] if ys_kind == "list of tensors"
              else tf.cast(x * 10, tf.int32))
        if ys_kind == "integer tensor":  # tf.gradients of an int target: None rows
            with pytest.raises(ValueError):
                gradient_rows(ys, x, range(2))
            with pytest.raises(ValueError):
                _loop(ys, x, range(2))
            return tf.zeros([1]), tf.zeros([1])
        return gradient_rows(ys, x, range(2)), _loop(ys, x, range(2))

    got, want, shape, loop_shape, _ = _graph(build)
    np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("case", ["source not connected (None rows)",
                                  "index out of range"])
def test_errors_are_the_loops_errors(case):
    def raised(call):
        with pytest.raises(Exception) as info:
            call()
        return type(info.value)

    with tf.Graph().as_default():
        x = tf.constant(RNG.randn(3), tf.float32)
        y = tf.sin(x)
        source, indices = ((tf.constant(1.0), range(3)) if case.startswith("source")
                           else (x, range(4)))
        ours = raised(lambda: gradient_rows(y, source, indices))
        theirs = raised(lambda: _loop(y, source, indices))
    assert ours is theirs
