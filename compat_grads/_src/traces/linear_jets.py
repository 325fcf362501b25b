"""The forward Laplacian's shape-only pieces (`compat_grads._src.traces.forward_laplacian`): its
error, and how a linear op (a slice, a reduction, a transpose, a gather) applies to a jet's
J or S, which may carry a leading axis of n directions (`shifted`); what a source's
directions are shaped like."""

from __future__ import annotations

import numpy as np

from compat_grads._src.core.tf import tf


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
    """The caller (`compat_grads._src.traces.traces`) names its public function and what it does
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


# Integer arithmetic a gradient builds on constants (an einsum's reduction axes, for one),
# which tf.get_static_value does not fold.
_ARITHMETIC = {"Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply,
               "FloorMod": np.mod, "FloorDiv": np.floor_divide, "Neg": np.negative,
               "Maximum": np.maximum, "Minimum": np.minimum}


def _constant_value(tensor, depth=0):
    value = tf.get_static_value(tensor)
    kind = tensor.op.type
    if value is not None or depth > 8 or kind not in (*_ARITHMETIC, "BroadcastGradientArgs",
                                                       "StridedSlice"):
        return value
    args = [_constant_value(t, depth + 1) for t in tensor.op.inputs]
    if any(a is None for a in args):
        return None
    if kind == "BroadcastGradientArgs":
        value = _reduction_indices(*args)[tensor.value_index]
    elif kind == "StridedSlice":
        value = _sliced_vector(tensor.op, *args)
        if value is None:
            return None
    else:
        value = _ARITHMETIC[kind](*args)
    return np.asarray(value, tensor.dtype.as_numpy_dtype)


def _sliced_vector(op, vector, begin, end, strides):
    """A strided slice of a known vector (a shape's part), or None for any other form."""
    masks = _slice_masks(op, False)
    if np.ndim(vector) != 1 or len(begin) != 1 or masks["ellipsis_mask"] or masks[
            "new_axis_mask"]:
        return None
    if masks["shrink_axis_mask"] & 1:
        return vector[int(begin[0])]
    start = None if masks["begin_mask"] & 1 else int(begin[0])
    stop = None if masks["end_mask"] & 1 else int(end[0])
    return vector[start:stop:int(strides[0])]


def _reduction_indices(first, second):
    """BroadcastGradientArgs of two known shapes: the axes each operand's gradient sums
    over (those where it is 1, or absent, in a broadcast that changed the shape)."""
    rank = max(len(first), len(second))
    a, b = ([1] * (rank - len(s)) + list(s) for s in (first, second))
    if a == b:
        return [], []
    return [i for i in range(rank) if a[i] == 1], [i for i in range(rank) if b[i] == 1]


def static(op, tensor):
    value = _constant_value(tensor)
    if value is None:
        raise unsupported(f"{named(op)} with the non-constant input '{tensor.name}'")
    return value


def folded(tensor):
    """`tensor`'s value where it is known statically, else `tensor`: a rule built inside a
    loop (the forward Laplacian's chunks) reads it through the loop's Enter otherwise,
    where TensorFlow no longer sees the constant and loses the result's shape."""
    value = _constant_value(tensor)
    return tensor if value is None else tf.constant(value, tensor.dtype)


def with_first(first, values, shifted):
    values = folded(tf.convert_to_tensor(values))
    return tf.concat([tf.constant([first], values.dtype), values], 0) if shifted else values


def n_then(x, shape, shifted):
    """`shape`, after x's leading n axis when shifted."""
    shape = folded(shape)
    return tf.concat([tf.shape(x, out_type=shape.dtype)[:1], shape], 0) if shifted else shape


def _slice_masks(op, shifted):
    """A strided slice's masks, for the value with a leading n axis when `shifted` (taken
    whole: its bit set in the begin and end masks)."""
    masks = {name: op.get_attr(name) for name in (
        "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    if not shifted:
        return masks
    return {k: (v << 1) | (k in ("begin_mask", "end_mask")) for k, v in masks.items()}


def strided_slice(op):
    begin, end, strides = (folded(t) for t in op.inputs[1:])

    def fn(x, s):
        return tf.strided_slice(x, with_first(0, begin, s), with_first(0, end, s),
                                with_first(1, strides, s), **_slice_masks(op, s))
    return fn


def strided_slice_grad(op):
    """StridedSliceGrad (a slice's gradient: dy written into zeros of the value's shape),
    linear in dy, its input 4."""
    shape, begin, end, strides = (folded(t) for t in op.inputs[:4])

    def fn(x, s):
        return tf.raw_ops.StridedSliceGrad(
            shape=n_then(x, shape, s), begin=with_first(0, begin, s),
            end=with_first(0, end, s), strides=with_first(1, strides, s), dy=x,
            **_slice_masks(op, s))
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
    given = op.inputs[1]  # a transpose's gradient inverts its permutation in the graph
    inverted = given.op.type == "InvertPermutation" and tf.get_static_value(given) is None
    perm = (np.argsort(static(op, given.op.inputs[0])) if inverted
            else np.asarray(static(op, given))) % rank_of(op.inputs[0])
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


def split(op):
    """tf.split (Split: axis first; SplitV: sizes and axis after the value): the jet split
    as the value is, along the same axis (after the n axis)."""
    value = op.inputs[1] if op.type == "Split" else op.inputs[0]
    axis = int(static(op, op.inputs[0] if op.type == "Split" else op.inputs[2]))
    axis = axis % rank_of(value)
    sizes = [tf.compat.dimension_value(t.shape[axis]) for t in op.outputs]
    if None in sizes:
        raise unsupported(f"{named(op)} into parts of unknown size")
    return value, lambda x, s: tf.split(x, sizes, axis=axis + 1 if s else axis)


def extremum(op):
    """Max and Min: linear in the selected elements (ties share, as in tf.gradients); the
    selection is a constant."""
    x, y = op.inputs[0], op.outputs[0]
    keep = op.get_attr("keep_dims")
    axes = (np.atleast_1d(static(op, op.inputs[1])) % rank_of(x)).tolist()
    kept = y if keep else tf.reshape(y, tf.tensor_scatter_nd_update(
        tf.shape(x), [[a] for a in axes], tf.ones(len(axes), tf.int32)))
    chosen = tf.cast(tf.equal(x, kept), x.dtype)
    share = chosen / tf.reduce_sum(chosen, axes, keepdims=True)
    return lambda v, s: tf.reduce_sum(v * share, shift(np.asarray(axes), s).tolist(),
                                      keepdims=keep)


def split_outputs(walk, op, jets):
    """The rule of Split and SplitV: the jet of each output."""
    value, fn = split(op)
    J, S = walk.linear(jets[1 if op.type == "Split" else 0], value, lambda x, s: x)
    parts = [fn(J, True), None if S is None else fn(S, not walk.summed)]
    return [(parts[0][i], None if parts[1] is None else parts[1][i])
            for i in range(len(op.outputs))]


def unpack_outputs(walk, op, jets):
    """The rule of Unpack (`tf.unstack`): the jet of each output."""
    axis, count = op.get_attr("axis"), op.get_attr("num")
    parts = [None if x is None else tf.unstack(x, count, int(shift(axis, s)))
             for x, s in zip(walk.linear(jets[0], op.inputs[0], lambda x, s: x),
                             (True, not walk.summed))]
    return [(parts[0][i], None if parts[1] is None else parts[1][i]) for i in range(count)]
