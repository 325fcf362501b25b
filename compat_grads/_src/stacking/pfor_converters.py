"""Vectorized rows where pfor's own conversion of an op loops over the rows or copies an
input once per row.

pfor vectorizes the ops of one row with the converter TensorFlow registers for each op
type. For a few ops that rows meet all the time it does worse than it could:

- `Conv2DBackpropFilter` whose input differs per row (per-example gradients: each example
  has its own input): TensorFlow logs "Conv2DBackpropFilter uses a while_loop. Fix that!"
  and loops. Ours is one batched matrix product per kernel tap (below), for Conv2D, Conv1D
  (a Conv2D), the pointwise half of a separable convolution and a transposed convolution's
  filter alike;
- `DepthwiseConv2dNative` and `DepthwiseConv2dNativeBackpropInput` whose kernel is the
  same in every row (a per-example forward pass; rows through a depthwise layer that is
  not the first): TensorFlow's converter folds the rows into the channels and needs a
  per-row kernel, so it loops. Ours folds the rows into the batch, as pfor does for Conv2D;
- `DepthwiseConv2dNativeBackpropFilter` whose input differs per row, with one input
  channel or under XLA: the taps below, each input channel a row of its own.
  TensorFlow's converter folds the rows into the channels of one such op, which XLA on
  CPU runs 10 to 500 times slower than the taps (measured in `_depthwise_filter_gradient`);
- `Conv3D`, `Conv3DBackpropInputV2` and `Conv3DBackpropFilterV2`: TensorFlow registers no
  converter for them, so each loops. Ours fold the rows into the batch where the kernel
  is the same in every row (the forward pass, the input gradient) and run the taps in
  three dimensions for the filter gradient (per-example gradients of a Conv3D model,
  b=64, side by side: 18.2 ms -> 4.0 ms, against 18.1 ms for vectorized_map(GradientTape));
- `StridedSliceGrad` whose begin differs per row (the gradient of `y[i]` or `y[:, i]` in
  row `i`, as a loop of one gradient per index takes it): TensorFlow's converter takes
  only a begin the same in every row and loops. Ours is one `where` against a one-hot
  mask (a TF1 Levenberg-Marquardt Jacobian, 40 to 400 samples, rewritten to
  `row_while_loop`: 2.2 to 2.5 times faster per run than the legacy while_loop, where
  pfor's loop over this op had left it 1.5 times faster to 1.3 times slower);
- the gradients of activations (`TanhGrad`, `SigmoidGrad`, `ReluGrad`) when the forward
  value is the same in every row and the incoming gradient is not (every reverse-mode
  Jacobian row, and every row of a reverse-over-reverse Hessian): TensorFlow's converter
  tiles the forward value once per row (these ops do not broadcast). Ours computes the
  activation's derivative once and multiplies it into the rows, broadcast.

`attach(ops)` gives each such op of a row its converter (`op.pfor_converter`, which pfor
asks before its registry), so TensorFlow's registry is never changed, and the gradient ops
of any backend's rows get it (a tape's as much as `tf.gradients`'). Every other case goes to
TensorFlow's converter. The filter gradient, per row r, tap (i, j):

    dW[r, i, j] = sum over n, h, w of x_pad[r, n, h*s + i*d, w*s + j*d, :]ᵀ g[r, n, h, w, :]

one view of the padded input and one batched matrix product per tap (measured
against one einsum over the stacked views, a `Pack` of all taps, image patches and a folded
depthwise filter gradient: as fast for one input channel, up to 1.9 times faster beyond;
the others copy the input kernel-size times at once). Sizes unknown while building, an
unknown rank, and anything our converters do not know keep TensorFlow's conversion.
"""

from __future__ import annotations

import itertools

import numpy as np

from compat_grads._src.core.mode import compiles_with_xla
from compat_grads._src.core.tf import pfor_converter_of, pfor_wrap, tf


def attach(ops) -> None:
    """Gives the ops of one row (as built, before pfor converts them) our converters (an
    op that takes no attribute keeps TensorFlow's conversion)."""
    for op in ops:
        converter = _CONVERTERS.get(op.type)
        if converter is not None:
            try:
                op.pfor_converter = converter
            except AttributeError:
                return


def _tensorflows(row):
    """TensorFlow's own conversion of the op (its while_loop where it has none)."""
    return pfor_converter_of(row)(row)


def _filter_gradient(row):
    """`Conv2DBackpropFilter` and `Conv3DBackpropFilterV2` (input, filter sizes, output
    gradient): the taps where the input differs per row."""
    parts = _per_row_filter_gradient(row)
    if parts is None:
        return _tensorflows(row)
    return pfor_wrap(taps(*parts), True)


def _per_row_filter_gradient(row):
    """The taps' arguments for a filter gradient op (input, filter sizes, output gradient)
    whose input differs per row: `(x, g, sizes, pads, attrs, channels first)`, `x` and `g`
    channels last; None where TensorFlow's conversion must do (an input the same in every
    row, sizes unknown while building)."""
    x, per_row, _ = row.input(0)
    sizes = tf.get_static_value(row.unstacked_input(1))
    if not per_row or sizes is None:
        return None
    g = row.stacked_input(2)
    attrs = _attrs(row)
    first = _channels_first(attrs)
    if first:
        x, g = _channels_last(x), _channels_last(g)
    dims = _static(x)
    if dims is None or _static(g) is None:
        return None
    pads = _paddings(attrs, dims[2:-1], sizes[:-2], first)
    if pads is None:
        return None
    return x, g, [int(s) for s in sizes], pads, attrs, first


def _depthwise_filter_gradient(row):
    """`DepthwiseConv2dNativeBackpropFilter` (input, filter sizes, output gradient) where the
    input differs per row, as taps: each input channel a row of its own with one channel
    (the channels folded into the rows), whose filter gradient is the taps' with the
    channel's multiplier outputs as output channels. Taken where XLA compiles the graph
    and where the layer has one input channel; elsewhere TensorFlow's conversion (the rows
    folded into the channels of one `DepthwiseConv2dNativeBackpropFilter`).

    Measured side by side, per-example gradients in a tf.function: XLA on CPU runs
    TensorFlow's folded op 10 to 500 times slower than these taps (b=256, 12x12, one input
    channel times 8: 597 ms against 4.1 ms; b=64, 16 channels times 4: 17.8 s against
    36 ms). Without XLA, with one input channel (then the layer is a plain convolution)
    the taps are 1.16 times faster; with more they lose, 0.97 to 0.81 (8 channels times 2
    to 64 channels times 1: one batched product per tap of one column each)."""
    sizes = tf.get_static_value(row.unstacked_input(1))
    parts = None
    if sizes is not None and (sizes[-2] == 1 or compiles_with_xla()):
        parts = _per_row_filter_gradient(row)
    if parts is None:
        return _tensorflows(row)
    x, g, (*kernel, c_in, multiplier), pads, attrs, first = parts
    per_channel = taps(_channels_in_rows(x, [c_in]), _channels_in_rows(g, [c_in, multiplier]),
                       [*kernel, 1, multiplier], pads, attrs, first)
    rows = tf.shape(per_channel)[0] // c_in  # [rows * c_in, *kernel, 1, multiplier]
    per_channel = tf.reshape(per_channel, tf.stack([rows, c_in, *kernel, multiplier]))
    return pfor_wrap(tf.transpose(per_channel, [0, *range(2, 2 + len(kernel)), 1,
                                                2 + len(kernel)]), True)


def _channels_in_rows(t, channels):
    """A stacked channels-last tensor `[rows, n, *spatial, prod(channels)]` as
    `[rows * channels[0], n, *spatial, prod(channels[1:])]`: its first channel axis folded
    into the rows."""
    shape = tf.shape(t)
    spatial = t.shape.rank - 3
    split = tf.reshape(t, tf.concat([shape[:-1], channels], 0))
    moved = tf.transpose(split, [0, 2 + spatial, 1, *range(2, 2 + spatial),
                                 *range(3 + spatial, 2 + spatial + len(channels))])
    return tf.reshape(moved, tf.concat([[-1], shape[1:-1], [int(np.prod(channels[1:]))]], 0))


def taps(x, g, sizes, pads, attrs, nchw=False):
    """`[rows, *kernel, c_in, c_out]`: each row's filter gradient, from its input
    `x [rows, n, *spatial, c_in]` and output gradient `g [rows, n, *out, c_out]` (channels
    last within a row; 2 or 3 spatial axes), `pads` [[before, after]] per spatial axis,
    strides and dilations from `attrs`."""
    kernel, (c_in, c_out), rows = sizes[:-2], sizes[-2:], tf.shape(x)[0]
    strides, dilations = (_spatial(attrs[k], nchw) for k in ("strides", "dilations"))
    tap = _tap_views(x, pads, strides, _static(g)[2:-1])
    g = tf.reshape(g, tf.stack([rows, -1, c_out]))
    products = [tf.matmul(tf.reshape(tap([i * d for i, d in zip(index, dilations)]),
                                     tf.stack([rows, -1, c_in])), g, transpose_a=True)
                for index in itertools.product(*(range(k) for k in kernel))]
    return tf.reshape(tf.stack(products, axis=1), tf.stack([rows, *kernel, c_in, c_out]))


def _tap_views(x, pads, strides, out):
    """`view(starts)`: the input (padded) under the output positions of the tap that starts
    at `starts` (one per spatial axis): `x_pad[:, :, starts + o*s, :]`. With strides, the
    padded input is laid out once by stride phase, so that each view is a slice with unit
    strides (a strided slice of each view reads element by element: 1.7 times slower for
    the bench's strided CNN, 3.7 times with 16 input channels)."""
    full = [size + sum(pad) for size, pad in zip(_static(x)[2:-1], pads)]
    extra = [-size % s for size, s in zip(full, strides)]  # whole blocks of the strides
    x = tf.pad(x, [[0, 0], [0, 0], *[[pad[0], pad[1] + e] for pad, e in zip(pads, extra)],
                   [0, 0]])
    if all(s == 1 for s in strides):
        return lambda starts: x[(slice(None), slice(None),
                                 *[slice(a, a + o) for a, o in zip(starts, out)])]
    shape, spatial = tf.shape(x), len(strides)
    blocks = [(size + e) // s for size, e, s in zip(full, extra, strides)]
    split = [shape[0], shape[1], *[v for b, s in zip(blocks, strides) for v in (b, s)],
             shape[-1]]
    phases = tf.reshape(tf.transpose(tf.reshape(x, tf.stack(split)), [
        0, 1, *range(3, 2 + 2 * spatial, 2), *range(2, 2 + 2 * spatial, 2), 2 + 2 * spatial]),
        tf.stack([shape[0], shape[1], int(np.prod(strides)), *blocks, shape[-1]]))
    # [rows, n, phase (one axis: a strided slice takes at most 8), *blocks, c]

    def view(starts):
        at = [divmod(a, s) for a, s in zip(starts, strides)]
        phase = int(np.ravel_multi_index([r for _, r in at], strides))
        return phases[(slice(None), slice(None), phase,
                       *[slice(block, block + o) for (block, _), o in zip(at, out)])]
    return view


def _folded(row):
    """A convolution (`DepthwiseConv2dNative`, `Conv3D`) whose kernel is the same in every
    row: the rows folded into the batch, as pfor does for Conv2D."""
    x, per_row, _ = row.input(0)
    kernel, kernel_per_row, _ = row.input(1)
    if kernel_per_row or not per_row:
        return _tensorflows(row)
    return _unfolded(getattr(tf.raw_ops, row.op_type)(
        input=_rows_in_batch(x), filter=kernel, **_attrs(row)), x)


def _input_gradient(row):
    """`Conv3DBackpropInputV2` or `DepthwiseConv2dNativeBackpropInput` (input sizes, filter,
    output gradient) whose filter is the same in every row: the rows folded into the batch,
    as pfor does for Conv2D's."""
    sizes, sizes_per_row, _ = row.input(0)
    kernel, kernel_per_row, _ = row.input(1)
    g, per_row, _ = row.input(2)
    if sizes_per_row or kernel_per_row or not per_row:
        return _tensorflows(row)
    rows = tf.cast(tf.shape(g)[0], sizes.dtype)
    return _unfolded(getattr(tf.raw_ops, row.op_type)(
        input_sizes=tf.concat([sizes[:1] * rows, sizes[1:]], 0), filter=kernel,
        out_backprop=_rows_in_batch(g), **_attrs(row)), g)


def _rows_in_batch(t):
    """A stacked tensor `[rows, n, ...]` as one batch `[rows * n, ...]`."""
    return tf.reshape(t, tf.concat([[-1], tf.shape(t)[2:]], 0))


def _unfolded(folded, like):
    """An op's output on the batch of `_rows_in_batch(like)`, stacked again by row."""
    return pfor_wrap(tf.reshape(folded, tf.concat([tf.shape(like)[:2], tf.shape(folded)[1:]],
                                                  0)), True)


def _attrs(row) -> dict:
    """The op's attributes but its dtypes (T, Tshape), as `tf.raw_ops` takes them."""
    return {a.name: row.get_attr(a.name) for a in row.op.op_def.attr if a.type != "type"}


def _channels_first(attrs) -> bool:
    return attrs.get("data_format", b"NHWC") in (b"NCHW", b"NCDHW")


def _channels_last(t):
    """A stacked channels-first tensor `[rows, n, c, *spatial]` as `[rows, n, *spatial,
    c]`."""
    return tf.transpose(t, [0, 1, *range(3, t.shape.rank), 2])


def _static(t):
    """The static sizes of a stacked 5-D or 6-D tensor but its first two axes, or None."""
    dims = t.shape.as_list() if t.shape.rank in (5, 6) else None
    return dims if dims is not None and None not in dims[2:] else None


def _spatial(values, nchw):
    return tuple(values[2:] if nchw else values[1:-1])


def _paddings(attrs, sizes, kernel, nchw):
    """[[before, after]] of the input per spatial axis (channels last), None when
    TensorFlow's rule for SAME cannot be worked out while building."""
    padding = attrs["padding"]
    if padding == b"VALID":
        return [[0, 0] for _ in sizes]
    if padding == b"EXPLICIT":
        flat = list(attrs["explicit_paddings"])
        pairs = [flat[k:k + 2] for k in range(0, len(flat), 2)]
        return pairs[2:] if nchw else pairs[1:-1]
    strides, dilations = (_spatial(attrs[k], nchw) for k in ("strides", "dilations"))
    pads = []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        total = max((-(-size // s) - 1) * s + (int(k) - 1) * d + 1 - size, 0)
        pads.append([total // 2, total - total // 2])
    return pads


def _slice_gradient(row):
    """`StridedSliceGrad` (shape, begin, end, strides, dy) whose begin differs per row: the
    gradient of `y[i]` (or `y[:, i]`, ...) in row `i`, the form of a loop that takes one
    gradient per index. TensorFlow's converter takes only a begin the same in every row and
    runs a while_loop over the rows otherwise. Where every axis is either taken whole or is
    one index (a shrink axis) and the strides are 1, each row is its `dy` where the indices
    are and zero elsewhere: one `where` against a one-hot mask per indexed axis (zero, not
    `dy * 0`, where `dy` is not finite, as TensorFlow's gradient has it)."""
    begin, begin_per_row, _ = row.input(1)
    attrs = {k: row.get_attr(k) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                          "new_axis_mask", "shrink_axis_mask")}
    rank = tf.compat.dimension_value(row.op.inputs[0].shape[0])
    indexed = _indexed_axes(attrs, rank, tf.get_static_value(row.op.inputs[3]))
    if not begin_per_row or indexed is None:  # end: begin + 1 or unused
        return _tensorflows(row)
    shape = tf.cast(row.unstacked_input(0), tf.int32)
    dy, dy_per_row, _ = row.input(4)
    ones = [1] * rank
    spread = tf.reshape(dy, tf.stack([tf.shape(dy)[0] if dy_per_row else 1, *[
        1 if a in indexed else shape[a] for a in range(rank)]]))  # [rows or 1, *shape]
    mask = None
    for axis in indexed:
        at = begin[:, axis]
        at = tf.where(at < 0, at + tf.cast(shape[axis], at.dtype), at)
        hot = tf.one_hot(at, shape[axis], True, False)
        hot = tf.reshape(hot, tf.stack([-1, *ones[:axis], shape[axis], *ones[axis + 1:]]))
        mask = hot if mask is None else tf.logical_and(mask, hot)
    return pfor_wrap(tf.where(mask, spread, tf.zeros([], dy.dtype)), True)


def _indexed_axes(attrs, rank, strides):
    """The axes a strided slice takes one index of (its shrink axes) where every other
    axis is taken whole and every stride is 1; None for any other slice."""
    if rank is None or strides is None or any(int(s) != 1 for s in strides) or (
            attrs["ellipsis_mask"] or attrs["new_axis_mask"]):
        return None
    whole = attrs["begin_mask"] & attrs["end_mask"]
    indexed = []
    for axis in range(len(strides)):
        if attrs["shrink_axis_mask"] >> axis & 1:
            indexed.append(axis)
        elif not whole >> axis & 1:
            return None
    return indexed or None


def _activation_gradient(times_derivative, value_at):
    """The converter of an activation's gradient op, `times_derivative(dy, value)`, whose
    input `value_at` is the forward value: where that is the same in every row, the
    derivative is computed once and broadcast over the rows' incoming gradients."""
    def convert(row):
        value, value_per_row, _ = row.input(value_at)
        dy, dy_per_row, _ = row.input(1 - value_at)
        if value_per_row or not dy_per_row or not value.dtype.is_floating:
            return _tensorflows(row)
        return pfor_wrap(times_derivative(dy, value), True)
    return convert


def _tanh_gradient(dy, y):
    return dy * (1 - y * y)


def _sigmoid_gradient(dy, y):
    return dy * (y * (1 - y))


def _relu_gradient(dy, features):
    return tf.where(features > 0, dy, tf.zeros([], dy.dtype))  # 0 where off, even for inf


_CONVERTERS = {
    "Conv2DBackpropFilter": _filter_gradient, "Conv3DBackpropFilterV2": _filter_gradient,
    "DepthwiseConv2dNativeBackpropFilter": _depthwise_filter_gradient,
    "DepthwiseConv2dNative": _folded, "Conv3D": _folded,
    "Conv3DBackpropInputV2": _input_gradient,
    "DepthwiseConv2dNativeBackpropInput": _input_gradient,
    "StridedSliceGrad": _slice_gradient,
    "TanhGrad": _activation_gradient(_tanh_gradient, 0),  # TanhGrad(y, dy)
    "SigmoidGrad": _activation_gradient(_sigmoid_gradient, 0),  # SigmoidGrad(y, dy)
    "ReluGrad": _activation_gradient(_relu_gradient, 1),  # ReluGrad(dy, features)
}
