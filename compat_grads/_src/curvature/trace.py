"""Traces and diagonals of an operator from its products with random probes.

Hutchinson: for Rademacher probes z (E[z zᵀ] = I), zᵀAz is an unbiased sample of tr(A) and
z ⊙ Az of diag(A). Hutch++ (Meyer, Musco, Musco and Woodruff, 2021) spends a third of its
products on a sketch Q of A's range, takes tr(QᵀAQ) exactly and Hutchinson's estimate of
the rest, tr((I - QQᵀ) A (I - QQᵀ)), which is small when A's spectrum decays: its error falls
as 1/num_samples where Hutchinson's falls as 1/sqrt(num_samples). The probes of each stage
go through one `op.matmul`.
"""

from __future__ import annotations

import math

from compat_grads._src.core.mode import as_graph
from compat_grads._src.core.tf import tf
from compat_grads._src.curvature import checks, probes

METHODS = ("hutchinson", "hutch++")
PROBES, SKETCH, RESIDUAL = 0, 1, 2
"""The salts of the probes' streams: Hutchinson's trace and the diagonal share theirs (one
seed: the trace estimate is the sum of the diagonal estimate)."""
FEWEST = {
    ("hutchinson", True): (2, "a standard error needs two probes"),
    ("hutch++", False): (3, "hutch++ needs a sketch vector, its product and a residual probe"),
    ("hutch++", True): (4, "hutch++'s standard error needs two residual probes"),
}
"""(the fewest num_samples, why) by (method, return_std), where more than one is needed."""


def trace_estimate(op, num_samples, method, seed, return_std):
    """The estimate (and its standard error), the arguments checked first. In eager code
    the products run in a one-off `tf.function` (`as_graph`), the ops a graph runs."""
    function = "trace_estimate"
    n = checks.square_operator(function, op)
    method = checks.choice(function, "method", method, METHODS)
    num_samples = checks.count(function, "num_samples", num_samples,
                               "how many products the estimate may take")
    seed = checks.seed(function, seed)
    return_std = checks.boolean(function, "return_std", return_std)
    _enough(function, method, num_samples, return_std)
    build = _hutchinson if method == "hutchinson" else _hutch_plus_plus
    estimate, error = as_graph(lambda: build(op, n, num_samples, seed, return_std))
    return (estimate, error) if return_std else estimate


def diagonal_estimate(op, num_samples, seed):
    """Hutchinson's estimate of diag(A), `[n]`, the arguments checked first."""
    function = "diagonal_estimate"
    n = checks.square_operator(function, op)
    num_samples = checks.count(function, "num_samples", num_samples,
                               "how many probes the estimate averages")
    seed = checks.seed(function, seed)
    return as_graph(lambda: _diagonal(op, n, num_samples, seed))


def _enough(function, method, num_samples, return_std):
    """num_samples, if it is enough for the method and the standard error."""
    fewest = FEWEST.get((method, return_std))
    if fewest is not None:
        checks.at_least(function, "num_samples", num_samples, *fewest)


def _hutchinson(op, n, num_samples, seed, return_std):
    """(mean of zᵀAz, its standard error or None) over `num_samples` probes."""
    z = probes.rademacher([n, num_samples], seed, PROBES, op.dtype)
    return mean_and_error(tf.reduce_sum(z * op.matmul(z), axis=0), num_samples, return_std)


def _hutch_plus_plus(op, n, num_samples, seed, return_std):
    """tr(QᵀAQ) + Hutchinson's estimate of the trace of the rest: `num_samples // 3`
    products sketch the range (AS, then Q = qr(AS)), as many take AQ, the remaining ones
    probe (I - QQᵀ) A (I - QQᵀ). The standard error is the residual's, given the sketch:
    tr(QᵀAQ) + tr((I - QQᵀ) A (I - QQᵀ)) = tr(A) for every Q, so the sketch adds no variance
    of its own and it is the estimate's too."""
    sketched = num_samples // 3
    q, _ = tf.linalg.qr(op.matmul(probes.rademacher([n, sketched], seed, SKETCH, op.dtype)))
    exact = tf.linalg.trace(tf.linalg.matmul(q, op.matmul(q), transpose_a=True))
    probed = num_samples - 2 * sketched
    g = probes.rademacher([n, probed], seed, RESIDUAL, op.dtype)
    g = g - tf.linalg.matmul(q, tf.linalg.matmul(q, g, transpose_a=True))
    rest, error = mean_and_error(tf.reduce_sum(g * op.matmul(g), axis=0), probed, return_std)
    return exact + rest, error


def _diagonal(op, n, num_samples, seed):
    """The mean of z ⊙ Az over `num_samples` probes."""
    z = probes.rademacher([n, num_samples], seed, PROBES, op.dtype)
    return tf.reduce_mean(z * op.matmul(z), axis=1)


def mean_and_error(samples, count, with_error):
    """(the mean of the `[count]` samples, its standard error: the sample standard deviation
    over sqrt(count); None without `with_error`)."""
    mean = tf.reduce_mean(samples)
    if not with_error:
        return mean, None
    spread = tf.reduce_sum(tf.square(samples - mean)) / (count - 1)
    return mean, tf.sqrt(spread) / math.sqrt(count)
