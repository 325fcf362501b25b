"""Rows vectorize without pfor's while_loop or tiling where compat_grads gives an op its own
converter (`compat_grads._src.stacking.pfor_converters`): the filter gradient of a per-row input
against
TensorFlow's own on every padding, stride, dilation and layout, the depthwise forward pass
with a shared kernel, the activation gradients with a shared forward value, and the
per-example gradients of each convolution layer kind against a Python loop of
tf.GradientTape over examples, on the compiled and the tape route, with no while_loop in the
graph and no "uses a while_loop" log. (Every route and the TF1 graph: tests_tf2 and tests_tf1
test_models.py, cases cnn*, conv1d, depthwise_separable, conv_transpose, conv3d.)"""

import collections
import logging

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import keras2, tf
from compat_grads._src.stacking import pfor_converters as _pfor_converters

RNG = np.random.default_rng(0)
LOOPS = {"While", "StatelessWhile"}


def _rows(row, count, attach=True, types=set, jit_compile=False):
    """`tf.vectorized_map` of `row(i)` over `range(count)` in a tf.function, our converters
    attached to each row's ops as compat_grads attaches them: (values, the op types of the
    graph and the graphs of its functions, as `types` collects them)."""
    @tf.function(autograph=False, jit_compile=jit_compile)
    def rows():
        def body(i):
            graph = tf.compat.v1.get_default_graph()
            known = len(graph.get_operations())
            out = row(i)
            if attach:
                _pfor_converters.attach(graph.get_operations()[known:])
            return out
        return tf.vectorized_map(body, tf.range(count), warn=False)
    kinds = types(op.type for graph in _graphs(rows.get_concrete_function())
                  for op in graph.get_operations())
    return rows().numpy(), kinds


def _reference(x, w, g, strides, padding, dilation):
    """TensorFlow's filter gradient; a dilated one (which TensorFlow's CPU kernel refuses)
    through the dilated kernel, zeros between its taps, every d-th entry kept."""
    k, cin, cout = w.shape[0], w.shape[2], w.shape[3]
    kd = (k - 1) * dilation + 1
    wide = tf.Variable(tf.zeros([kd, kd, cin, cout], tf.float64))
    with tf.GradientTape() as tape:
        y = tf.nn.conv2d(x, wide, strides, padding)
    return tape.gradient(y, wide, output_gradients=g).numpy()[::dilation, ::dilation]


def _filter_rows(x, w, g, attrs, count):
    """Each example's filter gradient, `Conv2DBackpropFilter` of its own input, as rows."""
    return _rows(lambda i: tf.raw_ops.Conv2DBackpropFilter(
        input=_example(x, i), filter_sizes=tf.shape(w), out_backprop=_example(g, i), **attrs),
        count)


def _example(t, i):
    """Example i, as a batch of one (not `t[i:i + 1]`: a slice whose bounds differ per row
    is a while_loop of pfor's own)."""
    return tf.gather(t, i)[None]


@pytest.mark.parametrize("size,k,stride,dilation,padding", [
    (9, 3, 1, 1, "SAME"), (9, 3, 2, 1, "SAME"), (10, 3, 2, 1, "VALID"), (11, 3, 1, 2, "SAME"),
    (12, 3, 1, 3, "VALID"), (13, 3, 2, 2, "SAME"), (8, 2, 2, 1, "SAME"), (7, 5, 3, 1, "SAME")])
def test_filter_gradient_of_per_row_inputs_is_tensorflows(size, k, stride, dilation, padding):
    x = tf.constant(RNG.standard_normal((3, size, size + 1, 3)))
    w = tf.constant(RNG.standard_normal((k, k, 3, 4)))
    g = tf.sin(tf.nn.conv2d(x, w, stride, padding, dilations=dilation))
    attrs = {"strides": [1, stride, stride, 1], "padding": padding, "dilations":
             [1, dilation, dilation, 1]}
    if dilation == 1:  # TensorFlow's CPU kernel runs no dilated filter gradient
        got, kinds = _filter_rows(x, w, g, attrs, 3)
        assert not kinds & LOOPS
    else:
        got, kinds = _rows(lambda i: _dilated_row(x, w, g, attrs, i), 3)
    for s in range(3):
        np.testing.assert_allclose(got[s], _reference(x[s:s + 1], w, g[s:s + 1], stride,
                                                      padding, dilation),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("stride,dilation", [((2, 3), (1, 1)), ((2, 2), (2, 1))])
def test_strided_taps_of_rows_of_several_examples_are_tensorflows(stride, dilation):
    """Rows of several examples each (a Jacobian through a convolution: each row its own
    batch), strides laid out by phase: each row's filter gradient is TensorFlow's over its
    examples."""
    x = tf.constant(RNG.standard_normal((3, 2, 11, 9, 2)))  # rows, examples, H, W, c_in
    attrs = {"strides": [1, *stride, 1], "dilations": [1, *dilation, 1], "padding": b"SAME"}
    sizes = [3, 2, 2, 4]
    pads = _pfor_converters._paddings(attrs, [11, 9], sizes[:2], False)
    wide = [(k - 1) * d + 1 for k, d in zip(sizes[:2], dilation)]
    outs = [-(-n // s) for n, s in zip((11, 9), stride)]
    g = tf.constant(RNG.standard_normal((3, 2, *outs, 4)))
    got = _pfor_converters.taps(x, g, sizes, pads, attrs).numpy()
    for r in range(3):
        kernel = tf.Variable(tf.zeros([*wide, 2, 4], tf.float64))
        with tf.GradientTape() as tape:
            y = tf.nn.conv2d(tf.pad(x[r], [[0, 0], *pads, [0, 0]]), kernel, stride, "VALID")
        want = tape.gradient(y, kernel, output_gradients=g[r]).numpy()
        np.testing.assert_allclose(got[r], want[::dilation[0], ::dilation[1]], rtol=1e-12,
                                   atol=1e-12)


@pytest.mark.parametrize("stride,dilation,padding", [
    ((1, 1, 1), (1, 1, 1), b"VALID"), ((2, 1, 3), (1, 1, 1), b"SAME"),
    ((1, 2, 1), (2, 1, 1), b"SAME")])
def test_three_dimensional_taps_are_tensorflows(stride, dilation, padding):
    """Conv3D's filter gradient (`Conv3DBackpropFilterV2`) of rows of two examples each,
    against TensorFlow's over each row's examples (a dilated one through the dilated
    kernel, zeros between its taps)."""
    x = tf.constant(RNG.standard_normal((3, 2, 7, 6, 5, 2)))  # rows, n, D, H, W, c_in
    sizes = [2, 3, 2, 2, 3]
    attrs = {"strides": [1, *stride, 1], "dilations": [1, *dilation, 1], "padding": padding}
    pads = _pfor_converters._paddings(attrs, [7, 6, 5], sizes[:3], False)
    wide = [(k - 1) * d + 1 for k, d in zip(sizes[:3], dilation)]
    padded = [n + sum(p) for n, p in zip((7, 6, 5), pads)]
    outs = [(n - k) // s + 1 for n, k, s in zip(padded, wide, stride)]
    g = tf.constant(RNG.standard_normal((3, 2, *outs, 3)))
    got = _pfor_converters.taps(x, g, sizes, pads, attrs).numpy()
    for r in range(3):
        kernel = tf.Variable(tf.zeros([*wide, 2, 3], tf.float64))
        with tf.GradientTape() as tape:
            y = tf.nn.conv3d(tf.pad(x[r], [[0, 0], *pads, [0, 0]]), kernel, [1, *stride, 1],
                             "VALID")
        want = tape.gradient(y, kernel, output_gradients=g[r]).numpy()
        np.testing.assert_allclose(
            got[r], want[::dilation[0], ::dilation[1], ::dilation[2]], rtol=1e-12, atol=1e-12)


def _dilated_row(x, w, g, attrs, i):
    """A dilated Conv2D's filter gradient as the rows meet it: built by the gradient (the
    op is only converted, never run, so TensorFlow's CPU kernel never sees it)."""
    with tf.GradientTape() as tape:
        tape.watch(w)
        y = tf.raw_ops.Conv2D(input=_example(x, i), filter=w, **attrs)
    return tape.gradient(y, w, output_gradients=_example(g, i))


def test_explicit_padding_and_channels_first():
    x = tf.constant(RNG.standard_normal((2, 9, 8, 3)))
    w = tf.constant(RNG.standard_normal((3, 2, 3, 4)))
    pads = [[0, 0], [1, 2], [0, 1], [0, 0]]
    with tf.GradientTape() as tape:
        tape.watch(w)
        y = tf.nn.conv2d(x, w, [1, 2, 1, 1], pads)
    g = tf.sin(y)
    attrs = {"strides": [1, 2, 1, 1], "padding": "EXPLICIT", "explicit_paddings": sum(pads, [])}
    got, _ = _filter_rows(x, w, g, attrs, 2)
    first = dict(attrs, strides=[1, 1, 2, 1], explicit_paddings=[0, 0, 0, 0, 1, 2, 0, 1],
                 data_format="NCHW")
    x_first, g_first = (tf.transpose(t, [0, 3, 1, 2]) for t in (x, g))
    # built only on the NCHW input: TensorFlow's CPU kernels run NHWC alone, ours any layout
    got_first, kinds = _filter_rows(x_first, w, g_first, first, 2)
    assert not kinds & LOOPS
    for s in range(2):
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = tf.nn.conv2d(x[s:s + 1], w, [1, 2, 1, 1], pads)
        want = tape.gradient(y, w, output_gradients=g[s:s + 1]).numpy()
        np.testing.assert_allclose(got[s], want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got_first[s], want, rtol=1e-12, atol=1e-12)


def test_sizes_unknown_while_building_keep_tensorflows_conversion():
    w = tf.constant(RNG.standard_normal((3, 3, 2, 2)))
    x = tf.constant(RNG.standard_normal((2, 6, 5, 2)))
    g = tf.nn.conv2d(x, w, 1, "SAME")

    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 2], tf.float64)] * 2,
                 autograph=False)
    def rows(x, g):
        def body(i):
            graph = tf.compat.v1.get_default_graph()
            known = len(graph.get_operations())
            out = tf.raw_ops.Conv2DBackpropFilter(input=_example(x, i),
                                                  filter_sizes=tf.shape(w),
                                                  out_backprop=_example(g, i),
                                                  strides=[1] * 4, padding="SAME")
            _pfor_converters.attach(graph.get_operations()[known:])
            return out
        return tf.vectorized_map(body, tf.range(2), warn=False)
    kinds = {op.type for op in rows.get_concrete_function().graph.get_operations()}
    assert kinds & LOOPS  # TensorFlow's while_loop: right, if slow
    np.testing.assert_allclose(rows(x, g)[1], _reference(x[1:], w, g[1:], 1, "SAME", 1),
                               rtol=1e-12)


def test_depthwise_forward_with_one_kernel_folds_the_rows_into_the_batch():
    x = tf.constant(RNG.standard_normal((5, 8, 7, 3)))
    kernel = tf.constant(RNG.standard_normal((3, 3, 3, 2)))

    def row(i):
        return tf.nn.depthwise_conv2d(_example(x, i), kernel, [1, 2, 2, 1], "SAME")
    got, kinds = _rows(row, 5)
    _, tensorflows = _rows(row, 5, attach=False)
    assert not kinds & LOOPS and tensorflows & LOOPS
    want = tf.nn.depthwise_conv2d(x, kernel, [1, 2, 2, 1], "SAME").numpy()
    np.testing.assert_array_equal(got[:, 0], want)


def test_depthwise_forward_with_a_kernel_per_row_keeps_tensorflows_folding():
    x = tf.constant(RNG.standard_normal((4, 6, 6, 2)))
    kernels = tf.constant(RNG.standard_normal((4, 3, 3, 2, 2)))
    got, kinds = _rows(lambda i: tf.nn.depthwise_conv2d(_example(x, i), tf.gather(kernels, i),
                                                        [1] * 4, "VALID"), 4)
    assert not kinds & LOOPS
    for s in range(4):
        np.testing.assert_allclose(got[s, 0], tf.nn.depthwise_conv2d(
            x[s:s + 1], kernels[s], [1] * 4, "VALID")[0], rtol=1e-12, atol=1e-12)


def _depthwise_reference(x, kernel_shape, g, stride, dilation, padding):
    """TensorFlow's depthwise filter gradient of one example; a dilated one through the
    dilated kernel, zeros between its taps, every d-th entry kept (TensorFlow's CPU kernel
    runs no dilated depthwise filter gradient)."""
    kh, kw, *channels = kernel_shape
    wide = tf.Variable(tf.zeros([(kh - 1) * dilation + 1, (kw - 1) * dilation + 1,
                                 *channels], tf.float64))
    with tf.GradientTape() as tape:
        y = tf.nn.depthwise_conv2d(x, wide, [1, stride, stride, 1], padding)
    return tape.gradient(y, wide, output_gradients=g).numpy()[::dilation, ::dilation]


@pytest.mark.parametrize("channels,xla,stride,dilation,padding,layout", [
    (1, False, 1, 1, "SAME", "NHWC"), (1, False, 2, 1, "SAME", "NHWC"),
    (1, False, 1, 2, "VALID", "NHWC"), (1, False, 2, 1, "VALID", "NCHW"),
    (3, True, 1, 1, "SAME", "NHWC"), (3, True, 2, 2, "SAME", "NHWC"),
    (3, True, 2, 1, "VALID", "NCHW"), (3, False, 2, 1, "SAME", "NHWC")])
def test_depthwise_filter_gradient_of_per_row_inputs_is_tensorflows(channels, xla, stride,
                                                                    dilation, padding,
                                                                    layout):
    """`DepthwiseConv2dNativeBackpropFilter` of a per-row input (per-example gradients of a
    depthwise layer), two outputs per input channel: as taps (the channels folded into the
    rows) with one input channel, or under XLA (which runs TensorFlow's folded op a hundred
    times slower); TensorFlow's conversion (the rows folded into the channels of one such op)
    with more channels without XLA. No loop either way, each row TensorFlow's."""
    x = tf.constant(RNG.standard_normal((4, 9, 8, channels)))
    kernel_shape = [3, 2, channels, 2]
    wide = [(k - 1) * dilation + 1 for k in kernel_shape[:2]]
    g = tf.sin(tf.nn.depthwise_conv2d(x, tf.ones([*wide, channels, 2], tf.float64),
                                      [1, stride, stride, 1], padding))
    first = layout == "NCHW"
    spatial = [1, stride, stride, 1]
    attrs = {"strides": [1, 1, stride, stride] if first else spatial, "padding": padding,
             "dilations": [1, 1, dilation, dilation] if first else [1, dilation, dilation, 1],
             "data_format": layout}
    x_in, g_in = ((tf.transpose(t, [0, 3, 1, 2]) if first else t) for t in (x, g))
    # the taps are only built from the op (TensorFlow's CPU kernel takes NHWC, no dilation)
    got, kinds = _rows(lambda i: tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
        input=_example(x_in, i), filter_sizes=kernel_shape, out_backprop=_example(g_in, i),
        **attrs), 4, types=collections.Counter, jit_compile=xla)
    assert not set(kinds) & LOOPS
    taps = channels == 1 or xla  # else the row's own op and TensorFlow's folded one
    assert kinds["DepthwiseConv2dNativeBackpropFilter"] == (1 if taps else 2)
    for s in range(4):
        np.testing.assert_allclose(got[s], _depthwise_reference(
            x[s:s + 1], kernel_shape, g[s:s + 1], stride, dilation, padding),
            rtol=1e-12, atol=1e-12)


def test_depthwise_input_gradient_with_one_kernel_folds_the_rows_into_the_batch():
    """`DepthwiseConv2dNativeBackpropInput` whose kernel is the same in every row (rows
    through a depthwise layer that is not the first): the rows in the batch where
    TensorFlow's conversion loops, each row TensorFlow's."""
    kernel = tf.constant(RNG.standard_normal((3, 3, 2, 3)))
    g = tf.constant(RNG.standard_normal((5, 1, 4, 4, 6)))

    def row(i):
        return tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
            input_sizes=[1, 8, 7, 2], filter=kernel, out_backprop=tf.gather(g, i),
            strides=[1, 2, 2, 1], padding="SAME")
    got, kinds = _rows(row, 5)
    _, tensorflows = _rows(row, 5, attach=False)
    assert not kinds & LOOPS and tensorflows & LOOPS
    for s in range(5):
        np.testing.assert_allclose(got[s], row(s), rtol=1e-12, atol=1e-12)


SLICES = {  # shape, the slice of row i (of 5 rows)
    "y[i]": ([5], lambda y, i: y[i]),
    "y[i] of a matrix": ([5, 3], lambda y, i: y[i]),
    "y[:, i]": ([4, 5], lambda y, i: y[:, i]),
    "y[i, 4 - i], two indexed axes": ([5, 5, 2], lambda y, i: y[i, 4 - i]),
    "y[-1 - i], negative": ([5, 3], lambda y, i: y[-1 - i]),
    "y[:, :, i] with an int64 index": ([2, 3, 5], lambda y, i: y[:, :, tf.cast(i, tf.int64)]),
}


@pytest.mark.parametrize("per_row", [True, False], ids=["dy per row", "one dy"])
@pytest.mark.parametrize("case", sorted(SLICES))
def test_gradient_of_an_indexed_slice_per_row_is_tensorflows_without_a_loop(case, per_row):
    """`StridedSliceGrad` whose begin differs per row (the gradient of `y[i]` in row `i`,
    as a loop of one gradient per index takes it): each row TensorFlow's, where
    TensorFlow's conversion runs a while_loop over the rows."""
    shape, index = SLICES[case]
    y = tf.constant(RNG.standard_normal(shape))

    def row(i):
        with tf.GradientTape() as tape:
            tape.watch(y)
            out = index(y, i)
        dy = tf.cast(i + 1, tf.float64) * tf.ones_like(out) if per_row else None
        return tape.gradient(out, y, output_gradients=dy)
    got, kinds = _rows(row, 5)
    want, tensorflows = _rows(row, 5, attach=False)
    assert not kinds & LOOPS and tensorflows & LOOPS
    np.testing.assert_array_equal(got, want)
    for s in range(5):
        np.testing.assert_array_equal(got[s], row(s))


def test_gradient_of_an_indexed_slice_is_zero_off_the_index_even_for_an_infinite_gradient():
    y = tf.zeros([3, 2], tf.float64)

    def row(i):
        with tf.GradientTape() as tape:
            tape.watch(y)
            out = y[i]
        return tape.gradient(out, y, output_gradients=tf.fill([2], np.inf))
    got, _ = _rows(row, 3)
    np.testing.assert_array_equal(got, [np.where(np.arange(3)[:, None] == s, np.inf, 0.0)
                                        * np.ones(2) for s in range(3)])


def test_gradient_of_a_range_or_strided_slice_per_row_keeps_tensorflows_conversion():
    y = tf.constant(RNG.standard_normal([8]))
    for index in (lambda i: y[i:i + 2], lambda i: y[i:i + 4:2]):
        def row(i, index=index):
            with tf.GradientTape() as tape:
                tape.watch(y)
                out = index(i)
            return tape.gradient(out, y)
        got, kinds = _rows(row, 3)
        assert kinds & LOOPS  # TensorFlow's while_loop: right, if slow
        for s in range(3):
            np.testing.assert_array_equal(got[s], row(s))


ACTIVATIONS = {"TanhGrad": tf.tanh, "SigmoidGrad": tf.sigmoid, "ReluGrad": tf.nn.relu}


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
def test_activation_gradients_with_one_forward_value_broadcast_instead_of_tiling(op):
    activation = ACTIVATIONS[op]
    features = tf.constant(RNG.standard_normal((4, 6)))
    cotangents = tf.constant(RNG.standard_normal((5, 4, 6)))

    def row(i):
        with tf.GradientTape() as tape:
            tape.watch(features)
            out = activation(features)
        return tape.gradient(out, features, output_gradients=tf.gather(cotangents, i))
    got, kinds = _rows(row, 5)
    _, tensorflows = _rows(row, 5, attach=False)
    assert "Tile" not in kinds and "Tile" in tensorflows
    assert op in {o.type for o in tf.function(row).get_concrete_function(0).graph
                  .get_operations()}
    for s in range(5):
        np.testing.assert_allclose(got[s], row(s), rtol=1e-15, atol=1e-15)


def test_relu_gradient_is_zero_where_the_unit_is_off_even_for_an_infinite_gradient():
    features = tf.constant([[-1.0, 2.0, 0.0]], tf.float64)
    infinite = tf.constant([[np.inf, np.inf, np.inf]], tf.float64)
    got, _ = _rows(lambda i: tf.raw_ops.ReluGrad(gradients=infinite * tf.cast(i + 1, tf.float64),
                                                 features=features), 2)
    np.testing.assert_array_equal(got, [[[0.0, np.inf, 0.0]]] * 2)


def test_activation_gradients_of_a_per_row_value_keep_tensorflows_conversion():
    features = tf.constant(RNG.standard_normal((3, 4)))
    got, kinds = _rows(lambda i: tf.raw_ops.TanhGrad(y=tf.tanh(features[i]),
                                                     dy=tf.ones([4], tf.float64)), 3)
    assert "Tile" in kinds  # the forward value differs per row: nothing to broadcast
    np.testing.assert_allclose(got, 1 - np.tanh(features.numpy()) ** 2, rtol=1e-12,
                               atol=1e-12)


def test_tensorflows_registry_is_left_as_it_was():
    from compat_grads._src.core.tf import _pfor as pfor

    before = dict(pfor._pfor_converter_registry)
    _rows(lambda i: tf.raw_ops.TanhGrad(y=tf.ones([3], tf.float64),
                                        dy=tf.cast(tf.fill([3], i), tf.float64)), 2)
    assert pfor._pfor_converter_registry == before
    # ops of a row that compat_grads did not build keep TensorFlow's conversion: a tile
    _, kinds = _rows(lambda i: tf.raw_ops.TanhGrad(
        y=tf.ones([3], tf.float64), dy=tf.cast(tf.fill([3], i), tf.float64)), 2, attach=False)
    assert "Tile" in kinds


LAYERS = {
    "conv2d": lambda L: [L.Conv2D(4, 3, activation="tanh"), L.Conv2D(3, 2)],
    "strided": lambda L: [L.Conv2D(4, 3, strides=2, padding="same", activation="tanh")],
    "dilated": lambda L: [L.Conv2D(4, 3, dilation_rate=2, activation="tanh")],
    "depthwise": lambda L: [L.DepthwiseConv2D(3, depth_multiplier=2, activation="tanh")],
    "depthwise_deep": lambda L: [L.Conv2D(3, 2, activation="tanh"), L.DepthwiseConv2D(
        3, strides=2, padding="same", depth_multiplier=2, activation="tanh"),
        L.DepthwiseConv2D(2, dilation_rate=2)],
    "separable": lambda L: [L.SeparableConv2D(4, 3, padding="same", activation="tanh")],
    "transposed": lambda L: [L.Conv2DTranspose(3, 3, strides=2, activation="tanh")],
    "conv1d": lambda L: [L.Conv1D(4, 3, strides=2, activation="tanh")],
    "conv3d": lambda L: [L.Conv3D(3, 2, strides=(2, 1, 1), padding="same",
                                  activation="tanh"), L.Conv3D(2, 2)],
}


def _graphs(concrete):
    graph = concrete.graph
    return [graph, *(f.graph for f in getattr(graph, "_functions", {}).values()
                     if hasattr(f, "graph"))]


def _per_example_case(kind, batch, seed):
    """A model of the layers `LAYERS[kind]` then Flatten and Dense(3), a batch, its labels,
    the loss, and each example's gradients by a Python loop of tf.GradientTape."""
    keras = keras2()
    keras.utils.set_random_seed(seed)
    shape = {"conv1d": (9, 2), "conv3d": (5, 5, 4, 2)}.get(kind, (7, 7, 2))
    model = keras.Sequential([keras.Input(shape), *LAYERS[kind](keras.layers),
                              keras.layers.Flatten(), keras.layers.Dense(3)])
    x = tf.constant(RNG.standard_normal((batch, *shape)).astype(np.float32))
    y = tf.constant(RNG.integers(0, 3, batch))

    def loss(t, p):
        return keras.losses.sparse_categorical_crossentropy(t, p, from_logits=True)

    def one(s):
        with tf.GradientTape() as tape:
            value = tf.reduce_sum(loss(y[s:s + 1], model(x[s:s + 1])))
        return tape.gradient(value, model.trainable_weights)
    return model, x, y, loss, [np.stack(column) for column in zip(*(one(s)
                                                                    for s in range(batch)))]


@pytest.mark.parametrize("compile_", [True, False], ids=["compiled", "tape"])
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_per_example_gradients_through_convolutions(kind, compile_, caplog):
    model, x, y, loss, want = _per_example_case(kind, 6, seed=1)
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        if compile_:
            compiled = tf.function(lambda x, y: cg.per_example_gradients(loss, model, x, y))
            got = compiled(x, y)
            graphs = _graphs(compiled.get_concrete_function(x, y))
            assert not {op.type for g in graphs for op in g.get_operations()} & LOOPS
        else:
            got = cg.per_example_gradients(loss, model, x, y, compile=False)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
    assert "while_loop" not in caplog.text


@pytest.mark.parametrize("kind", ["depthwise", "depthwise_deep"])
def test_per_example_gradients_of_depthwise_layers_under_xla_run_as_taps(kind):
    """Under the caller's `tf.function(jit_compile=True)`, each depthwise filter gradient is
    taps: the graph keeps only each row's own `DepthwiseConv2dNativeBackpropFilter`, one per
    layer (TensorFlow's folded op, which XLA on CPU runs a hundred times slower, would add
    one per layer); the values are a Python loop's over examples."""
    model, x, y, loss, want = _per_example_case(kind, 5, seed=2)
    compiled = tf.function(lambda x, y: cg.per_example_gradients(loss, model, x, y),
                           jit_compile=True)
    got = compiled(x, y)
    ops = collections.Counter(op.type for g in _graphs(compiled.get_concrete_function(x, y))
                              for op in g.get_operations())
    depthwise = sum(isinstance(layer, keras2().layers.DepthwiseConv2D)
                    for layer in model.layers)
    assert ops["DepthwiseConv2dNativeBackpropFilter"] == depthwise and not set(ops) & LOOPS
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
