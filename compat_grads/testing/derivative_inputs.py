"""`check_derivatives`' arguments, checked: clear errors that name the argument, what it
needs, what it got and the fix. And the user's f, called twice eagerly to learn its output."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence

import numpy as np

from compat_grads._src.core.errors import describe, message
from compat_grads._src.core.tf import tf
from compat_grads.testing import modes as _modes
from compat_grads.testing.derivative_routes import STRATEGIES
from compat_grads.testing.port import resolve

NAME = "testing.check_derivatives"
FIRST_ORDER = ("stacked_jacobian", "per_element_gradients", "jvp", "vjp", "batch_jacobian")
SECOND_ORDER = ("hessian", "batch_hessian", "hvp")
FUNCTIONS = FIRST_ORDER + SECOND_ORDER
BATCH = ("batch_jacobian", "batch_hessian")
"""Run only when asked for: they assume the samples of the batch are independent."""


@dataclasses.dataclass
class Problem:
    """The checked arguments: `primals` as a nest of numpy arrays in their own dtypes,
    `flat` its leaves, `y` f's output there (numpy), the chosen names."""

    f: object
    primals: object
    flat: list
    y: np.ndarray
    order: int
    functions: list
    modes: list
    strategies: list
    notes: list
    tf1_problem: str | None = None


def checked(f, primals, order, functions, modes, strategies) -> Problem:
    if not callable(f):
        raise TypeError(message(NAME, f"f must be a callable f(primals) -> float tensor, but "
                                      f"got {describe(f)}", "Pass the function to check"))
    nest, flat = _primals(primals)
    if isinstance(order, bool) or order not in (1, 2):
        raise ValueError(message(NAME, f"order must be 1 or 2, but got {order!r}",
                                 "Pass order=1 (Jacobians) or order=2 (Hessians too)"))
    y = output(f, nest)
    asked = _choice("modes", modes, _modes.DERIVATIVE_MODES)
    chosen, notes, tf1_problem = asked or list(_modes.DERIVATIVE_MODES), [], not_importable(f)
    if tf1_problem and not asked:
        chosen.remove(_modes.TF1)
        notes.append(f"tf1 left out: {tf1_problem}")
    return Problem(f, nest, flat, y, order, _functions(functions, order, flat, y), chosen,
                   _choice("strategies", strategies, STRATEGIES) or list(STRATEGIES), notes,
                   tf1_problem)


def _primals(primals) -> tuple:
    """(nest of numpy arrays, its leaves) from float arrays or eager tensors."""
    flat = tf.nest.flatten(primals)
    if not flat:
        raise ValueError(message(NAME, "primals is empty", "Pass the point to check at: a "
                                 "float array or tensor, or a list / tuple / dict of them"))
    arrays = []
    for path, leaf in zip(leaf_paths(primals), flat):
        array = _array(leaf)
        if array is None:
            where = f"primals{path}"
            raise TypeError(message(
                NAME, f"primals must be float numpy arrays or float eager tensors (or a list "
                f"/ tuple / dict of them), but {where} is {describe(leaf)}",
                "Pass np.asarray(value, np.float32) or tf.constant(value, tf.float32)"))
        arrays.append(array)
    return tf.nest.pack_sequence_as(primals, arrays), arrays


def leaf_paths(nest) -> list:
    """The index of each leaf of `nest` in tf.nest order: "" for a single leaf, else e.g.
    "[0]" or "['w']"."""
    from compat_grads.testing.port import paths

    if not isinstance(nest, (dict, list, tuple)):
        return [""]
    return ["".join(f"[{p}]" if p.isdigit() else f"[{p!r}]" for p in path.split("/"))
            for path in paths(nest)]


def _array(leaf):
    if isinstance(leaf, tf.Variable):
        leaf = leaf.read_value()
    if tf.is_tensor(leaf):
        try:
            leaf = leaf.numpy()
        except Exception:  # a graph tensor (or a Keras symbolic one) has no value
            return None
    if not isinstance(leaf, (np.ndarray, np.generic)):
        return None
    array = np.asarray(leaf)
    return array if array.dtype.kind == "f" or array.dtype.name == "bfloat16" else None


def output(f, nest) -> np.ndarray:
    """f's output at `nest`, eagerly, twice: one float tensor of the same shape each time."""
    first, second = (_one_output(f, nest, call) for call in ("first", "second"))
    if first.shape != second.shape:
        raise ValueError(message(
            NAME, f"f returned shape {first.shape} on its first call and {second.shape} on "
            f"its second, at the same primals", "Make f return one shape for one input "
            "(no Python state that changes between calls)"))
    return first


def _one_output(f, nest, call) -> np.ndarray:
    y = f(tf.nest.map_structure(tf.constant, nest))
    if not tf.is_tensor(y):
        raise TypeError(message(
            NAME, f"f must return one float tensor (of TensorFlow ops, to be differentiated), "
            f"but its {call} call returned {describe(y) if y is not None else 'None'}",
            "Return the tensor to differentiate (one output per check)"))
    value = np.asarray(y.numpy())
    if value.dtype.kind != "f" and value.dtype.name != "bfloat16":
        raise TypeError(message(
            NAME, f"f must return a float tensor, but its {call} call returned "
            f"{describe(y)}", "Cast the output to a float dtype (a derivative of integers "
            "is not defined)"))
    return value


def not_importable(f) -> str | None:
    """Why the TF1 worker, which imports f by module and qualname, cannot; None if it can."""
    module, qualname = getattr(f, "__module__", None), getattr(f, "__qualname__", "")
    if module and module != "__main__" and "<" not in qualname:
        if resolve(module, qualname) is f:
            return None
    where = f"{module}.{qualname}" if module else describe(f)
    return (f"f ({where}) is not importable by module and qualname, and the TF1 worker "
            "imports it by name: define f at the top level of a module (a test file works)")


def _choice(what, values, allowed) -> list:
    if values is None:
        return []
    values = [values] if isinstance(values, str) else values
    if not isinstance(values, Sequence) or not values:
        raise ValueError(message(NAME, f"{what} must be a name or a non-empty list of names "
                                       f"among {list(allowed)}, got {values!r}",
                                 f"Pass {what}=None for all of them"))
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ValueError(message(NAME, f"{what} must be among {list(allowed)}, got {bad}",
                                 f"Choose {what} from that list"))
    return list(dict.fromkeys(values))


def _functions(functions, order, flat, y) -> list:
    chosen = _choice("functions", functions, FUNCTIONS)
    if not chosen:
        chosen = [f for f in FIRST_ORDER if f not in BATCH]
        if order == 2:
            chosen += ["hessian"] + (["hvp"] if y.ndim == 0 else [])
    late = [f for f in chosen if f in SECOND_ORDER and order == 1]
    if late:
        raise ValueError(message(NAME, f"functions names {late}, which are second-order "
                                       f"derivatives, but order=1", "Pass order=2"))
    for function in chosen:
        problem = _misfit(function, flat, y)
        if problem:
            raise ValueError(message(NAME, f"functions names {function}, but {problem}",
                                     f"Leave {function} out of functions"))
    return chosen


def _misfit(function, flat, y) -> str:
    """Why `function` does not apply to these shapes, or ""."""
    if function == "hvp" and y.ndim:
        return f"hvp needs a scalar output and f returns shape {y.shape}"
    if function not in BATCH:
        return ""
    if len(flat) != 1 or not flat[0].ndim:
        return "a batch form needs one primal with a batch axis first"
    b = flat[0].shape[0]
    if not y.ndim or y.shape[0] != b:
        return f"f's output (shape {y.shape}) does not start with the batch axis ({b})"
    if function == "batch_hessian" and y.shape not in ((b,), (b, 1)):
        return f"batch_hessian needs one scalar per sample (shape ({b},)), got {y.shape}"
    return ""


def checked_number(what, value, low=0.0, *, strict=False, integer=False):
    """`value` itself if it is None or a number >= low (> low when `strict`)."""
    if value is None:
        return None
    kinds = (numbers.Integral,) if integer else (numbers.Real,)
    bad = isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value)
    if bad or value < low or (strict and value == low):
        need = "an int" if integer else f"a number {'>' if strict else '>='} {low}"
        raise (TypeError if bad else ValueError)(message(
            NAME, f"{what} must be None or {need}, got {value!r}",
            f"Pass e.g. {what}={1 if integer else 1e-5}"))
    return value
