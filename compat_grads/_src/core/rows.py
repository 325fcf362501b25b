"""A proof, while building, that a graph target keeps its source's rows: the target's first
dimension is the source's, whatever the batch size fed at run time. Where it holds, the
batch functions need no run-time check of the batch size (the nested `tf.gradients` they
replace checks nothing either); where it cannot be shown, the check stays.

The walk knows the ops a per-sample model is made of (elementwise maths, `x @ w`, biases,
reductions and slices that leave the first axis alone, concatenation and stacking along
later axes); any other op on the way ends the proof, not the derivative.
"""

from __future__ import annotations

import numpy as np

from compat_grads._src.core.tf import op_of, tf

_SAME_SHAPE = frozenset({
    "Identity", "StopGradient", "PreventGradient", "Cast", "Neg", "Abs", "Sign", "Square",
    "Sqrt", "Rsqrt", "Reciprocal", "Exp", "Expm1", "Log", "Log1p", "Sin", "Cos", "Tan",
    "Sinh", "Cosh", "Tanh", "Asinh", "Atan", "Sigmoid", "Relu", "Relu6", "Elu", "Selu",
    "LeakyRelu", "Softplus", "Softsign", "Erf", "Softmax", "LogSoftmax", "Floor", "Ceil",
    "Round"})
_BROADCAST = frozenset({
    "Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "DivNoNan", "MulNoNan", "Maximum",
    "Minimum", "Pow", "SquaredDifference", "Atan2", "BiasAdd"})
_REDUCE = frozenset({"Sum", "Mean", "Max", "Min", "Prod"})
_LIMIT = 20_000  # ops walked before giving up (the check then stays)


def keeps_rows(target, source) -> bool:
    """True when the graph proves `target.shape[0] == source.shape[0]` at run time: every
    op from `source` to `target` maps the first axis of its input from the source to the
    first axis of its output. False means "not proved", never "different"."""
    if not _same_graph(target, [source]):
        return False
    return bool(walk(target, {_key(source): True}, _row_inputs,
                     lambda t, rows: bool(rows) and _follows(t, rows)))


def walk(target, known: dict, inputs_of, rule):
    """The value of `target` from the values of the tensors it is made of, depth first and
    without recursion (real models are deep): `known` holds the values of the starting
    tensors (by `_key`); a tensor's own is `rule(t, [value of each of inputs_of(t)])`, None
    where the walk gives up (more than `_LIMIT` tensors)."""
    done = dict(known)
    todo = [target]
    while todo and len(done) < _LIMIT:
        t = todo[-1]
        if _key(t) in done:
            todo.pop()
            continue
        inputs = inputs_of(t)
        waiting = [i for i in inputs if _key(i) not in done]
        if waiting:
            todo.extend(waiting)
            if len(todo) > _LIMIT:
                return None
            continue
        todo.pop()
        done[_key(t)] = rule(t, [done[_key(i)] for i in inputs])
    return done.get(_key(target))


def _same_graph(target, sources) -> bool:
    """Whether `target` and every source are graph tensors of one graph (eager tensors are
    never walked)."""
    if not isinstance(target, tf.Tensor) or op_of(target) is None:
        return False
    return all(isinstance(s, tf.Tensor) and op_of(s) is not None and
               op_of(s).graph is target.graph for s in sources)


def _key(t):
    return id(t.op), t.value_index


_FIRST_INPUT = frozenset({"MatMul", "GatherV2", "ExpandDims", "Squeeze", "StridedSlice",
                          *_REDUCE})
"""Ops whose output rows can only come from their first input."""
_KNOWN = _SAME_SHAPE | _BROADCAST | _FIRST_INPUT | {"ConcatV2", "Pack"}


def _row_inputs(t) -> list:
    """The inputs whose rows `t` may take: the ones the rule for its op reads (none for an
    op without a rule, or for another output than the first)."""
    op = t.op
    if t.value_index != 0 or op.type not in _KNOWN:
        return []
    if op.type in _FIRST_INPUT:
        return [op.inputs[0]]
    return list(op.inputs[:-1] if op.type == "ConcatV2" else op.inputs)


def _follows(t, rows) -> bool:
    """Whether `t` keeps the rows, given which of its row inputs (`_row_inputs`) do."""
    op = t.op
    if op.type in _SAME_SHAPE:
        return rows[0]
    if op.type in _BROADCAST:
        return _broadcast(t, op.inputs, rows)
    if op.type == "MatMul":
        return rows[0] and not op.get_attr("transpose_a")
    if op.type in ("ConcatV2", "Pack"):
        axis = _constant(op.inputs[-1]) if op.type == "ConcatV2" else op.get_attr("axis")
        return any(rows) and _later_axis(axis, t.shape.rank)
    if op.type in _REDUCE:
        axes = _constant(op.inputs[1])
        return rows[0] and axes is not None and all(
            _later_axis(a, op.inputs[0].shape.rank) for a in _listed(axes))
    if op.type == "GatherV2":
        axis = _constant(op.inputs[2])
        return rows[0] and op.get_attr("batch_dims") == 0 and _later_axis(
            axis, op.inputs[0].shape.rank)
    if op.type == "ExpandDims":
        return rows[0] and _later_axis(_constant(op.inputs[1]), t.shape.rank)
    if op.type == "Squeeze":
        axes = op.get_attr("squeeze_dims")
        return rows[0] and bool(axes) and all(
            _later_axis(a, op.inputs[0].shape.rank) for a in axes)
    return rows[0] and _whole_first_axis(op)  # StridedSlice


def _broadcast(t, inputs, rows) -> bool:
    """An elementwise op keeps the rows of an input of its own rank when every other input
    can only broadcast along the first axis: a lower rank, or a first dimension of 1."""
    rank = t.shape.rank
    if rank is None or rank == 0 or not any(rows):
        return False
    for value, follows in zip(inputs, rows):
        if follows:
            if value.shape.rank != rank:
                return False
        elif value.shape.rank is None or (value.shape.rank == rank and
                                          tf.compat.dimension_value(value.shape[0]) != 1):
            return False
    return True


def _whole_first_axis(op) -> bool:
    """`x[:, ...]`: a strided slice that takes the first axis whole, in order."""
    strides = _constant(op.inputs[3])
    return (op.get_attr("ellipsis_mask") == 0 and op.get_attr("begin_mask") & 1 and
            op.get_attr("end_mask") & 1 and not op.get_attr("new_axis_mask") & 1 and
            not op.get_attr("shrink_axis_mask") & 1 and strides is not None and
            len(_listed(strides)) > 0 and _listed(strides)[0] == 1)


def _later_axis(axis, rank) -> bool:
    """Whether `axis` (possibly negative) is known to be an axis after the first."""
    if axis is None or rank is None:
        return False
    axis = int(axis)
    return 0 < axis < rank or -rank < axis < 0


def _constant(t):
    """The value of a constant tensor, else None."""
    try:
        return tf.get_static_value(t)
    except (TypeError, ValueError, NotImplementedError):
        return None


def _listed(value) -> list:
    return [int(v) for v in (value.ravel() if hasattr(value, "ravel") else [value])]


# -- example-major tensors -------------------------------------------------------------------
#
# Private training needs more than the first dimension: the inputs and output gradients of
# each layer, reshaped to `[b, rows, features]`, must hold example s's rows in block s. A
# tensor is *example-major* with E elements per example when, read in row-major order, its
# elements [s*E, (s+1)*E) are example s's and no other's: reshapes keep that whatever they
# do, and an op that works row by row keeps it when each row lies inside one example.

_ROW_WISE = frozenset({
    "MatMul", "BatchMatMulV2", "BatchMatMul", "Conv2D", "Conv3D", "DepthwiseConv2dNative",
    "MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D", "BiasAdd", "Transpose", "Pad", "PadV2",
    "MirrorPad", "Tile", "Slice", "Split", "SplitV", "Unpack", "OneHot", "FusedBatchNormV3",
    "FusedBatchNorm", "FusedBatchNormV2", "Einsum", "ResourceGather", "Reshape",
    "SpaceToBatchND", "BatchToSpaceND",
    *_SAME_SHAPE, *_BROADCAST, *_FIRST_INPUT, "ConcatV2", "Pack", "Select", "SelectV2",
    "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "LogicalAnd",
    "LogicalOr", "LogicalNot", "FloorMod", "FloorDiv", "AddN", "ZerosLike", "OnesLike"})
_POOLS = frozenset({"MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D"})


def elements_per_example(target, sources) -> int | None:
    """E when the graph proves `target` example-major with E elements per example, given
    that every tensor of `sources` is (its first axis the examples, one row each), else
    None ("not proved", never "mixed")."""
    sources = list(sources)
    if not _same_graph(target, sources):
        return None
    known = {}
    for source in sources:
        size = _row_size(source)
        if size is not None:
            known[_key(source)] = size
    if not known:
        return None
    return walk(target, known, _example_inputs, _example_rule)


def rows_per_example(t, elements) -> int | None:
    """How many of `t`'s first-axis rows each example holds when it is example-major with
    `elements` per example (None when a row would straddle two examples)."""
    if not isinstance(elements, int):
        return None
    size = _row_size(t)
    if elements is None or size is None or size == 0 or elements % size:
        return None
    return elements // size


def _row_size(t) -> int | None:
    """The elements in one first-axis row of `t` (None when not known while building)."""
    dims = _dims(t)
    if dims is None or not dims or None in dims[1:]:
        return None
    return int(np.prod(dims[1:], dtype=np.int64))


def _dims(t) -> list | None:
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
    constant = _constant(t)
    if constant is not None:
        return constant.tolist() if hasattr(constant, "tolist") else constant
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
    return list(op.inputs)


def _example_rule(t, values):
    """E of `t` from the E of its inputs (None for an input that is not example-major)."""
    op = t.op
    if op.type in _BLOCKED or any(isinstance(v, tuple) for v in values):
        return _blocked(t, values)
    if op.type == "Reshape":
        return values[0]
    if op.type in ("FusedBatchNormV3", "FusedBatchNorm", "FusedBatchNormV2"):
        return _normalized(t, values)
    rows = _rows(op, _example_inputs(t), values)
    size = _row_size(t)
    return None if rows is None or size is None else rows * size


_ELEMENTWISE = _BROADCAST | {"Select", "SelectV2", "Less", "LessEqual", "Greater",
                             "GreaterEqual", "Equal", "NotEqual", "LogicalAnd", "LogicalOr",
                             "FloorMod", "FloorDiv", "AddN"}


def _rows(op, inputs, values):
    """Rows per example of the op's outputs when it keeps the examples on the first axis
    (each output row made from one example's rows), else None. `values`: the E of each of
    `inputs` (`_example_inputs`)."""
    if op.type in ("ResourceGather", "OneHot") or (
            op.type == "GatherV2" and values[0] is None):
        return _gathered(op, values[-1] if op.type != "GatherV2" else values[1])
    counts = {rows_per_example(i, e) for i, e in zip(inputs, values) if e is not None}
    if len(counts) != 1 or None in counts:
        return None
    (rows,) = counts
    fixed = [e is not None for e in values]
    if op.type in _SAME_SHAPE or op.type in ("LogicalNot", "ZerosLike", "OnesLike"):
        return rows
    if op.type in _ELEMENTWISE:
        return rows if _broadcast(op.outputs[0], inputs, fixed) else None
    if not fixed[0]:
        return None
    return rows if _keeps_first_axis(op, fixed) else None


def _gathered(op, indices_elements):
    """A gather of a table by example-major indices: the output's rows are the indices'."""
    indices = op.inputs[0] if op.type == "OneHot" else op.inputs[1]
    if op.type == "GatherV2" and (op.get_attr("batch_dims") != 0 or
                                  _constant(op.inputs[2]) != 0):
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
    if kind in ("Conv2D", "Conv3D", "DepthwiseConv2dNative", "BiasAdd", *_POOLS):
        return op.get_attr("data_format").decode() in ("NHWC", "NDHWC") and not any(fixed[1:])
    if any(fixed[1:]) and kind not in ("ConcatV2", "Pack", "Einsum"):
        return False
    constant = _constant(inputs[1]) if len(inputs) > 1 else None
    if kind == "Transpose":
        return constant is not None and _listed(constant)[:1] == [0]
    if kind in ("Pad", "PadV2", "MirrorPad"):
        return constant is not None and [int(v) for v in constant[0]] == [0, 0]
    if kind == "Tile":
        return constant is not None and _listed(constant)[:1] == [1]
    if kind == "Slice":
        size = _constant(inputs[2])
        return (constant is not None and size is not None and _listed(constant)[0] == 0
                and _listed(size)[0] == -1)
    if kind in ("Split", "SplitV"):
        axis = _constant(inputs[0] if kind == "Split" else inputs[2])
        data = inputs[1] if kind == "Split" else inputs[0]
        return _later_axis(axis, data.shape.rank)
    if kind == "Unpack":
        return _later_axis(op.get_attr("axis"), inputs[0].shape.rank)
    if kind == "Einsum":
        return _einsum_keeps(op, fixed)
    return _follows(op.outputs[0], [True] + [False] * (len(_row_inputs(op.outputs[0])) - 1))


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
                         "BiasAdd", *_SAME_SHAPE})


def _blocked(t, values):
    """A dilated convolution as TensorFlow runs it: `SpaceToBatchND` makes the first axis
    `blocks` blocks of the examples' rows (the value `(rows, blocks)`), ops that work row
    by row keep that, and `BatchToSpaceND` with the same blocks makes it example-major."""
    op, first = t.op, values[0] if values else None
    if t.value_index != 0 or any(isinstance(v, tuple) for v in values[1:]):
        return None
    block = _constant(op.inputs[1]) if op.type in _BLOCKED else None
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
    if op.type not in _BLOCK_WISE or (op.type in _BLOCK_WISE - _SAME_SHAPE and
                                      not _keeps_first_axis(op, [True] + [False] * (
                                          len(op.inputs) - 1))):
        return None
    return first


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
    dims = _dims(x)
    if dims is None or dims[0] != 1 or None in dims[2:]:
        return None
    block = int(np.prod(dims[2:], dtype=np.int64))
    return elements if block and elements % block == 0 else None
