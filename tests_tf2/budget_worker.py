"""One derivative computed with a memory budget, in its own process: `python
tests_tf2/budget_worker.py FUNCTION STRATEGY M N BUDGET`; prints one JSON line.

FUNCTION is "stacked" (the `[m, n]` Jacobian of y = tanh(A x)) or "batch" (the `[b, m, n]`
per-sample Jacobians of y = tanh(x Aᵀ) for b = 4 samples). The peak is the rise of the
process's resident set (VmHWM, reset first) during the call, tracing included, after a
small chunked call of the same function has started the runtime; the result is then
compared with the one computed all at once.
"""

import json
import sys

import numpy as np

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads.bench.timing import reset_peak_rss, rss_mb

BATCH = 4


def main(function, strategy, m, n, budget):
    rng = np.random.default_rng(0)
    a = tf.Variable((rng.standard_normal((m, n)) / n).astype(np.float32))  # not folded
    if function == "stacked":
        x = tf.constant(rng.standard_normal(n).astype(np.float32))
        call, f = cg.stacked_jacobian, lambda x: tf.tanh(tf.linalg.matvec(a, x))
    else:
        x = tf.constant(rng.standard_normal((BATCH, n)).astype(np.float32))
        call, f = cg.batch_jacobian, lambda x: tf.tanh(tf.matmul(x, a, transpose_b=True))
    small = tf.ones([2] + x.shape[1:])  # the runtime and pfor's machinery started first
    call(lambda v: tf.tanh(v * 2.0), small, strategy=strategy, chunk_size=1).numpy()
    reset_peak_rss()
    baseline = rss_mb()
    with cg.memory_plans() as plans:
        chunked = call(f, x, strategy=strategy, memory_budget=budget)
    peak = (rss_mb("VmHWM:") - baseline) * 2**20  # before .numpy(), which may copy it
    chunked = chunked.numpy()
    whole = call(f, x, strategy=strategy, chunk_size=None).numpy()
    return {"peak_bytes": peak, "result_bytes": chunked.nbytes, "budget": budget,
            "plans": [vars(p) for p in plans], "same": bool(np.array_equal(chunked, whole))}


if __name__ == "__main__":
    function, strategy, *sizes = sys.argv[1:]
    print(json.dumps(main(function, strategy, *map(int, sizes))))
