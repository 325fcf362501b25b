"""The package exceptions and warnings, and the one format every message follows."""

import os
import re
import sys
import warnings

# compat_grads/ itself (this file is compat_grads/_src/core/errors.py): every frame in it is
# ours.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ModeError(RuntimeError):
    """A call that cannot run in the current execution mode (eager, tf.function or graph)."""

    # AutoGraph re-raises an error from converted code (a `tf.function` of the caller's)
    # as its own type only when that type is a known builtin or keeps Exception's
    # constructor; any other type becomes an AutoGraph StagingError, which an
    # `except ModeError` would miss.
    __init__ = Exception.__init__


class DerivativeError(RuntimeError):
    """TensorFlow could not compute a derivative with the requested strategy (for example
    forward mode through the gradient of a `tf.cond`); another strategy may work."""

    __init__ = Exception.__init__  # see ModeError


class VectorizationWarning(UserWarning):
    """pfor could not vectorize a Jacobian; it was computed one row at a time instead."""


class MaterializedWarning(UserWarning):
    """`per_example_gradient_norms` or `clipped_gradients` met a weight whose use no rule
    knows (a layer kind, or an op): that weight's per-example gradients were materialized
    (vectorized, `[b] + its shape`) instead of being read from its layer's inputs and output
    gradients. The values are the same; the time and memory are those of
    `per_example_gradients` for that weight."""


class MemoryWarning(UserWarning):
    """An eager call with `chunk_size="auto"` ran out of memory and was computed again in
    smaller chunks (the warning names the chunk that fit)."""


class XlaWarning(UserWarning):
    """An eager call with `jit_compile=True` that XLA could not compile ran compiled without
    XLA instead, with the same result; the warning gives XLA's reason."""


def describe(value) -> str:
    """A short description of what the caller passed, for error messages: a tensor is "a
    tensor" whatever TensorFlow's class for it (an eager tensor becomes a SymbolicTensor
    where compat_grads compiles the call, a name the caller never wrote)."""
    kind = type(value).__name__
    if kind in ("EagerTensor", "SymbolicTensor", "Tensor", "_EagerTensorBase"):
        kind = "a tensor"
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is not None and shape is not None:
        return f"{kind} of dtype {getattr(dtype, 'name', dtype)} and shape {shape}"
    return kind


def message(function: str, problem: str, fix: str) -> str:
    """`compat_grads.<function>: <what is wrong, what was needed and got>. <how to fix it>`."""
    return f"compat_grads.{function}: {problem}. {fix}"


def op_name(function: str, problem: str) -> str:
    """An op name that says the problem (`compat_grads.<function>.<problem in words>`): a
    failing run-time check is reported from its op's name first."""
    words = "_".join(re.findall(r"[A-Za-z0-9]+", problem))
    return f"compat_grads.{function}.{words}"[:160]


def is_ours(err: BaseException) -> bool:
    """Whether `err` is one of compat_grads' clear errors (raised, say, by the caller's
    target inside a vectorized loop): to be passed on as it is, never retried."""
    return str(err).startswith("compat_grads.")


def last_line(err):
    """The informative line of a TensorFlow error (the last one, after the trace)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:300]


def _skipped_dirs() -> tuple:
    """Our package, and TensorFlow's (its AutoGraph wrapper sits between us and the caller)."""
    tensorflow = sys.modules.get("tensorflow")
    path = getattr(tensorflow, "__file__", None)
    ours = _PACKAGE_DIR + os.sep
    return (ours,) if path is None else (ours, os.path.dirname(path) + os.sep)


def warn(text: str, category: type) -> None:
    """`warnings.warn`, attributed to the first caller outside compat_grads."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_skipped_dirs()):
        frame, level = frame.f_back, level + 1
    warnings.warn(text, category, stacklevel=level)
