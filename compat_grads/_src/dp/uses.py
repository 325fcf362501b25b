"""Where the forward pass reads each weight: the ops that consume its value (through views
that keep its elements in order: reads, identities, casts, reshapes), among the ops the
forward pass created."""

from __future__ import annotations

import dataclasses

from compat_grads._src.core.tf import tf
from compat_grads._src.core.variables import unwrap_variable

VIEWS = frozenset({"ReadVariableOp", "Identity", "Cast", "Reshape", "ExpandDims", "Squeeze",
                   "Snapshot"})
"""Ops whose output is the weight's elements in the same row-major order: a rule sees the
view an op reads, and its per-example gradient is the weight's, reshaped."""


DERIVED = frozenset({"Mul", "RealDiv", "Neg", "Sub", "Add", "AddV2"})
"""Ops that make a tensor derived from the weight when their other inputs are the same for
every example (BatchNormalization's `gamma * rsqrt(variance + eps)`): its uses are the
weight's, pulled back through them."""


@dataclasses.dataclass(frozen=True)
class Step:
    """Input `index` of `op` is the weight (or what is derived from it), the other inputs
    the same for every example."""

    op: tf.Operation
    index: int


PARTS = frozenset({"Unpack", "Split", "SplitV", "StridedSlice"})
"""Ops that cut the weight along its first axis into pieces (a GRU's two biases): each
piece's uses are read, and the pieces joined again."""


@dataclasses.dataclass(frozen=True)
class Piece:
    """Output `index` of `op`: the weight's rows `start` to `start + rows`."""

    op: tf.Operation
    index: int
    start: int
    rows: int


@dataclasses.dataclass(frozen=True)
class Use:
    """Input `index` of `op` reads `view`, a view of the weight with the shape `shape`
    (a resource handle's is its variable's), or of a tensor derived from it by `chain`."""

    op: tf.Operation
    index: int
    view: tf.Tensor
    shape: tf.TensorShape
    chain: tuple = ()
    piece: Piece | None = None

    @property
    def output(self) -> tf.Tensor:
        """The tensor whose output gradient the rules read."""
        return self.op.outputs[0]


def uses_of(weight, graph, created, fixed) -> list[Use]:
    """Every read of `weight` by an op of `created` (`{op name: position}` of the ops of
    `graph` the forward pass made, in the order it made them), through views and through
    ops that derive a tensor from it with tensors `fixed(t)` says are the same for every
    example; in the order the forward pass made them (the backward pass reaches them in
    the reverse order). A weight the graph never reads has none."""
    found, seen = [], set()
    todo = [(t, (), None) for t in _values_in(weight, graph)]
    while todo:
        tensor, chain, piece = todo.pop()
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        for op in tensor.consumers():
            if op.type in VIEWS and op.outputs:
                todo.append((op.outputs[0], chain, piece))
                continue
            if op.name not in created:
                continue
            cut = _pieces(op, tensor, weight) if piece is None and not chain else None
            if cut:
                todo += [(out, chain, each) for out, each in zip(op.outputs, cut)]
                continue
            for i, t in enumerate(op.inputs):
                if t is not tensor:
                    continue
                if _derives(op, i, fixed):
                    todo.append((op.outputs[0], (*chain, Step(op, i)), piece))
                    continue
                shape = weight.shape if tensor.dtype == tf.resource else tensor.shape
                found.append(Use(op, i, tensor, shape, chain, piece))
    return sorted(found, key=lambda use: created[use.op.name])


def _pieces(op, tensor, weight) -> list | None:
    """The `Piece` of each output when `op` cuts the weight's value (in its own shape)
    along its first axis, else None."""
    if op.type not in PARTS or tensor.dtype == tf.resource or (
            tensor.shape.as_list() != weight.shape.as_list()):
        return None
    if op.type == "StridedSlice":
        return _one_row(op)
    if op.type == "Unpack":
        return [Piece(op, k, k, 1) for k in range(len(op.outputs))] if (
            op.get_attr("axis") == 0) else None
    axis = tf.get_static_value(op.inputs[0] if op.type == "Split" else op.inputs[2])
    rows = [tf.compat.dimension_value(out.shape[0]) for out in op.outputs]
    if axis is None or int(axis) != 0 or None in rows:
        return None
    starts = [sum(rows[:k]) for k in range(len(rows))]
    return [Piece(op, k, start, n) for k, (start, n) in enumerate(zip(starts, rows))]


def _one_row(op) -> list | None:
    """`w[i]`: one row of the weight, the rest whole."""
    begin, end, strides = (tf.get_static_value(t) for t in op.inputs[1:])
    if begin is None or end is None or strides is None or op.get_attr("ellipsis_mask") or (
            op.get_attr("new_axis_mask") or op.get_attr("shrink_axis_mask") != 1):
        return None
    rest = len(begin) - 1
    whole = (1 << len(begin)) - 2  # every axis after the first taken whole
    if rest and ((op.get_attr("begin_mask") & whole) != whole or
                 (op.get_attr("end_mask") & whole) != whole):
        return None
    start = int(begin[0])
    return [Piece(op, 0, start, 1)] if start >= 0 and int(strides[0]) == 1 else None


def _derives(op, index, fixed) -> bool:
    """Whether `op`'s output is derived from its input `index` linearly, its other inputs
    the same for every example."""
    if op.type not in DERIVED or (op.type == "RealDiv" and index != 0):
        return False
    return all(fixed(t) for i, t in enumerate(op.inputs) if i != index)


def _values_in(weight, graph) -> list:
    """The tensors of `graph` that stand for `weight`: a resource variable's handle (as the
    graph captured it), a TF1 variable's reference, or the tensor itself."""
    weight = unwrap_variable(weight)
    if isinstance(weight, tf.Tensor):
        return [weight] if weight.graph is graph else []
    handle = getattr(weight, "handle", None) if _is_resource(weight) else None
    if handle is None:
        ref = getattr(weight, "_variable", None)  # a TF1 reference variable
        return [ref] if ref is not None and getattr(ref, "graph", None) is graph else []
    if getattr(handle, "graph", None) is graph:
        return [handle]
    return [inner for outer, inner in getattr(graph, "captures", ()) if outer is handle]


def _is_resource(weight) -> bool:
    try:
        return bool(getattr(weight, "handle", None) is not None)
    except (AttributeError, ValueError, TypeError):
        return False
