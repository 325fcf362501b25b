"""The forward Laplacian's shape-only pieces (`compat_grads._forward_laplacian`): its
error, and how a linear op (a slice, a reduction, a transpose, a gather) applies to a jet's
J or S, which may carry a leading axis of n directions (`shifted`); what a source's
directions are shaped like."""

from __future__ import annotations

import numpy as np

from compat_grads._tf import tf


class Unsupported(Exception):
    """The target runs an op without a forward-Laplacian rule; `.reason` names it, e.g.
    "op 'dense/Softmax' (Softmax)"."""

    __init__ = Exception.__init__  # AutoGraph keeps the type (see _errors.ModeError)

    def __str__(self):
        return str(self.args[0]) if self.args else ""

    @property
    def reason(self) -> str:
        return self.args[-1] if self.args else ""


def unsupported(reason: str) -> Unsupported:
    """The caller (`compat_grads._traces`) names its public function and what it does
    instead; the error carries what has no rule."""
    return Unsupported(f"no forward-Laplacian rule for {reason}", reason)


def named(op) -> str:
    return f"op '{op.name}' ({op.type})"


def rank_of(t) -> int:
    if t.shape.rank is None:
        raise unsupported(f"tensor '{t.name}' of unknown rank")
    return t.shape.rank


def shift(axis, shifted):
    """An axis of t as an axis of [n] + t.shape (negative axes count from the end)."""
    axis = np.asarray(axis)
    return np.where(axis >= 0, axis + 1, axis) if shifted else axis


def static(op, tensor):
    value = tf.get_static_value(tensor)
    if value is None:
        raise unsupported(f"{named(op)} with the non-constant input '{tensor.name}'")
    return value


def folded(tensor):
    """`tensor`'s value where it is known statically, else `tensor`: a rule built inside a
    loop (the forward Laplacian's chunks) reads it through the loop's Enter otherwise,
    where TensorFlow no longer sees the constant and loses the result's shape."""
    value = tf.get_static_value(tensor)
    return tensor if value is None else tf.constant(value, tensor.dtype)


def with_first(first, values, shifted):
    values = folded(tf.convert_to_tensor(values))
    return tf.concat([tf.constant([first], values.dtype), values], 0) if shifted else values


def n_then(x, shape, shifted):
    """`shape`, after x's leading n axis when shifted."""
    shape = folded(shape)
    return tf.concat([tf.shape(x, out_type=shape.dtype)[:1], shape], 0) if shifted else shape


def strided_slice(op):
    begin, end, strides = (folded(t) for t in op.inputs[1:])
    masks = {name: op.get_attr(name) for name in (
        "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}

    def fn(x, s):
        if not s:
            return tf.strided_slice(x, begin, end, strides, **masks)
        shifted = {k: (v << 1) | (k in ("begin_mask", "end_mask")) for k, v in masks.items()}
        return tf.strided_slice(x, with_first(0, begin, s), with_first(0, end, s),
                                with_first(1, strides, s), **shifted)
    return fn


def reduction(reduce):
    def build(op):
        axis, keep = static(op, op.inputs[1]), op.get_attr("keep_dims")
        return lambda x, s: reduce(x, shift(axis, s).tolist(), keepdims=keep)
    return build


def expand_dims(op):
    axis = int(static(op, op.inputs[1]))
    return lambda x, s: tf.expand_dims(x, int(shift(axis, s)))


def squeeze(op):
    axes = list(op.get_attr("squeeze_dims"))
    if not axes:
        dims = op.inputs[0].shape.as_list()
        if None in dims:
            raise unsupported(f"{named(op)} without axes on a partly unknown shape")
        axes = [i for i, dim in enumerate(dims) if dim == 1]
    return lambda x, s: tf.squeeze(x, shift(axes, s).tolist())


def transpose(op):
    perm = np.asarray(static(op, op.inputs[1])) % rank_of(op.inputs[0])
    return lambda x, s: tf.transpose(x, [0] + (perm + 1).tolist() if s else perm.tolist())


def gather(op):
    if op.get_attr("batch_dims") != 0:
        raise unsupported(f"{named(op)} with batch_dims")
    indices, axis = op.inputs[1], int(static(op, op.inputs[2]))
    return lambda x, s: tf.gather(x, indices, axis=int(shift(axis, s)))


def gather_nd(op):
    """tf.gather_nd, linear in its params: the n axis moved last, where the gathered
    slices keep it, and back to the front."""
    indices = op.inputs[1]

    def fn(x, s):
        if not s:
            return tf.gather_nd(x, indices)
        rank = rank_of(x)
        gathered = tf.gather_nd(tf.transpose(x, list(range(1, rank)) + [0]), indices)
        last = rank_of(gathered) - 1
        return tf.transpose(gathered, [last] + list(range(last)))
    return fn


def value_of(source):
    if isinstance(source, tf.Variable) and not hasattr(source, "handle"):
        return source.op.outputs[0]
    return source


def size_of(source, batched):
    """n, the directions of `source` (per sample when batched), if known statically."""
    source = value_of(source)
    value = source if source.dtype != tf.resource else read_of(source)
    return (value.shape[1:] if batched else value.shape).num_elements()


def read_of(handle):
    """A read of the variable behind `handle`: the value the directions are shaped like."""
    for op in handle.consumers():
        if op.type == "ReadVariableOp":
            return op.outputs[0]
    raise unsupported(f"variable handle '{handle.name}' that is never read")


def inert(dtype) -> bool:
    """Values no derivative flows through."""
    return dtype.is_integer or dtype.is_bool or dtype == tf.string
