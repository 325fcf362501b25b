"""Biases, scales and shifts (Dense and convolution biases, LayerNormalization's gamma and
beta, BatchNormalization in inference mode): a weight broadcast over the example's rows.
The per-example gradient is the output gradient (times the other factor, for a scale)
summed over the axes the weight is broadcast along: as small as the weight, so it is
materialized."""

from __future__ import annotations

from compat_grads._src.core.tf import tf
from compat_grads._src.dp.factors import PerExample


def broadcast(use, grad, ctx):
    op = use.op
    out, view = op.outputs[0], use
    if op.type == "BiasAdd" and op.get_attr("data_format").decode() != "NHWC":
        return "a bias added in channels-first layout"
    if op.type == "BiasAdd" and use.index != 1:
        return "the weight is the value a bias is added to"
    if view.shape.rank is None or out.shape.rank is None or view.shape.rank > out.shape.rank:
        return "a weight that does not broadcast along the examples' rows"
    shape = [1] * (out.shape.rank - view.shape.rank) + view.shape.as_list()
    if op.type == "BiasAdd":
        shape = [1] * (out.shape.rank - 1) + [int(view.shape[-1])]
    if shape[0] != 1 or None in shape:
        return "a weight with one entry per example (it is the batch's, not a parameter)"
    product = grad
    if op.type == "Mul":
        product = grad * tf.cast(op.inputs[1 - use.index], grad.dtype)
    elif op.type == "Sub" and use.index == 1:
        product = -grad
    return _summed(ctx, product, out, shape, view.shape)


def fused_batch_norm(use, grad, ctx):
    """A batch norm in inference mode: `y = scale * (x - mean) / sqrt(var + eps) + offset`."""
    op = use.op
    if op.get_attr("is_training"):
        return "a batch normalization in training mode (its statistics mix the examples)"
    if op.get_attr("data_format").decode() not in ("NHWC", "NDHWC") or use.index not in (1, 2):
        return "a batch normalization in channels-first layout, or of its statistics"
    product = grad
    if use.index == 1:
        x, mean, variance = op.inputs[0], op.inputs[3], op.inputs[4]
        normalized = (x - mean) * tf.math.rsqrt(variance + op.get_attr("epsilon"))
        product = grad * tf.cast(normalized, grad.dtype)
    rank = op.outputs[0].shape.rank
    return _summed(ctx, product, op.outputs[0], [1] * (rank - 1) + [int(use.shape[-1])],
                   use.shape)


def _summed(ctx, product, out, shape, view_shape):
    """`product` (shaped like the output `out`) summed per example over the axes where
    `shape` (the weight's, aligned with the output's) is 1, in the weight's view shape."""
    rows = ctx.by_example(product, like=out)
    if rows is None:
        return "the graph does not show that the output holds the examples on its first axis"
    axes = [1] + [i + 1 for i, d in enumerate(shape) if i > 0 and d == 1]
    summed = tf.reduce_sum(rows, axis=axes)
    return PerExample(tf.reshape(summed, [ctx.batch, *view_shape.as_list()]))
