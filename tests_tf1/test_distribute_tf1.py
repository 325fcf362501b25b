"""`distribute=` in a TF1 graph: a list of device names places the pieces with tf.device in
one graph, run in a Session with two CPU devices; a tf.distribute.Strategy is refused with
the TF1 way to do it."""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg

RNG = np.random.RandomState(0)
X = RNG.randn(5, 3).astype(np.float32)
W = RNG.randn(3, 4).astype(np.float32)
DEVICES = ["/cpu:0", "/cpu:1"]


def _layer(x):
    return tf.tanh(tf.matmul(x, tf.constant(W)))


def _energy(x):
    return tf.reduce_sum(tf.sin(x) ** 2 * tf.reduce_sum(tf.constant(W)))


def _per_sample(x):
    return tf.reduce_sum(tf.sin(x) ** 3, axis=1)


CALLS = {
    "stacked_jacobian of a tensor": lambda x, **k: cg.stacked_jacobian(_layer(x), x, **k),
    "stacked_jacobian of a callable": lambda x, **k: cg.stacked_jacobian(_layer, x, **k),
    "stacked_jacobian by columns": lambda x, **k: cg.stacked_jacobian(
        _layer, x, strategy="forward", **k),
    "batch_jacobian": lambda x, **k: cg.batch_jacobian(_layer, x, **k),
    "hessian": lambda x, **k: cg.hessian(_energy, x, **k),
    "batch_hessian": lambda x, **k: cg.batch_hessian(_per_sample, x, **k),
    "per_example_gradients": lambda x, **k: cg.per_example_gradients(
        lambda yt, yp: tf.reduce_sum((yp - yt) ** 2, axis=1), _Linear(), x,
        tf.zeros([5, 4]), weights=[_Linear.kernel], **k),
    "per_example_gradient_norms": lambda x, **k: cg.per_example_gradient_norms(
        lambda yt, yp: tf.reduce_sum((yp - yt) ** 2, axis=1), _Linear(), x,
        tf.ones([5, 4]), weights=[_Linear.kernel], **k),
    "clipped_gradients, noised, mean": lambda x, **k: cg.clipped_gradients(
        lambda yt, yp: tf.reduce_sum((yp - yt) ** 2, axis=1), _Linear(), x,
        tf.ones([5, 4]), weights=[_Linear.kernel], l2_norm_clip=1.0, noise_multiplier=0.5,
        seed=7, reduction="mean", return_norms=True, **k),
}


class _Linear:
    kernel = None

    def __call__(self, x):
        return tf.matmul(x, _Linear.kernel)


def _run(name):
    """(distributed, one-device) values, and the devices the ops ran on."""
    with tf.Graph().as_default():
        _Linear.kernel = tf.compat.v1.get_variable("kernel", initializer=tf.constant(W))
        x = tf.compat.v1.placeholder(tf.float32, X.shape)  # fed: nothing folds away
        pieces = CALLS[name](x, distribute=DEVICES)
        whole = CALLS[name](x)
        config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
        with tf.compat.v1.Session(config=config) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
            metadata = tf.compat.v1.RunMetadata()
            got = session.run(pieces, {x: X}, options=options, run_metadata=metadata)
            want = session.run(whole, {x: X})
        devices = {d.device.rpartition("CPU:")[2] for d in metadata.step_stats.dev_stats}
    return got, want, devices


@pytest.mark.parametrize("name", CALLS)
def test_pieces_on_two_devices_equal_one_device(name):
    got, want, devices = _run(name)
    assert {"0", "1"} <= devices
    for g, w in zip(tf.nest.flatten(got), tf.nest.flatten(want)):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_gather_false_gives_one_result_per_device():
    with tf.Graph().as_default():
        x = tf.constant(X)
        pieces = cg.stacked_jacobian(_layer(x), x, distribute=DEVICES, gather=False)
        assert len(pieces) == 2 and [p.shape.as_list() for p in pieces] == [[10, 5, 3],
                                                                             [10, 5, 3]]
        assert [p.device.rpartition("CPU:")[2] for p in pieces] == ["0", "1"]


def test_a_strategy_is_refused_in_a_tf1_graph():
    with tf.Graph().as_default():
        x = tf.constant(X)
        with pytest.raises(cg.ModeError, match="distribute=\\['/cpu:0', '/cpu:1'\\]"):
            cg.stacked_jacobian(_layer(x), x, distribute=tf.distribute.get_strategy())
