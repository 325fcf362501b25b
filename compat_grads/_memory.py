"""How much memory a Jacobian will take, checked against `max_bytes` before it is built.

A Jacobian is stacked from rows (or columns): one stack per target (reverse mode) or per
source (forward mode). The result holds every row's output; while it is computed, the rows
in flight at once each hold their one-hot input and their output as well. Both are known
from the static shapes before anything is built or run: a size known only at run time is
not counted.
"""

from __future__ import annotations

from compat_grads._errors import message

LOOP_ROWS_AT_ONCE = 10
"""Rows a `while_loop` ("loop", without chunk_size) runs at once: tf.map_fn's default
`parallel_iterations`."""


def nbytes(x, dtype=None):
    """Bytes of `x` (in `dtype` if given): an int when its shape is static, else None."""
    elements = x.shape.num_elements()
    return None if elements is None else elements * (dtype or x.dtype).base_dtype.size


def total(values):
    """The sum, or None when any value is unknown (None or a tensor)."""
    values = list(values)
    return sum(values) if all(isinstance(v, int) for v in values) else None


def check(function, how, stacks) -> None:
    """Raises ValueError, before anything is built, when the result and the rows in flight
    would take more than `how.max_bytes`.

    `stacks` has one `(rows, bytes each row takes in, bytes each row gives out)` per stack;
    a stack with a size known only at run time is left out.
    """
    if how.max_bytes is None:
        return
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
    """How many of `rows` are in flight at once."""
    limit = how.chunk_size if how.vectorize else (how.chunk_size or LOOP_ROWS_AT_ONCE)
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
