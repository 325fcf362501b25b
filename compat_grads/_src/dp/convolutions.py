"""Convolutions (Conv1D, Conv2D, Conv3D, depthwise, separable and transposed ones): a filter
applied to each patch of the example's input. The per-example gradient of a filter is the
outer product of the patches and the output gradients, summed over positions (a depthwise
filter's per channel, materialized: it is as small as the filter; a transposed
convolution's, the output gradient's patches and the input)."""

from __future__ import annotations

from compat_grads._src.core.tf import tf
from compat_grads._src.dp.factors import Outer, PerExample


def conv(use, grad, ctx):
    op = use.op
    if use.index != 1:
        return "the weight is the convolution's input, not its filter"
    if op.get_attr("data_format").decode() not in ("NHWC", "NDHWC"):
        return "a convolution in channels-first layout"
    shape = use.shape
    if _one_channel(op, shape, ctx):
        return _per_channel(op, grad, shape, ctx.batch)
    patches = _patches(op)
    if isinstance(patches, str):
        return patches
    channels_in = int(shape[-2])
    groups = int(op.inputs[0].shape[-1]) // channels_in
    depth = int(patches.shape[-1])
    x, blocks = _undilated(op.inputs[0])
    left = ctx.flat(patches, depth, like=x, blocks=blocks)
    right = ctx.flat(grad, int(op.outputs[0].shape[-1]), like=x, blocks=blocks)
    if left is None or right is None:
        return "the graph does not show that the input holds the examples on its first axis"
    if op.type == "DepthwiseConv2dNative":
        return _depthwise(left, right, shape, ctx.batch)
    if groups != 1:
        return _grouped(left, right, shape, groups, ctx.batch)
    return Outer(left, right, depth)


def transposed(use, grad, ctx):
    """A transposed convolution (Conv1DTranspose, Conv2DTranspose, Conv3DTranspose): the
    adjoint of the convolution whose input is the layer's output and whose output is the
    layer's input, with the same filter; so the filter's per-example gradient is that
    convolution's, the patches of the output gradient times the layer's input."""
    op = use.op
    if use.index != 1:
        return "the weight is the transposed convolution's input, not its filter"
    if op.get_attr("data_format").decode() not in ("NHWC", "NDHWC"):
        return "a transposed convolution in channels-first layout"
    x, shape = op.inputs[2], use.shape
    patches = _patches_of(grad, op)
    if isinstance(patches, str):
        return patches
    if patches.shape[1:-1] != x.shape[1:-1] or not x.shape[1:-1].is_fully_defined():
        return (f"the output gradient's patches ({patches.shape}) do not line up with the "
                f"input ({x.shape})")
    depth = int(patches.shape[-1])
    left = ctx.flat(patches, depth, like=x)
    right = ctx.flat(x, int(shape[-1]), like=x)
    if left is None or right is None:
        return "the graph does not show that the input holds the examples on its first axis"
    return Outer(left, right, depth)


def _one_channel(op, shape, ctx) -> bool:
    """A 2-D convolution of one input channel (an image's first layer), one row per
    example: its per-example filter gradients are one depthwise filter gradient."""
    return (op.type == "Conv2D" and int(shape[-2]) == 1 and op.inputs[0].shape[-1] == 1 and
            list(op.get_attr("dilations")) == [1, 1, 1, 1] and
            ctx.rows(op.inputs[0]) == 1)


def _per_channel(op, grad, shape, batch):
    """`G[s] = filter gradient of example s`, as the filter gradient of a depthwise
    convolution over the examples moved into the channels (4 times faster than its patches
    for TF Privacy's MNIST CNN's first layer, `python /tmp/w/prof2.py`)."""
    x = op.inputs[0]
    moved = tf.transpose(x, [3, 1, 2, 0])  # [1, H, W, b]
    grads = tf.transpose(grad, [3, 1, 2, 0])  # [c_out, oh, ow, b]
    grads = tf.expand_dims(tf.transpose(grads, [1, 2, 3, 0]), 0)  # [1, oh, ow, b, c_out]
    grads = tf.reshape(grads, tf.stack([1, tf.shape(grad)[1], tf.shape(grad)[2], -1]))
    kernel, channels_out = [int(d) for d in shape[:2]], int(shape[-1])
    attrs = {"padding": op.get_attr("padding"), "strides": op.get_attr("strides")}
    if attrs["padding"] == b"EXPLICIT":
        attrs["explicit_paddings"] = op.get_attr("explicit_paddings")
    found = tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
        input=moved, filter_sizes=tf.stack([*kernel, batch, channels_out]),
        out_backprop=grads, **attrs)  # [kh, kw, b, c_out]
    return PerExample(tf.reshape(tf.transpose(found, [2, 0, 1, 3]),
                                 [batch, *shape.as_list()]))


def _undilated(x):
    """(the example-major tensor, blocks): a dilated convolution that TensorFlow runs as
    `SpaceToBatchND`, a plain convolution, `BatchToSpaceND` reads `blocks` spatial blocks of
    the batch, each holding every example's rows in order."""
    if x.op.type != "SpaceToBatchND":
        return x, 1
    block = tf.get_static_value(x.op.inputs[1])
    if block is None:
        return x, 1
    return x.op.inputs[0], int(block.prod())


def _patches(op):
    """The input's patches, `[N, positions..., kernel * channels]` in the filter's order."""
    return _patches_of(op.inputs[0], op)


def _patches_of(x, op):
    """The patches of `x` the convolution `op` (or the one a transposed convolution is the
    adjoint of) multiplies by its filter, `op.inputs[1]`: its kernel, strides, dilations
    and padding."""
    spatial = x.shape.rank - 2
    kernel = [int(d) for d in op.inputs[1].shape[:spatial]]
    strides = list(op.get_attr("strides"))
    rates = list(op.get_attr("dilations"))
    padding = op.get_attr("padding").decode()
    if padding == "EXPLICIT":
        pads = list(op.get_attr("explicit_paddings"))
        x = tf.pad(x, [pads[i:i + 2] for i in range(0, len(pads), 2)])
        padding = "VALID"
    if spatial == 2:
        return tf.image.extract_patches(x, [1, *kernel, 1], strides, rates, padding)
    if spatial == 3 and rates == [1] * 5:
        return tf.extract_volume_patches(x, [1, *kernel, 1], strides, padding)
    return "a dilated 3-D convolution (no patch extraction op for it)"


def _depthwise(left, right, shape, batch):
    """`G[s, k, c, m] = sum_t patch[s, t, k, c] * g[s, t, c, m]`."""
    kernel, channels, multiplier = int(shape[0]) * int(shape[1]), int(shape[2]), int(shape[3])
    patches = tf.reshape(left, [batch, -1, kernel, channels])
    grads = tf.reshape(right, [batch, -1, channels, multiplier])
    return PerExample(tf.reshape(tf.einsum("btkc,btcm->bkcm", patches, grads),
                                 [batch, *shape.as_list()]))


def _grouped(left, right, shape, groups, batch):
    """A grouped convolution: group j's filter columns see group j's input channels."""
    kernel = int(shape[:-2].num_elements())
    channels_in, channels_out = int(shape[-2]), int(shape[-1])
    patches = tf.reshape(left, [batch, -1, kernel, groups, channels_in])
    grads = tf.reshape(right, [batch, -1, groups, channels_out // groups])
    per_group = tf.einsum("btkgc,btgo->bkcgo", patches, grads)
    return PerExample(tf.reshape(per_group, [batch, *shape.as_list()]))
