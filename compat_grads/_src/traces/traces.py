"""Hessian diagonals, Laplacians and divergences, composed from a backend's primitives.

Exact values never build the Hessian (or the Jacobian) they are the diagonal of:

- in a graph, the forward Laplacian (`compat_grads._src.traces.forward_laplacian`) pushes each
  tensor's first and second derivatives along the n one-hot directions through the target's
  ops in one pass, where every op on the path has a rule;
- otherwise (eager code, an op without a rule: then with a `VectorizationWarning`) it takes
  n forward-over-reverse products against one-hot tangents, each reduced to its one diagonal
  element inside the row, vectorized and chunked by `compat_grads._src.stacking.stack`.

Estimates are Hutchinson's: the mean of vᵀHv (v ⊙ Hv for a diagonal, vᵀJv for a divergence)
over Rademacher probes v drawn by a stateless generator from the seed, so every route draws
the same probes and gives the same estimate.
"""

from __future__ import annotations

import dataclasses
import math

from compat_grads._src import memory as _memory
from compat_grads._src.core import graph_walk as _graph_walk
from compat_grads._src.core import structure as st
from compat_grads._src.core.errors import VectorizationWarning, message, warn
from compat_grads._src.core.tf import tf
from compat_grads._src.jacobians import jacobians as _jacobians
from compat_grads._src.stacking import cost as _cost
from compat_grads._src.stacking.stack import stack
from compat_grads._src.traces import chunks as _chunks
from compat_grads._src.traces import forward_laplacian as _forward_laplacian

# -- exact -----------------------------------------------------------------------------------


def diagonals(backend, flat, how, batched=False, summed=False, propagate=True):
    """Per source, the Hessian diagonal of the scalar target (`x.shape`), or of each sample's
    scalar (`batched`: `[b] + x.shape[1:]`); with `summed`, its sum (a scalar, or `[b]`).
    None where the source does not reach the gradient. `propagate`: the forward Laplacian
    may be tried."""
    if how.strategy == "auto" and all(
            (x.shape[1:] if batched else x.shape).num_elements() == 1 for x in flat):
        return _one_direction(backend, flat, batched, summed)
    walk = _walk_how(backend, flat, how, batched, looped=True) if propagate else None
    fast = None if walk is None else _propagated(backend, flat, batched, summed,
                                                 walk.chunk_size)
    if fast is not None:
        return fast
    gradient = backend.vjp_backend(lambda targets: [st.ones_of(targets[0])])
    return _jacobians.second_order(backend, how, lambda outer: [
        _diagonal_of(gradient, flat, k, outer, batched, summed) for k in range(len(flat))])


def _one_direction(backend, flat, batched, summed):
    """Sources of one element (per sample, when batched): each diagonal is the derivative
    of the gradient, the nested `tf.gradients` (or nested tapes) a user writes, op for op
    (a walk or a row would only add ops around it)."""
    gradient = backend.vjp_backend(lambda targets: [st.ONES])
    pull, found = gradient.vjp_fn(), []
    for k, x in enumerate(flat):
        second = pull([st.ONES if i == k else None
                       for i, t in enumerate(gradient.targets)])[k]
        if second is not None:
            second = tf.cast(second, st.dtype_of(x))
            if summed:
                second = tf.reshape(second, tf.shape(second)[:1] if batched else [])
        found.append(second)
    return found


def _diagonal_of(gradient, flat, k, how, batched, summed):
    """Source k's diagonal: row j is element j of the product of the gradient's derivative
    with the one-hot direction j (a column of H_kk forward, a row backward)."""
    x = flat[k]
    forward = how.strategy == "forward"
    product_of = _products(gradient, forward)

    def row(j):
        unit = st.only(k, st.one_hot_like(x, j, st.dtype_of(x), batched), len(flat))
        product = product_of(unit)[k]
        return [None if product is None else _element(product, j, batched)]

    count = st.per_sample_size(x) if batched else st.size(x)
    rows = _element_rows(gradient, row, count, x, how, forward, batched)
    if rows is None:
        return None
    diagonal = tf.transpose(rows) if batched else rows  # [n] or [n, b] -> [b, n]
    return _shaped(tf.cast(diagonal, st.dtype_of(x)), x, batched, summed)


def _element_rows(backend, row, count, x, how, forward, batched):
    """`count` rows `row(j)` of one element each (one per sample when batched), stacked
    (`[count]`, or `[count, b]`) after `max_bytes` is checked for their directions, each
    shaped like x; None when no row reaches the source."""
    like = _element(x, 0, batched)
    how = _memory.fit(backend.function, how, [(count, _memory.nbytes(x), _memory.nbytes(like))],
                      _cost.intermediates(backend))
    (rows,) = stack(backend, row, count, [like], how, forward or backend.vjp_reusable)
    return rows


def _products(backend, forward):
    """The backend's products with directions (J·v forward, vᵀJ backward), set up here,
    outside the rows: a tape records its target once, where the call is built."""
    return backend.jvp_fn() if forward else backend.vjp_fn()


def _square_products(backend, forward):
    """`_products` of a square Jacobian with one direction shaped like the source (a
    cotangent in the target's dtype)."""
    product_of = _products(backend, forward)
    if forward:
        return lambda v: product_of([v])
    return lambda v: product_of([tf.cast(v, st.dtype_of(backend.target))])


def _element(product, j, batched):
    """Element j of each sample of `product` (shaped like its source), or of the whole."""
    if batched:
        return tf.gather(tf.reshape(product, [tf.shape(product)[0], -1]), j, axis=1)
    return tf.gather(tf.reshape(product, [-1]), j)


def _shaped(diagonal, x, batched, summed):
    """`[n]` (or `[b, n]`) diagonal elements as the result: shaped like x, or summed."""
    if summed:
        return tf.reduce_sum(diagonal, axis=-1)
    return st.reshape(diagonal, tf.shape(x), x.shape)


def _walk_how(backend, flat, how, batched, looped=False):
    """`how` with the chunk of directions the forward Laplacian walks at once, or None when
    it is not the "auto" choice: an explicit strategy asks for the products (their
    direction, "loop" for the least memory); directions that do not fit `max_bytes` or the
    memory budget even one at a time take the products too (whose own check says how to
    chunk them), as does a chunk that needs more than `WALKS` walks unless the walk is
    `looped` (built once, in a loop over the chunks): each walk is a copy of the target's
    ops, so more chunks take the products' loop."""
    if how.strategy != "auto":
        return None
    auto, sizes = how.chunk_size == _memory.AUTO, [
        st.per_sample_size(x) if batched else st.size(x) for x in flat]
    with _memory.recording(isolated=True) as plans:  # shown only when the walk is taken
        try:  # n directions, each carrying a tangent like each tensor on the path (and S)
            how = _memory.fit(backend.function, how, [(n, 0, _memory.nbytes(x))
                                                      for n, x in zip(sizes, flat)],
                              2 * (_cost.intermediates(backend) or 0))
        except ValueError:
            return None
    if not backend.walkable() or not looped and how.chunk_size is not None and any(
            isinstance(n, int) and -(-n // how.chunk_size) > _chunks.WALKS
            for n in sizes):  # the products loop instead
        return None
    if looped and auto:
        how, plans = _within_the_walks_default(backend, how, batched, plans)
    _memory.replay(plans)
    return how


def _within_the_walks_default(backend, how, batched, plans):
    """`how` and its `plans` with the budget's chunk bounded by the loop's own default
    (`chunks.default_chunk`): the budget's model holds the products' rows, and
    more directions at once than the default only slowed the walk down (b=512, d=1000: the
    budget's 500 took 259 MB against 19 MB). The plans say what the walk runs, so that a
    retry after running out of memory halves that."""
    defaults = [_chunks.default_chunk(backend.target, x, batched)
                for x in backend.differentiated()]
    bound = min((c for c in defaults if c is not None), default=None)
    if bound is None or how.chunk_size is not None and how.chunk_size <= bound:
        return how, plans
    plans = [dataclasses.replace(p, chunk_size=min(bound, p.rows),
                                 pieces=-(-p.rows // min(bound, p.rows))) for p in plans]
    return dataclasses.replace(how, chunk_size=bound), plans


def _propagated(backend, flat, batched, summed, chunk=None):
    """The forward Laplacian's diagonals (or sums), or None where it does not apply: eager
    tensors have no graph to walk; an op without a rule warns and takes the products."""
    target = backend.target
    if not backend.walkable():
        return None
    try:
        found = [_forward_laplacian.propagate(target, x, batched=batched, summed=summed,
                                              chunk=chunk) for x in backend.differentiated()]
    except _forward_laplacian.Unsupported as err:
        warn(message(backend.function, f"the forward Laplacian has no rule for {err.reason}",
                     "Computed with forward-over-reverse products instead: same values, "
                     "slower."), VectorizationWarning)
        return None
    return [None if s is None else _from_propagated(s, target, x, batched, summed)
            for s, x in zip(found, flat)]


def _from_propagated(second, target, x, batched, summed):
    """`propagate`'s result (`y.shape`, or `[n] + y.shape`) as `_shaped`'s."""
    dtype = st.dtype_of(x)
    if summed:
        shape = tf.shape(target)[:1] if batched else []
        return tf.cast(tf.reshape(second, shape), dtype)
    n = st.per_sample_size(x) if batched else st.size(x)
    columns = tf.reshape(second, [n, -1])  # [n, b] (batched) or [n, 1]
    return _shaped(tf.cast(tf.transpose(columns) if batched else columns[:, 0], dtype), x,
                   batched, False)


def coupled_diagonal(backend, x, how):
    """`[b] + x.shape[1:]`: d² y[s] / d x[s, j]², from the derivative of each sample's own
    gradient (row p = s·n + j: the gradient of y[s], built in the row, then its product
    with the one-hot at flat element p). Exact when samples interact, at b·n products, and
    one loop, never a loop inside a loop (as `_jacobians` builds a non-scalar Hessian)."""
    target, n = backend.target, st.per_sample_size(x)
    forward = how.strategy == "forward"

    def row(p):
        gradient = backend.vjp_backend(lambda targets: [
            st.one_hot_like(targets[0], p // n, st.dtype_of(targets[0]), False)])
        unit = [st.one_hot_like(x, p, st.dtype_of(x), False)]
        (product,) = gradient.jvp_fn()(unit) if forward else gradient.vjp_fn()(unit)
        return [None if product is None else _element(product, p, False)]

    rows = _element_rows(backend, row, st.size(target) * n, x, how, forward, False)
    if rows is None:
        return None
    return st.reshape(tf.cast(rows, st.dtype_of(x)), tf.shape(x), x.shape)


def traces_of_jacobian(backend, source, how, batched=False):
    """The trace of the square Jacobian of the target (`y.shape == x.shape`): a scalar, or
    one per sample (`[b]`): in a graph, from the first-order forward walk where every op
    has a rule (n directions, or `chunk_size` at a time); otherwise row j is element j of
    the product with the one-hot j."""
    walk = _walk_how(backend, [source], how, batched)
    if walk is not None and backend.walkable():
        try:  # an op without a rule: the products, as fast there (no warning)
            return _trace_of_tangents(backend, source, batched, walk.chunk_size)
        except _forward_laplacian.Unsupported:
            pass
    how = how.using(_jacobians.choose_strategy(how.strategy, 1, 1,
                                               backend.forward_per_row() is None))
    forward = how.strategy == "forward"
    product_of = _square_products(backend, forward)

    def row(j):
        (product,) = product_of(st.one_hot_like(source, j, st.dtype_of(source), batched))
        return [None if product is None else _element(product, j, batched)]

    count = st.per_sample_size(source) if batched else st.size(source)
    rows = _element_rows(backend, row, count, source, how, forward, batched)
    if rows is None:
        return None
    return tf.cast(tf.reduce_sum(rows, axis=0), st.dtype_of(source))


def _trace_of_tangents(backend, source, batched, chunk):
    """The trace from the first-order forward walk (`[n] + y.shape` tangents along the
    one-hot directions, y shaped like the source), per sample (`[b]`) when batched; the
    directions in chunks, each chunk's share of the diagonal summed."""
    (x,) = backend.differentiated()
    target, dtype = backend.target, st.dtype_of(source)
    last = _last_product(target, x) if batched else None
    if last is not None:  # y = a @ w (+ constants): Σ_j Σ_k J_a[j, k] w[k, j] per sample
        a, w, transposed = last
        wt = tf.transpose(w) if not transposed else w  # [n, k]

        def share(J, lo, hi):
            return tf.reduce_sum(tf.linalg.matvec(J, tf.cast(wt[lo:hi], J.dtype)), 0)
        trace = _forward_laplacian.reduced_tangents(a, x, batched=True, reduce=share,
                                                     chunk=chunk)
        return None if trace is None else tf.cast(
            tf.broadcast_to(trace, tf.shape(target)[:1]), dtype)

    def share(J, lo, hi):  # the chunk's columns lo..hi of its [hi - lo] rows
        if not batched:
            return tf.linalg.trace(tf.reshape(J, [tf.shape(J)[0], -1])[:, lo:hi])
        square = tf.reshape(J, [tf.shape(J)[0], tf.shape(J)[1], -1])[:, :, lo:hi]
        return tf.linalg.trace(tf.transpose(square, [1, 0, 2]))
    trace = _forward_laplacian.reduced_tangents(target, x, batched=batched, reduce=share,
                                                 chunk=chunk)
    return None if trace is None else tf.cast(trace, dtype)


_ADDS = frozenset({"Identity", "BiasAdd", "Add", "AddV2"})


def _last_product(target, source):
    """(a, w, transpose_b) when the target is `a @ w` of a rank-2 `a` and a `w` the source
    does not reach, then only identities and adds of such constants (a dense layer without
    its activation): the trace needs the product's diagonal only, not the [n, b, n]
    tangents of the target."""
    def reaches(t):
        return t is source or bool(_graph_walk.between([t], [source]))
    t = target
    while t.op.type in _ADDS:
        carried = [u for u in t.op.inputs if reaches(u)]
        if len(carried) != 1 or carried[0].shape != t.shape or not t.shape.is_fully_defined():
            return None
        t = carried[0]
    op = t.op
    if op.type != "MatMul" or op.get_attr("transpose_a") or op.inputs[0].shape.rank != 2:
        return None
    a, w = op.inputs
    return None if reaches(w) or not reaches(a) else (a, w, op.get_attr("transpose_b"))


# -- Hutchinson -----------------------------------------------------------------------------


def probes(x, estimator, k, batched):
    """`[num_samples] + x.shape` Rademacher (±1) probes for source k, from the stateless
    seed (an int, or the int64 tensor a compiled call passes it as): the same on every
    route, in every mode."""
    shape = tf.concat([[estimator.probes], tf.shape(x)], 0)
    seed = tf.stack([tf.cast(estimator.seed, tf.int64), tf.constant(k, tf.int64)])
    bits = tf.random.stateless_uniform(shape, seed, minval=0, maxval=2, dtype=tf.int32)
    out = tf.cast(2 * bits - 1, st.dtype_of(x))
    out.set_shape(tf.TensorShape([estimator.probes]).concatenate(x.shape))
    return out


def estimated_diagonals(backend, flat, how, estimator, batched=False, summed=False):
    """Hutchinson's estimates of `diagonals`: the mean of v ⊙ Hv (summed over each sample's
    elements, and over the sources, for a Laplacian), as (estimates, standard errors)."""
    gradient = backend.vjp_backend(lambda targets: [st.ones_of(targets[0])])
    vs = [probes(x, estimator, k, batched) for k, x in enumerate(flat)]

    def compute(outer):
        forward = outer.strategy == "forward"
        product_of = _products(gradient, forward)

        def row(i):
            v = [p[i] for p in vs]
            products = product_of(v)
            terms = [None if hv is None else tf.cast(hv, st.dtype_of(x)) * vi
                     for hv, vi, x in zip(products, v, flat)]
            return [_summed_terms(terms, flat, batched)] if summed else terms
        like = [_summed_terms(flat, flat, batched)] if summed else flat
        return stack(gradient, row, estimator.probes, like, outer,
                     forward or gradient.vjp_reusable)

    samples = _jacobians.second_order(backend, how, compute)
    return [_mean_and_error(s, estimator) for s in samples]


def estimated_trace_of_jacobian(backend, source, how, estimator, batched=False):
    """Hutchinson's estimate of `traces_of_jacobian`: the mean of vᵀJv."""
    how = how.using(_jacobians.choose_strategy(how.strategy, 1, 1,
                                               backend.forward_per_row() is None))
    forward = how.strategy == "forward"
    (vs,) = [probes(source, estimator, 0, batched)]
    product_of = _square_products(backend, forward)

    def row(i):
        v = vs[i]
        (product,) = product_of(v)
        return [None if product is None else _summed_terms(
            [tf.cast(product, st.dtype_of(source)) * v], [source], batched)]

    (samples,) = stack(backend, row, estimator.probes,
                       [_summed_terms([source], [source], batched)], how,
                       forward or backend.vjp_reusable)
    return _mean_and_error(samples, estimator)


def _summed_terms(terms, flat, batched):
    """Σ over the sources of each term's elements (each sample's, when `batched`); None when
    every term is None."""
    kept = [t for t in terms if t is not None]
    if not kept:
        return None
    dtype = st.dtype_of(flat[0])
    if batched:
        return tf.add_n([tf.reduce_sum(tf.reshape(t, [tf.shape(t)[0], -1]), 1) for t in kept])
    return tf.add_n([tf.cast(tf.reduce_sum(t), dtype) for t in kept])


def _mean_and_error(samples, estimator):
    """(the mean over the probe axis, its standard error: the sample standard deviation over
    √num_samples), or (None, None)."""
    if samples is None:
        return None, None
    count = estimator.probes
    mean = tf.reduce_mean(samples, axis=0)
    if count < 2:
        return mean, None
    spread = tf.reduce_sum(tf.square(samples - mean), axis=0) / (count - 1)
    return mean, tf.sqrt(spread) / math.sqrt(count)
