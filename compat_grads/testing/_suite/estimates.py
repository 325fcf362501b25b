"""The Hutchinson estimates the diagonal and trace functions must give, recomputed in numpy
from the probes the library documents (Rademacher ±1 from
`tf.random.stateless_uniform(seed=[seed, k])`, k the flat source's index) and the exact
Hessian: both suites check every route against it, so the TF1 graph and the TF2 routes give
the same estimate for one seed."""

from __future__ import annotations

import numpy as np

from compat_grads._src.core.tf import tf

PROBES = 16
SEED = 7


def probes_op(shape, count=PROBES, seed=SEED, k=0):
    """The probes as a TensorFlow op, in whatever mode runs it."""
    bits = tf.random.stateless_uniform([count, *shape], tf.constant([seed, k], tf.int64),
                                       minval=0, maxval=2, dtype=tf.int32)
    return tf.cast(2 * bits - 1, tf.float64)


def batch_laplacian(probes, hessians):
    """mean over probes of vᵀ H v per sample: `probes` [S, b, n], `hessians` [b, n, n]."""
    samples = np.einsum("sbi,bij,sbj->sb", probes, hessians, probes)
    return samples.mean(0), samples.std(0, ddof=1) / np.sqrt(len(samples))


def batch_diagonal(probes, hessians):
    """mean over probes of v ⊙ H v per sample."""
    samples = probes * np.einsum("bij,sbj->sbi", hessians, probes)
    return samples.mean(0), samples.std(0, ddof=1) / np.sqrt(len(samples))


def batch_divergence(probes, jacobians):
    """mean over probes of vᵀ J v per sample."""
    return batch_laplacian(probes, jacobians)


def per_sample_3x2y_plus_y2(xy):
    """`3x²y + y²` per sample, its Hessians `[[6y, 6x], [6x, 2]]` (float64)."""
    x, y = xy[:, 0], xy[:, 1]
    return np.stack([np.stack([6 * y, 6 * x], -1), np.stack([6 * x, 2 + 0 * x], -1)], 1)
