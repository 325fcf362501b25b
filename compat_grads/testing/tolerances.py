"""Every tolerance of the matrix, in one place.

Errors are measured as `max|a - b| / max(1, max|b|)`. Routes that run the same algorithm
(the graph backend in a TF1 graph, a v1 Graph in TF2 and a tf.function) must agree bit for
bit; other pairs, and every route against the float64 oracle, within `TOLERANCE[dtype]`.
"""

import numpy as np

from compat_grads._tf import tf

TOLERANCE = {"float64": 1e-6, "float32": 1e-4, "float16": 2e-2, "bfloat16": 6e-2}
SAME_ALGORITHM = 0.0


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
