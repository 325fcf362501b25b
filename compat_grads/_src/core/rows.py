"""A proof, while building, that a graph target keeps its source's rows: the target's first
dimension is the source's, whatever the batch size fed at run time. Where it holds, the
batch functions need no run-time check of the batch size (the nested `tf.gradients` they
replace checks nothing either); where it cannot be shown, the check stays.

The walk knows the ops a per-sample model is made of (elementwise maths, `x @ w`, biases,
reductions and slices that leave the first axis alone, concatenation and stacking along
later axes); any other op on the way ends the proof, not the derivative.
"""

from __future__ import annotations

from compat_grads._src.core.tf import op_of, tf

SAME_SHAPE = frozenset({
    "Identity", "StopGradient", "PreventGradient", "Cast", "Neg", "Abs", "Sign", "Square",
    "Sqrt", "Rsqrt", "Reciprocal", "Exp", "Expm1", "Log", "Log1p", "Sin", "Cos", "Tan",
    "Sinh", "Cosh", "Tanh", "Asinh", "Atan", "Sigmoid", "Relu", "Relu6", "Elu", "Selu",
    "LeakyRelu", "Softplus", "Softsign", "Erf", "Softmax", "LogSoftmax", "Floor", "Ceil",
    "Round"})
BROADCAST = frozenset({
    "Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "DivNoNan", "MulNoNan", "Maximum",
    "Minimum", "Pow", "SquaredDifference", "Atan2", "BiasAdd"})
REDUCE = frozenset({"Sum", "Mean", "Max", "Min", "Prod"})
_LIMIT = 20_000  # ops walked before giving up (the check then stays)


def keeps_rows(target, source) -> bool:
    """True when the graph proves `target.shape[0] == source.shape[0]` at run time: every
    op from `source` to `target` maps the first axis of its input from the source to the
    first axis of its output. False means "not proved", never "different"."""
    if not same_graph(target, [source]):
        return False
    return bool(walk(target, {key(source): True}, row_inputs,
                     lambda t, rows: bool(rows) and follows(t, rows)))


def walk(target, known: dict, inputs_of, rule, done: dict | None = None):
    """The value of `target` from the values of the tensors it is made of, depth first and
    without recursion (real models are deep): `known` holds the values of the starting
    tensors (by `key`); a tensor's own is `rule(t, [value of each of inputs_of(t)])`, None
    where the walk gives up (more than `_LIMIT` new tensors). `done`: the values found by
    earlier walks of the same rule, which this one adds to (a caller asking about many
    tensors of one graph walks each op once)."""
    done = dict(known) if done is None else done
    for found_key, value in known.items():
        done.setdefault(found_key, value)
    limit = len(done) + _LIMIT
    todo = [target]
    while todo and len(done) < limit:
        t = todo[-1]
        if key(t) in done:
            todo.pop()
            continue
        inputs = inputs_of(t)
        waiting = [i for i in inputs if key(i) not in done]
        if waiting:
            todo.extend(waiting)
            if len(todo) > _LIMIT:
                return None
            continue
        todo.pop()
        done[key(t)] = rule(t, [done[key(i)] for i in inputs])
    return done.get(key(target))


def same_graph(target, sources) -> bool:
    """Whether `target` and every source are graph tensors of one graph (eager tensors are
    never walked)."""
    if not isinstance(target, tf.Tensor) or op_of(target) is None:
        return False
    return all(isinstance(s, tf.Tensor) and op_of(s) is not None and
               op_of(s).graph is target.graph for s in sources)


def key(t):
    return id(t.op), t.value_index


FIRST_INPUT = frozenset({"MatMul", "GatherV2", "ExpandDims", "Squeeze", "StridedSlice",
                          *REDUCE})
"""Ops whose output rows can only come from their first input."""
_KNOWN = SAME_SHAPE | BROADCAST | FIRST_INPUT | {"ConcatV2", "Pack"}


def row_inputs(t) -> list:
    """The inputs whose rows `t` may take: the ones the rule for its op reads (none for an
    op without a rule, or for another output than the first)."""
    op = t.op
    if t.value_index != 0 or op.type not in _KNOWN:
        return []
    if op.type in FIRST_INPUT:
        return [op.inputs[0]]
    return list(op.inputs[:-1] if op.type == "ConcatV2" else op.inputs)


def follows(t, rows) -> bool:
    """Whether `t` keeps the rows, given which of its row inputs (`row_inputs`) do."""
    op = t.op
    if op.type in SAME_SHAPE:
        return rows[0]
    if op.type in BROADCAST:
        return broadcast(t, op.inputs, rows)
    if op.type == "MatMul":
        return rows[0] and not op.get_attr("transpose_a")
    if op.type in ("ConcatV2", "Pack"):
        axis = constant(op.inputs[-1]) if op.type == "ConcatV2" else op.get_attr("axis")
        return any(rows) and later_axis(axis, t.shape.rank)
    if op.type in REDUCE:
        axes = constant(op.inputs[1])
        return rows[0] and axes is not None and all(
            later_axis(a, op.inputs[0].shape.rank) for a in listed(axes))
    if op.type == "GatherV2":
        axis = constant(op.inputs[2])
        return rows[0] and op.get_attr("batch_dims") == 0 and later_axis(
            axis, op.inputs[0].shape.rank)
    if op.type == "ExpandDims":
        return rows[0] and later_axis(constant(op.inputs[1]), t.shape.rank)
    if op.type == "Squeeze":
        axes = op.get_attr("squeeze_dims")
        return rows[0] and bool(axes) and all(
            later_axis(a, op.inputs[0].shape.rank) for a in axes)
    return rows[0] and _whole_first_axis(op)  # StridedSlice


def broadcast(t, inputs, rows) -> bool:
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
    strides = constant(op.inputs[3])
    return (op.get_attr("ellipsis_mask") == 0 and op.get_attr("begin_mask") & 1 and
            op.get_attr("end_mask") & 1 and not op.get_attr("new_axis_mask") & 1 and
            not op.get_attr("shrink_axis_mask") & 1 and strides is not None and
            len(listed(strides)) > 0 and listed(strides)[0] == 1)


def later_axis(axis, rank) -> bool:
    """Whether `axis` (possibly negative) is known to be an axis after the first."""
    if axis is None or rank is None:
        return False
    axis = int(axis)
    return 0 < axis < rank or -rank < axis < 0


def constant(t):
    """The value of a constant tensor, else None."""
    try:
        return tf.get_static_value(t)
    except (TypeError, ValueError, NotImplementedError):
        return None


def listed(value) -> list:
    return [int(v) for v in (value.ravel() if hasattr(value, "ravel") else [value])]
