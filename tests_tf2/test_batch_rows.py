"""The proof, while building, that a graph target keeps its source's rows: where it holds the
batch functions add no run-time batch-size check (the nested tf.gradients they replace has
none); where it cannot be shown the check stays, and still catches mixed samples."""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads._src.core.rows import keeps_rows

RNG = np.random.default_rng(0)
W = RNG.standard_normal((3, 4)).astype(np.float32)

PROVED = {
    "dense tanh layers": lambda x: tf.tanh(tf.matmul(tf.tanh(x @ W + 0.1), W.T)),
    "bias_add and softplus": lambda x: tf.nn.softplus(tf.nn.bias_add(x @ W, np.ones(4, "f"))),
    "per-sample sum": lambda x: tf.reduce_sum(tf.square(x), axis=1),
    "mean over the last axis, kept": lambda x: tf.reduce_mean(x, -1, keepdims=True),
    "columns sliced": lambda x: tf.exp(x[:, 1:]) * x[:, :1],
    "concat along features": lambda x: tf.concat([x, tf.sin(x)], axis=1),
    "stacked along a later axis": lambda x: tf.stack([x, x ** 2], axis=-1),
    "gather of features": lambda x: tf.gather(x, [0, 2], axis=1),
    "expand and squeeze": lambda x: tf.squeeze(tf.expand_dims(x, -1), -1),
    "a row-vector broadcast": lambda x: x * np.ones((1, 3), "f") - np.ones(3, "f"),
    "the source itself": lambda x: x,
}
NOT_PROVED = {
    "sum over the batch": lambda x: tf.reduce_sum(x, axis=0, keepdims=True),
    "the first rows": lambda x: x[:2],
    "samples mixed by concat": lambda x: tf.concat([x, x], 0),
    "a reshape": lambda x: tf.reshape(x, [-1, 1]),
    "a transposed matmul": lambda x: tf.matmul(x, x, transpose_a=True),
    "an op it does not know": lambda x: tf.linalg.matrix_transpose(x),
}


def _graph_pair(f):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3])
        return f(x), x


@pytest.mark.parametrize("case", sorted(PROVED))
def test_a_per_sample_model_keeps_the_rows_in_a_v1_graph(case):
    target, x = _graph_pair(PROVED[case])
    assert keeps_rows(target, x)


@pytest.mark.parametrize("case", sorted(NOT_PROVED))
def test_what_may_change_the_rows_is_not_proved(case):
    target, x = _graph_pair(NOT_PROVED[case])
    assert not keeps_rows(target, x)


def test_another_batched_input_is_not_proved_to_share_the_rows():
    graph = tf.Graph()
    with graph.as_default():
        x, z = (tf.compat.v1.placeholder(tf.float32, [None, 3]) for _ in range(2))
        assert not keeps_rows(x * z, x)  # z may hold 1 row, or another batch
        assert not keeps_rows(x, z)


def test_a_tf_function_with_an_unknown_batch_proves_the_same():
    found = []

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def f(x):
        found.append((keeps_rows(PROVED["dense tanh layers"](x), x),
                      keeps_rows(NOT_PROVED["the first rows"](x), x)))
        return x

    f.get_concrete_function()
    assert found == [(True, False)]


def test_eager_tensors_are_never_walked():
    x = tf.ones([2, 3])
    assert not keeps_rows(x * 2, x)


def _asserts(f):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3])
        before = len(graph.get_operations())
        result = cg.batch_jacobian(f(x), x)
        types = [op.type for op in graph.get_operations()[before:]]
        with tf.compat.v1.Session() as session:
            try:
                out = session.run(result, {x: np.ones((4, 3), np.float32)})
            except tf.errors.InvalidArgumentError as err:
                out = err
    return types.count("Assert"), out


def test_a_proved_model_builds_no_batch_check_and_is_right():
    asserts, out = _asserts(lambda x: tf.tanh(x) * 2.0)
    assert asserts == 0
    np.testing.assert_allclose(out, np.tile(np.diag([2 * (1 - np.tanh(1) ** 2)] * 3),
                                            (4, 1, 1)), rtol=1e-6)


def test_an_unproved_mix_of_samples_is_still_caught_at_run_time():
    asserts, out = _asserts(lambda x: tf.concat([x, x], 0))
    assert asserts >= 1
    assert isinstance(out, tf.errors.InvalidArgumentError)
    assert "target and source must have the same batch size" in out.message
