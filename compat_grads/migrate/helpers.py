"""Runtime-checked migration helpers: what `compat-grads scan --fix` rewrites a legacy loop
to when the source alone cannot prove a vectorized rewrite equal. Each has the exact
semantics of the code it replaces: it computes vectorized when the values it gets at run
time allow and the static rule of `compat_grads._cost` finds that faster, and runs that
very code otherwise (never slower than it). TensorFlow is imported on first call only,
so the scanner never loads it."""

from __future__ import annotations

import operator

# What a `tf.while_loop` or `tf.map_fn` keyword may be for the vectorized route: these
# change how the loop runs, not what it returns.
_LOOP_KEYWORDS = frozenset({"parallel_iterations", "back_prop", "swap_memory", "name"})
_MAP_KEYWORDS = _LOOP_KEYWORDS | {"infer_shape"}


def gradient_rows(ys, xs, indices, axis=0, index=0):
    """`tf.stack([tf.gradients(row_i, xs)[index] for i in indices])`, row_i being `ys[i]`
    (`axis=0`) or `ys[:, i]` (`axis=1`).

    Shape: `[len(indices)] + x.shape`, x = `xs` or `xs[index]`; each row is the gradient of
    the sum of that slice (what `tf.gradients` computes). Computed as one Jacobian of the
    slice sums (`compat_grads.stacked_jacobian`) when `ys` is one float tensor of known rank
    in a graph or `tf.function`, `indices` are integers within its static length (or the
    length is unknown and none is negative), the source is a float tensor or variable
    that appears once in `xs`, and the static rule of `compat_grads._cost` does not run
    these rows one by one (convolutions, pooling, or large rows: there the loop is
    faster); otherwise by the loop itself, errors included.

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
    rows = _vectorized(tf, ys, xs, indices, axis, index)
    if rows is not None:
        return rows
    return tf.stack(_loop(tf, ys, xs, indices, axis, index))


def gradient_row_list(ys, xs, indices, axis=0, index=0, cached=None):
    """`[tf.gradients(row_i, xs)[index] for i in indices]`: the rows of `gradient_rows` as
    the Python list the loop built (None for a row that does not depend on `xs`).

    Each row is its own gradient, as the loop built it: code that keeps the rows as a list
    may fetch them one at a time (`sess.run(rows[k])`, a class-gradient cache), and a row
    sliced from one Jacobian would compute every row each time it is fetched. Rows used
    together are faster stacked: `gradient_rows`, or `cg.stacked_jacobian`. With `cached`,
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
    from compat_grads._tf import tf

    indices = list(indices)
    missing = indices if cached is None else [i for i in indices if cached[i] is None]
    computed = iter(_loop(tf, ys, xs, missing, axis, index))
    return [next(computed) if cached is None or cached[i] is None else cached[i]
            for i in indices]


def fill_gradient_rows(rows, ys, xs, indices, axis=0, index=0):
    """`for i in indices: if rows[i] is None: rows[i] = tf.gradients(row_i, xs)[index]`:
    fills the missing rows of a cache in place, each once, in the loop's order, each by its
    own pass (fetching one row later runs that row alone): the loop itself.

    Args:
      rows: the cache, a list (or anything indexable by the indices) with None where a row
        is missing.
      ys, xs, indices, axis, index: as for `gradient_row_list`.
    """
    from compat_grads._tf import tf

    # The loop itself: a cache is read a row at a time, so each row is its own pass (one
    # Jacobian would run every row whenever one is fetched).
    for i in indices:
        if rows[i] is None:
            rows[i] = _loop(tf, ys, xs, [i], axis, index)[0]


def row_while_loop(cond, body, loop_vars, **kwargs):
    """`tf.compat.v1.while_loop(cond, body, loop_vars, **kwargs)`, vectorized for the loop
    that writes one row per index into a `tf.TensorArray`: `cond` is `i < n` and `body`
    returns `(i + 1, acc.write(i, <row i>))`.

    In a graph or `tf.function`, when `loop_vars` is `[0, a TensorArray]`, `cond` run on a
    symbolic index is `index < n`, and the body run once on it does exactly that (and makes
    no random numbers or other state changes), the rows are computed at once with
    `tf.vectorized_map` (which runs the body's own ops, gradients included, for every index
    together) and scattered into the TensorArray, unless
    the static rule of `compat_grads._cost`, reading the ops and sizes of that one row,
    finds the loop faster (convolutions, pooling, TF2 loops, large rows). Otherwise, and in
    eager mode, the while_loop itself runs.

    Returns:
      What the while_loop returns: the final index and the filled TensorArray, in the
      structure of `loop_vars`.
    """
    from compat_grads._tf import tf

    result = _vectorized_loop(tf, cond, body, loop_vars, kwargs)
    if result is not None:
        return result
    return tf.compat.v1.while_loop(cond, body, loop_vars, **kwargs)


def gradient_map_fn(fn, elems, **kwargs):
    """`tf.compat.v1.map_fn(fn, elems, **kwargs)` for a `fn` that takes gradients of its
    element: with one float tensor `elems` in a graph or `tf.function` and an `fn` that
    returns one tensor of the same dtype (and makes nothing random), computed with
    `tf.vectorized_map(fn, elems)` for every element together, unless the static rule of
    `compat_grads._cost`, reading the ops and sizes of one element's call, finds `map_fn`
    faster; otherwise by `map_fn`.

    Returns:
      What `map_fn` returns.
    """
    from compat_grads._tf import tf

    result = _vectorized_map(tf, fn, elems, kwargs)
    if result is not None:
        return result
    return tf.compat.v1.map_fn(fn, elems, **kwargs)


# -- the gradient rows -------------------------------------------------------------------


def _loop(tf, ys, xs, indices, axis, index):
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


def _vectorized(tf, ys, xs, indices, axis, index):
    """The stacked rows from one Jacobian, or None when that might differ from the loop."""
    plan = _vectorizable(tf, ys, xs, indices, axis, index)
    return None if plan is None else _jacobian_rows(tf, ys, plan[0], plan[1], axis)


def _vectorizable(tf, ys, xs, indices, axis, index):
    """(source, indices within range) when the vectorized route gives the loop's values."""
    from compat_grads.dispatch import runs_eagerly

    if runs_eagerly() or not tf.is_tensor(ys) or not indices:
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
    if len(same) != 1 or not _float_source(tf, source) or _gathered(source):
        return None
    positions = _positions(indices, tf.compat.dimension_value(ys.shape[axis]))
    return None if positions is None else (source, positions)


def _float_source(tf, source) -> bool:
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


def _jacobian_rows(tf, ys, source, positions, axis):
    """The Jacobian of the chosen slice sums; None when not connected, when compat_grads
    cannot compute it, or when the static rule runs these rows one by one (the loop is the
    faster code then): the loop then runs, and raises what it raises."""
    import compat_grads as cg
    from compat_grads import _cost

    if not _cost.plan_for(len(positions), [ys], [source]).vectorized:
        return None
    others = [a for a in range(ys.shape.rank) if a != axis]
    sums = tf.reduce_sum(ys, axis=others) if others else ys
    try:
        rows = cg.stacked_jacobian(tf.gather(sums, positions), source)
    except cg.DerivativeError:  # what TensorFlow can build one row at a time, the loop does
        return None
    return None if rows is None else tf.convert_to_tensor(rows)


def _slice(ys, i, axis):
    return ys[i] if axis == 0 else ys[:, i]


# -- while_loop and map_fn bodies ------------------------------------------------------------


class _NotTheForm(Exception):
    """The body does something other than the form the helper vectorizes."""


class _Recorder:
    """Stands for the TensorArray in a body run once: records the one `write(i, row)`."""

    def __init__(self, index):
        self.index, self.rows = index, []

    def write(self, index, value, name=None):
        del name
        if index is not self.index or self.rows:
            raise _NotTheForm
        self.rows.append(value)
        return self

    def __getattr__(self, name):
        raise _NotTheForm


def _vectorized_loop(tf, cond, body, loop_vars, kwargs):
    """The while_loop's result from `tf.vectorized_map`, or None."""
    from compat_grads.dispatch import runs_eagerly

    if runs_eagerly() or set(kwargs) - _LOOP_KEYWORDS:
        return None
    if not isinstance(loop_vars, (list, tuple)) or len(loop_vars) != 2:
        return None
    start, array = loop_vars
    if not isinstance(array, tf.TensorArray) or not _zero_index(tf, start):
        return None
    dtype = start.dtype if tf.is_tensor(start) else tf.int32
    count = _bound(tf, cond, tf.zeros([], dtype), array)
    if count is None:
        return None
    indices = tf.range(tf.maximum(count, 0))
    # Not converted by AutoGraph: tf.while_loop does not convert its body either.
    row = tf.autograph.experimental.do_not_convert(
        lambda i: _row(tf, body, tf.cast(i, dtype), array.dtype))
    try:
        if not _vectorizing_wins(tf, row, tf.get_static_value(count)):
            return None
        rows = tf.vectorized_map(row, indices)
    except Exception:  # noqa: BLE001 - anything the body does not survive: the loop runs
        return None
    if kwargs.get("back_prop") is False:
        rows = tf.stop_gradient(rows)
    return type(loop_vars)([tf.maximum(count, 0), array.scatter(indices, rows)])


def _bound(tf, cond, index, array):
    """`n` when `cond(index, array)` is the op `index < n` for an integer scalar `n`."""
    try:
        with _deterministic(tf):
            test = cond(index, array)
    except Exception:  # noqa: BLE001 - the loop runs and raises what it raises
        return None
    op = getattr(test, "op", None)
    if op is None or op.type != "Less" or op.inputs[0] is not index:
        return None
    bound = op.inputs[1]
    return bound if bound.dtype == index.dtype and bound.shape.rank == 0 else None


def _zero_index(tf, start) -> bool:
    if isinstance(start, int) and not isinstance(start, bool):
        return start == 0
    return tf.is_tensor(start) and start.dtype.is_integer and start.shape.rank == 0 and (
        tf.get_static_value(start) == 0)


def _row(tf, body, index, dtype):
    """Row `index` as the body writes it (raises `_NotTheForm` for any other body)."""
    acc = _Recorder(index)
    with _deterministic(tf):
        out = body(index, acc)
    if not (isinstance(out, (list, tuple)) and len(out) == 2 and out[1] is acc
            and acc.rows and _plus_one(tf, out[0], index)):
        raise _NotTheForm
    row = tf.convert_to_tensor(acc.rows[0])
    if row.dtype != dtype:
        raise _NotTheForm
    return row


def _plus_one(tf, value, index) -> bool:
    """Whether `value` is the op `index + 1`."""
    op = getattr(value, "op", None)
    if op is None or op.type not in ("Add", "AddV2") or len(op.inputs) != 2:
        return False
    a, b = op.inputs
    return (a is index and tf.get_static_value(b) == 1) or (
        b is index and tf.get_static_value(a) == 1)


class _deterministic:
    """Raises `_NotTheForm` when the code run inside makes stateful ops other than variable
    reads (random numbers, assignments, prints, Python functions): vectorized, they would
    draw other numbers, or change state in another order, than the loop does."""

    def __init__(self, tf):
        self.graph = tf.compat.v1.get_default_graph()

    def __enter__(self):
        self.before = len(self.graph.get_operations())

    def __exit__(self, kind, value, trace):
        if kind is None and any(op.op_def.is_stateful and op.type not in _READS
                                for op in self.graph.get_operations()[self.before:]):
            raise _NotTheForm
        return False


_READS = frozenset({"ReadVariableOp", "VarHandleOp", "VariableV2", "Variable"})


def _vectorizing_wins(tf, row, rows) -> bool:
    """Whether the static rule of `compat_grads._cost` vectorizes `rows` rows (None: known
    at run time only), reading the ops of one `row(index)` built here (what pfor would
    stack). Where it does not, the loop itself is the faster code."""
    from compat_grads import _cost

    _, ops = _cost.new_ops(lambda: row(tf.zeros([], tf.int32)))
    return _cost.plan(None if rows is None else int(rows), _cost.ops_facts(ops)).vectorized


def _vectorized_map(tf, fn, elems, kwargs):
    """map_fn's result from `tf.vectorized_map`, or None."""
    from compat_grads.dispatch import runs_eagerly

    if runs_eagerly() or set(kwargs) - _MAP_KEYWORDS:
        return None
    if not tf.is_tensor(elems) or not elems.dtype.is_floating or not elems.shape.rank:
        return None

    def element(value):
        with _deterministic(tf):
            out = fn(value)
        if not tf.is_tensor(out) or out.dtype != elems.dtype:
            raise _NotTheForm
        return out

    one = tf.autograph.experimental.do_not_convert(element)  # as map_fn does not convert fn
    try:
        if not _vectorizing_wins(tf, lambda i: one(tf.gather(elems, i)),
                                 tf.compat.dimension_value(elems.shape[0])):
            return None
        out = tf.vectorized_map(one, elems)
    except Exception:  # noqa: BLE001 - anything fn does not survive: map_fn runs
        return None
    return tf.stop_gradient(out) if kwargs.get("back_prop") is False else out
