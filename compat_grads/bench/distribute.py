"""`compat-grads bench --distribute N`: the tall Jacobian of y = tanh(A x) on N logical CPU
devices next to one device, in its own process (TensorFlow fixes its devices when it
starts): `python -m compat_grads.bench.distribute N M COLUMNS REPEATS` prints one JSON line.

Times are medians measured side by side (`timing.interleaved_ms`). Memory is the CPU
allocator's peak (`tf.config.experimental.get_memory_info`) during one call: the logical
devices of one CPU share that allocator, so a replica's own peak is measured by running its
share (its rows of the Jacobian) alone, next to the whole Jacobian on one device and all
replicas at once with `gather=False`. On one CPU the replicas also share the same cores:
expect no speed-up here; on several GPUs each replica has its own device and memory.
"""

import json
import sys

import numpy as np

from compat_grads.bench.timing import interleaved_ms
from compat_grads.testing.devices import logical_cpus


def _peak_mb(tf, call):
    """The CPU allocator's peak in MiB while `call()` runs once."""
    tf.config.experimental.reset_memory_stats("CPU:0")
    for leaf in tf.nest.flatten(call(), expand_composites=True):
        leaf.numpy()
    return tf.config.experimental.get_memory_info("CPU:0")["peak"] / 2 ** 20


def main(argv):
    count, m, n, repeats = (int(a) for a in argv)
    devices = logical_cpus(count)  # before TensorFlow runs anything
    import compat_grads as cg
    from compat_grads._src.core.tf import tf

    rng = np.random.default_rng(0)
    a = tf.constant((rng.standard_normal((m, n)) / np.sqrt(n)).astype(np.float32))
    x = tf.constant(rng.standard_normal(n).astype(np.float32))

    def f(x):
        return tf.tanh(tf.linalg.matvec(a, x))

    strategy = tf.distribute.MirroredStrategy(devices)
    recipes = {
        "one device": lambda: cg.stacked_jacobian(f, x),
        f"{count} replicas (MirroredStrategy), gathered": lambda: cg.stacked_jacobian(
            f, x, distribute=strategy),
        f"{count} devices (a list), gathered": lambda: cg.stacked_jacobian(
            f, x, distribute=devices),
    }
    times = interleaved_ms(recipes, repeats)
    from compat_grads._src.call import options as _options
    from compat_grads._src.call import run as _call
    from compat_grads._src.call import specs as _specs

    share = tf.function(lambda: _call.split(
        _specs.STACKED_JACOBIAN, f, (x,), _options.Options()).piece(0, count))  # replica 0's work
    memory = {
        "whole Jacobian, one device": _peak_mb(tf, recipes["one device"]),
        "one replica's share, alone": _peak_mb(tf, share),
        f"all {count} replicas at once, gather=False": _peak_mb(
            tf, lambda: cg.stacked_jacobian(f, x, distribute=strategy, gather=False)),
    }
    print(json.dumps({"devices": count, "m": m, "n": n, "result_mb": m * n * 4 / 2 ** 20,
                      "ms": times, "peak_mb": memory}))
    return 0


def markdown(report) -> str:
    one = report["ms"]["one device"]
    lines = [f"Tall Jacobian {report['m']}x{report['n']} (result "
             f"{report['result_mb']:.1f} MiB) on {report['devices']} logical CPU devices",
             "", "| recipe | ms | one device ms / this ms |", "|---|---|---|"]
    lines += [f"| {name} | {ms:.2f} | {one / ms:.2f} |" for name, ms in report["ms"].items()]
    lines += ["", "| run | peak MiB (the CPU allocator) |", "|---|---|"]
    lines += [f"| {name} | {peak:.1f} |" for name, peak in report["peak_mb"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
