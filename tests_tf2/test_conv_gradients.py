"""Per-example gradients through convolutions vectorize without pfor's while_loop
(`compat_grads._conv_gradients`): the filter gradient against TensorFlow's own on every
padding, stride, dilation and layout, and the per-example gradients of each convolution
layer kind against a Python loop of tf.GradientTape over examples, with no while_loop in
the graph and no "uses a while_loop" log. (Every route and the TF1 graph: tests_tf2 and
tests_tf1 test_models.py, cases cnn*, conv1d, depthwise_separable, conv_transpose.)"""

import logging

import numpy as np
import pytest

import compat_grads as cg
from compat_grads import _conv_gradients
from compat_grads._tf import keras2, tf

RNG = np.random.default_rng(0)


def _reference(x, w, g, strides, padding, dilation):
    """TensorFlow's filter gradient; a dilated one (which TensorFlow's CPU kernel refuses)
    through the dilated kernel, zeros between its taps, every d-th entry kept."""
    k, cin, cout = w.shape[0], w.shape[2], w.shape[3]
    kd = (k - 1) * dilation + 1
    wide = tf.Variable(tf.zeros([kd, kd, cin, cout], tf.float64))
    with tf.GradientTape() as tape:
        y = tf.nn.conv2d(x, wide, strides, padding)
    return tape.gradient(y, wide, output_gradients=g).numpy()[::dilation, ::dilation]


@pytest.mark.parametrize("size,k,stride,dilation,padding", [
    (9, 3, 1, 1, "SAME"), (9, 3, 2, 1, "SAME"), (10, 3, 2, 1, "VALID"), (11, 3, 1, 2, "SAME"),
    (12, 3, 1, 3, "VALID"), (13, 3, 2, 2, "SAME"), (8, 2, 2, 1, "SAME"), (7, 5, 3, 1, "SAME")])
def test_filter_gradient_is_tensorflows(size, k, stride, dilation, padding):
    x = tf.constant(RNG.standard_normal((2, size, size + 1, 3)))
    w = tf.constant(RNG.standard_normal((k, k, 3, 4)))
    g = tf.sin(tf.nn.conv2d(x, w, stride, padding, dilations=dilation))
    attrs = {"strides": [1, stride, stride, 1], "padding": padding.encode(),
             "explicit_paddings": [], "dilations": [1, dilation, dilation, 1],
             "data_format": b"NHWC"}
    got = _conv_gradients.filter_gradient(x, w, g, attrs).numpy()
    np.testing.assert_allclose(got, _reference(x, w, g, stride, padding, dilation),
                               rtol=1e-12, atol=1e-12)


def test_explicit_padding_and_channels_first():
    x = tf.constant(RNG.standard_normal((2, 9, 8, 3)))
    w = tf.constant(RNG.standard_normal((3, 2, 3, 4)))
    pads = [[0, 0], [1, 2], [0, 1], [0, 0]]
    with tf.GradientTape() as tape:
        tape.watch(w)
        y = tf.nn.conv2d(x, w, [1, 2, 1, 1], pads)
    g = tf.sin(y)
    want = tape.gradient(y, w, output_gradients=g).numpy()
    attrs = {"strides": [1, 2, 1, 1], "padding": b"EXPLICIT", "dilations": [1, 1, 1, 1],
             "explicit_paddings": sum(pads, []), "data_format": b"NHWC"}
    np.testing.assert_allclose(_conv_gradients.filter_gradient(x, w, g, attrs), want,
                               rtol=1e-12, atol=1e-12)
    first = dict(attrs, strides=[1, 1, 2, 1], explicit_paddings=[0, 0, 0, 0, 1, 2, 0, 1],
                 data_format=b"NCHW")
    x_first, g_first = (tf.transpose(t, [0, 3, 1, 2]) for t in (x, g))
    np.testing.assert_allclose(_conv_gradients.filter_gradient(x_first, w, g_first, first),
                               want, rtol=1e-12, atol=1e-12)


def test_unknown_sizes_keep_tensorflows_gradient():
    w = tf.constant(RNG.standard_normal((3, 3, 2, 2)))

    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 2], tf.float64)])
    def graph(x):
        g = tf.nn.conv2d(x, w, 1, "SAME")
        attrs = {"strides": [1, 1, 1, 1], "padding": b"SAME", "explicit_paddings": [],
                 "dilations": [1, 1, 1, 1], "data_format": b"NHWC"}
        return _conv_gradients.filter_gradient(x, w, g, attrs)
    ops = {op.type for op in graph.get_concrete_function().graph.get_operations()}
    assert "Conv2DBackpropFilter" in ops and "Einsum" not in ops


def test_unknown_sizes_channels_first_give_tensorflows_op_the_tensors_as_they_are():
    # built only: TensorFlow's CPU kernels run NHWC alone
    w = tf.constant(RNG.standard_normal((3, 3, 2, 2)))
    attrs = {"strides": [1, 1, 1, 1], "padding": b"SAME", "explicit_paddings": [],
             "dilations": [1, 1, 1, 1], "data_format": b"NCHW"}
    spec = tf.TensorSpec([None, 2, None, None], tf.float64)
    graph = tf.function(lambda x, g: _conv_gradients.filter_gradient(x, w, g, attrs))
    ops = graph.get_concrete_function(spec, spec).graph.get_operations()
    (op,) = [op for op in ops if op.type == "Conv2DBackpropFilter"]
    assert op.get_attr("data_format") == b"NCHW"
    assert [t.op.type for t in (op.inputs[0], op.inputs[2])] == ["Placeholder"] * 2
    assert not any(op.type == "Transpose" for op in ops)


LAYERS = {
    "conv2d": lambda L: [L.Conv2D(4, 3, activation="tanh"), L.Conv2D(3, 2)],
    "strided": lambda L: [L.Conv2D(4, 3, strides=2, padding="same", activation="tanh")],
    "dilated": lambda L: [L.Conv2D(4, 3, dilation_rate=2, activation="tanh")],
    "depthwise": lambda L: [L.DepthwiseConv2D(3, depth_multiplier=2, activation="tanh")],
    "separable": lambda L: [L.SeparableConv2D(4, 3, padding="same", activation="tanh")],
    "transposed": lambda L: [L.Conv2DTranspose(3, 3, strides=2, activation="tanh")],
    "conv1d": lambda L: [L.Conv1D(4, 3, strides=2, activation="tanh")],
}


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_per_example_gradients_through_convolutions(kind, caplog):
    keras = keras2()
    keras.utils.set_random_seed(1)
    shape = (9, 2) if kind == "conv1d" else (7, 7, 2)
    model = keras.Sequential([keras.Input(shape), *LAYERS[kind](keras.layers),
                              keras.layers.Flatten(), keras.layers.Dense(3)])
    x = tf.constant(RNG.standard_normal((6, *shape)).astype(np.float32))
    y = tf.constant(RNG.integers(0, 3, 6))

    def loss(t, p):
        return keras.losses.sparse_categorical_crossentropy(t, p, from_logits=True)

    def one(s):
        with tf.GradientTape() as tape:
            value = tf.reduce_sum(loss(y[s:s + 1], model(x[s:s + 1])))
        return tape.gradient(value, model.trainable_weights)
    want = [np.stack(column) for column in zip(*(one(s) for s in range(6)))]
    compiled = tf.function(lambda x, y: cg.per_example_gradients(loss, model, x, y))
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        got = compiled(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
    assert "while_loop" not in caplog.text
    graph = compiled.get_concrete_function(x, y).graph
    functions = [graph, *(f.graph for f in getattr(graph, "_functions", {}).values()
                          if hasattr(f, "graph"))]
    kinds = {op.type for g in functions for op in g.get_operations()}
    assert "Conv2DBackpropFilter" not in kinds
    # pfor runs a depthwise convolution's forward op in a while_loop of its own (still open)
    if kind not in ("depthwise", "separable"):
        assert not kinds & {"While", "StatelessWhile"}


def test_depthwise_filter_gradient_is_tensorflows():
    x = tf.constant(RNG.standard_normal((2, 8, 7, 3)))
    w = tf.constant(RNG.standard_normal((3, 3, 3, 2)))
    with tf.GradientTape() as tape:
        tape.watch(w)
        y = tf.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME")
    g = tf.sin(y)
    attrs = {"strides": [1, 2, 2, 1], "padding": b"SAME", "explicit_paddings": [],
             "dilations": [1, 1, 1, 1], "data_format": b"NHWC"}
    np.testing.assert_allclose(
        _conv_gradients.filter_gradient(x, w, g, attrs, depthwise=True),
        tape.gradient(y, w, output_gradients=g), rtol=1e-12, atol=1e-12)
