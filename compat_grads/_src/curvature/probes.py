"""The estimators' random vectors, from stateless generators only: one `seed` (an int, or an
integer scalar tensor) gives the same numbers in a TF1 Session, in eager code and in a
`tf.function`, and each use of the seed gets its own stream by a `salt`: the estimators' salts
are >= 0, the labels a true Fisher samples use negative ones (`label_salt`), so one seed given
to both never draws the same stream twice."""

from __future__ import annotations

import numpy as np

from compat_grads._src.core.tf import tf


def _key(seed, salt):
    """The `[2]` int64 key of the stateless ops: the caller's seed, then the salt that keeps
    one call's streams apart (a Python int, or a tensor such as a loop counter)."""
    return tf.stack([tf.cast(seed, tf.int64), tf.cast(salt, tf.int64)])


def rademacher(shape, seed, salt, dtype):
    """±1 with probability 1/2 each: Hutchinson's probes, whose variance is the least of
    any distribution with E[z zᵀ] = I."""
    bits = tf.random.stateless_uniform(shape, _key(seed, salt), minval=0, maxval=2,
                                       dtype=tf.int32)
    return tf.cast(2 * bits - 1, dtype)


def normal(shape, seed, salt, dtype):
    """Standard normal: a start vector with no preferred direction."""
    return tf.random.stateless_normal(shape, _key(seed, salt), dtype=dtype)


def uniform(shape, seed, salt, dtype):
    """Uniform in the open interval (0, 1): -log(-log u) is Gumbel noise, whose argmax
    added to logits samples the categorical distribution of their softmax."""
    tiny = float(np.finfo(dtype.as_numpy_dtype).tiny)
    return tf.random.stateless_uniform(shape, _key(seed, salt), minval=tiny, maxval=1.0,
                                       dtype=dtype)


def label_salt(batch):
    """The salt of the labels sampled for batch `batch` (0, 1, ...; an int or a tensor):
    negative, apart from every estimator's."""
    return -1 - tf.cast(batch, tf.int64)
