"""The runtime-checked helpers of gradient rows: what `compat-grads scan --fix` rewrites a
loop of `tf.gradients` rows to when the source alone cannot prove one Jacobian equal. Each has
the exact semantics of the loop it replaces: one Jacobian when the values it gets at run time
allow it and the static rule of `compat_grads._src.stacking.cost` finds that faster, the loop
otherwise."""

from __future__ import annotations

import operator

from compat_grads import dispatch
from compat_grads._src.core.errors import DerivativeError
from compat_grads._src.core.tf import tf
from compat_grads._src.stacking import cost as _cost

# The helpers are hidden from AutoGraph, as the public functions are (`_docs.public`, or
# `_docs.public_call` and the call path's `_whole_path`): the rows of a per-sample attack
# run inside `tf.map_fn`, which converts its fn and everything it calls, and converting
# this package took seconds of each graph's build (its Python control flow is on Python
# values only).
_hidden = tf.autograph.experimental.do_not_convert


@_hidden
def gradient_rows(ys, xs, indices, axis=0, index=0, flat=False):
    """`tf.stack([tf.gradients(row_i, xs)[index] for i in indices])`, row_i being `ys[i]`
    (`axis=0`) or `ys[:, i]` (`axis=1`); with `flat=True`, each gradient flattened first,
    `tf.stack([tf.reshape(tf.gradients(row_i, xs)[index], [-1]) for i in indices])`.

    Shape: `[len(indices)] + x.shape` (flat: `[len(indices), x.size]`), x = `xs` or
    `xs[index]`; each row is the gradient of
    the sum of that slice (what `tf.gradients` computes). Computed as one Jacobian of the
    slice sums (`compat_grads.stacked_jacobian`) when `ys` is one float tensor of known rank
    in a graph or `tf.function`, `indices` are integers within its static length (or the
    length is unknown and none is negative), the source is a float tensor or variable
    that appears once in `xs`, there are more than 8 rows (up to 8 the loop builds faster
    and runs as fast), and the static rule of `compat_grads._src.stacking.cost` does not run
    these rows one by one (convolutions, pooling, or large rows: there the loop is
    faster); otherwise by the loop itself, errors included.

    Args:
      ys: what the loop indexed (a tensor; anything else runs the loop).
      xs: the `xs` of the loop's `tf.gradients` call.
      indices: the loop's iterable of indices (`range(n)`, `six.moves.range(n)`, a list),
        consumed once.
      axis: 0 for rows `ys[i]`, 1 for columns `ys[:, i]`.
      index: the `[index]` taken from each `tf.gradients` result.
      flat: whether each row is `tf.reshape(row, [-1])` before it is stacked (the rows of
        a Jacobian with respect to an image, flattened; the one Jacobian is reshaped to
        `[len(indices), -1]` then, the same values in the same order).

    Returns:
      The stacked rows, as the loop and `tf.stack` built them.
    """
    indices = list(indices)
    rows = _vectorized(ys, xs, indices, axis, index)
    if rows is not None:
        return tf.reshape(rows, [len(indices), -1]) if flat else rows
    rows = _loop(ys, xs, indices, axis, index)
    return tf.stack([tf.reshape(row, [-1]) for row in rows] if flat else rows)


@_hidden
def gradient_row_list(ys, xs, indices, axis=0, index=0, cached=None):
    """`[tf.gradients(row_i, xs)[index] for i in indices]`: the rows of `gradient_rows` as
    the Python list the loop built (None for a row that does not depend on `xs`).

    Each row is its own gradient, as the loop built it: code that keeps the rows as a list
    may fetch them one at a time (`sess.run(rows[k])`, a class-gradient cache), and a row
    sliced from one Jacobian would compute every row each time it is fetched. Rows used
    together are faster stacked: `gradient_rows`, or `api.stacked_jacobian`. With `cached`,
    a row already there is kept, as the caching comprehension
    `[<row i> if cached[i] is None else cached[i] for i in indices]` keeps it.
    `index=None` takes each result as `(g,) = tf.gradients(...)` unpacks it (a
    `ValueError` when `xs` gives more than one gradient).

    Args:
      ys, xs, indices, axis, index: as for `gradient_rows`.
      cached: a list (or anything indexable by the indices) of rows computed before, None
        where a row is missing; it is read, not changed.

    Returns:
      A new list, one entry per index.
    """
    indices = list(indices)
    missing = indices if cached is None else [i for i in indices if cached[i] is None]
    computed = iter(_loop(ys, xs, missing, axis, index))
    return [next(computed) if cached is None or cached[i] is None else cached[i]
            for i in indices]


@_hidden
def fill_gradient_rows(rows, ys, xs, indices, axis=0, index=0):
    """`for i in indices: if rows[i] is None: rows[i] = tf.gradients(row_i, xs)[index]`:
    fills the missing rows of a cache in place, each once, in the loop's order, each by its
    own pass (fetching one row later runs that row alone): the loop itself.

    Args:
      rows: the cache, a list (or anything indexable by the indices) with None where a row
        is missing.
      ys, xs, indices, axis, index: as for `gradient_row_list`.
    """
    # The loop itself: a cache is read a row at a time, so each row is its own pass (one
    # Jacobian would run every row whenever one is fetched).
    for i in indices:
        if rows[i] is None:
            rows[i] = _loop(ys, xs, [i], axis, index)[0]


# -- the gradient rows -------------------------------------------------------------------


def _loop(ys, xs, indices, axis, index):
    """The original loop: one `tf.gradients` per index."""
    rows = []
    for i in indices:
        grads = tf.compat.v1.gradients(_slice(ys, i, axis), xs)
        if index is None:
            (row,) = grads
        else:
            row = grads[index]
        rows.append(row)
    return rows


def _vectorized(ys, xs, indices, axis, index):
    """The stacked rows from one Jacobian, or None when that might differ from the loop."""
    plan = _vectorizable(ys, xs, indices, axis, index)
    return None if plan is None else _jacobian_rows(ys, plan[0], plan[1], axis)


def _vectorizable(ys, xs, indices, axis, index):
    """(source, indices within range) when the vectorized route gives the loop's values."""
    if dispatch.runs_eagerly() or not tf.is_tensor(ys) or not indices:
        return None
    rank = ys.shape.rank
    if rank is None or rank <= axis or not ys.dtype.is_floating:
        return None
    flat = xs if isinstance(xs, (list, tuple)) else [xs]
    if index is None:  # `(g,) = tf.gradients(...)`: exactly one gradient
        index = 0 if len(flat) == 1 else -1
    if not 0 <= index < len(flat):
        return None
    source = flat[index]
    same = [x for x in flat if x is source]
    if len(same) != 1 or not _float_source(source) or _gathered(source):
        return None
    positions = _positions(indices, tf.compat.dimension_value(ys.shape[axis]))
    return None if positions is None else (source, positions)


def _float_source(source) -> bool:
    kind = tf.is_tensor(source) or isinstance(source, tf.Variable)
    return kind and source.dtype.is_floating


# Ops whose gradient with respect to their first input is an IndexedSlices (the rows they
# read): a loop row through one of them alone is an IndexedSlices, which a program may use
# as one (`g.indices`, `g.values`), and a Jacobian row would be dense.
_GATHERS = frozenset({"Gather", "GatherV2", "ResourceGather"})
# What a source reaches its gathers through: reads of a variable, a loop's Enter.
_PASS_THROUGH = frozenset({"Identity", "ReadVariableOp", "Enter", "RefEnter"})


def _gathered(source) -> bool:
    """Whether `source` (or a read of it) is gathered from: its loop rows may then be
    IndexedSlices, so the loop runs."""
    try:
        todo = list(source.op.outputs)
    except (AttributeError, ValueError):  # an eager tensor: the helpers run the loop there
        return False
    while todo:
        for op in todo.pop().consumers():
            if op.type in _GATHERS:
                return True
            if op.type in _PASS_THROUGH:
                todo.extend(op.outputs)
    return False


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


def _jacobian_rows(ys, source, positions, axis):
    """The Jacobian of the chosen slice sums; None when not connected, when compat_grads
    cannot compute it, or when the static rule runs these rows one by one (the loop is the
    faster code then), as it does for `_cost.LOOP_ROWS` rows or fewer (as fast, and faster
    to build): the loop then runs, and raises what it raises."""
    if len(positions) <= _cost.LOOP_ROWS or not _cost.plan_for(
            len(positions), [ys], [source]).vectorized:
        return None
    others = [a for a in range(ys.shape.rank) if a != axis]
    sums = tf.reduce_sum(ys, axis=others) if others else ys
    try:
        from compat_grads import api  # here: the helpers load without the whole API

        rows = api.stacked_jacobian(tf.gather(sums, positions), source)
    except DerivativeError:  # what TensorFlow can build one row at a time, the loop does
        return None
    return None if rows is None else tf.convert_to_tensor(rows)


def _slice(ys, i, axis):
    return ys[i] if axis == 0 else ys[:, i]
