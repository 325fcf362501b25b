"""Checks of what is known only when the graph runs (a batch size, a size), made so that
their failures read as compat_grads' own errors do."""

from __future__ import annotations

import functools
import pathlib

from compat_grads._src.core import tf as _tf
from compat_grads._src.core.errors import message, op_name


def run_time_check(function, problem, fix, check, *args):
    """`check(*args)`, a `tf.debugging` assertion, for what is known only when the graph runs,
    made so that its failure reads as compat_grads' own errors do: TensorFlow reports a
    failing op by its name, then the Python frames where it was defined, then its message;
    the op is named after the function and the problem, and defined at the caller's line
    (not the library's), and the message says the fix."""
    with _tf.frames_hidden(_our_files()):
        return check(*args, message=message(function, problem, fix),
                     name=op_name(function, problem))


@functools.cache
def _our_files() -> frozenset:
    """The library's source files (the frames a user has no use for in an op's report)."""
    return frozenset(str(path) for path in pathlib.Path(__file__).parents[2].rglob("*.py"))
