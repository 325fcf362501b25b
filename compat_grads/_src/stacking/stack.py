"""Stacking one function of an index over a range: vectorized with pfor, in a while_loop,
or in chunks of at most `chunk_size` indices, with the fallbacks and warnings in one place.
"""

from __future__ import annotations

import contextlib
import logging
import re

from compat_grads._src import memory as _memory
from compat_grads._src.core import mode as _mode
from compat_grads._src.core import structure as st
from compat_grads._src.core.errors import (
    DerivativeError,
    VectorizationWarning,
    is_ours,
    last_line,
    message,
    warn,
)
from compat_grads._src.core.how import How
from compat_grads._src.core.python_ops import differentiated_loop, python_op
from compat_grads._src.core.tf import tf
from compat_grads._src.stacking import cost as _cost
from compat_grads._src.stacking import pfor_converters as _pfor_converters
from compat_grads._src.stacking import row_calls as _row_calls

# What pfor raises, while building, when it cannot convert an op or a gradient through it.
_VECTORIZATION_ERRORS = (ValueError, TypeError, NotImplementedError, LookupError,
                         tf.errors.InvalidArgumentError, tf.errors.UnimplementedError)


def stack(backend, fn, count, like, how: How, reusable: bool = True, rerun=None, at=0):
    """`[fn(i) for i in range(count)]` stacked on a new axis, one stack per output.

    `at` is where that index axis goes: 0 (first), 1 (after a batch axis) or -1 (last).
    Chunks are written straight into that layout; the other routes stack on a first axis
    and move it (a whole copy, beside a peak that is already the result and its rows).

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
            return _stack(backend, fn, count, like, how, reusable, at)
        except _OncePerRun as found:
            reason = found.reason
    if rerun is None:
        raise _once_per_run_error(backend, reason)
    stacks = _stack_with(rerun, count, like, False, None, at, one_by_one=True)
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


def _stack(backend, fn, count, like, how, reusable, at):
    chunk = how.chunk_size
    if not how.vectorize:
        return _loop(backend, fn, count, like, chunk, at, None)
    plan = _plan(backend, count, how)
    if not plan.vectorized:
        return _loop(backend, fn, count, like, chunk, at, None, plan.separate and reusable)
    reason = backend.cannot_vectorize()
    if reason is None:
        try:
            with _PforLog() as log:
                return _stack_with(fn, count, like, True, chunk, at)
        except _LoopInRow as found:  # known before pfor converts anything
            reason = found.reason
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
    return _loop(backend, fn, count, like, chunk, at, reason)


def _plan(backend, count, how) -> _cost.Plan:
    """The static rule's plan for "auto"; an explicit strategy vectorizes all at once."""
    if not how.planned:
        return _cost.Plan(True)
    return _cost.plan(count if isinstance(count, int) else None,
                      _cost.path_facts(backend.targets, backend.path_ops),
                      xla=_mode.compiles_with_xla(),
                      through_gradient=backend.order > 1)


def _loop(backend, fn, count, like, chunk, at, vectorizing, separate=False):
    """The rows in a while_loop (or, `separate`, as separate passes, one per row, as the
    legacy Python loop built them); what TensorFlow cannot build there is a
    DerivativeError. `vectorizing` is why pfor was not used, when it was meant to be."""
    try:
        return _stack_with(fn, count, like, False, chunk, at, separate=separate)
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


class _LoopInRow(Exception):
    """Raised while tracing a row that runs a loop and differentiates it (per-example
    gradients through an LSTM or GRU layer, a `tf.while_loop`): pfor would convert the
    forward loop and then fail on its gradient, so the rows go to the while_loop at once."""

    def __init__(self, found: str):
        super().__init__(f"each row differentiates a loop it runs ({found}), and pfor "
                         "cannot vectorize the gradient of a loop")
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


def _stack_with(fn, count, like, vectorize: bool, chunk, at, one_by_one=False,
                separate=False):
    missing = []

    @tf.autograph.experimental.do_not_convert
    def body(i):
        graph = tf.compat.v1.get_default_graph()
        known = len(graph.get_operations())
        with _row_calls.in_rows():  # the value of has_aux= / return_value= is not in here
            outs = fn(i)
        if not one_by_one:
            ops = graph.get_operations()[known:]
            _refuse_python(ops)
            if vectorize:  # pfor converts them once the row is built
                _refuse_differentiated_loops(ops)
                _pfor_converters.attach(ops)
        # Connectivity is structural, so recording it while tracing the body is exact.
        missing[:] = [out is None for out in outs]
        return [tf.zeros(tf.shape(ref), st.dtype_of(ref)) if out is None else out
                for out, ref in zip(outs, like)]

    dtypes = [st.dtype_of(ref) for ref in like]
    in_xla = _mode.compiles_with_xla()

    def build():
        if vectorize and chunk is not None and not (isinstance(count, int) and count <= chunk):
            chunked = _equal_chunks if in_xla and isinstance(count, int) else _chunks
            return chunked(body, count, like, chunk, at)  # already laid out
        return [_moved(stacked, at) for stacked in stacked_first()]

    def stacked_first():
        if one_by_one:
            return _one_by_one(body, count, like)
        if separate:  # as the legacy Python loop of tf.gradients: one pass per row
            return [tf.stack(rows) for rows in zip(*[body(tf.constant(i))
                                                      for i in range(count)])]
        if not vectorize:  # a while_loop with at most `chunk` iterations in flight
            with _caching_device_kept():
                return tf.map_fn(body, tf.range(count), fn_output_signature=dtypes,
                                 parallel_iterations=chunk)
        return tf.vectorized_map(body, tf.range(count), warn=False)

    stacks = _mode.as_graph(build)
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


def _refuse_differentiated_loops(ops):
    """`_LoopInRow` when a row's new ops run a loop and its gradient (see
    `compat_grads._src.core.python_ops.differentiated_loop`)."""
    found = differentiated_loop(ops)
    if found is not None:
        raise _LoopInRow(found)


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


def _chunks(body, count, like, chunk, at):
    """pfor over `chunk` indices at a time, one chunk after another in a while_loop.

    Each chunk is written in place into one preallocated buffer per output, already in the
    final layout (the index axis at `at`), so the peak memory is the result plus one chunk.
    A TensorArray would hold every chunk and then a concatenated copy, and stacking first
    then moving the index axis (forward mode's columns go last) a transposed copy: twice
    the result either way. A chunk is transposed at its own size instead, then written as a
    slice of the buffer [before, count, after] (`_blocks`), which reshapes to the result
    for free. The buffer is TensorFlow's uninitialized `Empty`; TensorStridedSliceUpdate
    reuses its input's memory when nothing else holds it (the loop is its one consumer).
    The gradient flows through the slice updates into each chunk's rows (the buffer itself,
    uninitialized, gets none): a chunked result trains like one computed all at once.
    """
    chunks = (count + chunk - 1) // chunk
    blocks = [_blocks(ref, count, at) for ref in like]
    buffers = [tf.raw_ops.Empty(shape=tf.stack([before, count, after]),
                                dtype=st.dtype_of(ref))
               for (before, after), ref in zip(blocks, like)]

    def step(c, *buffers):
        start = c * chunk
        rows = tf.vectorized_map(body, tf.range(start, tf.minimum(start + chunk, count)),
                                 warn=False)
        return (c + 1, *[_written(b, r, start, block)
                         for b, r, block in zip(buffers, rows, blocks)])

    _, *buffers = tf.while_loop(lambda c, *_: c < chunks, step, (0, *buffers),
                                parallel_iterations=1)
    return [_laid_out(b, ref, count, at) for b, ref in zip(buffers, like)]


def _equal_chunks(body, count, like, chunk, at):
    """`_chunks` for a graph XLA compiles, whose shapes must all be known while compiling:
    every chunk is `chunk` rows wide (the last one repeats the last row where it runs past
    `count`), scattered into one buffer per output, rows first, of every chunk's rows; the
    rows past `count` are cut off at the end, and the rows' axis moved to `at` (XLA lays
    both out in its own buffers)."""
    chunks = -(-count // chunk)
    blocks = [_blocks(ref, count, at) for ref in like]
    buffers = [tf.zeros([chunks * chunk, before, after], st.dtype_of(ref))
               for (before, after), ref in zip(blocks, like)]

    def step(c, *buffers):
        at_rows = c * chunk + tf.range(chunk)
        rows = tf.vectorized_map(body, tf.minimum(at_rows, count - 1), warn=False)
        return (c + 1, *[tf.tensor_scatter_nd_update(b, at_rows[:, None], tf.reshape(
            r, [chunk, before, after])) for b, r, (before, after) in zip(buffers, rows, blocks)])

    _, *buffers = tf.while_loop(lambda c, *_: c < chunks, step, (0, *buffers),
                                parallel_iterations=1)
    return [_laid_out(tf.transpose(b[:count], [1, 0, 2]), ref, count, at)
            for b, ref in zip(buffers, like)]


def _blocks(ref, count, at):
    """(before, after): the elements of one row shaped like `ref` that come before and after
    the index axis at `at`, Python ints when static."""
    if at == 0:
        return 1, st.size(ref)
    if at == -1:
        return st.size(ref), 1
    static = ref.shape[:at].num_elements(), ref.shape[at:].num_elements()
    shape = tf.shape(ref)
    return (tf.reduce_prod(shape[:at]) if static[0] is None else static[0],
            tf.reduce_prod(shape[at:]) if static[1] is None else static[1])


def _written(buffer, rows, start, block):
    """`rows` ([width] + a row's shape) written at indices `start`, `start + width`, ... of
    the buffer [before, count, after]: a transpose of one chunk, then a slice update."""
    before, after = block
    width = tf.shape(rows)[0]
    chunk = tf.transpose(tf.reshape(rows, tf.stack([width, before, after])), [1, 0, 2])
    return written_at(buffer, [0, start, 0], chunk)


def written_at(buffer, begin, value):
    """`buffer` with `value` written over its slice from `begin` (one index per axis), in
    place when nothing else holds the buffer (TensorStridedSliceUpdate reuses its input's
    memory then)."""
    begin = tf.stack(begin)
    return tf.raw_ops.TensorStridedSliceUpdate(
        input=buffer, begin=begin, end=begin + tf.shape(value, out_type=begin.dtype),
        strides=tf.ones_like(begin), value=value)


def _laid_out(buffer, ref, count, at):
    """The buffer [before, count, after] as `ref`'s shape with `count` inserted at `at`: a
    reshape, which shares the buffer's memory."""
    static, shape = ref.shape, tf.shape(ref)
    counted = tf.TensorShape([count if isinstance(count, int) else None])
    if at == -1:
        return st.reshape(buffer, tf.concat([shape, [count]], 0),
                          static.concatenate(counted) if static.rank is not None
                          else tf.TensorShape(None))
    return st.reshape(buffer, tf.concat([shape[:at], [count], shape[at:]], 0),
                      static[:at].concatenate(counted).concatenate(static[at:])
                      if static.rank is not None else tf.TensorShape(None))


def _moved(stacked, at):
    """A stack's first (index) axis moved to `at`: 1 (after the batch axis) or -1 (last)."""
    if at == 0:
        return stacked
    rank = st.rank(stacked)
    before = rank - 1 if at == -1 else at
    return tf.transpose(stacked, _joined(_axes(1, before + 1), [0], _axes(before + 1, rank)))


def _axes(start, stop):
    """`range(start, stop)` as a list, or as a tensor when the rank `stop` is one (unknown
    while building the graph)."""
    return list(range(start, stop)) if isinstance(stop, int) else tf.range(start, stop)


def _joined(*axes):
    """Lists of axes joined: a list when every part is one, else a tensor."""
    if all(isinstance(part, list) for part in axes):
        return [axis for part in axes for axis in part]
    return tf.concat([tf.cast(part, tf.int32) for part in axes], 0)
