"""Jacobians composed from a backend's two primitives, `vjp_fn` and `jvp_fn`.

Rows (reverse mode) are VJPs with one-hot cotangents; columns (forward mode) are JVPs with
one-hot tangents. Either is stacked over an index by `_stacking.stack` (pfor, or a
`while_loop` over indices for "loop": the graph does not grow with the number of rows).
`how` (`_options.How`) carries the strategy, the unconnected mode, the chunk size and the
memory limit.
"""

from __future__ import annotations

from compat_grads._src import memory as _memory
from compat_grads._src.core import structure as st
from compat_grads._src.core.errors import (
    DerivativeError,
    VectorizationWarning,
    last_line,
    message,
    warn,
)
from compat_grads._src.core.tf import tf
from compat_grads._src.jacobians import one_hot_products as _one_hot_products
from compat_grads._src.stacking import cost as _cost
from compat_grads._src.stacking.stack import stack


def _reverse(backend, flat, how, batched=False, at=0):
    """rows[t][k], `[rows of target t] + x_k.shape`: VJPs with one-hot cotangents (one-hot
    per sample when `batched`), started before the target's last matrix product where it
    has one (`_one_hot_products`); the rows' axis at `at` (1: after the batch axis)."""
    def row_of(pull, targets, t):
        target, count = targets[t], len(targets)
        return lambda i: pull(st.only(t, st.one_hot_like(target, i, st.dtype_of(target), batched),
                                    count))

    pull, targets, rows = backend.vjp_fn(), backend.targets, []
    for t, target in enumerate(targets):
        count = st.per_sample_size(target) if batched else st.size(target)
        again = _rerun(backend, lambda served, t=t: row_of(served.vjp_fn(), served.targets, t))
        row = _one_hot_products.rows(backend, t, batched) or row_of(pull, targets, t)
        rows.append(stack(backend, row, count, flat, how, backend.vjp_reusable, again, at))
    return rows


def _forward(backend, flat, how, batched=False):
    """columns[t][k], `target_t.shape + [columns of source k]`, in x_k's dtype: JVPs with
    one-hot tangents (one-hot per sample when `batched`), stacked straight into that
    layout (the columns' axis last); started after the source's first matrix product
    where it has one (`_one_hot_products`)."""
    def column_of(push, k):
        x = flat[k]
        return lambda j: push(st.only(k, st.one_hot_like(x, j, st.dtype_of(x), batched),
                                    len(flat)))

    push, by_source = None, []
    for k, x in enumerate(flat):
        count = st.per_sample_size(x) if batched else st.size(x)
        again = _rerun(backend, lambda served, k=k: column_of(served.jvp_fn(), k))
        column = _one_hot_products.columns(backend, k, batched)
        if column is None:
            push = push or backend.jvp_fn()
            column = column_of(push, k)
        stacks = stack(backend, column, count, backend.targets, how, rerun=again, at=-1)
        by_source.append([None if c is None else tf.cast(c, st.dtype_of(x)) for c in stacks])
    return [list(row) for row in zip(*by_source)]


def _rerun(backend, row_of):
    """The row function `row_of(backend)` computing the target again for each row (on a
    fresh backend), for targets allowed one derivative per forward pass; None when the
    target is a tensor, which cannot be computed again."""
    if backend.fresh() is None:
        return None
    return lambda i: row_of(backend.fresh())(i)


def choose_strategy(strategy, target_size, source_size, forward_ok=True,
                    rows_are_copies=lambda: False):
    """'auto' picks forward when the sources are smaller than the target, else reverse (and
    reverse when forward mode cannot work: `forward_ok` False, or when every row is a copy
    of a matrix product's factor, `rows_are_copies()`: `_one_hot_products`)."""
    if strategy != "auto":
        return strategy
    if forward_ok and isinstance(target_size, int) and isinstance(source_size, int):
        return "forward" if source_size < target_size and not rows_are_copies() else "reverse"
    return "reverse"


def jacobian_blocks(backend, flat, how):
    """blocks[t][k] of shape `y_t.shape + x_k.shape` (None or zeros where unconnected)."""
    targets = backend.targets
    how = how.using(choose_strategy(how.strategy, _memory.total(st.size(t) for t in targets),
                                    _memory.total(st.size(x) for x in flat),
                                    backend.forward_per_row() is None,
                                    lambda: _one_hot_products.rows_are_copies(backend, False)))
    forward = how.strategy == "forward"
    how = _memory.fit(backend.function, how, _stacks(targets, flat, forward),
                      _cost.intermediates(backend), moved=forward)
    raw = (_forward if forward else _reverse)(backend, flat, how)
    return [[_finish(raw[t][k], [_shapes(target), _shapes(x)], st.dtype_of(x), how.unconnected)
             for k, x in enumerate(flat)] for t, target in enumerate(targets)]


def batch_jacobian_block(backend, source, how):
    """`[b] + y.shape[1:] + x.shape[1:]`: per-sample Jacobians, samples assumed independent."""
    target = backend.target
    how = how.using(choose_strategy(how.strategy, st.per_sample_size(target),
                                    st.per_sample_size(source), backend.forward_per_row() is None,
                                    lambda: _one_hot_products.rows_are_copies(backend, True)))
    forward = how.strategy == "forward"
    how = _memory.fit(backend.function, how, _stacks([target], [source], forward, batched=True),
                      _cost.intermediates(backend), moved=True)  # columns last, rows second
    if forward:
        ((raw,),) = _forward(backend, [source], how, batched=True)
    else:
        ((raw,),) = _reverse(backend, [source], how, batched=True, at=1)
    return _finish(raw, [_shapes(target), _shapes(source, batch=False)], st.dtype_of(source),
                   how.unconnected)


def per_example_rows(backend, loss_of_example, count, how, extras=None):
    """`[b] + w_k.shape` per source w_k: the gradient of example i's scalar loss
    `loss_of_example(i)(sources)`, stacked over the `count` examples. Each example runs
    forward and backward on its own (O(b) work in all, not the O(b²) of b one-hot VJPs
    through the whole batch), vectorized over examples by pfor.

    `extras`: `(like, of_example)`, more outputs of each example's pass (its loss, its aux):
    `of_example(served)` gives tensors shaped like `like` from the example's backend after
    its gradient; they come back stacked, `[b] + like[j].shape`. Returns (gradients, those
    stacks)."""
    like, of_example = extras or ([], None)

    def row(i):
        one = backend.sibling(loss_of_example(i))
        grads = one.vjp_fn()([tf.ones_like(one.target)])
        return [*grads, *of_example(one)] if of_example else grads

    flat = backend.sources
    # Each row is one example's pass: its intermediates are not those of the whole batch's
    # graph (there may be none), so only its gradients are counted.
    how = _memory.fit(backend.function, how,
                      [(count, 0, _memory.total(_memory.nbytes(w) for w in flat))])
    rows = stack(backend, row, count, [*flat, *like], how, rerun=row)  # each row: its example
    examples = (tf.TensorShape([count if isinstance(count, int) else None]),
                tf.reshape(count, [1]))
    grads = [_finish(r, [examples, _shapes(w)], st.dtype_of(w), how.unconnected)
             for r, w in zip(rows, flat)]
    return grads, rows[len(flat):]


def per_element(backend, flat, how):
    """One target-shaped J_k·1 per source: one forward-mode product each."""
    push = backend.jvp_fn()
    results = []
    for k, x in enumerate(flat):
        (out,) = push(st.only(k, tf.ones_like(x), len(flat)))
        if out is None and how.unconnected == "zero":
            out = tf.zeros_like(backend.target)
        results.append(None if out is None else tf.cast(out, st.dtype_of(x)))
    return results


def hessian_blocks(backend, flat, how):
    """H[i][j] of shape `y.shape + x_i.shape + x_j.shape`: the Jacobian of the gradient."""
    target = backend.target
    every = _memory.total(_memory.nbytes(x) for x in flat)
    scalar = target.shape.num_elements() == 1
    stacks = [  # rows of H[k]: (target element, x_k element)s
        (_product(st.size(target), st.size(x)), _memory.nbytes(x), every) for x in flat]
    if scalar:  # the Jacobian of the gradient chooses its chunk from the gradient's graph
        _memory.check(backend.function, how, stacks)
    else:
        how = _memory.fit(backend.function, how, stacks, _cost.intermediates(backend, 2),
                          moved=True)  # forward-over-reverse columns become rows

    def compute(outer):
        if scalar:  # statically scalar: no loop over elements
            gradient = backend.vjp_backend(lambda targets: [st.ones_of(targets[0])])
            return jacobian_blocks(gradient, flat, outer)
        return _hessian_pairs(backend, flat, outer)

    raw = second_order(backend, how, compute)
    return [[_finish(raw[i][j], [_shapes(target), _shapes(x_i), _shapes(x_j)],
                     st.dtype_of(x_j), how.unconnected)
             for j, x_j in enumerate(flat)] for i, x_i in enumerate(flat)]


def second_order(backend, how, compute):
    """`compute(how with the outer direction)`. "auto" is forward-over-reverse where the
    backend runs a callable forward (tape), reverse-over-reverse in graphs, and falls back to
    reverse when TensorFlow cannot push tangents through a gradient (a tf.cond's, for one)."""
    if how.strategy != "auto":
        return compute(how)
    if backend.second_order_outer != "forward":
        return compute(how.using("reverse"))
    try:
        return compute(how.using("forward"))
    except DerivativeError as err:
        if getattr(err, "every_strategy", False):
            raise
        warn(message(backend.function, f"forward-over-reverse failed ({last_line(err)})",
                     "Using reverse-over-reverse instead: same values."), VectorizationWarning)
        return compute(how.using("reverse"))


def _hessian_pairs(backend, flat, how):
    """Hessians of a non-scalar target: ONE loop over (target element, source element) pairs,
    each step the derivative of one element's gradient. Never a loop inside a loop (TF1's
    control flow v1 cannot differentiate a while_loop inside a while_loop)."""
    target, count = backend.target, len(flat)

    def gradient_of(element):
        return backend.vjp_backend(lambda targets: [
            st.one_hot_like(targets[0], element, st.dtype_of(targets[0]), False)])

    forward = how.strategy == "forward"

    def pairs_for(k):
        x_k, n = flat[k], st.size(flat[k])

        def body(p):
            unit = st.only(k, st.one_hot_like(x_k, p % n, st.dtype_of(x_k), False), count)
            gradient = gradient_of(p // n)
            return gradient.jvp_fn()(unit) if forward else gradient.vjp_fn()(unit)
        reusable = forward or backend.vjp_reusable
        return stack(backend, body, st.size(target) * n, flat, how, reusable)

    raw = [[None] * count for _ in flat]
    for k, x_k in enumerate(flat):
        stacks = pairs_for(k)
        if not forward:  # rows of H[k][j] for every j
            raw[k] = stacks
            continue
        for i, (columns, x_i) in enumerate(zip(stacks, flat)):  # columns of H[i][k]
            raw[i][k] = None if columns is None else tf.cast(
                _columns_to_rows(columns, st.size(x_k), x_i), st.dtype_of(x_k))
    return raw


def _columns_to_rows(stack, n, x_i):
    """`[m * n] + x_i.shape` (n columns per target element) -> `[m] + x_i.shape + [n]`."""
    grouped = tf.reshape(stack, [-1, n, st.size(x_i)])
    return tf.transpose(grouped, [0, 2, 1])


def batch_hessian_block(backend, source, how):
    """`[b] + x.shape[1:] + x.shape[1:]`: the batch Jacobian of the batch-summed gradient."""
    _memory.check(backend.function, how, [  # the gradient is shaped like the source
        (st.per_sample_size(source), _memory.nbytes(source), _memory.nbytes(source))])
    gradient = backend.vjp_backend(lambda targets: [st.ones_of(targets[0])])
    return second_order(backend, how, lambda outer: batch_jacobian_block(
        gradient, source, outer))


def exact_batch_jacobian(backend, source, how):
    """The per-sample blocks of the full Jacobian: exact even when samples interact."""
    ((full,),) = jacobian_blocks(backend, [source], how)
    target = backend.target
    return _batch_diagonal(full, [target, source], [_shapes(target), _shapes(source, False)])


def exact_batch_hessian(backend, source, how):
    """The per-sample blocks of the full Hessian: exact even when samples interact."""
    ((full,),) = hessian_blocks(backend, [source], how)
    per_sample = _shapes(source, batch=False)
    return _batch_diagonal(full, [backend.target, source, source],
                           [(source.shape[:1], tf.shape(source)[:1]), per_sample, per_sample])


def _batch_diagonal(block, parts, out_parts):
    """`block[s, ..., s, ..., s, ...]` for every sample s, where each of `parts` contributes
    its axes to `block` and starts with the batch axis; reshaped to `out_parts`."""
    if block is None:
        return None
    moved = tf.transpose(block, _batch_axes_first([st.rank(p) for p in parts]))
    samples = tf.range(tf.shape(block)[0])
    diagonal = tf.gather_nd(moved, tf.stack([samples] * len(parts), axis=1))
    static = tf.TensorShape([])
    for part, _ in out_parts:
        static = static.concatenate(part)
    return st.reshape(diagonal, tf.concat([d for _, d in out_parts], 0), static)


def _batch_axes_first(ranks):
    """The permutation that moves the first axis of each part (of these ranks, laid end to
    end) to the front, keeping the order of the others: a list, or a tensor when a rank is
    only known at run time."""
    if all(isinstance(r, int) for r in ranks):
        starts = [sum(ranks[:p]) for p in range(len(ranks))]
        return starts + [a for a in range(sum(ranks)) if a not in starts]
    ranks = tf.stack([tf.cast(r, tf.int32) for r in ranks])
    starts = tf.cumsum(ranks, exclusive=True)
    axes = tf.range(tf.reduce_sum(ranks))
    is_start = tf.reduce_any(tf.equal(axes[:, None], starts[None, :]), axis=1)
    return tf.concat([starts, tf.boolean_mask(axes, tf.logical_not(is_start))], 0)


def _shapes(x, batch=True):
    """(static, dynamic) shape of x, without its first (batch) axis if not `batch`."""
    return (x.shape, tf.shape(x)) if batch else (x.shape[1:], tf.shape(x)[1:])


def _finish(block, parts, dtype, unconnected):
    """`block` reshaped to the concatenated shapes of `parts` (None or zeros if missing)."""
    static = tf.TensorShape([])
    for part, _ in parts:
        static = static.concatenate(part)
    shape = tf.concat([dynamic for _, dynamic in parts], 0)
    if block is None:
        return st.zeros(static, shape, dtype) if unconnected == "zero" else None
    return st.reshape(block, shape, static)


def _stacks(targets, flat, forward, batched=False):
    """What `_memory.check` needs of a Jacobian: (rows, bytes in, bytes out) per stack, one
    stack per source in forward mode (its one-hot columns), else one per target."""
    rows = st.per_sample_size if batched else st.size
    if forward:
        return [(rows(x), _memory.nbytes(x),
                 _memory.total(_memory.nbytes(t, st.dtype_of(x)) for t in targets))
                for x in flat]
    every = _memory.total(_memory.nbytes(x) for x in flat)
    return [(rows(t), _memory.nbytes(t), every) for t in targets]


def _product(a, b):
    return a * b if isinstance(a, int) and isinstance(b, int) else None
