"""Stacking one function of an index over a range: vectorized with pfor, in a while_loop,
or in chunks of at most `chunk_size` indices, with the fallbacks and warnings in one place.
"""

from __future__ import annotations

import contextlib
import logging
import re

from compat_grads import _cost, _memory, _value, dispatch
from compat_grads import _structure as st
from compat_grads._errors import (
    DerivativeError,
    VectorizationWarning,
    is_ours,
    last_line,
    message,
    warn,
)
from compat_grads._options import How
from compat_grads._python_ops import python_op
from compat_grads._tf import tf

# What pfor raises, while building, when it cannot convert an op or a gradient through it.
_VECTORIZATION_ERRORS = (ValueError, TypeError, NotImplementedError, LookupError,
                         tf.errors.InvalidArgumentError, tf.errors.UnimplementedError)


def stack(backend, fn, count, like, how: How, reusable: bool = True, rerun=None):
    """`[fn(i) for i in range(count)]` stacked on a new first axis, one stack per output.

    `fn` returns a flat list whose entries may be None (not connected); `like[k]` gives the
    shape and dtype of output k. Returns the stacks, with None kept where `fn` gave None.
    Vectorized with pfor unless `how.strategy` is "loop" (or pfor fails: then, with a
    warning, a while_loop); at most `how.chunk_size` indices at a time when it is set.
    `reusable` says whether `fn` can be traced again after a failed attempt.

    Some targets allow one derivative per run of their forward pass (a `tf.py_function`,
    a TF1 `tf.while_loop` inside another loop): `rerun`, when given, is `fn` computing the
    target again for its row, and the rows then run one after another with a warning;
    without it such a target is a `DerivativeError`.
    """
    if how.chunk_size == _memory.AUTO:  # a caller that did not decide it: the outputs counted
        how = _memory.fit(backend.function, how, [(count, 0, _memory.total(
            _memory.nbytes(ref, st.dtype_of(ref)) for ref in like))],
            _cost.intermediates(backend))
    # Rows that run the target themselves (an example each) need no check of its forward pass.
    reason = None if rerun is fn else backend.forward_per_row()
    if reason is None:
        try:
            return _stack(backend, fn, count, like, how, reusable)
        except _OncePerRun as found:
            reason = found.reason
    if rerun is None:
        raise _once_per_run_error(backend, reason)
    stacks = _stack_with(rerun, count, like, vectorize=False, chunk=None, one_by_one=True)
    warn(message(backend.function, reason, "Computed the rows one at a time in a while_loop "
                 "instead, running the target again for each: same values, slower."),
         VectorizationWarning)
    return stacks


def _once_per_run_error(backend, reason):
    """A target allowed one derivative per forward run, which cannot be run again: a tensor
    (pass the callable), or a first derivative (TensorFlow has no second one through it)."""
    return DerivativeError(message(
        backend.function, f"{reason}, but this derivative needs it once per row",
        "TensorFlow has no second derivative through it: differentiate once "
        "(stacked_jacobian, vjp), or compute the target without it (TensorFlow ops instead "
        "of Python code; an unrolled loop, such as a Keras RNN with unroll=True)"
        if backend.order > 1 else "Pass the target as a callable f(sources) (to "
        "stacked_jacobian, batch_jacobian or per_example_gradients): compat_grads then runs "
        "it again for each row."))


def _stack(backend, fn, count, like, how, reusable):
    chunk = how.chunk_size
    if not how.vectorize:
        return _loop(backend, fn, count, like, chunk, None)
    plan = _plan(backend, count, how)
    if not plan.vectorized:
        return _loop(backend, fn, count, like, chunk, None, plan.separate and reusable)
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
    return _loop(backend, fn, count, like, chunk, reason)


def _plan(backend, count, how) -> _cost.Plan:
    """The static rule's plan for "auto"; an explicit strategy vectorizes all at once."""
    if not how.planned:
        return _cost.Plan(True)
    return _cost.plan(count if isinstance(count, int) else None,
                      _cost.path_facts(backend.targets, backend.path_ops))


def _loop(backend, fn, count, like, chunk, vectorizing, separate=False):
    """The rows in a while_loop (or, `separate`, as separate passes, one per row, as the
    legacy Python loop built them); what TensorFlow cannot build there is a
    DerivativeError. `vectorizing` is why pfor was not used, when it was meant to be."""
    try:
        return _stack_with(fn, count, like, False, chunk, separate=separate)
    except _VECTORIZATION_ERRORS as err:
        if is_ours(err):
            raise
        tried = "" if vectorizing is None else f"neither vectorized ({vectorizing}) nor "
        raise DerivativeError(message(
            backend.function, f"TensorFlow could not compute this derivative, {tried}in a "
            f"while_loop ({type(err).__name__}: {last_line(err)})", "Try another "
            "strategy: 'reverse' works wherever tf.gradients does.")) from err


class _OncePerRun(Exception):
    """Raised while tracing a row that runs a tf.py_function's gradient, which pops the tape
    its forward run stashed: one gradient per forward run, however many rows run at once."""

    def __init__(self, found: str):
        super().__init__(f"the target runs Python code through tf.py_function ({found}), "
                         "whose gradient TensorFlow can take once per run of the forward "
                         "pass")
        self.reason = str(self)


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


def _stack_with(fn, count, like, vectorize: bool, chunk, one_by_one=False, separate=False):
    missing = []

    @tf.autograph.experimental.do_not_convert
    def body(i):
        graph = tf.compat.v1.get_default_graph()
        known = len(graph.get_operations())
        with _value.in_rows():  # the value of has_aux= / return_value= is not in here
            outs = fn(i)
        if not one_by_one:
            _refuse_python(graph.get_operations()[known:])
        # Connectivity is structural, so recording it while tracing the body is exact.
        missing[:] = [out is None for out in outs]
        return [tf.zeros(tf.shape(ref), st.dtype_of(ref)) if out is None else out
                for out, ref in zip(outs, like)]

    dtypes = [st.dtype_of(ref) for ref in like]

    def build():
        if one_by_one:
            return _one_by_one(body, count, like)
        if separate:  # as the legacy Python loop of tf.gradients: one pass per row
            return [tf.stack(rows) for rows in zip(*[body(tf.constant(i))
                                                      for i in range(count)])]
        if not vectorize:  # a while_loop with at most `chunk` iterations in flight
            with _caching_device_kept():
                return tf.map_fn(body, tf.range(count), fn_output_signature=dtypes,
                                 parallel_iterations=chunk)
        if chunk is None or (isinstance(count, int) and count <= chunk):
            return tf.vectorized_map(body, tf.range(count), warn=False)
        return _chunks(body, count, like, chunk)

    stacks = dispatch.as_graph(build)
    return [None if gone else stacked for stacked, gone in zip(stacks, missing)]


@contextlib.contextmanager
def _caching_device_kept():
    """tf.map_fn sets the variable scope's caching device while it builds, and leaves it
    set when the body raises (an error of ours, found while tracing a row): in eager code
    that scope is global, and tf.distribute (any variable scope) then fails."""
    scope = tf.compat.v1.get_variable_scope()
    device = scope.caching_device
    try:
        yield
    finally:
        scope.set_caching_device(device)


def _refuse_python(ops):
    """`_OncePerRun` when a row's new ops run a tf.py_function (its forward run, for rows
    that run the target, or its gradient). tf.numpy_function has no gradient, and pfor runs
    it in a loop of its own."""
    found = python_op(ops)
    if found is not None:
        raise _OncePerRun(found)


def _one_by_one(body, count, like):
    """`body(i)` for each i in a while_loop whose every row starts after the previous one
    has finished: a row that runs the target again then differentiates its own run."""
    rows = [tf.TensorArray(st.dtype_of(ref), size=count, element_shape=ref.shape)
            for ref in like]

    def step(i, *rows):
        with tf.control_dependencies([row.flow for row in rows]):
            outs = body(i)
        return (i + 1, *[row.write(i, out) for row, out in zip(rows, outs)])

    _, *rows = tf.while_loop(lambda i, *_: i < count, step, (0, *rows),
                             parallel_iterations=1)
    return [row.stack() for row in rows]


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
