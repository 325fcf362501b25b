"""Filter gradients of 2-D convolutions that pfor vectorizes when the input is stacked too.

pfor turns `Conv2DBackpropFilter` into a `tf.while_loop` over the stacked axis whenever the
convolution's input differs per row ("Conv2DBackpropFilter uses a while_loop. Fix that!"):
exactly the case of per-example gradients, where each example has its own input. Within
`vectorized()`, a Conv2D (Conv1D and the pointwise half of a separable convolution are
Conv2Ds) or a transposed convolution (`Conv2DBackpropInput`) built there gets a gradient whose
filter part is one einsum over shifted views of the input instead:

    dW[i, j, :, :] = sum over n, h, w of x_pad[n, h*s + i*d, w*s + j*d, :]ᵀ g[n, h, w, :]

pfor vectorizes both the strided slices and the einsum over the stacked axis, so a batch of
examples is one batched matrix product. The views hold kernel-height × kernel-width copies of
the (padded) input for the einsum, as im2col does. Depthwise convolutions need nothing here:
pfor folds their examples into the channels already (their forward op, though, pfor runs in
a while_loop when the kernel is a per-example source: still open). A convolution whose
sizes are not known while building keeps TensorFlow's gradient.
"""

from __future__ import annotations

import contextlib
import functools

from compat_grads._tf import tf

_CONV2D = "CompatGradsVectorizableConv2D"
_TRANSPOSED = "CompatGradsVectorizableConv2DBackpropInput"
_ATTRS = ("strides", "padding", "explicit_paddings", "dilations", "data_format",
          "use_cudnn_on_gpu")


@contextlib.contextmanager
def vectorized():
    """Convolutions created inside differentiate with `filter_gradient` (in a graph: the
    gradient of a tape, which ignores the override, is TensorFlow's own)."""
    graph = tf.compat.v1.get_default_graph()
    with graph.gradient_override_map(_registered()):
        yield


@functools.cache
def _registered() -> dict:
    """Our gradients, registered at the first use (not at import: the registry is global)."""
    tf.RegisterGradient(_CONV2D)(_conv2d_gradient)
    tf.RegisterGradient(_TRANSPOSED)(_transposed_gradient)
    return {"Conv2D": _CONV2D, "Conv2DBackpropInput": _TRANSPOSED}


def _attrs(op) -> dict:
    return {name: op.get_attr(name) for name in _ATTRS}


def _conv2d_gradient(op, grad):
    x, w = op.inputs
    attrs = _attrs(op)
    dx = tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.shape(x), filter=w, out_backprop=grad,
                                        **attrs)
    return dx, filter_gradient(x, w, grad, attrs)


def _transposed_gradient(op, grad):
    """A transposed convolution is the input gradient of a Conv2D: its filter gradient is
    the filter gradient of that Conv2D with the roles of input and output exchanged."""
    _, w, out_backprop = op.inputs
    attrs = _attrs(op)
    d_out = tf.raw_ops.Conv2D(input=grad, filter=w, **attrs)
    return None, filter_gradient(grad, w, out_backprop, attrs), d_out


def filter_gradient(x, w, g, attrs, depthwise=False):
    """d/dw of sum(g * conv2d(x, w)), as `Conv2DBackpropFilter` computes it (with
    `depthwise`: of a depthwise convolution, as `DepthwiseConv2dNativeBackpropFilter`;
    not used by `vectorized`, whose depthwise gradients pfor folds into channels, as fast
    as this einsum in the measurements so far)."""
    nchw = attrs["data_format"] == b"NCHW"
    strides, dilations = (_spatial(attrs[k], nchw) for k in ("strides", "dilations"))
    x_dims, g_dims = (_nhwc(_dims(t), nchw) for t in (x, g))
    w_dims = _dims(w)
    pads = _paddings(attrs, x_dims, w_dims, strides, dilations, nchw)
    if pads is None or None in g_dims[1:3] or len(w_dims) != 4 or None in w_dims:
        return _tensorflows(x, w, g, attrs, depthwise)
    if nchw:
        x, g = (tf.transpose(t, [0, 2, 3, 1]) for t in (x, g))
    out = g_dims[1:3]
    x = tf.pad(x, [[0, 0], *pads, [0, 0]])
    (kh, kw), (sh, sw), (dh, dw) = w_dims[:2], strides, dilations
    views = [x[:, i * dh:i * dh + (out[0] - 1) * sh + 1:sh,
               j * dw:j * dw + (out[1] - 1) * sw + 1:sw, :]
             for i in range(kh) for j in range(kw)]
    if depthwise:  # output channel c * multiplier + m reads input channel c
        g = tf.reshape(g, [-1, *out, *w_dims[2:]])
        dw_ = tf.einsum("knhwc,nhwcm->kcm", tf.stack(views), g)
    else:
        dw_ = tf.einsum("knhwc,nhwo->kco", tf.stack(views), g)
    return tf.reshape(dw_, w_dims)


def _tensorflows(x, w, g, attrs, depthwise):
    op = (tf.raw_ops.DepthwiseConv2dNativeBackpropFilter if depthwise
          else tf.raw_ops.Conv2DBackpropFilter)
    return op(input=x, filter_sizes=tf.shape(w), out_backprop=g, **attrs)


def _dims(t) -> list:
    """The static sizes (None where unknown; [None] * 4 for an unknown rank: a TF1 graph
    gives Dimensions, which do no arithmetic)."""
    return t.shape.as_list() if t.shape.rank is not None else [None] * 4


def _nhwc(dims: list, nchw: bool) -> list:
    """Sizes of an NCHW tensor in NHWC order (unchanged for NHWC)."""
    return [dims[0], *dims[2:], dims[1]] if nchw and len(dims) == 4 else dims


def _spatial(values, nchw):
    return tuple(values[2:4] if nchw else values[1:3])


def _paddings(attrs, x_dims, w_dims, strides, dilations, nchw):
    """[[top, bottom], [left, right]] of the input (NHWC), or None when they are not
    static."""
    padding = attrs["padding"]
    if padding == b"VALID":
        return [[0, 0], [0, 0]]
    if padding == b"EXPLICIT":
        flat = list(attrs["explicit_paddings"])
        pairs = [flat[k:k + 2] for k in range(0, len(flat), 2)]
        return pairs[2:4] if nchw else pairs[1:3]
    sizes, kernel = x_dims[1:3], w_dims[:2]
    if None in sizes or None in kernel:
        return None
    pads = []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        pads.append([total // 2, total - total // 2])
    return pads
