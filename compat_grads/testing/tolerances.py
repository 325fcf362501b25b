"""Every tolerance of the matrix, in one place.

Errors are measured as `max|a - b| / max(1, max|b|)`. Routes that run the same algorithm
(the graph backend in a TF1 graph, a v1 Graph in TF2 and a tf.function) must agree bit for
bit; other pairs, and every route against the float64 oracle, within `TOLERANCE[dtype]`.
"""

import numpy as np

from compat_grads._src.core.tf import tf

TOLERANCE = {"float64": 1e-6, "float32": 1e-4, "float16": 2e-2, "bfloat16": 6e-2}
SAME_ALGORITHM = 0.0
MODEL_TOLERANCE = {"float32": 2e-4, "float64": 1e-9}
"""The Keras model matrix (`compat_grads.testing.models`): a model's float32 kernels add up
more rounding than a matrix case's, against the same float64 references."""


def pin_runtime_for_bitwise():
    """What bit-for-bit agreement between a Session and a tf.function needs: grappler's
    arithmetic optimizer and constant folding off (their rewrites differ between the two
    runtimes, and between a value passed in and one built into the graph), and oneDNN's
    graph rewrites off (`TF_ENABLE_ONEDNN_OPTS=0`, read when TensorFlow loads: tox sets it).
    The test suites call this once per process; the library never does."""
    tf.config.optimizer.set_experimental_options(
        {"arithmetic_optimization": False, "constant_folding": False})


def scaled_error(actual, reference) -> float:
    actual = np.asarray(actual, np.float64)
    reference = np.asarray(reference, np.float64)
    if actual.size == 0:
        return 0.0
    return float(np.max(np.abs(actual - reference)) / max(1.0, float(np.max(np.abs(reference)))))


def max_abs_difference(actual, reference) -> float:
    actual = np.asarray(actual, np.float64)
    if actual.size == 0:
        return 0.0
    return float(np.max(np.abs(actual - np.asarray(reference, np.float64))))


# compare_port: (rtol, atol) by the less precise dtype of the two sides; integers and bools
# must be equal. A port runs other kernels in another runtime, so float32 allows a few ulps.
PORT_TOLERANCE = {"bfloat16": (1e-2, 1e-2), "float16": (1e-3, 1e-3),
                  "float32": (1e-5, 1e-6), "float64": (1e-10, 1e-12)}
_PRECISION = ("bfloat16", "float16", "float32", "float64")
_AS_REAL = {"complex64": "float32", "complex128": "float64"}


def port_tolerance(dtype_a, dtype_b, rtol=None, atol=None) -> tuple:
    """(rtol, atol) for comparing values of these two numpy dtypes, overrides applied."""
    names = [_AS_REAL.get(np.dtype(d).name, np.dtype(d).name) for d in (dtype_a, dtype_b)]
    floats = [n for n in names if n in PORT_TOLERANCE]
    default = (PORT_TOLERANCE[min(floats, key=_PRECISION.index)] if floats else (0.0, 0.0))
    return (default[0] if rtol is None else rtol, default[1] if atol is None else atol)


# check_derivatives: (rtol, atol) of central differences of f, by the order of the derivative
# and the dtype f was evaluated in (float64 unless f only runs in its own dtype): a route is
# held to the looser of this and PORT_TOLERANCE of its dtype against them, and to twice
# PORT_TOLERANCE against the other routes (each may be off by one tolerance).
DIFFERENCE_TOLERANCE = {
    1: {"float64": (1e-6, 1e-6), "float32": (2e-3, 2e-3), "float16": (5e-2, 5e-2),
        "bfloat16": (1e-1, 1e-1)},
    2: {"float64": (1e-4, 1e-4), "float32": (2e-2, 2e-2), "float16": (2e-1, 2e-1),
        "bfloat16": (3e-1, 3e-1)},
}


def difference_tolerance(dtype, evaluated_in, order, rtol=None, atol=None) -> tuple:
    """(rtol, atol) for a derivative of numpy `dtype` against central differences of order
    `order` taken in `evaluated_in`, overrides applied."""
    port = port_tolerance(dtype, dtype)
    table = DIFFERENCE_TOLERANCE[order][_AS_REAL.get(np.dtype(evaluated_in).name,
                                                     np.dtype(evaluated_in).name)]
    return (max(port[0], table[0]) if rtol is None else rtol,
            max(port[1], table[1]) if atol is None else atol)


def between_routes_tolerance(dtype, rtol=None, atol=None) -> tuple:
    """(rtol, atol) for two routes' derivatives of numpy `dtype`: twice PORT_TOLERANCE."""
    port = port_tolerance(dtype, dtype, rtol, atol)
    return 2 * port[0], 2 * port[1]
