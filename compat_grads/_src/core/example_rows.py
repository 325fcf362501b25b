"""Which tensors of a graph hold each example's elements together (example-major), for the
rules of private training (`compat_grads._src.dp`), which reshape a layer's inputs and
output gradients to `[b, rows, features]`.

A tensor is *example-major* with E elements per example when, read in row-major order, its
elements [s*E, (s+1)*E) are example s's and no other's: reshapes keep that whatever they
do, and an op that works row by row keeps it when each row lies inside one example. Besides
E, a tensor may be `ANY` (its rows the same for every example: an RNN's zero state),
`TIME_MAJOR` (an unrolled RNN's `[T, b, ...]`) or blocks of a dilated convolution.
"""

from __future__ import annotations

import numpy as np

from compat_grads._src.core.rows import (
    BROADCAST,
    FIRST_INPUT,
    SAME_SHAPE,
    broadcast,
    constant,
    follows,
    key,
    later_axis,
    listed,
    row_inputs,
    same_graph,
    walk,
)
from compat_grads._src.core.tf import tf

_TRANSPOSED = ("Conv2DBackpropInput", "Conv3DBackpropInputV2")
"""Transposed convolutions: their input 2 is the data, input 0 the output's shape."""
_ROW_WISE = frozenset({
    "MatMul", "BatchMatMulV2", "BatchMatMul", "Conv2D", "Conv3D", "DepthwiseConv2dNative",
    *_TRANSPOSED, "MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D", "BiasAdd", "Transpose",
    "Pad", "PadV2", "MirrorPad", "Tile", "Slice", "Split", "SplitV", "Unpack", "OneHot",
    "FusedBatchNormV3", "FusedBatchNorm", "FusedBatchNormV2", "Einsum", "ResourceGather", "Reshape",
    "SpaceToBatchND", "BatchToSpaceND", "Fill", "Const",
    *SAME_SHAPE, *BROADCAST, *FIRST_INPUT, "ConcatV2", "Pack", "Select", "SelectV2",
    "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "LogicalAnd",
    "LogicalOr", "LogicalNot", "FloorMod", "FloorDiv", "AddN", "ZerosLike", "OnesLike"})
_POOLS = frozenset({"MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D"})


def elements_per_example(target, sources, done: dict | None = None):
    """E when the graph proves `target` example-major with E elements per example, given
    that every tensor of `sources` is (its first axis the examples, one row each); `ANY`
    for rows that are the same for every example; else None ("not proved", never "mixed")
    or another layout's marker (`TIME_MAJOR`, blocks of a dilated convolution). `done`:
    the values of earlier calls with these sources (see `rows.walk`), added to."""
    sources = list(sources)
    if not same_graph(target, sources):
        return None
    known = {}
    for source in sources:
        size = _row_size(source)
        if size is not None:
            known[key(source)] = size
    if not known:
        return None
    return walk(target, known, _example_inputs, _example_rule, done)


def rows_per_example(t, elements) -> int | None:
    """How many of `t`'s first-axis rows each example holds when it is example-major with
    `elements` per example (None when a row would straddle two examples); -1 for `ANY`
    (the same rows for every example: as many as there are)."""
    if elements is ANY:
        return -1
    if not isinstance(elements, int):
        return None
    size = _row_size(t)
    if elements is None or size is None or size == 0 or elements % size:
        return None
    return elements // size


def _row_size(t) -> int | None:
    """The elements in one first-axis row of `t` (None when not known while building)."""
    found = dims(t)
    if found is None or not found or None in found[1:]:
        return None
    return int(np.prod(found[1:], dtype=np.int64))


def dims(t) -> list | None:
    """`t`'s dimensions while building (None for an unknown one): its static shape, and for
    a reshape whose shape is computed from other shapes (`tf.tensordot`, Keras 2's layer
    normalization) what that computation gives before anything runs."""
    if t.shape.rank is None:
        return None
    dims = [tf.compat.dimension_value(d) for d in t.shape]
    if None in dims[1:] and t.op.type == "Reshape":
        wanted = _shape_value(t.op.inputs[1])
        if isinstance(wanted, list) and len(wanted) == len(dims):
            dims = [d if d is not None else (w if w is not None and w >= 0 else None)
                    for d, w in zip(dims, wanted)]
    return dims


def _shape_value(t, depth=0):
    """The value of a small integer tensor computed from shapes: an int, a list of ints and
    Nones (the dimensions known while building), or None when it is not such a tensor."""
    found = constant(t)
    if found is not None:
        return found.tolist() if hasattr(found, "tolist") else found
    op = t.op
    if depth > 8 or t.value_index != 0:
        return None
    parts = [_shape_value(i, depth + 1) for i in op.inputs[1:]] if op.type != "Pack" else []
    if op.type == "Shape":
        return [tf.compat.dimension_value(d) for d in op.inputs[0].shape] if (
            op.inputs[0].shape.rank is not None) else None
    if op.type == "Pack":
        values = [_shape_value(i, depth + 1) for i in op.inputs]
        return values if all(v is None or isinstance(v, int) for v in values) else None
    value = _shape_value(op.inputs[0], depth + 1) if op.inputs else None
    if op.type in ("Identity", "Cast"):
        return value
    if op.type == "ConcatV2":
        pieces = [_shape_value(i, depth + 1) for i in op.inputs[:-1]]
        return sum(pieces, []) if all(isinstance(p, list) for p in pieces) else None
    if not isinstance(value, list) or None in parts[:1]:
        return None
    if op.type == "GatherV2" and parts[1] == 0:
        picked = parts[0] if isinstance(parts[0], list) else [parts[0]]
        chosen = [value[i] for i in picked]
        return chosen if isinstance(parts[0], list) else chosen[0]
    if op.type == "Prod" and parts[0] in (0, [0]):
        return None if None in value else int(np.prod(value, dtype=np.int64))
    if op.type == "StridedSlice" and not any(
            op.get_attr(m) for m in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask")):
        begin, end, strides = (p[0] if isinstance(p, list) and p else p for p in parts)
        begin = None if op.get_attr("begin_mask") & 1 else begin
        end = None if op.get_attr("end_mask") & 1 else end
        return value[slice(begin, end, strides)]
    return None


def _example_inputs(t) -> list:
    op = t.op
    if op.type not in _ROW_WISE:
        return []
    if op.type == "ConcatV2":
        return list(op.inputs[:-1])
    if op.type in ("ResourceGather", "Split"):
        return [op.inputs[1]]
    if op.type in ("OneHot", "SplitV"):
        return [op.inputs[0]]
    if op.type in _TRANSPOSED:
        return [op.inputs[2], op.inputs[1]]
    return list(op.inputs)


class _Marker:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


ANY = _Marker("ANY")
"""The value of a tensor whose rows are all the same, whatever the batch: an RNN's zero
initial state (`tf.fill([batch, units], 0.0)`). It goes with any example-major tensor."""
TIME_MAJOR = _Marker("TIME_MAJOR")
"""The value of a time-major tensor `[T, b, ...]` (an unrolled RNN's inputs and outputs):
its second axis holds the examples, one row each."""


def _example_rule(t, values):
    """E of `t` from the E of its inputs (None for an input that is not example-major)."""
    op = t.op
    if op.type in _BLOCKED or any(isinstance(v, tuple) for v in values):
        return _blocked(t, values)
    if op.type in ("Fill", "ZerosLike", "OnesLike") and t.shape.rank:
        return ANY if op.type != "Fill" or constant(op.inputs[1]) is not None else None
    if op.type == "Const":
        return ANY if _same_rows(t) else None
    if TIME_MAJOR in values or op.type in ("Transpose", "Pack"):
        found = _time_major(t, values)
        if found is not None or TIME_MAJOR in values:
            return found
    known = [v for v in values if v is not None]
    if known and all(v is ANY for v in known) and op.type in _ROW_WISE:
        return ANY
    if op.type == "Reshape":
        return values[0]
    if op.type in ("FusedBatchNormV3", "FusedBatchNorm", "FusedBatchNormV2"):
        return _normalized(t, values)
    rows = _rows(op, _example_inputs(t), values)
    size = _row_size(t)
    return None if rows is None or size is None else rows * size


_ELEMENTWISE = BROADCAST | {"Select", "SelectV2", "Less", "LessEqual", "Greater",
                             "GreaterEqual", "Equal", "NotEqual", "LogicalAnd", "LogicalOr",
                             "FloorMod", "FloorDiv", "AddN"}


def _rows(op, inputs, values):
    """Rows per example of the op's outputs when it keeps the examples on the first axis
    (each output row made from one example's rows), else None. `values`: the E of each of
    `inputs` (`_example_inputs`)."""
    if op.type in ("ResourceGather", "OneHot") or (
            op.type == "GatherV2" and values[0] is None):
        return _gathered(op, values[-1] if op.type != "GatherV2" else values[1])
    counts = {rows_per_example(i, e) for i, e in zip(inputs, values)
              if e is not None and e is not ANY}
    if len(counts) != 1 or None in counts:
        return None
    (rows,) = counts
    elementwise = op.type in _ELEMENTWISE
    fixed = [e is not None and (elementwise or e is not ANY) for e in values]
    if op.type in SAME_SHAPE or op.type in ("LogicalNot", "ZerosLike", "OnesLike"):
        return rows
    if elementwise:
        return rows if broadcast(op.outputs[0], inputs, fixed) else None
    if not fixed[0]:
        return None
    return rows if _keeps_first_axis(op, fixed) else None


def _gathered(op, indices_elements):
    """A gather of a table by example-major indices: the output's rows are the indices'."""
    indices = op.inputs[0] if op.type == "OneHot" else op.inputs[1]
    if op.type == "GatherV2" and (op.get_attr("batch_dims") != 0 or
                                  constant(op.inputs[2]) != 0):
        return None
    if op.type == "ResourceGather" and op.get_attr("batch_dims") != 0:
        return None
    if op.type == "OneHot" and op.get_attr("axis") not in (-1, indices.shape.rank):
        return None
    return rows_per_example(indices, indices_elements)


def _keeps_first_axis(op, fixed) -> bool:
    """Whether an op whose first input is example-major maps that input's first axis to
    its outputs' first axis, row by row. `fixed[i]`: whether input i is example-major too
    (a weight, a filter or a bias must not be)."""
    kind, inputs = op.type, op.inputs
    if kind in ("MatMul", "BatchMatMul", "BatchMatMulV2"):
        rank = inputs[0].shape.rank
        if kind == "MatMul" or rank is None or rank <= 2:
            adjoint = op.get_attr("transpose_a" if kind == "MatMul" else "adj_x")
            return not adjoint and not fixed[1]
        return not fixed[1] or inputs[1].shape.rank == rank
    if kind in ("Conv2D", "Conv3D", "DepthwiseConv2dNative", "BiasAdd", *_POOLS, *_TRANSPOSED):
        return op.get_attr("data_format").decode() in ("NHWC", "NDHWC") and not any(fixed[1:])
    if any(fixed[1:]) and kind not in ("ConcatV2", "Pack", "Einsum"):
        return False
    second = constant(inputs[1]) if len(inputs) > 1 else None
    if kind == "Transpose":
        return second is not None and listed(second)[:1] == [0]
    if kind in ("Pad", "PadV2", "MirrorPad"):
        return second is not None and [int(v) for v in second[0]] == [0, 0]
    if kind == "Tile":
        return second is not None and listed(second)[:1] == [1]
    if kind == "Slice":
        size = constant(inputs[2])
        return (second is not None and size is not None and listed(second)[0] == 0
                and listed(size)[0] == -1)
    if kind in ("Split", "SplitV"):
        axis = constant(inputs[0] if kind == "Split" else inputs[2])
        data = inputs[1] if kind == "Split" else inputs[0]
        return later_axis(axis, data.shape.rank)
    if kind == "Unpack":
        return later_axis(op.get_attr("axis"), inputs[0].shape.rank)
    if kind == "Einsum":
        return _einsum_keeps(op, fixed)
    return follows(op.outputs[0], [True] + [False] * (len(row_inputs(op.outputs[0])) - 1))


def _einsum_keeps(op, fixed) -> bool:
    """An einsum whose output's first label is the first label of each example-major input
    and a label of no other input."""
    equation = op.get_attr("equation").decode().replace(" ", "")
    if "." in equation or "->" not in equation:
        return False
    operands, output = equation.split("->")
    labels = operands.split(",")
    if not output or len(labels) != len(fixed):
        return False
    return all(mine[:1] == output[0] if example else output[0] not in mine
               for mine, example in zip(labels, fixed))


_BLOCKED = frozenset({"SpaceToBatchND", "BatchToSpaceND"})
_BLOCK_WISE = frozenset({"Conv2D", "DepthwiseConv2dNative", "ExpandDims", "Squeeze",
                         "BiasAdd", *SAME_SHAPE})


def _blocked(t, values):
    """A dilated convolution as TensorFlow runs it: `SpaceToBatchND` makes the first axis
    `blocks` blocks of the examples' rows (the value `(rows, blocks)`), ops that work row
    by row keep that, and `BatchToSpaceND` with the same blocks makes it example-major."""
    op, first = t.op, values[0] if values else None
    if t.value_index != 0 or any(isinstance(v, tuple) for v in values[1:]):
        return None
    block = constant(op.inputs[1]) if op.type in _BLOCKED else None
    if op.type == "SpaceToBatchND":
        rows = rows_per_example(op.inputs[0], first)
        return None if rows is None or block is None else (rows, int(np.prod(block)))
    if not isinstance(first, tuple):
        return None
    rows, blocks = first
    if op.type == "BatchToSpaceND":
        size = _row_size(t)
        if block is None or int(np.prod(block)) != blocks or size is None:
            return None
        return rows * size
    if op.type not in _BLOCK_WISE or (op.type in _BLOCK_WISE - SAME_SHAPE and
                                      not _keeps_first_axis(op, [True] + [False] * (
                                          len(op.inputs) - 1))):
        return None
    return first


def _same_rows(t) -> bool:
    """A constant of rank >= 1 whose first-axis rows are all equal (a zero state made for a
    batch size known while building)."""
    if not t.shape.rank or (t.shape.num_elements() or 0) > 2**20:
        return False
    value = constant(t)
    return value is not None and value.shape[0] > 1 and bool(np.all(value == value[:1]))


def _time_major(t, values):
    """An unrolled RNN's layout: a transpose of the first two axes of an example-major
    tensor of one row per example, or a stack of such tensors along a new first axis, is
    time-major; unstacking or indexing the first axis of a time-major tensor, or
    transposing its first two axes back, gives example-major tensors of one row each."""
    op, first = t.op, values[0] if values else None
    perm = constant(op.inputs[1]) if op.type == "Transpose" else None
    swaps = perm is not None and listed(perm)[:2] == [1, 0] and listed(perm)[2:] == list(
        range(2, len(listed(perm))))
    if first is TIME_MAJOR:
        if op.type == "Unpack" and op.get_attr("axis") == 0 or (
                op.type == "Transpose" and swaps) or _indexes_first_axis(op):
            return _example_row(t)
        return None
    if op.type == "Transpose" and swaps and rows_per_example(op.inputs[0], first) == 1:
        return TIME_MAJOR
    if op.type == "Pack" and op.get_attr("axis") == 0 and values and all(
            rows_per_example(i, v) == 1 for i, v in zip(op.inputs, values)):
        return TIME_MAJOR
    return None


def _example_row(t):
    size = _row_size(t)
    return size if size is not None else None


def _indexes_first_axis(op) -> bool:
    """`x[i]`: a strided slice that takes one index of the first axis and the rest whole."""
    return (op.type == "StridedSlice" and op.get_attr("shrink_axis_mask") == 1 and
            not op.get_attr("new_axis_mask") and not op.get_attr("ellipsis_mask"))


def _normalized(t, values):
    """A fused batch norm keeps the examples apart when its statistics are not the batch's:
    in inference, or (Keras 2's layer normalization) over the rows of a `[1, N, H, W]`
    input in NCHW, each channel inside one example."""
    op, elements = t.op, values[0]
    if t.value_index != 0 or elements is None:
        return None
    x = op.inputs[0]
    if not op.get_attr("is_training"):
        rows = rows_per_example(x, elements)
        fmt = op.get_attr("data_format").decode()
        return None if rows is None or fmt not in ("NHWC", "NDHWC") else elements
    if op.get_attr("data_format").decode() != "NCHW" or x.shape.rank != 4:
        return None
    found = dims(x)
    if found is None or found[0] != 1 or None in found[2:]:
        return None
    block = int(np.prod(found[2:], dtype=np.int64))
    return elements if block and elements % block == 0 else None
