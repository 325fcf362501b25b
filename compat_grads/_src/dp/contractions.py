"""Dense, EinsumDense and attention projections: a weight contracted with the example's
rows (`MatMul`, `BatchMatMulV2`, `Einsum`). Each is an einsum `A,W->Y`; the per-example
gradient is `einsum(A,Y->W)` over the example's rows, an outer product of its input rows and
output gradients when the weight's axes split into input-side then output-side ones."""

from __future__ import annotations

import string

import numpy as np

from compat_grads._src.core.tf import tf
from compat_grads._src.dp.factors import Outer, PerExample


def matmul(use, grad, ctx):
    op = use.op
    if use.index != 1:
        return "the weight is the left factor of a matmul (the examples are contracted)"
    x = op.inputs[0]
    if op.type == "MatMul":
        if op.get_attr("transpose_a"):
            return "a matmul with transpose_a=True (the examples are contracted)"
        inner, weight = "ij", ("kj" if op.get_attr("transpose_b") else "jk")
        return contraction(x, inner, weight, "ik", grad, op.outputs[0], ctx)
    rank, wrank = x.shape.rank, use.shape.rank
    if rank is None or wrank != 2 or rank < 2:
        return "a batched matmul by a weight that is not a matrix"
    batch = string.ascii_lowercase[:rank - 2]
    inner = batch + ("ji" if op.get_attr("adj_x") else "ij")
    weight = "kj" if op.get_attr("adj_y") else "jk"
    return contraction(x, inner, weight, batch + "ik", grad, op.outputs[0], ctx)


def einsum(use, grad, ctx):
    op = use.op
    equation = op.get_attr("equation").decode().replace(" ", "")
    if "." in equation or len(op.inputs) != 2:
        return f"an einsum {equation!r} (an ellipsis, or not two operands)"
    operands, output = equation.split("->")
    labels = operands.split(",")
    other = 1 - use.index
    return contraction(op.inputs[other], labels[other], labels[use.index], output, grad,
                       op.outputs[0], ctx)


def contraction(x, x_labels, w_labels, y_labels, grad, y, ctx):
    """The per-example gradient of `W` in `Y = einsum(X,W->Y)`, from `x` and the output
    gradient `grad` (of `y`), when both hold the examples on their first axis."""
    if not y_labels or x_labels[:1] != y_labels[:1] or y_labels[0] in w_labels:
        return "the examples are not the first axis of both the input and the output"
    x_rows, g_rows = ctx.by_example(x), ctx.by_example(grad, like=y)
    if x_rows is None or g_rows is None:
        return "the graph does not show that the input holds the examples on its first axis"
    example, rows_label = [c for c in string.ascii_letters
                           if c not in x_labels + w_labels + y_labels][:2]
    x_labels = example + rows_label + x_labels[1:]
    y_labels = example + rows_label + y_labels[1:]
    if set(w_labels) - set(x_labels) - set(y_labels):
        return "a weight axis that is summed over in the forward pass"
    left = [c for c in w_labels if c in x_labels and c not in y_labels]
    right = [c for c in w_labels if c in y_labels and c not in x_labels]
    if w_labels == "".join(left + right):
        rows = [c for c in x_labels[1:] if c in y_labels and c not in w_labels]
        return Outer(_arranged(x_rows, x_labels, [example, *rows], left, ctx.batch),
                     _arranged(g_rows, y_labels, [example, *rows], right, ctx.batch),
                     int(np.prod([_size(x_rows, x_labels, c) for c in left], dtype=np.int64)))
    equation = f"{x_labels},{y_labels}->{example}{w_labels}"
    return PerExample(tf.einsum(equation, x_rows, tf.cast(g_rows, x_rows.dtype)))


def _size(t, labels, label) -> int:
    return int(t.shape[labels.index(label)])


def _arranged(t, labels, rows, features, batch):
    """`t` (axes `labels`) summed over the axes in neither list and arranged as `[batch,
    prod(rows[1:]), prod(features)]` (`rows[0]` is the example axis)."""
    keep = [*rows, *features]
    drop = [i for i, c in enumerate(labels) if c not in keep]
    if drop:
        t = tf.reduce_sum(t, axis=drop)
        labels = "".join(c for c in labels if c in keep)
    order = [labels.index(c) for c in keep]
    if order != list(range(len(order))):
        t = tf.transpose(t, order)
    width = int(np.prod([t.shape[len(rows) + i] for i in range(len(features))],
                        dtype=np.int64))
    return tf.reshape(t, [batch, -1, width])
