"""Checks of route results against the oracle and against each other.

Each check returns a list of problems (empty when all is well) plus the measured numbers,
so the test suites can assert and `compat-grads check` can print a table.
"""

from __future__ import annotations

import numpy as np

from compat_grads._src.core.tf import tf
from compat_grads.testing import matrix, oracle, tolerances
from compat_grads.testing.routes import backend_of


def _precision(item) -> str:
    return item.case.dtype


def against_oracle(item, route, result):
    """(problems, max scaled error vs the oracle) for one route's result."""
    if item.expected_error(route):
        return _error_problems(result, item.expected_error(route)), float("nan")
    if result.error:
        return [f"raised {result.error}"], float("nan")
    problems = [f"unexpected warning: {w}" for w in result.warnings
                if not item.case.may_fall_back]
    if result.structure_error:
        problems.append(f"result does not mirror the sources: {result.structure_error}")
    want = expected(item, route)
    if len(want) != len(result.values):
        return problems + [f"{len(result.values)} results for {len(want)} expected"], \
            float("nan")
    worst = 0.0
    dtype = np.dtype(tf.as_dtype(item.case.dtype).as_numpy_dtype)
    for k, ((ref, of_source), got, static) in enumerate(zip(want, result.values,
                                                            result.static_shapes)):
        problems += _leaf_problems(k, got, ref, static)
        if got is not None and of_source and got.dtype != dtype:
            problems.append(f"result {k} has dtype {got.dtype}, expected the source's {dtype}")
        if got is not None and ref is not None and np.shape(got) == ref.shape:
            worst = max(worst, tolerances.scaled_error(got, ref))
    limit = tolerances.TOLERANCE[_precision(item)]
    if worst > limit:
        problems.append(f"error vs oracle {worst:.3g} > tolerance {limit:g}")
    return problems, worst


def expected(item, route) -> list:
    """What `item` must return on `route`, flattened as the result is: `(array or None,
    whether it has the source's dtype)` per leaf. The value `y` (the numpy function in
    float64) and the aux `y + y` come first (jvp's and vjp's aux last), then the derivative
    (`oracle.expected`, joined into one matrix for a flat item)."""
    case, function = item.case, item.function
    derivative = oracle.expected(case, function, item.unconnected, item.independent)
    if item.flat:
        derivative = [_flat(item, derivative)]
    sources, consts = case.inputs()
    value = np.asarray(case.numpy_fn(sources, consts), np.float64)
    aux = [(2.0 * value, False)] if matrix.callable_route(route) else []
    if function in ("jvp", "vjp"):
        outputs, products = derivative[0], derivative[1:]
        return [(outputs, False)] + [(p, function == "vjp") for p in products] + aux
    return [(value, False)] + aux + [(d, True) for d in derivative]


def _flat(item, blocks):
    """The oracle's blocks as the one matrix of `flat=True` (`compat_grads._src.call.flat`)."""
    sources, consts = item.case.inputs()
    y = np.asarray(item.case.numpy_fn(sources, consts))
    shapes = [np.shape(x) for x in tf.nest.flatten(sources)]
    sizes = [int(np.prod(s)) for s in shapes]
    if item.function in ("batch_jacobian", "batch_hessian"):
        b, n = shapes[0][0], sizes[0] // shapes[0][0]
        m = n if item.function == "batch_hessian" else y.size // b
        block = blocks[0]
        return np.zeros((b, m, n)) if block is None else block.reshape(b, m, n)
    m, count = y.size, len(shapes)
    if item.function == "stacked_jacobian":
        return np.concatenate([np.zeros((m, n)) if b is None else b.reshape(m, n)
                               for b, n in zip(blocks, sizes)], axis=1)
    rows = [np.concatenate([np.zeros((m, sizes[i], n_j)) if b is None else
                            b.reshape(m, sizes[i], n_j)
                            for b, n_j in zip(blocks[i * count:(i + 1) * count], sizes)], axis=2)
            for i in range(count)]
    matrix_ = np.concatenate(rows, axis=1)
    return matrix_.reshape(matrix_.shape[1:]) if y.ndim == 0 else matrix_


def _error_problems(result, name):
    if result.error_type is None:
        return [f"ran, but this call is declared to fail: expected compat_grads.{name}"]
    if result.error_type.__name__ != name or "compat_grads." not in result.error:
        return [f"expected a clear compat_grads.{name}, got {result.error}"]
    return []


def _leaf_problems(k, got, ref, static):
    if (got is None) != (ref is None):
        return [f"result {k} is {'None' if got is None else 'a tensor'}, expected "
                f"{'None' if ref is None else 'a tensor'}"]
    if got is None:
        return []
    if np.shape(got) != ref.shape:
        return [f"result {k} has shape {np.shape(got)}, expected {ref.shape}"]
    if static is None or len(static) != ref.ndim or any(
            s is not None and s != r for s, r in zip(static, ref.shape)):
        return [f"result {k} has static shape {static}, expected one compatible with "
                f"{ref.shape}"]
    return []


def same_algorithm(item, route_a, route_b) -> bool:
    """Both routes run the graph backend on graphs of the same shapes. Compiled eager calls
    trace with the inputs' exact shapes, so with an unknown batch size in the other graph
    routes the kernels (and the last bits) may differ."""
    if not backend_of(route_a) == backend_of(route_b) == "graph":
        return False
    return not (item.case.dynamic_batch and "eager.callable" in (route_a, route_b))


def between(item, route_a, result_a, route_b, result_b, bitwise=True):
    """(problems, max |a - b|) between two routes; bit for bit when they share an algorithm
    and `bitwise` is set (oneDNN's graph rewrites can differ by an ulp between a Session and
    a tf.function; tox turns them off with TF_ENABLE_ONEDNN_OPTS=0)."""
    if result_a.error or result_b.error:
        return [], float("nan")
    same = bitwise and same_algorithm(item, route_a, route_b)
    limit = tolerances.SAME_ALGORITHM if same else tolerances.TOLERANCE[_precision(item)]
    problems, worst = [], 0.0
    values_a = matrix.without_aux(item.function, route_a, result_a.values)
    values_b = matrix.without_aux(item.function, route_b, result_b.values)
    for k, (a, b) in enumerate(zip(values_a, values_b)):
        if (a is None) != (b is None) or np.shape(a) != np.shape(b):
            problems.append(f"result {k}: {route_a} and {route_b} disagree on shape/None")
            continue
        if a is None:
            continue
        diff = tolerances.max_abs_difference(a, b)
        scaled = tolerances.scaled_error(a, b)
        worst = max(worst, diff)
        if (same and diff > 0) or scaled > limit:
            kind = "bitwise" if same else f"within {limit:g}"
            problems.append(f"result {k}: {route_a} vs {route_b} differ by {diff:.3g} "
                            f"(expected {kind})")
    return problems, worst


def all_between(item, results: dict, reference: str, bitwise=True):
    """Problems and the largest difference of every route against `reference`, plus
    bitwise checks among all graph-backend routes."""
    problems, worst = [], 0.0
    names = list(results)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if a != reference and b != reference and not same_algorithm(item, a, b):
                continue
            found, diff = between(item, a, results[a], b, results[b], bitwise)
            problems += found
            worst = max(worst, diff) if diff == diff else worst
    return problems, worst
