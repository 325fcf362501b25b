"""`check_derivatives`' routes: the user's f through compat_grads' public functions in each
mode, every call of a mode at once (one graph, one tf.function), and one by one where that
fails, so that a call that cannot run fails its own row only.

A result is {call key: list of numpy arrays (the derivative's leaves) or an error line}.
`graph_side` is what the TF1 worker runs (by name: this module is importable there).
"""

from __future__ import annotations

import typing
import warnings

import numpy as np

from compat_grads._src.core.errors import VectorizationWarning
from compat_grads._src.core.tf import tf
from compat_grads.testing import modes as _modes
from compat_grads.testing.derivative_report import NO_STRATEGY
from compat_grads.testing.port import one_line

STRATEGIES = ("auto", "reverse", "forward", "loop")
WITH_STRATEGY = ("stacked_jacobian", "batch_jacobian", "hessian", "batch_hessian")
# These take a direction (tangents, cotangents, vector) and return (outputs, derivative) or
# the product alone (hvp); the others return the derivative's blocks.
WITH_DIRECTION = ("jvp", "vjp", "hvp")
_ZERO_UNCONNECTED = ("stacked_jacobian", "per_element_gradients", "batch_jacobian",
                     "hessian", "batch_hessian")


class Call(typing.NamedTuple):
    """One compat_grads call: `function` with `strategy`, along `direction` (numpy leaves in
    the structure of the primals, or of the output for vjp; None for the others)."""

    function: str
    strategy: str = NO_STRATEGY
    direction: object = None

    @property
    def key(self) -> tuple:
        return self.function, self.strategy


def derivative(call: Call, f, primals, **options) -> list:
    """The leaves of `call`'s derivative of `f` at `primals` (tensors), in this mode."""
    import compat_grads as cg

    function = getattr(cg, call.function)
    if call.strategy != NO_STRATEGY:
        options["strategy"] = call.strategy
    if call.function in _ZERO_UNCONNECTED:  # the differences of an unused input are zeros
        options["unconnected_gradients"] = "zero"
    if call.function not in WITH_DIRECTION:
        return tf.nest.flatten(function(f, primals, **options))
    direction = tf.nest.map_structure(tf.constant, call.direction)
    found = function(f, primals, direction, **options)
    return tf.nest.flatten(found if call.function == "hvp" else found[1])


def _each(calls, compute) -> tuple:
    """({key: compute(call)}, {key: error line}) over `calls`: an error fails its call only.
    A vectorization fallback is not an error here: its warning goes to the notes."""
    found, errors = {}, {}
    for call in calls:
        try:
            found[call.key] = compute(call)
        except Exception as error:  # the function cannot run this way: its row says why
            errors[call.key] = raised(error)
    return found, errors


def raised(error) -> str:
    """The reason of a row whose call raised `error`."""
    return f"raised {one_line(error)}"


def graph_side(f, primals, calls) -> dict:
    """Every call in one new `tf.Graph` with a placeholder per primal, run in one Session
    (each on its own where the run fails). In a TF1 process, or a v1 Graph in TF2."""
    with tf.Graph().as_default():
        flat = tf.nest.flatten(primals)
        feeds = [_modes.placeholder(a) for a in flat]
        nest = tf.nest.pack_sequence_as(primals, feeds)
        found, errors = _each(calls, lambda call: derivative(call, f, nest))
        feed_dict = dict(zip(feeds, flat))
        try:
            return {**_modes.session_values(found, feed_dict), **errors}
        except Exception:  # one call fails at run time: run each alone to tell which
            for key, fetches in found.items():
                try:
                    errors[key] = _modes.session_values(fetches, feed_dict)
                except Exception as error:
                    errors[key] = raised(error)
            return errors


def function_side(f, primals, calls, jit_compile=False) -> dict:
    """Every call inside one `tf.function` (each in its own where that one fails), compiled
    with XLA with `jit_compile` (one compilation for all, as `jit_compile=True` of the
    functions would compile each: the same graph)."""
    tensors = tf.nest.map_structure(tf.constant, primals)

    def run(chosen):
        failed = {}

        def all_calls(nest):
            found, errors = _each(chosen, lambda call: derivative(call, f, nest))
            failed.update(errors)
            return found
        traced = tf.function(all_calls, jit_compile=jit_compile)
        return {**_modes.to_numpy(traced(tensors)), **failed}

    try:
        return run(calls)
    except Exception:  # one call fails at run time: run each alone to tell which
        found = {}
        for call in calls:
            try:
                found.update(run([call]))
            except Exception as error:
                found[call.key] = raised(error)
        return found


def eager_side(f, primals, calls, **options) -> dict:
    """Each call eagerly with `options` (compile=False)."""
    tensors = tf.nest.map_structure(tf.constant, primals)
    found, errors = _each(calls, lambda call: _modes.to_numpy(
        derivative(call, f, tensors, **options)))
    return {**found, **errors}


def run_mode(mode, f, primals, calls, tf1=None) -> tuple:
    """(result, notes) of `calls` in `mode`: the notes are the vectorization fallbacks.
    `tf1(job, *args)` runs a job in the TF1 worker."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", VectorizationWarning)
        if mode == _modes.TF1:
            result = tf1(graph_side, f, primals, calls)
        elif mode == _modes.V1_GRAPH:
            result = graph_side(f, primals, calls)
        elif mode in (_modes.FUNCTION, _modes.XLA):
            result = function_side(f, primals, calls, jit_compile=mode == _modes.XLA)
        else:
            result = eager_side(f, primals, calls, compile=False)
    notes = sorted({f"{mode}: {str(w.message).splitlines()[0]}" for w in caught
                    if issubclass(w.category, VectorizationWarning)})
    return {key: value if isinstance(value, str) else [np.asarray(v) for v in value]
            for key, value in result.items()}, notes
