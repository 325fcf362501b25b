"""Jacobians composed from a backend's two primitives, `vjp_fn` and `jvp_fn`.

Rows (reverse mode) are VJPs with one-hot cotangents; columns (forward mode) are JVPs with
one-hot tangents. Either is stacked over an index with `tf.vectorized_map` (pfor) or, for
the "loop" strategy, `tf.map_fn` over indices (a `while_loop`; each step gathers its own
row, so the graph does not grow with the number of rows).
"""

from __future__ import annotations

import logging
import re

from compat_grads import _structure as st
from compat_grads import dispatch
from compat_grads._errors import VectorizationWarning, message, warn
from compat_grads._tf import tf

# What pfor raises, while building, when it cannot convert an op or a gradient through it.
_VECTORIZATION_ERRORS = (ValueError, TypeError, NotImplementedError, LookupError,
                         tf.errors.InvalidArgumentError, tf.errors.UnimplementedError)


def _stack(backend, fn, count, like, vectorize: bool, reusable: bool = True):
    """`[fn(i) for i in range(count)]` stacked on a new first axis, one stack per output.

    `fn` returns a flat list whose entries may be None (not connected); `like[k]` gives the
    shape and dtype of output k. Returns the stacks, with None kept where `fn` gave None.
    Vectorized with pfor when asked and possible, else (with a warning) a while_loop;
    `reusable` says whether `fn` can be traced again after a failed attempt.
    """
    if not vectorize:
        return _stack_with(fn, count, like, vectorize=False)
    reason = backend.cannot_vectorize()
    if reason is None:
        try:
            with _PforLog() as log:
                return _stack_with(fn, count, like, vectorize=True)
        except _VECTORIZATION_ERRORS as err:
            reason = f"pfor failed{log.failed_op()} with {type(err).__name__}: {_last_line(err)}"
            if not reusable:
                raise RuntimeError(message(
                    backend.function, f"could not vectorize the Jacobian ({reason}), and "
                    "the non-persistent tape cannot be used again for a loop",
                    "Record with tf.GradientTape(persistent=True), or pass "
                    "strategy='loop'.")) from err
    warn(message(
        backend.function, f"could not vectorize the Jacobian: {reason}",
        "Computing it one row at a time in a while_loop instead: same values, slower. "
        "Pass strategy='loop' to skip the attempt."), VectorizationWarning)
    return _stack_with(fn, count, like, vectorize=False)


class _PforLog(logging.Filter):
    """Holds back pfor's own error log (whole NodeDefs) while we try to vectorize: when pfor
    fails, our warning names the op instead, and the loop takes over."""

    def __enter__(self):
        self.records = []
        tf.get_logger().addFilter(self)
        return self

    def __exit__(self, *exc):
        tf.get_logger().removeFilter(self)

    def filter(self, record):
        if "parallel_for" not in record.pathname or record.levelno < logging.ERROR:
            return True
        self.records.append(record.getMessage())
        return False

    def failed_op(self) -> str:
        """` on the <type> op '<name>'` from pfor's log, or "" when it named none."""
        for text in self.records:
            found = re.search(r'converting op name: "([^"]+)"\s+op: "([^"]+)"', text)
            if found:
                return f" on the {found.group(2)} op '{found.group(1)}'"
        return ""


def _last_line(err):
    """The informative line of a TensorFlow error (the last one, after the trace)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:300]


def _stack_with(fn, count, like, vectorize: bool):
    missing = []

    @tf.autograph.experimental.do_not_convert
    def body(i):
        outs = fn(i)
        # Connectivity is structural, so recording it while tracing the body is exact.
        missing[:] = [out is None for out in outs]
        return [tf.zeros(tf.shape(ref), st.dtype_of(ref)) if out is None else out
                for out, ref in zip(outs, like)]

    def build():
        indices = tf.range(count)
        if vectorize:
            return tf.vectorized_map(body, indices, warn=False)
        return tf.map_fn(body, indices, fn_output_signature=[st.dtype_of(ref) for ref in like])

    stacks = dispatch.as_graph(build)
    return [None if gone else stack for stack, gone in zip(stacks, missing)]


def _move_first_axis_last(x):
    rank = x.shape.rank
    return tf.transpose(x, list(range(1, rank)) + [0])


def _move_first_axis_after_batch(x):
    rank = x.shape.rank
    return tf.transpose(x, [1, 0] + list(range(2, rank)))


def _reverse(backend, flat, vectorize):
    target, pull = backend.target, backend.vjp_fn()
    dtype = st.dtype_of(target)
    return _stack(backend, lambda i: pull(st.one_hot_like(target, i, dtype, batched=False)),
                  st.size(target), flat, vectorize, backend.vjp_reusable)


def _forward(backend, flat, vectorize):
    target, push = backend.target, backend.jvp_fn()
    blocks = []
    for k, x in enumerate(flat):
        def column(j, k=k, x=x):
            return [push(_only(k, st.one_hot_like(x, j, st.dtype_of(x), False), len(flat)))]
        (cols,) = _stack(backend, column, st.size(x), [target], vectorize)
        blocks.append(None if cols is None
                      else tf.cast(_move_first_axis_last(cols), st.dtype_of(x)))
    return blocks


def choose_strategy(strategy, target_size, source_size):
    """'auto' picks forward when the sources are smaller than the target, else reverse."""
    if strategy != "auto":
        return strategy
    if isinstance(target_size, int) and isinstance(source_size, int):
        return "forward" if source_size < target_size else "reverse"
    return "reverse"


def jacobian_blocks(backend, flat, strategy, unconnected):
    """One block `y.shape + x_k.shape` per source (None or zeros where unconnected)."""
    target = backend.target
    strategy = choose_strategy(strategy, st.size(target), _total(st.size(x) for x in flat))
    compute = _forward if strategy == "forward" else _reverse
    raw = compute(backend, flat, vectorize=strategy != "loop")
    return [_finish(block, target.shape.concatenate(x.shape),
                    tf.concat([tf.shape(target), tf.shape(x)], 0), st.dtype_of(x), unconnected)
            for block, x in zip(raw, flat)]


def batch_jacobian_block(backend, source, strategy, unconnected):
    """`[b] + y.shape[1:] + x.shape[1:]`: per-sample Jacobians, samples assumed independent."""
    target = backend.target
    strategy = choose_strategy(strategy, st.per_sample_size(target), st.per_sample_size(source))
    vectorize = strategy != "loop"
    if strategy == "forward":
        push = backend.jvp_fn()
        (raw,) = _stack(
            backend,
            lambda j: [push([st.one_hot_like(source, j, st.dtype_of(source), batched=True)])],
            st.per_sample_size(source), [target], vectorize)
        raw = None if raw is None else tf.cast(_move_first_axis_last(raw), st.dtype_of(source))
    else:
        pull = backend.vjp_fn()
        (raw,) = _stack(
            backend,
            lambda i: pull(st.one_hot_like(target, i, st.dtype_of(target), batched=True)),
            st.per_sample_size(target), [source], vectorize, backend.vjp_reusable)
        raw = None if raw is None else _move_first_axis_after_batch(raw)
    static = target.shape.concatenate(source.shape[1:])
    shape = tf.concat([tf.shape(target), tf.shape(source)[1:]], 0)
    return _finish(raw, static, shape, st.dtype_of(source), unconnected)


def per_element(backend, flat, unconnected):
    """One target-shaped J_k·1 per source: one forward-mode product each."""
    push = backend.jvp_fn()
    results = []
    for k, x in enumerate(flat):
        out = push(_only(k, tf.ones_like(x), len(flat)))
        if out is None and unconnected == "zero":
            out = tf.zeros_like(backend.target)
        results.append(None if out is None else tf.cast(out, st.dtype_of(x)))
    return results


def _only(k, value, count):
    """Tangents that are `value` for source k and zero (None) for every other source."""
    return [value if j == k else None for j in range(count)]


def _finish(block, static_shape, shape, dtype, unconnected):
    if block is None:
        return st.zeros(static_shape, shape, dtype) if unconnected == "zero" else None
    return st.reshape(block, shape, static_shape)


def _total(sizes):
    total = 0
    for n in sizes:
        if not isinstance(n, int):
            return None
        total += n
    return total
