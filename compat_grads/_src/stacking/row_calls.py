"""Which calls of the user's callable the stacking engine makes while it traces one row (or
column) of a stack: the call path's `has_aux=` / `return_value=` capture
(`compat_grads._src.call.value`) keeps no value from those, whose tensors live in the rows'
loop."""

from __future__ import annotations

import contextlib
import threading

_STATE = threading.local()


@contextlib.contextmanager
def in_rows():
    """Marks the calls made while one row (or column) of a stack is traced."""
    _STATE.rows = getattr(_STATE, "rows", 0) + 1
    try:
        yield
    finally:
        _STATE.rows -= 1


def inside_rows() -> bool:
    """Whether a row of a stack is being traced."""
    return bool(getattr(_STATE, "rows", 0))
