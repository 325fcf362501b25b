"""Embeddings: rows of a table gathered by the example's indices. The per-example gradient
is the output gradients added into the rows the example's indices name: an outer product of
one-hot rows (two positions share a row exactly when their indices are equal)."""

from __future__ import annotations

from compat_grads._src.core.tf import tf
from compat_grads._src.dp.factors import Outer


def gather(use, grad, ctx):
    op = use.op
    if use.index != 0:
        return "the weight holds the indices of a gather"
    if op.get_attr("batch_dims") != 0 or (
            op.type == "GatherV2" and tf.get_static_value(op.inputs[2]) != 0):
        return "a gather along another axis than the table's rows"
    shape = use.shape
    if shape.rank is None or not shape.is_fully_defined():
        return "a table whose shape is not known while building"
    width = int(shape[1:].num_elements())
    indices = op.inputs[1]
    found = ctx.elements(indices)
    right = ctx.flat(grad, width, like=op.outputs[0])
    if not isinstance(found, int) or right is None:
        return "the graph does not show that the indices hold the examples on their first axis"
    return Outer(None, right, int(shape[0]), tf.reshape(indices, [ctx.batch, found]))
