"""TF1 graph build and run for m target elements (weights fed as placeholders, so constant
size does not dominate). Run in its own process: `python -m compat_grads.bench.tf1_graph
REPEATS LOOP_MAX M...`; prints one JSON line: a list of rows."""

import json
import sys
import time

import numpy as np

from compat_grads._tf import tf

N = 50


def _python_loop(y, x):
    return tf.stack([tf.compat.v1.gradients(y[i], x)[0] for i in range(y.shape[0])])


def _map_fn(y, x):
    return tf.map_fn(lambda i: tf.compat.v1.gradients(tf.gather(y, i), x)[0],
                     tf.range(tf.size(y)), fn_output_signature=tf.float32)


def _parallel_for(y, x):
    from tensorflow.python.ops.parallel_for import gradients as private  # TF's best in TF1

    return private.jacobian(y, x)


def recipes():
    import compat_grads as cg

    return {
        "compat_grads stacked_jacobian (auto)": lambda y, x: cg.stacked_jacobian(y, x),
        "compat_grads stacked_jacobian (reverse)": lambda y, x: cg.stacked_jacobian(
            y, x, strategy="reverse"),
        "compat_grads stacked_jacobian (loop)": lambda y, x: cg.stacked_jacobian(
            y, x, strategy="loop"),
        "map_fn over indices + tf.gradients": _map_fn,
        "parallel_for.jacobian (private)": _parallel_for,
        "Python loop of tf.gradients": _python_loop,
    }


def measure(m, build, repeats):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [N])
        w = tf.compat.v1.placeholder(tf.float32, [m, N])
        y = tf.tanh(tf.linalg.matvec(w, x))
        start = time.perf_counter()
        out = build(y, x)
        build_s = time.perf_counter() - start
        ops = len(graph.get_operations())
        rng = np.random.default_rng(0)
        feed = {x: rng.standard_normal(N).astype(np.float32),
                w: rng.standard_normal((m, N)).astype(np.float32) / N}
        with tf.compat.v1.Session() as session:
            value = session.run(out, feed)
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                session.run(out, feed)
                times.append(time.perf_counter() - start)
    return {"build_s": build_s, "ops": ops, "run_ms": float(np.median(times)) * 1e3,
            "checksum": float(np.sum(value))}


def main(argv):
    repeats, loop_max, *sizes = map(int, argv)
    tf.compat.v1.disable_v2_behavior()
    rows = []
    for m in sizes:
        for name, build in recipes().items():
            if "Python loop" in name and m > loop_max:
                continue
            rows.append({"m": m, "recipe": name, **measure(m, build, repeats)})
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
