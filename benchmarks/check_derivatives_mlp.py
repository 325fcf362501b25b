"""How long `check_derivatives` takes on a 3-layer MLP (inputs 32 x 16) at order=1, on
every mode and strategy, the TF1 worker's start included (the issue's target: under 15 s).

    python benchmarks/check_derivatives_mlp.py

The MLP's weights are numpy constants made at import, so the TF1 worker (which imports
this module by name to get `mlp`) builds the same function.
"""

from __future__ import annotations

import sys
import time

import numpy as np

_RNG = np.random.default_rng(0)
SIZES = (16, 32, 32, 4)
WEIGHTS = [(_RNG.standard_normal((n, m)) / np.sqrt(n), _RNG.standard_normal(m) * 0.1)
           for n, m in zip(SIZES[:-1], SIZES[1:])]
INPUTS = _RNG.standard_normal((32, 16)).astype(np.float32)


def mlp(x):
    """Two tanh layers and a linear one, in the inputs' dtype: [32, 16] -> [32, 4]."""
    import tensorflow as tf

    for i, (w, b) in enumerate(WEIGHTS):
        x = tf.matmul(x, tf.constant(w, x.dtype)) + tf.constant(b, x.dtype)
        x = tf.tanh(x) if i < len(WEIGHTS) - 1 else x
    return x


def main() -> int:
    start = time.perf_counter()
    import compat_grads as cg
    from compat_grads.testing import remote

    remote.shutdown()  # the TF1 worker's start is part of the time
    import check_derivatives_mlp as this  # `mlp` by its module name, as the worker finds it

    report = cg.check_derivatives(this.mlp, INPUTS)
    elapsed = time.perf_counter() - start
    print(str(report).splitlines()[0] if report.ok else report)
    print(f"check_derivatives: 3-layer MLP, inputs {INPUTS.shape}, order=1, "
          f"{len(report.rows)} rows (every mode and strategy): {elapsed:.1f} s "
          f"(TensorFlow's import and the TF1 worker's start included)")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
