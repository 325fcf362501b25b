"""The arguments of the curvature estimators, checked before anything is built: a value of
the wrong type is a `TypeError`, a value of the right type that is not allowed a
`ValueError`, each worded by `compat_grads._src.core.errors.message`."""

from __future__ import annotations

import numpy as np

from compat_grads._src.core.errors import describe, message
from compat_grads._src.core.tf import tf

DTYPES = (tf.float32, tf.float64)


def _shown(value) -> str:
    """The value's type and, when it is short, the value itself: `str 'LA'`."""
    text = repr(value)
    return describe(value) + (f" {text}" if len(text) <= 40 else "")


def square_operator(function: str, op) -> int:
    """n, the static size of the square operator `op` (`[n, n]`, float32 or float64)."""
    if not isinstance(op, tf.linalg.LinearOperator):
        matrix = tf.is_tensor(op) or isinstance(op, (np.ndarray, list, tf.Variable))
        raise TypeError(message(
            function, f"op must be a tf.linalg.LinearOperator, but got {_shown(op)}",
            "Wrap a matrix m as tf.linalg.LinearOperatorFullMatrix(m)." if matrix else
            "Pass a tf.linalg.LinearOperator (a subclass whose _matmul computes the products "
            "of your operator, or tf.linalg.LinearOperatorFullMatrix(m) for a matrix m)."))
    if op.dtype not in DTYPES:
        raise TypeError(message(
            function, f"op must be float32 or float64, but its dtype is {op.dtype.name}",
            "Build the operator in float32 or float64 (float64 for the most accurate "
            "estimates)."))
    shape = op.shape
    if shape.rank != 2 or not shape.is_fully_defined():
        raise ValueError(message(
            function, f"op must have a static shape [n, n] (no batch dimensions, n known when "
            f"the graph is built), but its shape is {shape}",
            "Give the operator a static shape: a placeholder or input with every dimension "
            "known, or a LinearOperator subclass whose _shape() returns [n, n]."))
    if shape[0] != shape[1]:
        raise ValueError(message(
            function, f"op must be square, but its shape is {shape}",
            "Pass a square operator [n, n] (for A of shape [m, n], A^T A is "
            "tf.linalg.LinearOperatorComposition([A.adjoint(), A]))."))
    return int(shape[0])


def self_adjoint(function: str, op) -> None:
    """An operator that says it is not self-adjoint cannot be used (one that says nothing is
    trusted: its products are all we see)."""
    if op.is_self_adjoint is False:
        raise ValueError(message(
            function, "op must be self-adjoint (symmetric), but it was built with "
            "is_self_adjoint=False",
            "Pass a symmetric operator, such as (A + A^T) / 2 for the symmetric part of A."))


def count(function: str, name: str, value, what: str, *, none_ok: bool = False) -> int | None:
    """A positive Python int (not a bool); None too with `none_ok`."""
    if value is None and none_ok:
        return None
    wanted = "a positive int" + (" or None" if none_ok else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(message(function, f"{name} must be {wanted}, but got {_shown(value)}",
                                f"Pass {what} as a Python int."))
    if value < 1:
        raise ValueError(message(function, f"{name} must be {wanted}, but got {value!r}",
                                 f"Pass {what} (at least 1)."))
    return int(value)


def at_most(function: str, name: str, value: int, limit: int, why: str) -> int:
    """`value` (already a positive int) when it is at most `limit`."""
    if value > limit:
        raise ValueError(message(function, f"{name} must be at most {limit} ({why}), but got "
                                 f"{value}", f"Pass {name}={limit} or less."))
    return value


def at_least(function: str, name: str, value: int, limit: int, why: str) -> int:
    """`value` (already a positive int) when it is at least `limit`."""
    if value < limit:
        raise ValueError(message(function, f"{name} must be at least {limit} ({why}), but got "
                                 f"{value}", f"Pass {name}={limit} or more."))
    return value


def choice(function: str, name: str, value, choices: tuple) -> str:
    """One of the strings `choices`."""
    wanted = "one of " + ", ".join(repr(c) for c in choices)
    fix = f"Pass {name}= as one of the strings " + ", ".join(repr(c) for c in choices) + "."
    if not isinstance(value, str):
        raise TypeError(message(function, f"{name} must be {wanted}, but got {_shown(value)}",
                                fix))
    if value not in choices:
        raise ValueError(message(function, f"{name} must be {wanted}, but got {value!r}", fix))
    return value


def number(function: str, name: str, value, *, positive: bool) -> float:
    """A finite real Python number (not a bool): positive, or at least 0."""
    wanted = "a positive number" if positive else "a number >= 0"
    fix = (f"Pass {name}= as a positive Python float, e.g. {name}=1e-5." if positive else
           f"Pass {name}= as a Python float >= 0, e.g. {name}=1e-3 (0 for none).")
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TypeError(message(function, f"{name} must be {wanted}, but got {_shown(value)}",
                                fix))
    if not np.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(message(function, f"{name} must be {wanted}, but got {value!r}", fix))
    return float(value)


def boolean(function: str, name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(message(function, f"{name} must be a bool, but got {_shown(value)}",
                                f"Pass {name}=True or {name}=False."))
    return bool(value)


def seed(function: str, value):
    """A Python int that fits in 64 bits, or an integer scalar tensor (a step counter)."""
    fix = ("Pass seed= a Python int such as seed=0 (or an integer scalar tensor): the random "
           "vectors come from a stateless generator, so one seed gives the same numbers in "
           "every mode.")
    if isinstance(value, (tf.Tensor, tf.Variable)):
        if not value.dtype.is_integer or value.shape.rank not in (0, None):
            raise TypeError(message(function, "seed must be an int or an integer scalar "
                                    f"tensor, but got {describe(value)}", fix))
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(message(function, f"seed must be an int or an integer scalar tensor, "
                                f"but got {_shown(value)}", fix))
    if not -2**63 <= value < 2**63:
        raise ValueError(message(function, f"seed must fit in 64 bits, but got {value}",
                                 "Pass a smaller int."))
    return int(value)


def right_hand_side(function: str, rhs, n: int, dtype):
    """`rhs` as a tensor of the operator's dtype, shape `[n]` or `[n, m]`."""
    if isinstance(rhs, (tf.Tensor, tf.Variable)) and rhs.dtype != dtype:
        raise TypeError(message(
            function, f"rhs must have the operator's dtype {dtype.name}, but got "
            f"{describe(rhs)}", f"Cast it: tf.cast(rhs, tf.{dtype.name})."))
    try:
        rhs = tf.convert_to_tensor(rhs, dtype=dtype)
    except (TypeError, ValueError) as err:
        raise TypeError(message(function, f"rhs must be a tensor of dtype {dtype.name}, but "
                                f"got {_shown(rhs)} ({err})", "Pass a tensor or an array "
                                f"of shape [{n}] or [{n}, m].")) from None
    shape = rhs.shape
    if shape.rank not in (1, 2) or tf.compat.dimension_value(shape[0]) not in (n, None):
        raise ValueError(message(
            function, f"rhs must have shape [{n}] or [{n}, m] (n = the operator's size), but "
            f"its shape is {shape}", f"Pass one right-hand side of {n} elements, or m of "
            "them as the columns of an [n, m] tensor."))
    return tf.ensure_shape(rhs, [n] + shape.as_list()[1:])
