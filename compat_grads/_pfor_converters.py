"""Vectorized rows where pfor's own conversion of an op loops over the rows or copies an
input once per row.

pfor vectorizes the ops of one row with the converter TensorFlow registers for each op
type. For a few ops that rows meet all the time it does worse than it could:

- `Conv2DBackpropFilter` whose input differs per row (per-example gradients: each example
  has its own input): TensorFlow logs "Conv2DBackpropFilter uses a while_loop. Fix that!"
  and loops. Ours is one batched matrix product per kernel tap (below), for Conv2D, Conv1D
  (a Conv2D), the pointwise half of a separable convolution and a transposed convolution's
  filter alike;
- `DepthwiseConv2dNative` whose kernel is the same in every row (a per-example forward
  pass): TensorFlow's converter folds the rows into the channels and needs a per-row
  kernel, so it loops. Ours folds the rows into the batch, as pfor does for Conv2D;
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

from compat_grads._tf import pfor_converter_of, pfor_wrap, tf


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
    x, per_row, _ = row.input(0)
    sizes = tf.get_static_value(row.unstacked_input(1))
    g = row.stacked_input(2)
    attrs = _attrs(row)
    nchw = attrs["data_format"] == b"NCHW"
    if nchw:
        x, g = _to_nhwc(x), _to_nhwc(g)
    dims = _static(x)
    if not per_row or sizes is None or dims is None or _static(g) is None:
        return _tensorflows(row)
    pads = _paddings(attrs, dims[2:4], sizes[:2], nchw)
    if pads is None:
        return _tensorflows(row)
    return pfor_wrap(taps(x, g, [int(s) for s in sizes], pads, attrs, nchw), True)


def taps(x, g, sizes, pads, attrs, nchw=False):
    """`[rows, kh, kw, c_in, c_out]`: each row's filter gradient, from its input
    `x [rows, n, H, W, c_in]` and output gradient `g [rows, n, h, w, c_out]` (NHWC within a
    row), `pads` [[top, bottom], [left, right]], strides and dilations from `attrs`."""
    (kh, kw, c_in, c_out), rows = sizes, tf.shape(x)[0]
    strides, (dh, dw) = (_spatial(attrs[k], nchw) for k in ("strides", "dilations"))
    out = _static(g)[2:4]
    tap = _tap_views(x, pads, strides, out)
    g = tf.reshape(g, tf.stack([rows, -1, c_out]))
    products = [tf.matmul(tf.reshape(tap(i * dh, j * dw), tf.stack([rows, -1, c_in])), g,
                          transpose_a=True)
                for i in range(kh) for j in range(kw)]
    return tf.reshape(tf.stack(products, axis=1), tf.stack([rows, kh, kw, c_in, c_out]))


def _tap_views(x, pads, strides, out):
    """`view(top, left)`: the input (padded) under the output positions of the tap that
    starts at row `top`, column `left`: `x_pad[:, :, top + h*s, left + w*s, :]`. With
    strides, the padded input is laid out once by stride phase, so that each view is a
    slice with unit strides (a strided slice of each view reads element by element: 1.7
    times slower for the bench's strided CNN, 3.7 times with 16 input channels)."""
    (sh, sw), (oh, ow) = strides, out
    height, width = (_static(x)[k] + sum(pads[k - 2]) for k in (2, 3))
    extra = [-height % sh, -width % sw]  # whole blocks of the strides
    x = tf.pad(x, [[0, 0], [0, 0], [pads[0][0], pads[0][1] + extra[0]],
                   [pads[1][0], pads[1][1] + extra[1]], [0, 0]])
    if sh == sw == 1:
        return lambda top, left: x[:, :, top:top + oh, left:left + ow, :]
    shape = tf.shape(x)
    phases = tf.transpose(tf.reshape(x, tf.stack([
        shape[0], shape[1], (height + extra[0]) // sh, sh, (width + extra[1]) // sw, sw,
        shape[4]])), [0, 1, 3, 5, 2, 4, 6])  # [rows, n, phase h, phase w, H/s, W/s, c_in]

    def view(top, left):
        (a, r), (b, t) = divmod(top, sh), divmod(left, sw)
        return phases[:, :, r, t, a:a + oh, b:b + ow, :]
    return view


def _depthwise(row):
    """The rows folded into the batch where the kernel is the same in every row."""
    x, per_row, _ = row.input(0)
    kernel, kernel_per_row, _ = row.input(1)
    if kernel_per_row or not per_row:
        return _tensorflows(row)
    shape = tf.shape(x)
    folded = tf.raw_ops.DepthwiseConv2dNative(
        input=tf.reshape(x, tf.concat([[-1], shape[2:]], 0)), filter=kernel, **_attrs(row))
    return pfor_wrap(tf.reshape(folded, tf.concat([shape[:2], tf.shape(folded)[1:]], 0)),
                     True)


def _attrs(row) -> dict:
    """The op's attributes but its dtype, as `tf.raw_ops` takes them."""
    return {a.name: row.get_attr(a.name) for a in row.op.op_def.attr if a.name != "T"}


def _to_nhwc(t):
    """A stacked NCHW tensor `[rows, n, c, h, w]` as `[rows, n, h, w, c]`."""
    return tf.transpose(t, [0, 1, 3, 4, 2])


def _static(t):
    """The static sizes of a stacked 5-D tensor but its first two axes, or None."""
    dims = t.shape.as_list() if t.shape.rank == 5 else None
    return dims if dims is not None and None not in dims[2:] else None


def _spatial(values, nchw):
    return tuple(values[2:4] if nchw else values[1:3])


def _paddings(attrs, sizes, kernel, nchw):
    """[[top, bottom], [left, right]] of the input (NHWC), None when TensorFlow's rule for
    SAME cannot be worked out while building."""
    padding = attrs["padding"]
    if padding == b"VALID":
        return [[0, 0], [0, 0]]
    if padding == b"EXPLICIT":
        flat = list(attrs["explicit_paddings"])
        pairs = [flat[k:k + 2] for k in range(0, len(flat), 2)]
        return pairs[2:4] if nchw else pairs[1:3]
    strides, dilations = (_spatial(attrs[k], nchw) for k in ("strides", "dilations"))
    pads = []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        total = max((-(-size // s) - 1) * s + (int(k) - 1) * d + 1 - size, 0)
        pads.append([total // 2, total - total // 2])
    return pads


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
    "Conv2DBackpropFilter": _filter_gradient, "DepthwiseConv2dNative": _depthwise,
    "TanhGrad": _activation_gradient(_tanh_gradient, 0),  # TanhGrad(y, dy)
    "SigmoidGrad": _activation_gradient(_sigmoid_gradient, 0),  # SigmoidGrad(y, dy)
    "ReluGrad": _activation_gradient(_relu_gradient, 1),  # ReluGrad(dy, features)
}
