"""Judging the matrix: one item run over several routes here, its results checked against
the oracle and each other (the TF1 side runs in `compat_grads.testing.process`), and the
checks the suites share (flat graphs, independence, hvp against the Hessian)."""

from __future__ import annotations

import functools

from compat_grads.testing import compare, matrix, modes, process, tolerances
from compat_grads.testing.routes import run


def check_item(item, routes, reference=None, extra=None, bitwise=True):
    """Runs `item` on `routes` here and checks every result.

    `extra` holds results from elsewhere (the TF1 process), keyed by route, joined to the
    comparison. Returns (problems, results, oracle error, largest difference to the
    reference route).
    """
    results = run_routes(item, routes)
    results.update(extra or {})
    return judge(item, results, reference, bitwise)


def run_routes(item, routes) -> dict:
    """{route: Result} of `item` on those of `routes` that apply to it, run here."""
    return {route: run(item, route) for route in routes if item.applies(route)}


def matrix_work(routes, bitwise=False):
    """What a worker process runs (`process.WorkerProcess`'s `work`): ({item id: item} of
    the matrix, item -> `run_routes` on `routes`), the runtime pinned first with `bitwise`
    (`tolerances.pin_runtime_for_bitwise`)."""
    if bitwise:
        tolerances.pin_runtime_for_bitwise()
    return {item.id: item for item in matrix.items()}, functools.partial(run_routes,
                                                                         routes=routes)


def run_tf1_process(items, routes, bitwise=False, timeout=1800) -> dict:
    """Runs `items` on TF1 `routes` in a new process with v2 behaviour disabled (and, with
    `bitwise`, the runtime pinned as in `tolerances.pin_runtime_for_bitwise`).

    Returns {item id: {route: Result}}. Raises `process.WorkerError` with the worker's
    output if the worker fails.
    """
    return process.run_tf1_process([item.id for item in items],
                                   functools.partial(matrix_work, tuple(routes), bitwise),
                                   ", ".join(routes), timeout)


def judge(item, results, reference=None, bitwise=True):
    """Checks `results` ({route: Result}) against the oracle and each other: see
    `check_item`."""
    results = {r: res for r, res in results.items() if item.applies(r)}
    problems, worst_oracle = [], 0.0
    for route, result in results.items():
        found, error = compare.against_oracle(item, route, result)
        problems += [f"{route}: {p}" for p in found]
        worst_oracle = max(worst_oracle, error) if error == error else worst_oracle
    supported = {r: res for r, res in results.items() if not item.expected_error(r)}
    if reference not in supported:
        reference = next(iter(supported), None)
    found, worst_route = compare.all_between(item, supported, reference, bitwise)
    return problems + found, results, worst_oracle, worst_route


def graph_op_counts(function, strategy=None, sizes=(200, 2000, 4000), n=50) -> dict:
    """{m: ops in a graph holding `function(tanh(W @ x), x)`}, W an (m, n) placeholder.

    Builds in a new graph (a TF1 graph in a TF1 process, a v1 Graph inside TF2 otherwise),
    to show that the graph does not grow with the number m of target elements.
    """
    from compat_grads._src.core.tf import tf

    counts = {}
    for m in sizes:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [n])
            w = tf.compat.v1.placeholder(tf.float32, [m, n])
            kwargs = {} if strategy is None else {"strategy": strategy}
            function(tf.tanh(tf.linalg.matvec(w, x)), x, **kwargs)
        counts[m] = len(graph.get_operations())
    return counts


def assert_flat_graph(function, strategy=None):
    """Asserts the graph of `function` does not grow with the number of target elements."""
    counts = graph_op_counts(function, strategy)
    assert counts[2000] == counts[4000], counts
    # tf.zeros folds shapes under 1000 elements into one Const instead of a Fill: a constant
    # difference, not growth.
    assert abs(counts[200] - counts[4000]) <= 4, counts


def independence_errors(route):
    """{(function, independent): error vs the oracle} for the coupled-samples case on
    `route`: the default (independent=True) is wrong there, independent=False is right."""
    from compat_grads.testing import cases

    case = cases.get("coupled_samples")
    errors = {}
    for function in ("batch_jacobian", "batch_hessian"):
        for independent in (True, False):
            item = matrix.Item(case, function, "auto", "none", independent)
            result = run(item, route)
            if result.error:
                raise AssertionError(f"{item} on {route}: {result.error}")
            errors[function, independent] = compare.against_oracle(item, route, result)[1]
    return errors


def hvp_against_hessian(case, mode):
    """Max scaled difference between `hvp(f, x, v)` and `hessian(f, x) @ v` for the scalar
    `f = sum(w * target)` (w fixed) of `case`, run in `mode` (`compat_grads.testing.modes`):
    "tf1" or "v1_graph" (a Session in a new graph: a TF1 graph in a TF1 process),
    "function" or "eager"."""
    import numpy as np

    import compat_grads as cg
    from compat_grads._src.core.tf import tf
    from compat_grads.testing import tolerances

    sources, consts = case.inputs()
    tangents, weight = case.directions()
    dtype = tf.as_dtype(case.dtype)

    def both(xs, v, cs):
        def f(s):
            y = tf.cast(case.build(s, cs), tf.float64)
            return tf.reduce_sum(y * tf.constant(weight, tf.float64))
        return cg.hessian(f, xs, unconnected_gradients="zero"), cg.hvp(f, xs, v)

    def tensors():
        convert = lambda a: tf.constant(a, dtype)  # noqa: E731
        return (case.repeated(tf.nest.map_structure(convert, sources)),
                tf.nest.map_structure(convert, tangents),
                {k: convert(v) for k, v in consts.items()})

    if mode in (modes.TF1, modes.V1_GRAPH):
        with tf.Graph().as_default(), tf.compat.v1.Session() as session:
            hessian, product = session.run(both(*tensors()))
    else:
        run = tf.function(both) if mode == modes.FUNCTION else both
        hessian, product = tf.nest.map_structure(np.asarray, run(*tensors()))
    flat_h = [np.asarray(h, np.float64) for h in tf.nest.flatten(hessian)]
    flat_v = [np.asarray(v, np.float64) for v in tf.nest.flatten(tangents)]
    worst = 0.0
    for i, got in enumerate(tf.nest.flatten(product)):
        want = sum(np.tensordot(flat_h[i * len(flat_v) + j], v, axes=v.ndim)
                   for j, v in enumerate(flat_v))
        assert np.shape(got) == want.shape, (np.shape(got), want.shape)
        worst = max(worst, tolerances.scaled_error(got, want))
    return worst
