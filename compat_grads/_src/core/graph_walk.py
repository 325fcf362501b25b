"""The part of a graph a derivative differentiates: the ops on a path from the sources to
the targets. The graph backend reads it for the control flow a target runs; the static rule
(`compat_grads._src.stacking.cost`) for what a row costs."""

from __future__ import annotations

from compat_grads._src.core.tf import op_of, tf

__all__ = ["between", "op_of"]

# Where a variable with no op in the graph being built (an eager variable a tf.function
# reads) enters it.
_VARIABLE_READS = frozenset({"ReadVariableOp", "ResourceGather"})


def between(targets, sources) -> list:
    """The ops on a path from `sources` to `targets`: the ones whose gradients
    tf.gradients builds (an op the sources do not reach is a constant to it)."""
    source_ops = {id(op) for op in map(op_of, sources) if op is not None}
    reads = any(op_of(s) is None and isinstance(s, tf.Variable) for s in sources)
    reaches, found, todo = {}, [], [t.op for t in targets]
    while todo:  # depth first, without recursion: real models are deep
        op, key = todo[-1], id(todo[-1])
        if reaches.get(key) is not None:
            todo.pop()
        elif key in source_ops or (reads and op.type in _VARIABLE_READS):
            reaches[key] = True
        elif key not in reaches:
            reaches[key] = None  # being visited: a v1 loop's back edge meets it again
            todo.extend(t.op for t in op.inputs if id(t.op) not in reaches)
        else:
            reaches[key] = any(reaches.get(id(t.op)) for t in op.inputs)
            if reaches[key]:
                found.append(op)
    return found
