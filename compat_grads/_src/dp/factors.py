"""What a rule gives for one use of a weight, and the math on it.

A use's per-example gradient is either an `Outer` factor, `G_s = sum_t left[s, t] ⊗
right[s, t]` (a dense layer's input rows and output gradients, a convolution's patches, an
embedding's one-hot rows), or a `PerExample` gradient already materialized (a bias, a
scale: as small as the weight). A weight's squared norm per example sums over its uses
before squaring (a weight used twice is one weight): by the Gram matrices of the factors,
`sum_{t,t'} (l_t·l_t')(r_t·r_t')`, or by the materialized `[b, P, Q]`, whichever is smaller.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from compat_grads._src.core.tf import tf


@dataclasses.dataclass(frozen=True)
class Outer:
    """`G_s = sum_t left[s, t] ⊗ right[s, t]`, flattened in the weight's order (P first).
    `left` is `[b, T, P]`, or None with `indices` `[b, T]`: one-hot rows of depth P (an
    embedding's table rows). `right` is `[b, T, Q]`."""

    left: tf.Tensor | None
    right: tf.Tensor
    depth: int
    indices: tf.Tensor | None = None

    @property
    def rows(self) -> int | None:
        return tf.compat.dimension_value(self.right.shape[1])

    @property
    def size(self) -> int:
        return self.depth * int(self.right.shape[-1])


@dataclasses.dataclass(frozen=True)
class PerExample:
    """The per-example gradient of one use, `[b] + view shape` (the weight's elements in
    its order)."""

    grads: tf.Tensor


def prepared(parts, batch, shared=None):
    """One weight's parts (its uses' `Outer`s and `PerExample`s) in the form its norm and
    clipped sum are read from: the `Outer`s joined (`joined`) when their Gram matrices are
    smaller than the materialized gradient, else one `PerExample`, `[batch, size]`, the sum
    over the uses. Materialized, the clipped sum needs only that sum (not every use's
    factors, which a recurrent kernel's hundred time steps would hold until the norms of
    every weight are known). `shared`: a dict for one call's joins, so weights whose uses
    have the same right factors (an LSTM's kernel and recurrent kernel: the gate
    gradients of each time step) join them once."""
    outers = [p for p in parts if isinstance(p, Outer)]
    alike = len({int(p.right.shape[-1]) for p in outers}) == 1
    if outers and len(outers) == len(parts) and alike and (
            _gram_is_smaller(outers) or all(p.left is None for p in outers)):
        return joined(outers, shared)
    return [PerExample(per_example_total(parts, batch, shared))]


def squared_norms(parts, batch):
    """Each example's squared gradient norm over one weight, `[batch]`, from its `prepared`
    parts."""
    if len(parts) == 1 and isinstance(parts[0], Outer) and parts[0].left is None:
        return _one_hot_norms(parts[0])
    if all(isinstance(p, Outer) for p in parts):
        return _gram_norms(parts)
    total = per_example_total(parts, batch)
    return tf.reduce_sum(tf.square(total), axis=1)


def joined(outers, shared=None):
    """The uses of one weight as at most two `Outer`s, one with dense left factors and one
    with one-hot ones, each joining its uses' rows (a recurrent kernel's time steps, a
    layer called twice): a weight's gradient is the sum over all its rows either way."""
    dense = [p for p in outers if p.left is not None]
    hot = [p for p in outers if p.left is None]
    found = []
    if len(dense) > 1:
        found.append(Outer(tf.concat([p.left for p in dense], 1),
                           _concat([p.right for p in dense], shared), dense[0].depth))
    else:
        found += dense
    if len(hot) > 1:
        found.append(Outer(None, _concat([p.right for p in hot], shared), hot[0].depth,
                           tf.concat([tf.cast(p.indices, tf.int64) for p in hot], 1)))
    else:
        found += hot
    return found


def _concat(tensors, shared):
    """`tf.concat(tensors, 1)`, made once per call for the same tensors (with `shared`)."""
    if shared is None:
        return tf.concat(tensors, 1)
    key = tuple(id(t) for t in tensors)
    if key not in shared:
        shared[key] = tf.concat(tensors, 1)
    return shared[key]


def clipped_sum(parts, batch, scale, shape):
    """`sum_s scale[s] * G_s` in the weight's `shape`, from its `prepared` parts."""
    total = None
    for part in parts:
        if isinstance(part, PerExample):
            flat = tf.reshape(part.grads, [batch, -1])
            term = tf.linalg.matvec(flat, tf.cast(scale, flat.dtype), transpose_a=True)
        else:
            right = part.right * tf.cast(scale, part.right.dtype)[:, None, None]
            term = tf.reshape(_outer_total(part, right), [-1])
        total = term if total is None else total + tf.cast(term, total.dtype)
    return tf.reshape(total, shape)


def _outer_total(part, right):
    """`sum_{s,t} left[s,t] ⊗ right[s,t]`, `[P, Q]`."""
    q = int(right.shape[-1])
    right = tf.reshape(right, [-1, q])
    if part.left is None:
        return tf.math.unsorted_segment_sum(right, tf.reshape(part.indices, [-1]), part.depth)
    left = tf.reshape(part.left, [-1, part.depth])
    return tf.matmul(left, right, transpose_a=True)


def _one_hot_norms(part):
    """Squared norms of one-hot rows' gradients (an embedding's): each example's rows of
    equal index summed (sorted by index, then one segment per run of equal ones), then
    squared: `b·T·Q` numbers, where the Gram form holds `b·T·T` several times."""
    right, indices = part.right, tf.cast(part.indices, tf.int64)
    order = tf.argsort(indices, axis=1, stable=True)
    ids = tf.gather(indices, order, batch_dims=1)
    rows = tf.gather(right, order, batch_dims=1)
    shape = tf.shape(ids, out_type=tf.int64)
    fresh = tf.concat([tf.ones([shape[0], 1], tf.int64),
                       tf.cast(tf.not_equal(ids[:, 1:], ids[:, :-1]), tf.int64)], 1)
    runs = tf.cumsum(fresh, axis=1) - 1 + tf.range(shape[0])[:, None] * shape[1]
    q = int(right.shape[-1])
    summed = tf.math.unsorted_segment_sum(tf.reshape(rows, [-1, q]), tf.reshape(runs, [-1]),
                                          shape[0] * shape[1])
    return tf.reduce_sum(tf.reshape(tf.square(summed), [shape[0], -1]), axis=1)


def _gram_is_smaller(outers) -> bool:
    """Gram matrices hold `b·T·T'` numbers per pair of uses, the materialized gradient
    `b·P·Q`: the smaller wins (rows unknown while building: the Gram form when the
    gradient is large)."""
    rows = [p.rows for p in outers]
    size = outers[0].size
    if None in rows:
        return size > 4096
    return sum(rows) ** 2 <= size


def _gram_norms(outers):
    total = None
    for i, u in enumerate(outers):
        for j in range(i, len(outers)):
            v = outers[j]
            term = tf.reduce_sum(_left_gram(u, v) * _gram(u.right, v.right), axis=[1, 2])
            term = term if i == j else 2 * term
            total = term if total is None else total + term
    return total


def _gram(a, b):
    return tf.matmul(a, b, transpose_b=True)


def _left_gram(u, v):
    """`[b, T_u, T_v]` inner products of the two uses' left factors."""
    dtype = u.right.dtype
    if u.left is not None and v.left is not None:
        return tf.cast(_gram(u.left, v.left), dtype)
    if u.left is None and v.left is None:
        return tf.cast(tf.equal(u.indices[:, :, None], v.indices[:, None, :]), dtype)
    if u.left is None:
        return tf.transpose(_left_gram(v, u), [0, 2, 1])
    picked = tf.gather(u.left, v.indices, axis=2, batch_dims=1)  # [b, T_u, T_v]
    return tf.cast(picked, dtype)


def per_example_total(parts, batch, shared=None):
    """The per-example gradient over every use, `[batch, size]`: added up last use first,
    the order the backward pass makes their gradients in, so each term is added (and its
    factors freed) as soon as it is made rather than after the first use's; the `Outer`s
    of consecutive uses joined (`grouped`) first."""
    total = None
    for part in reversed(grouped(parts, shared)):
        with tf.control_dependencies([] if total is None else [total]):
            if isinstance(part, PerExample):
                flat = tf.reshape(part.grads, [batch, -1])
            else:
                flat = tf.reshape(_materialized(part, batch), [batch, -1])
        total = flat if total is None else total + tf.cast(flat, total.dtype)
    return total


def grouped(parts, shared=None):
    """`parts` with each run of consecutive `Outer`s of one kind (dense or one-hot left
    factors of one depth, right factors of one width) joined into groups whose factors
    hold at most as many numbers per example as their materialized gradient: one matmul
    per group, not per use (a recurrent kernel's hundred time steps of one row each), and
    no copy of every use's factors at once."""
    found, run, rows = [], [], 0
    for part in parts:
        limit = _rows_per_group(part)
        if run and not (limit and _alike(run[0], part) and rows + part.rows <= limit):
            found += joined(run, shared)
            run, rows = [], 0
        if limit:
            run.append(part)
            rows += part.rows
        else:
            found.append(part)
    return found + (joined(run, shared) if run else [])


def _rows_per_group(part) -> int:
    """How many rows of `Outer`s a group may join (0: `part` joins none)."""
    if not isinstance(part, Outer) or part.rows is None:
        return 0
    width = int(part.right.shape[-1]) + (part.depth if part.left is not None else 1)
    return max(part.rows, part.size // width)


def _alike(a, b) -> bool:
    return (a.depth, int(a.right.shape[-1]), a.left is None) == (
        b.depth, int(b.right.shape[-1]), b.left is None)


def _materialized(part, batch):
    """An `Outer`'s per-example gradient, `[batch, P, Q]`."""
    if part.left is not None:
        return tf.matmul(part.left, part.right, transpose_a=True)
    rows = tf.shape(part.indices)[1]
    example = tf.repeat(tf.range(batch), rows)
    ids = example * part.depth + tf.cast(tf.reshape(part.indices, [-1]), example.dtype)
    q = int(part.right.shape[-1])
    return tf.math.unsorted_segment_sum(tf.reshape(part.right, [-1, q]), ids,
                                        batch * part.depth)


def elements(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))
