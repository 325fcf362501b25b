"""A Jacobian whose all-at-once estimate is larger than the machine, computed with the
defaults, in its own process: `python -m compat_grads.bench.bigger M N HIDDEN BUDGET`
(BUDGET 0: the default, half of the memory free); prints one JSON line.

The target is a tall MLP `R^N -> R^M` (tanh layers N -> HIDDEN -> HIDDEN -> M, small
weights), so the result is M x N floats while every column carries tangents of the M
outputs: `chunk_size="auto"` must chunk it. TensorFlow's `tape.jacobian` is not run on it
(it would be killed). The peak is the rise of the resident set (VmHWM, reset first) during
the call; a few columns are checked against `cg.jvp` with their one-hot tangents.
"""

import json
import sys
import time

import numpy as np

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads._src.memory import total_bytes
from compat_grads.bench.timing import reset_peak_rss, rss_mb

CHECKED = (0, 1)
"""Columns checked against jvp (and the last one)."""


def mlp(n, hidden, m):
    rng = np.random.default_rng(0)
    weights = [tf.Variable((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32))
               for shape in ((n, hidden), (hidden, hidden), (hidden, m))]

    def f(x):
        h = x[None, :]
        for w in weights[:-1]:
            h = tf.tanh(tf.matmul(h, w))
        return tf.tanh(tf.matmul(h, weights[-1]))[0]
    return f


def main(m, n, hidden, budget):
    f = mlp(n, hidden, m)
    x = tf.constant(np.linspace(-1, 1, n).astype(np.float32))
    options = {} if not budget else {"memory_budget": budget}
    _ = f(x).numpy()  # the runtime started before the baseline
    reset_peak_rss()
    baseline = rss_mb()
    start = time.perf_counter()
    with cg.memory_plans() as plans:
        jacobian = cg.stacked_jacobian(f, x, **options)
    seconds = time.perf_counter() - start
    peak = (rss_mb("VmHWM:") - baseline) * 2**20
    (plan,) = plans
    worst = 0.0
    for j in (*CHECKED, n - 1):
        _, column = cg.jvp(f, x, tf.one_hot(j, n))
        worst = max(worst, float(tf.reduce_max(tf.abs(jacobian[:, j] - column))))
    return {"m": m, "n": n, "hidden": hidden, "result_bytes": plan.result_bytes,
            "all_at_once_bytes": plan.all_at_once_bytes, "machine_bytes": total_bytes(),
            "budget_bytes": plan.budget_bytes, "chunk_size": plan.chunk_size,
            "pieces": plan.pieces, "peak_bytes": peak, "seconds": seconds,
            "max_abs_vs_jvp": worst}


if __name__ == "__main__":
    print(json.dumps(main(*map(int, sys.argv[1:5]))))
