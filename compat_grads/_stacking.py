"""Stacking one function of an index over a range: vectorized with pfor, in a while_loop,
or in chunks of at most `chunk_size` indices, with the fallbacks and warnings in one place.
"""

from __future__ import annotations

import logging
import re

from compat_grads import _structure as st
from compat_grads import dispatch
from compat_grads._errors import DerivativeError, VectorizationWarning, is_ours, message, warn
from compat_grads._options import How
from compat_grads._tf import tf

# What pfor raises, while building, when it cannot convert an op or a gradient through it.
_VECTORIZATION_ERRORS = (ValueError, TypeError, NotImplementedError, LookupError,
                         tf.errors.InvalidArgumentError, tf.errors.UnimplementedError)


def stack(backend, fn, count, like, how: How, reusable: bool = True):
    """`[fn(i) for i in range(count)]` stacked on a new first axis, one stack per output.

    `fn` returns a flat list whose entries may be None (not connected); `like[k]` gives the
    shape and dtype of output k. Returns the stacks, with None kept where `fn` gave None.
    Vectorized with pfor unless `how.strategy` is "loop" (or pfor fails: then, with a
    warning, a while_loop); at most `how.chunk_size` indices at a time when it is set.
    `reusable` says whether `fn` can be traced again after a failed attempt.
    """
    chunk = how.chunk_size
    if not how.vectorize:
        return _stack_with(fn, count, like, False, chunk)
    reason = backend.cannot_vectorize()
    if reason is None:
        try:
            with _PforLog() as log:
                return _stack_with(fn, count, like, True, chunk)
        except _VECTORIZATION_ERRORS as err:
            if is_ours(err):  # bad input found while tracing the rows: a loop cannot help
                raise
            reason = f"pfor failed{log.failed_op()} with {type(err).__name__}: {last_line(err)}"
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
    try:
        return _stack_with(fn, count, like, False, chunk)
    except _VECTORIZATION_ERRORS as err:
        if is_ours(err):
            raise
        raise DerivativeError(message(
            backend.function, f"TensorFlow could not compute this derivative, neither "
            f"vectorized ({reason}) nor in a while_loop ({type(err).__name__}: "
            f"{last_line(err)})", "Try another strategy: 'reverse' works wherever "
            "tf.gradients does. In a TF1 graph, a target computed by a tf.while_loop (a "
            "Keras RNN layer: pass unroll=True) cannot be differentiated inside another "
            "loop.")) from err


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


def last_line(err):
    """The informative line of a TensorFlow error (the last one, after the trace)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:300]


def _stack_with(fn, count, like, vectorize: bool, chunk):
    missing = []

    @tf.autograph.experimental.do_not_convert
    def body(i):
        outs = fn(i)
        # Connectivity is structural, so recording it while tracing the body is exact.
        missing[:] = [out is None for out in outs]
        return [tf.zeros(tf.shape(ref), st.dtype_of(ref)) if out is None else out
                for out, ref in zip(outs, like)]

    dtypes = [st.dtype_of(ref) for ref in like]

    def build():
        if not vectorize:  # a while_loop with at most `chunk` iterations in flight
            return tf.map_fn(body, tf.range(count), fn_output_signature=dtypes,
                             parallel_iterations=chunk)
        if chunk is None or (isinstance(count, int) and count <= chunk):
            return tf.vectorized_map(body, tf.range(count), warn=False)
        return _chunks(body, count, like, chunk)

    stacks = dispatch.as_graph(build)
    return [None if gone else stacked for stacked, gone in zip(stacks, missing)]


def _chunks(body, count, like, chunk):
    """pfor over `chunk` indices at a time, one chunk after another in a while_loop.

    Each chunk's rows are written in place into one preallocated buffer per output, so the
    peak memory is the result plus one chunk (a TensorArray would hold every chunk and then
    a concatenated copy: twice the result). The buffers are TensorFlow's aliasing
    `Empty` / `InplaceUpdate`, which have no gradient: a chunked result is an end product.
    """
    chunks = (count + chunk - 1) // chunk
    buffers = [tf.raw_ops.Empty(shape=tf.concat([[count], tf.shape(ref)], 0),
                                dtype=st.dtype_of(ref)) for ref in like]

    def step(c, *buffers):
        indices = tf.range(c * chunk, tf.minimum((c + 1) * chunk, count))
        rows = tf.vectorized_map(body, indices, warn=False)
        return (c + 1, *[tf.raw_ops.InplaceUpdate(x=b, i=indices, v=r)
                         for b, r in zip(buffers, rows)])

    _, *buffers = tf.while_loop(lambda c, *_: c < chunks, step, (0, *buffers),
                                parallel_iterations=1)
    for buffer, ref in zip(buffers, like):
        buffer.set_shape(tf.TensorShape([None]).concatenate(ref.shape))
    return buffers
