"""Graph build time of stacked_jacobian in a TF1 graph for m target elements, weights fed as
placeholders (so constant size does not dominate), next to the seed article's Python loop of
tf.gradients. Run: python benchmarks/tf1_graph_build.py [m ...]

Prints one markdown row per (m, recipe): build seconds, graph ops, run milliseconds, and the
ratio of the build time to that at the smallest m.
"""

import sys
import time

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_v2_behavior()

import compat_grads as cg  # noqa: E402

N = 50


def _measure(m, build):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [N])
        w = tf.compat.v1.placeholder(tf.float32, [m, N])
        y = tf.tanh(tf.linalg.matvec(w, x))
        start = time.perf_counter()
        out = build(y, x)
        seconds = time.perf_counter() - start
        ops = len(graph.get_operations())
        feed = {x: np.ones(N, np.float32), w: np.ones((m, N), np.float32) / N}
        with tf.compat.v1.Session() as session:
            session.run(out, feed)
            start = time.perf_counter()
            for _ in range(5):
                session.run(out, feed)
            run_ms = (time.perf_counter() - start) / 5 * 1e3
    return seconds, ops, run_ms


def _python_loop(y, x):
    return tf.stack([tf.gradients(y[i], x)[0] for i in range(y.shape[0])])


RECIPES = {
    "cg.stacked_jacobian reverse": lambda y, x: cg.stacked_jacobian(y, x, strategy="reverse"),
    "cg.stacked_jacobian loop": lambda y, x: cg.stacked_jacobian(y, x, strategy="loop"),
    "cg.stacked_jacobian auto": lambda y, x: cg.stacked_jacobian(y, x),
    "python loop of tf.gradients (m <= 1000)": _python_loop,
}


def main(sizes):
    print("| recipe | m | build s | ops | run ms | build / build at first m |")
    print("|---|---|---|---|---|---|")
    for name, build in RECIPES.items():
        first = None
        for m in sizes:
            if "python loop" in name and m > 1000:
                continue
            seconds, ops, run_ms = _measure(m, build)
            first = first or seconds
            print(f"| {name} | {m} | {seconds:.3f} | {ops} | {run_ms:.1f} | "
                  f"{seconds / first:.2f} |")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [200, 1000, 4000])
