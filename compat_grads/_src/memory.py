"""How much memory a Jacobian will take: checked against `max_bytes` before it is built,
and, for `chunk_size="auto"`, the chunk that keeps its peak within the memory budget.

A Jacobian is stacked from rows (or columns): one stack per target (reverse mode) or per
source (forward mode). The result holds every row's output; while it is computed, the rows
in flight at once each hold their one-hot input, their output and their intermediates (one
tensor like each float tensor on the path the row differentiates:
`compat_grads._src.stacking.cost`).
All of it is known from the static shapes before anything is built or run: a size known
only at run time is not counted, and a stack of such a size runs all at once.

The budget (`memory_budget=`) is bytes, or a share of the memory free when the call is
built; by default half of it. A chunk is chosen once, when the graph is built (a TF1 graph,
a `tf.function` trace, the compiled eager call's first trace): the call path
(`compat_grads._src.call.run`) retries an eager call with half the chunk when TensorFlow runs out of
memory all the same.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging

import numpy as np

from compat_grads._src.core.errors import describe, message

AUTO = "auto"
"""`chunk_size="auto"`: every row at once when that fits the budget, else the largest chunk
that does."""

SHARE_OF_FREE = 0.5
"""The default budget: this share of the memory free when the call is built."""

LOOP_ROWS_AT_ONCE = 10
"""Rows a `while_loop` ("loop", without chunk_size) runs at once: tf.map_fn's default
`parallel_iterations`."""

VECTORIZED_INTERMEDIATES = 4
"""What a vectorized row's intermediates take, in copies of the path's tensors: pfor tiles
the loop-invariant operands of the rows' ops (an activation the gradient reads) to the
chunk's width beside their outputs (measured: reverse rows through tanh(A x), 20000 x 1000,
chunks of 121: about 700 KB a row against 244 KB of path tensors)."""

RUNTIME_BYTES = 64 * 2**20
"""What building and running a chunk loop takes besides its tensors (the graph, the
executor's state, freed chunks the allocator keeps: measured 20 to 60 MB in a fresh process,
60 for forward-mode batch Jacobians), kept out of the budget (at most a quarter of it, so
that a small budget still means what it says)."""

LOG = logging.getLogger("compat_grads.memory")


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """What `chunk_size="auto"` chose for one stack of rows (or columns), when the graph was
    built.

    Attributes:
      function: the public function.
      rows: how many rows (or columns) the largest stack has.
      chunk_size: how many run at once; None: all of them.
      pieces: how many chunks run one after another (1: all at once).
      result_bytes: the result's size.
      row_bytes: one row's one-hot input, output and intermediates (the estimate).
      peak_bytes: the estimated peak: the result and the rows in flight, and the share of
        the budget kept for the runtime (`RUNTIME_BYTES`, at most a quarter of it).
      budget_bytes: the budget the chunk was chosen for (None: chunk_size was given).
      all_at_once_bytes: the estimated peak of every row at once, for comparison.
    """

    function: str
    rows: int
    chunk_size: int | None
    pieces: int
    result_bytes: int
    row_bytes: int
    peak_bytes: int
    budget_bytes: int | None
    all_at_once_bytes: int


_RECORDERS: contextvars.ContextVar[tuple] = contextvars.ContextVar("plans", default=())


def memory_plans():
    """What `chunk_size="auto"` chose for the calls inside the block: a list of
    `MemoryPlan`, one per stack of rows (or columns), filled as the calls are built (a TF1
    graph's when it is built, not when it runs; a compiled eager call's at each call).

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> x = tf.ones([2000])
      >>> with cg.memory_plans() as plans:
      ...     J = cg.stacked_jacobian(lambda x: tf.tanh(x) * 3.0, x)
      >>> plans[0].chunk_size is None, plans[0].pieces    # every row at once
      (True, 1)
      >>> with cg.memory_plans() as plans:
      ...     J = cg.stacked_jacobian(lambda x: tf.tanh(x) * 3.0, x,
      ...                             memory_budget=40 * 2**20)
      >>> plan = plans[0]
      >>> plan.result_bytes, plan.peak_bytes <= plan.budget_bytes, plan.pieces > 1
      (16000000, True, True)
    """
    return recording()


@contextlib.contextmanager
def recording(isolated=False):
    """The `MemoryPlan`s chosen inside the block, in order (a list that fills as they are);
    `isolated`: kept from the recorders outside the block (the caller replays them)."""
    plans = []
    token = _RECORDERS.set((plans,) if isolated else (*_RECORDERS.get(), plans))
    try:
        yield plans
    finally:
        _RECORDERS.reset(token)


def replay(plans) -> None:
    """Records `plans` again (a compiled call that reuses its trace chose them then)."""
    for recorder in _RECORDERS.get():
        recorder.extend(plans)


def nbytes(x, dtype=None):
    """Bytes of `x` (in `dtype` if given): an int when its shape is static, else None."""
    elements = x.shape.num_elements()
    return None if elements is None else elements * (dtype or x.dtype).base_dtype.size


def total(values):
    """The sum, or None when any value is unknown (None or a tensor)."""
    values = list(values)
    return sum(values) if all(isinstance(v, int) for v in values) else None


def fit(function, how, stacks, intermediates=None, moved=False):
    """`how` with its chunk size decided, after `max_bytes` is checked (`check`).

    `stacks` has one `(rows, bytes each row takes in, bytes each row gives out)` per stack;
    `intermediates`: the bytes of one row's intermediates (None: unknown, not counted);
    `moved`: the rows, when not written chunk by chunk into the result, are stacked first
    and then moved into its layout (forward mode's columns go last): one more copy of the
    result at the end. An explicit chunk size (an int, or None for all at once) is kept;
    "auto" becomes the largest chunk whose peak fits the budget, or None when every row at
    once does. Either way the plan is recorded (`memory_plans`) and logged at DEBUG.
    """
    known = [s for s in stacks if all(isinstance(n, int) for n in s)]
    if known:  # else sizes known only at run time: all at once, as an explicit None
        share = VECTORIZED_INTERMEDIATES if how.vectorize else 1
        sizes = _Sizes(known, share * (intermediates or 0), moved)
        budget = budget_bytes(how) if how.chunk_size == AUTO else None
        if budget is not None and how.max_bytes is not None:
            budget = min(budget, how.max_bytes)  # a chunk that max_bytes refuses fits nothing
        if budget is not None:
            how = dataclasses.replace(how, chunk_size=_choose(function, how, sizes, budget))
        _record(function, how, sizes, budget)
    elif how.chunk_size == AUTO:
        how = dataclasses.replace(how, chunk_size=None)
    check(function, how, stacks)
    return how


@dataclasses.dataclass(frozen=True)
class _Sizes:
    """The stacks' sizes: the most rows of one, the result, one row in flight, and whether
    rows stacked at once are moved into the result's layout (a copy)."""

    rows: int
    result: int
    per_row: int
    moved: bool

    def __init__(self, known, intermediates, moved):
        object.__setattr__(self, "rows", max(count for count, _, _ in known))
        object.__setattr__(self, "result", sum(count * out for count, _, out in known))
        moved_out = sum(out for _, _, out in known) if moved else 0  # a chunk's transpose
        object.__setattr__(self, "per_row", sum(row_in + out for _, row_in, out in known)
                           + intermediates + moved_out)
        object.__setattr__(self, "moved", moved)

    def results(self, how, at_once) -> int:
        """The bytes of the result's copies at the peak: one when chunks are written into
        it in place (vectorized chunks), two when the rows are moved there at the end."""
        in_place = how.vectorize and at_once < self.rows
        return self.result * (1 if in_place or not self.moved else 2)

    def peak(self, how, at_once, budget=None) -> int:
        """The estimated peak: the result's copies, the rows in flight and, for a budget,
        what the runtime keeps of it (`RUNTIME_BYTES`)."""
        return self.results(how, at_once) + at_once * self.per_row + runtime_bytes(budget)


def runtime_bytes(budget):
    """What the runtime keeps of a budget (`RUNTIME_BYTES`, at most a quarter of it); 0
    without one."""
    return 0 if budget is None else min(RUNTIME_BYTES, budget // 4)


def _choose(function, how, sizes, budget):
    """The largest chunk whose peak fits `budget`; None when every row at once does."""
    default = _at_once(sizes.rows, how)
    if sizes.peak(how, default, budget) <= budget:
        return None
    if not sizes.per_row:
        return None
    chunk = (budget - runtime_bytes(budget) - sizes.results(how, 1)) // sizes.per_row
    if chunk < 1:
        return _too_small(function, how, sizes.results(how, 1), sizes.per_row, budget)
    if how.vectorize and sizes.rows > 1:  # in chunks, written in place: at least two
        chunk = min(chunk, -(-sizes.rows // 2))
    return None if chunk >= default else chunk


def _record(function, how, sizes, budget):
    at_once = _at_once(sizes.rows, how)
    plan = MemoryPlan(function, sizes.rows, how.chunk_size, -(-sizes.rows // max(at_once, 1)),
                      sizes.result, sizes.per_row, sizes.peak(how, at_once, budget), budget,
                      sizes.peak(how, sizes.rows, budget))
    LOG.debug("compat_grads.%s: %s", function, plan)
    replay([plan])


def _too_small(function, how, result, per_row, budget):
    """One row at a time when not even that fits the default budget (the default is a share
    of what is free, not a limit the caller set); a `ValueError` for a budget the caller
    set."""
    if how.memory_budget is None:
        return 1
    runtime = runtime_bytes(budget)
    raise ValueError(message(
        function, f"memory_budget={how.memory_budget!r} ({_gib(budget)}) is too small even "
        f"for one row (or column) at a time: the result takes {_bytes(result)}, one row in "
        f"flight {_bytes(per_row)} and the runtime keeps {_bytes(runtime)} of the budget, a "
        f"peak of {_bytes(result + per_row + runtime)}",
        "Raise memory_budget= (or drop it: the default is half of the memory free), or "
        "compute a part of the result (fewer sources or target elements), or products "
        "instead of the whole matrix (jvp, vjp, hvp, per_element_gradients)."))


def check_budget(function, name, value):
    """`memory_budget` checked: None, a share of the free memory in (0, 1], or bytes up to
    the machine's memory (`name`: the argument's name, for the option tables)."""
    fix = ("Pass memory_budget= as bytes (an int, such as 2 * 2**30 for 2 GiB), as the share "
           "of the memory free now (a float in (0, 1], such as 0.25), or None (the default: "
           "half of it).")
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, np.integer, float, np.floating)):
        raise TypeError(message(function, f"memory_budget must be a number of bytes, a "
                                f"share in (0, 1] or None, but got {describe(value)} "
                                f"{value!r:.40}", fix))
    if isinstance(value, (float, np.floating)):
        if not 0 < value <= 1:
            raise ValueError(message(function, "memory_budget must be a share in (0, 1] of "
                                     f"the memory free when it is a float, but got {value!r}",
                                     fix))
        return float(value)
    machine = total_bytes()
    if not 0 < value <= machine:
        raise ValueError(message(
            function, f"memory_budget must be positive and at most this machine's memory "
            f"({machine} bytes) when it is bytes, but got {value!r}", fix))
    return int(value)


def budget_bytes(how) -> int:
    """The budget in bytes: `how.memory_budget` as given, or its share of the memory free
    now (half when it is None)."""
    budget = how.memory_budget
    if isinstance(budget, int):
        return budget
    return int((SHARE_OF_FREE if budget is None else budget) * free_bytes())


def free_bytes() -> int:
    """The memory free now on the device the work runs on: a GPU's, when TensorFlow sees
    one with a memory limit set (`tf.config.set_logical_device_configuration`), less what
    TensorFlow holds on it; otherwise the host's, from the OS (psutil)."""
    gpu = _gpu_free()
    if gpu is not None:
        return gpu
    import psutil
    return int(psutil.virtual_memory().available)


def total_bytes() -> int:
    """The host's memory (what a budget in bytes may not exceed)."""
    import psutil
    return int(psutil.virtual_memory().total)


def _gpu_free():
    from compat_grads._src.core.tf import tf
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    try:
        (config, *_) = tf.config.get_logical_device_configuration(gpus[0]) or [None]
        if config is None or config.memory_limit is None:
            return None
        used = tf.config.experimental.get_memory_info("GPU:0")["current"]
    except (RuntimeError, ValueError):
        return None
    return max(int(config.memory_limit) * 2**20 - int(used), 0)


def check(function, how, stacks) -> None:
    """Raises ValueError, before anything is built, when the result and the rows in flight
    would take more than `how.max_bytes`.

    `stacks` has one `(rows, bytes each row takes in, bytes each row gives out)` per stack;
    a stack with a size known only at run time is left out.
    """
    if how.max_bytes is None:
        return
    if how.chunk_size == AUTO:  # "auto" could still compute it row by row
        how = dataclasses.replace(how, chunk_size=1)
    known = [s for s in stacks if all(isinstance(n, int) for n in s)]
    result = sum(rows * out for rows, _, out in known)
    per_row = sum(row_in + out for _, row_in, out in known)
    in_flight = sum(_at_once(rows, how) * (row_in + out) for rows, row_in, out in known)
    if result + in_flight > how.max_bytes:
        at_once = max((_at_once(rows, how) for rows, _, _ in known), default=0)
        raise ValueError(message(
            function, f"the result would take {_bytes(result)} and the {at_once} rows (or "
            f"columns) computed at once {_bytes(in_flight)} more: {_bytes(result + in_flight)}"
            f" in all, more than max_bytes={how.max_bytes} ({_gib(how.max_bytes)})",
            _fix(how.max_bytes, result, per_row)))


def _at_once(rows, how):
    """How many of `rows` are in flight at once (an explicit or decided chunk size)."""
    chunk = None if how.chunk_size == AUTO else how.chunk_size
    limit = chunk if how.vectorize else (chunk or LOOP_ROWS_AT_ONCE)
    return rows if limit is None else min(rows, limit)
def _fix(limit, result, per_row):
    raise_it = ("or, if the machine has the memory, raise max_bytes= (max_bytes=None turns "
                "this check off).")
    if result + per_row > limit:
        return ("The result alone does not fit, so chunk_size= cannot help: compute a part "
                "of it (fewer sources or target elements) or products instead of the whole "
                f"matrix (jvp, vjp, hvp, per_element_gradients); {raise_it}")
    chunk = (limit - result) // per_row
    return (f"Pass chunk_size= to compute fewer rows at once (chunk_size={chunk} fits; the "
            f"result itself still takes {_bytes(result)}); {raise_it}")


def _bytes(n):
    return f"{n} bytes ({_gib(n)})"


def _gib(n):
    """`n` bytes in the largest binary unit that keeps the number at least 1."""
    for power, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 2**power:
            return f"{n / 2**power:.1f} {unit}"
    return f"{n} B"
