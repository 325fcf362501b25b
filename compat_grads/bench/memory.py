"""Peak memory of one m x n float32 Jacobian, in its own process: `python -m
compat_grads.bench.memory M N STRATEGY CHUNK` (CHUNK 0 for none); prints one JSON line.

The peak is the rise of the process's resident set (VmHWM, reset first) while the Jacobian
of y = tanh(A x) is computed, A (m x n) already in memory; the first call, tracing included.
"""

import json
import sys

import numpy as np

from compat_grads._src.core.tf import tf
from compat_grads.bench.timing import reset_peak_rss, rss_mb


def main(argv):
    m, n, strategy, chunk = int(argv[0]), int(argv[1]), argv[2], int(argv[3]) or None
    import compat_grads as cg

    a = tf.constant((np.random.default_rng(0).standard_normal((m, n)) / n).astype(np.float32))
    x = tf.constant(np.ones(n, np.float32))
    _ = (tf.constant(1.0) + 1.0).numpy()  # start the runtime before the baseline
    reset_peak_rss()
    baseline = rss_mb()
    jacobian = cg.stacked_jacobian(lambda x: tf.tanh(tf.linalg.matvec(a, x)), x,
                                   strategy=strategy, chunk_size=chunk)
    peak = rss_mb("VmHWM:") - baseline
    result = jacobian.numpy().nbytes / 2 ** 20
    print(json.dumps({"m": m, "n": n, "strategy": strategy, "chunk_size": chunk,
                      "result_mb": result, "peak_delta_mb": peak, "ratio": peak / result}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
