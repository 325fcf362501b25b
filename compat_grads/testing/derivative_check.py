"""`check_derivatives`: is the derivative of the user's own function right, on every route?

The user's f goes through compat_grads' public functions in every mode and strategy
(`compat_grads.testing.derivative_routes`); each result is held to float64 central
differences of f (`compat_grads.testing.oracle`, no TensorFlow autodiff in them) and to the
other routes, with the tolerances of `compat_grads.testing.tolerances`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from compat_grads._src.core.errors import ModeError, message
from compat_grads._src.core.tf import tf
from compat_grads.dispatch import runs_eagerly
from compat_grads.testing import modes as _modes
from compat_grads.testing import oracle, remote
from compat_grads.testing import tolerances as _tolerances
from compat_grads.testing.derivative_inputs import (
    NAME,
    Problem,
    checked,
    checked_number,
    leaf_paths,
)
from compat_grads.testing.derivative_report import (
    NO_STRATEGY,
    DerivativeReport,
    DerivativeRow,
    compare,
    number,
)
from compat_grads.testing.derivative_routes import WITH_STRATEGY, Call, graph_side, run_mode
from compat_grads.testing.port import one_line

_STEPS = {"float64": (1e-6, 1e-4), "float32": (4e-3, 3e-2), "float16": (1e-1, 2e-1),
          "bfloat16": (1e-1, 3e-1)}
"""The base step of the central differences (first, second order), by the dtype f is
evaluated in: about the cube (fourth) root of its machine epsilon."""


def check_derivatives(f: Callable, primals, *, order: int = 1,
                      functions: str | Sequence[str] | None = None,
                      modes: str | Sequence[str] | None = None,
                      strategies: str | Sequence[str] | None = None,
                      rtol: float | None = None, atol: float | None = None,
                      eps: float | None = None, seed: int = 0) -> DerivativeReport:
    """Checks the derivatives of your own function on every route compat_grads has.

    `f(primals)` goes through compat_grads' functions (`stacked_jacobian`,
    `per_element_gradients`, `jvp`, `vjp`; with `order=2` also `hessian`, and `hvp` for a
    scalar f) in every mode and with every strategy, and each result is compared with
    float64 central differences of f (which need no TensorFlow autodiff, so a wrong
    `tf.custom_gradient` cannot fool them) and with the other routes.

    Args:
      f: a callable `f(primals) -> one float tensor`, deterministic. For the "tf1" mode it
        must be importable by module and qualname (a module-level function): the TF1
        worker process imports it by name.
      primals: where to check: a float numpy array or eager tensor, or a list / tuple /
        dict of them; f is called with tensors in this structure.
      order: 1 (first derivatives) or 2 (Hessians too: the differences cost 4 calls of f
        per pair of input elements).
      functions: names among "stacked_jacobian", "per_element_gradients", "jvp", "vjp",
        "batch_jacobian", "hessian", "batch_hessian", "hvp" (default: the first four, and
        "hessian" and, for a scalar f, "hvp" with order=2; the batch forms assume
        independent samples, so they run only when named).
      modes: among "tf1" (a TF1 graph in the TF1 worker process), "v1_graph" (a
        `tf.Graph` in this process), "function" (`tf.function`), "eager" (`compile=False`)
        and "xla" (a `tf.function` with `jit_compile=True`, the graph `jit_compile=True`
        compiles); default all, "tf1" left out with a note when f is not importable.
      strategies: among "auto", "reverse", "forward", "loop" (default all), for the
        functions that take `strategy=`.
      rtol, atol: override the tolerances: `|route - differences| <= atol * max(1,
        max|differences|) + rtol * |differences|` per element (by default the looser of
        `PORT_TOLERANCE` of the dtype and `DIFFERENCE_TOLERANCE`; twice `PORT_TOLERANCE`
        between routes).
      eps: the base of the difference step: element j moves by `eps * max(1, |x_j|)`
        (default 1e-6 at first order, 1e-4 at second, in float64).
      seed: the seed of the random directions of jvp, vjp and hvp.

    Returns:
      A `DerivativeReport`: one row per (function, mode, strategy), failing rows first,
      with its ok property, its assert_ok and to_dict methods, and str() for the table.

    Raises:
      TypeError, ValueError: for arguments that cannot be checked: f not callable, or
        returning None, a non-float or a different shape on a second call; primals that
        are not float arrays; order not 1 or 2; unknown names. A route that fails is a
        failing row, not an exception.
      compat_grads.ModeError: when called from a graph: the checks run from TF2 code.

    Example:
      >>> import numpy as np
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> report = cg.check_derivatives(lambda x: tf.sin(x) * x, np.array([0.5, 1.0]),
      ...                               functions="stacked_jacobian", modes="eager")
      >>> report.ok
      True
    """
    if not runs_eagerly():
        raise ModeError(message(
            NAME, "it runs f eagerly here and in graphs of its own, but this code runs in a "
            "graph (v2 behaviour disabled, or inside tf.Graph().as_default())",
            "Call check_derivatives from TF2 code; the tf1 mode gets a TF1 process of its own"))
    rtol, atol = (checked_number(n, v) for n, v in (("rtol", rtol), ("atol", atol)))
    eps = checked_number("eps", eps, strict=True)
    rng = np.random.default_rng(checked_number("seed", seed, integer=True))
    problem = checked(f, primals, order, functions, modes, strategies)
    calls = _calls(problem, rng)
    tf1 = _in_tf1_worker(problem, calls) if _modes.TF1 in problem.modes else None
    differences, evaluated_in = _differences(problem, eps)
    results = _results(problem, calls, tf1)
    rows = []
    for function in problem.functions:
        mine = [c for c in calls if c.function == function]
        expected = _expected(function, problem, differences, mine[0].direction)
        rows += _rows(problem, mine, results, expected, (evaluated_in, rtol, atol))
    return DerivativeReport(rows, problem.notes, _name(problem.f), problem.order)


def _name(f) -> str:
    return f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', type(f).__name__)}"


# --- the routes -------------------------------------------------------------------------


def _calls(problem: Problem, rng) -> list:
    def like(arrays):
        return [rng.standard_normal(np.shape(a)).astype(np.asarray(a).dtype) for a in arrays]

    along_primals = tf.nest.pack_sequence_as(problem.primals, like(problem.flat))
    directions = {"jvp": along_primals, "hvp": along_primals, "vjp": like([problem.y])[0]}
    return [Call(function, strategy, directions.get(function))
            for function in problem.functions
            for strategy in (problem.strategies if function in WITH_STRATEGY
                             else [NO_STRATEGY])]


def _results(problem: Problem, calls, tf1) -> dict:
    """{mode: {call key: leaves or error line}}; `tf1` is the (thread, result) of the TF1
    worker's share, which runs beside this process's."""
    results = {}
    for mode in problem.modes:
        if mode != _modes.TF1:
            results[mode], notes = run_mode(mode, problem.f, problem.primals, calls)
            problem.notes += notes
    if tf1 is not None:
        tf1[0].join()
        results[_modes.TF1] = tf1[1]
    return results


def _in_tf1_worker(problem, calls):
    """(thread, result) of the calls in the TF1 worker: every call fails with the reason
    when f cannot get there or the worker cannot run it."""
    result = {}

    def work():
        try:
            if problem.tf1_problem:
                raise TypeError(problem.tf1_problem)
            result.update(remote.call(graph_side, problem.f, problem.primals, calls,
                                      label=f"check_derivatives({_name(problem.f)})"))
        except Exception as error:  # the worker cannot run it: every tf1 row says why
            why = (problem.tf1_problem if problem.tf1_problem
                   else f"the TF1 worker could not run it: {one_line(error)}")
            result.update({call.key: why for call in calls})

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, result


# --- the differences --------------------------------------------------------------------


def _differences(problem: Problem, eps) -> tuple:
    """({"jacobian": blocks, "hessian": blocks or None}, the dtype f was evaluated in):
    float64 where f runs in float64, else the primals' own dtype (with a note)."""
    try:
        evaluate = _evaluator(problem, np.float64)
        evaluate([np.asarray(x, np.float64) for x in problem.flat])
        evaluated_in = np.dtype(np.float64)
    except Exception as error:  # f mixes in its own dtype (float32 constants or weights)
        evaluated_in = min((x.dtype for x in problem.flat), key=lambda d: d.itemsize)
        evaluate = _evaluator(problem, None)
        problem.notes.append(
            f"f does not run in float64 ({one_line(error)}): the finite differences are "
            f"taken in {evaluated_in.name}, with DIFFERENCE_TOLERANCE for {evaluated_in.name}")
    first, second = _STEPS[evaluated_in.name]
    flat = [np.asarray(x, np.float64) for x in problem.flat]

    def moved(k, x):
        return evaluate(flat[:k] + [x] + flat[k + 1:])
    found = {"jacobian": oracle.difference_jacobian(moved, flat, eps or first)}
    if problem.order == 2:
        found["hessian"] = oracle.difference_hessian(evaluate, flat, eps or second)
    return found, evaluated_in


def _evaluator(problem, dtype):
    """`arrays -> f(...)` as float64 numpy, eagerly, in `dtype` (None: each primal's own)."""
    def evaluate(arrays):
        cast = [np.asarray(a, dtype or x.dtype) for a, x in zip(arrays, problem.flat)]
        nest = tf.nest.pack_sequence_as(problem.primals, [tf.constant(a) for a in cast])
        return np.asarray(problem.f(nest), np.float64)
    return evaluate


def _expected(function, problem, differences, direction) -> list:
    """What `function` must give by the differences: a list of float64 blocks."""
    jacobian, y_shape = differences["jacobian"], problem.y.shape
    x_shapes = [x.shape for x in problem.flat]
    if function == "stacked_jacobian":
        return jacobian
    if function == "per_element_gradients":
        return [j.reshape(y_shape + (-1,)).sum(-1) for j in jacobian]
    if function == "batch_jacobian":
        return [oracle.diagonal(jacobian[0], [y_shape, x_shapes[0]])]
    directions = [np.asarray(d, np.float64) for d in tf.nest.flatten(direction)]
    if function == "jvp":
        return [sum(np.tensordot(j, t, axes=t.ndim) for j, t in zip(jacobian, directions))]
    if function == "vjp":
        return [np.tensordot(directions[0], j, axes=len(y_shape)) for j in jacobian]
    hessian = differences["hessian"]
    if function == "hessian":
        return [block for row in hessian for block in row]
    if function == "batch_hessian":
        return [oracle.diagonal(hessian[0][0], [y_shape, x_shapes[0], x_shapes[0]])]
    return [sum(np.tensordot(h, v, axes=v.ndim) for h, v in zip(row, directions))
            for row in hessian]  # hvp of a scalar f


# --- the rows ---------------------------------------------------------------------------


def _rows(problem, calls, results, expected, tolerance) -> list:
    labels = leaf_paths(problem.primals)
    if calls[0].function == "hessian":
        labels = [f"{a}{b}" for a in labels for b in labels]
    found = {(mode, call.strategy): results[mode][call.key]
             for mode in problem.modes for call in calls}
    rows = {key: _row(DerivativeRow(calls[0].function, *key), value, expected, labels,
                      tolerance) for key, value in found.items()}
    # the routes that agree with the differences, held to each other (a route that does not
    # is wrong already, and must not make the right ones look wrong)
    median = _median([found[key] for key, row in rows.items() if row.ok])
    for key, row in rows.items():
        if median is not None and row.ok:
            _against_routes(row, found[key], median, labels, tolerance)
    return list(rows.values())


def _median(values):
    """The elementwise median of two or more routes' blocks, or None."""
    if len(values) < 2:
        return None
    return [np.median(np.stack([np.asarray(v[k], np.float64) for v in values]), axis=0)
            for k in range(len(values[0]))]


def _row(row, value, expected, labels, tolerance) -> DerivativeRow:
    if isinstance(value, str):
        row.reason = value
        return row
    if len(value) != len(expected):
        row.reason = f"returned {len(value)} blocks, the differences have {len(expected)}"
        return row
    evaluated_in, rtol, atol = tolerance
    row.rtol, row.atol = _tolerances.difference_tolerance(
        value[0].dtype, evaluated_in, 2 if row.function in ("hessian", "batch_hessian", "hvp")
        else 1, rtol, atol)
    found = compare(value, expected, labels, (row.rtol, row.atol))
    row.shape, row.worst = found["shape"], found.get("worst", "")
    row.max_abs_error, row.max_rel_error = found["max_abs_error"], found["max_rel_error"]
    if "problem" in found:
        row.reason = f"{row.route} {found['problem']}"
    elif not found["ok"]:
        row.reason = (f"{row.route} disagrees with finite differences at {found['worst']}: "
                      f"{number(found['got'])} vs {number(found['want'])} ({found['count']} "
                      f"of {found['size']} elements)")
    row.ok = not row.reason
    return row


def _against_routes(row, value, median, labels, tolerance) -> None:
    _, rtol, atol = tolerance
    between = compare(value, median, labels,
                      _tolerances.between_routes_tolerance(value[0].dtype, rtol, atol))
    row.route_difference = between["max_abs_error"]
    if not between["ok"]:
        row.ok, row.worst = False, between["worst"]
        row.reason = (f"{row.route} disagrees with the other routes at {between['worst']}: "
                      f"{number(between['got'])} vs {number(between['want'])} (their median)")
