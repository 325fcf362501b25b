"""The runtime-checked loops: `row_while_loop` and `gradient_map_fn`, what `compat-grads
scan --fix` writes in place of a `tf.while_loop` that writes one gradient row per index, or
a `tf.map_fn` that differentiates with respect to its element. They trace the body once,
for `tf.vectorized_map`, on its symbolic index (or element), check it has the form they
vectorize, and compute every row at once when the static rule of `compat_grads._src.stacking.cost`,
reading that trace, finds that faster; otherwise they run the loop itself."""

from __future__ import annotations

from compat_grads import dispatch
from compat_grads._src.core.tf import tf
from compat_grads._src.stacking import cost as _cost
from compat_grads._src.stacking import pfor_converters as _pfor_converters

# What a `tf.while_loop` or `tf.map_fn` keyword may be for the vectorized route: these
# change how the loop runs, not what it returns.
_LOOP_KEYWORDS = frozenset({"parallel_iterations", "back_prop", "swap_memory", "name"})
_MAP_KEYWORDS = _LOOP_KEYWORDS | {"infer_shape"}
# Hidden from AutoGraph as the public functions are (see `rows._hidden`): a loop built
# inside a `tf.map_fn` fn or a tf.function is not converted with it.
_hidden = tf.autograph.experimental.do_not_convert


@_hidden
def row_while_loop(cond, body, loop_vars, **kwargs):
    """`tf.compat.v1.while_loop(cond, body, loop_vars, **kwargs)`, vectorized for the loop
    that writes one row per index into a `tf.TensorArray`: `cond` is `i < n` and `body`
    returns `(i + 1, acc.write(i, <row i>))`.

    In a graph or `tf.function`, when `loop_vars` is `[0, a TensorArray]`, `cond` run on a
    symbolic index is `index < n`, and the body run once on it does exactly that (and makes
    no random numbers or other state changes), the rows are computed at once with
    `tf.vectorized_map` (which runs the body's own ops, gradients included, for every index
    together, with the converters compat_grads gives its own rows: the gradient of `y[i]`
    without a loop of pfor's) and scattered into the TensorArray, unless `n` is known
    while building and at most 8 (there the loop builds faster and runs as fast), or
    the static rule of `compat_grads._src.stacking.cost`, reading the ops and sizes of that one row,
    finds the loop faster (convolutions, pooling, TF2 loops, also one inside a function
    the row calls, as in an LSTM layer, large rows). Otherwise, and in eager mode, the
    while_loop itself runs.

    Returns:
      What the while_loop returns: the final index and the filled TensorArray, in the
      structure of `loop_vars`.
    """
    result = _vectorized_loop(cond, body, loop_vars, kwargs)
    if result is not None:
        return result
    return tf.compat.v1.while_loop(cond, body, loop_vars, **kwargs)


@_hidden
def gradient_map_fn(fn, elems, **kwargs):
    """`tf.compat.v1.map_fn(fn, elems, **kwargs)` for a `fn` that takes gradients of its
    element: with one float tensor `elems` in a graph or `tf.function` and an `fn` that
    returns one tensor of the same dtype (and makes nothing random), computed with
    `tf.vectorized_map(fn, elems)` for every element together, unless there are at most 8
    elements (the loop builds faster and runs as fast) or the static rule of
    `compat_grads._src.stacking.cost`, reading the ops and sizes of one element's call, finds
    `map_fn`
    faster; otherwise by `map_fn`.

    Returns:
      What `map_fn` returns.
    """
    result = _vectorized_map(fn, elems, kwargs)
    if result is not None:
        return result
    return tf.compat.v1.map_fn(fn, elems, **kwargs)


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


def _vectorized_loop(cond, body, loop_vars, kwargs):
    """The while_loop's result from `tf.vectorized_map`, or None."""
    if dispatch.runs_eagerly() or set(kwargs) - _LOOP_KEYWORDS:
        return None
    if not isinstance(loop_vars, (list, tuple)) or len(loop_vars) != 2:
        return None
    start, array = loop_vars
    if not isinstance(array, tf.TensorArray) or not _zero_index(start):
        return None
    dtype = start.dtype if tf.is_tensor(start) else tf.int32
    count = _bound(cond, tf.zeros([], dtype), array)
    if count is None or _few(tf.get_static_value(count)):
        return None
    indices = tf.range(tf.maximum(count, 0))
    # Not converted by AutoGraph: tf.while_loop does not convert its body either.
    row = tf.autograph.experimental.do_not_convert(
        lambda i: _row(body, tf.cast(i, dtype), array.dtype))
    try:
        rows = tf.vectorized_map(_if_vectorizing_wins(row, tf.get_static_value(count)),
                                 indices)
    except Exception:  # noqa: BLE001 - anything the body does not survive: the loop runs
        return None
    if kwargs.get("back_prop") is False:
        rows = tf.stop_gradient(rows)
    return type(loop_vars)([tf.maximum(count, 0), array.scatter(indices, rows)])


def _few(rows) -> bool:
    """Whether `rows` (None: known at run time only) are few enough that the loop builds
    faster and runs as fast (`_cost.LOOP_ROWS`): decided before the body is traced."""
    return rows is not None and int(rows) <= _cost.LOOP_ROWS


def _bound(cond, index, array):
    """`n` when `cond(index, array)` is the op `index < n` for an integer scalar `n`."""
    try:
        with _deterministic():
            test = cond(index, array)
    except Exception:  # noqa: BLE001 - the loop runs and raises what it raises
        return None
    op = getattr(test, "op", None)
    if op is None or op.type != "Less" or op.inputs[0] is not index:
        return None
    bound = op.inputs[1]
    return bound if bound.dtype == index.dtype and bound.shape.rank == 0 else None


def _zero_index(start) -> bool:
    if isinstance(start, int) and not isinstance(start, bool):
        return start == 0
    return tf.is_tensor(start) and start.dtype.is_integer and start.shape.rank == 0 and (
        tf.get_static_value(start) == 0)


def _row(body, index, dtype):
    """Row `index` as the body writes it (raises `_NotTheForm` for any other body)."""
    acc = _Recorder(index)
    with _deterministic():
        out = body(index, acc)
    if not (isinstance(out, (list, tuple)) and len(out) == 2 and out[1] is acc
            and acc.rows and _plus_one(out[0], index)):
        raise _NotTheForm
    row = tf.convert_to_tensor(acc.rows[0])
    if row.dtype != dtype:
        raise _NotTheForm
    return row


def _plus_one(value, index) -> bool:
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

    def __init__(self):
        self.graph = tf.compat.v1.get_default_graph()

    def __enter__(self):
        self.before = len(self.graph.get_operations())

    def __exit__(self, kind, value, trace):
        if kind is None and any(op.op_def.is_stateful and op.type not in _READS
                                for op in self.graph.get_operations()[self.before:]):
            raise _NotTheForm
        return False


_READS = frozenset({"ReadVariableOp", "VarHandleOp", "VariableV2", "Variable"})


def _if_vectorizing_wins(row, rows):
    """`row`, for `tf.vectorized_map` to trace: it raises `_LoopWins` (before pfor converts
    anything) where the static rule of `compat_grads._src.stacking.cost`, reading the ops of the
    row pfor
    traces, does not vectorize `rows` rows (None: known at run time only). There the loop
    itself is the faster code (a row that runs a loop, also one inside a function it calls,
    as an LSTM does, is one of those: pfor could not vectorize one that differentiates its
    loop at all). The row is traced once: the rule reads pfor's own trace."""
    def checked(index):
        out, ops = _cost.new_ops(lambda: row(index))
        if not _cost.plan(None if rows is None else int(rows), _cost.ops_facts(ops)).vectorized:
            raise _LoopWins
        _pfor_converters.attach(ops)  # as compat_grads' own rows have them
        return out
    return checked


class _LoopWins(Exception):
    """The loop itself runs faster than the vectorized rows."""


def _vectorized_map(fn, elems, kwargs):
    """map_fn's result from `tf.vectorized_map`, or None."""
    if dispatch.runs_eagerly() or set(kwargs) - _MAP_KEYWORDS:
        return None
    if not tf.is_tensor(elems) or not elems.dtype.is_floating or not elems.shape.rank:
        return None

    def element(value):
        with _deterministic():
            out = fn(value)
        if not tf.is_tensor(out) or out.dtype != elems.dtype:
            raise _NotTheForm
        return out

    if _few(tf.compat.dimension_value(elems.shape[0])):
        return None
    one = tf.autograph.experimental.do_not_convert(element)  # as map_fn does not convert fn
    try:
        out = tf.vectorized_map(_if_vectorizing_wins(
            one, tf.compat.dimension_value(elems.shape[0])), elems)
    except Exception:  # noqa: BLE001 - anything fn does not survive: map_fn runs
        return None
    return tf.stop_gradient(out) if kwargs.get("back_prop") is False else out
