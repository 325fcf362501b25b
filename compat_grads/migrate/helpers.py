"""Runtime-checked migration helpers: what `compat-grads scan --fix` rewrites a legacy loop
to when the source alone cannot prove a vectorized rewrite equal. Each has the exact
semantics of the code it replaces: it computes vectorized when the values it gets at run
time allow, and runs that very code otherwise. TensorFlow is imported on first call only,
so the scanner never loads it."""

from __future__ import annotations

import operator


def gradient_rows(ys, xs, indices, axis=0, index=0):
    """`tf.stack([tf.gradients(row_i, xs)[index] for i in indices])`, row_i being `ys[i]`
    (`axis=0`) or `ys[:, i]` (`axis=1`).

    Shape: `[len(indices)] + x.shape`, x = `xs` or `xs[index]`; each row is the gradient of
    the sum of that slice (what `tf.gradients` computes). Computed as one Jacobian of the
    slice sums (`compat_grads.stacked_jacobian`) when `ys` is one float tensor of known rank
    in a graph or `tf.function`, `indices` are integers within its static length (or the
    length is unknown and none is negative) and the source is a float tensor or variable
    that appears once in `xs`; otherwise by the loop itself, errors included.

    Args:
      ys: what the loop indexed (a tensor; anything else runs the loop).
      xs: the `xs` of the loop's `tf.gradients` call.
      indices: the loop's iterable of indices (`range(n)`, `six.moves.range(n)`, a list),
        consumed once.
      axis: 0 for rows `ys[i]`, 1 for columns `ys[:, i]`.
      index: the `[index]` taken from each `tf.gradients` result.

    Returns:
      The stacked rows, as the loop and `tf.stack` built them.
    """
    from compat_grads._tf import tf

    indices = list(indices)
    plan = _vectorizable(tf, ys, xs, indices, axis, index)
    if plan is not None:
        rows = _jacobian_rows(tf, ys, plan[0], plan[1], axis)
        if rows is not None:
            return rows
    return tf.stack([tf.compat.v1.gradients(_slice(ys, i, axis), xs)[index]
                     for i in indices])


def _vectorizable(tf, ys, xs, indices, axis, index):
    """(source, indices within range) when the vectorized route gives the loop's values."""
    from compat_grads.dispatch import execution_mode

    if execution_mode() == "eager" or not tf.is_tensor(ys) or not indices:
        return None
    rank = ys.shape.rank
    if rank is None or rank <= axis or not ys.dtype.is_floating:
        return None
    flat = xs if isinstance(xs, (list, tuple)) else [xs]
    if not 0 <= index < len(flat):
        return None
    source = flat[index]
    same = [x for x in flat if x is source]
    if len(same) != 1 or not _float_source(tf, source):
        return None
    positions = _positions(indices, tf.compat.dimension_value(ys.shape[axis]))
    return None if positions is None else (source, positions)


def _float_source(tf, source) -> bool:
    kind = tf.is_tensor(source) or isinstance(source, tf.Variable)
    return kind and source.dtype.is_floating


def _positions(indices, length):
    """The indices as non-negative ints within `length` (None: unknown), or None when one
    is not an int or would make the loop fail."""
    try:
        ints = [operator.index(i) for i in indices]
    except TypeError:
        return None
    if length is None:
        return ints if all(i >= 0 for i in ints) else None
    if not all(-length <= i < length for i in ints):
        return None
    return [i % length for i in ints]


def _jacobian_rows(tf, ys, source, positions, axis):
    """The Jacobian of the chosen slice sums; None when not connected (the loop then raises
    what it raises)."""
    import compat_grads as cg

    others = [a for a in range(ys.shape.rank) if a != axis]
    sums = tf.reduce_sum(ys, axis=others) if others else ys
    rows = cg.stacked_jacobian(tf.gather(sums, positions), source)
    return None if rows is None else tf.convert_to_tensor(rows)


def _slice(ys, i, axis):
    return ys[i] if axis == 0 else ys[:, i]
