"""Few gradient rows: vectorized (`cg.migrate.gradient_rows`) against the loop it replaces,
in a TF1 graph: `python benchmarks/few_rows.py [ROWS,...]` (default 4,6,8,10).

The measurement behind `compat_grads._src.stacking.cost.LOOP_ROWS` (the migration helpers
keep the loop for that many rows or fewer): the Jacobian columns of a 2-layer ReLU MLP (16
inputs) for a
batch of 1, 32 and 256 and widths 16, 64 and 256. Each recipe is built twice in a new graph
(the smaller build time is reported) and run 50 times (the median; the smaller of the two).
The vectorized recipe is what the helper builds above LOOP_ROWS: `cg.stacked_jacobian` of
the columns' batch sums (which the static rule of `compat_grads._src.stacking.cost` may
still run as separate passes, for large rows).
"""

import sys
import time

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
import compat_grads as cg  # noqa: E402

FEATURES, RUNS = 16, 50


def _one(batch, width, rows, recipe):
    graph, rng = tf.Graph(), np.random.default_rng(0)
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, FEATURES])
        h = x
        for shape in [(FEATURES, width), (width, width)]:
            h = tf.nn.relu(h @ tf.constant(rng.standard_normal(shape).astype(np.float32)))
        y = h @ tf.constant(rng.standard_normal((width, rows)).astype(np.float32))
        start = time.perf_counter()
        if recipe == "loop":
            rows_of = tf.stack([tf.gradients(y[:, i], x)[0] for i in range(rows)])
        else:
            rows_of = cg.stacked_jacobian(tf.reduce_sum(y, 0), x)
        build = time.perf_counter() - start
    feed = {x: np.random.default_rng(1).standard_normal((batch, FEATURES)).astype(np.float32)}
    with tf.Session(graph=graph) as session:
        session.run(rows_of, feed)
        times = []
        for _ in range(RUNS):
            start = time.perf_counter()
            session.run(rows_of, feed)
            times.append(time.perf_counter() - start)
    return build, float(np.median(times))


def main(argv):
    counts = [int(r) for r in (argv[0] if argv else "4,6,8,10").split(",")]
    _one(4, 8, 2, "loop"), _one(4, 8, 2, "vectorized")  # warm up
    print("| batch | width | rows | build loop / vectorized ms | run loop / vectorized us "
          "| run: loop / vectorized |")
    print("|---|---|---|---|---|---|")
    for batch in (1, 32, 256):
        for width in (16, 64, 256):
            for rows in counts:
                got = {recipe: [_one(batch, width, rows, recipe) for _ in range(2)]
                       for recipe in ("loop", "vectorized")}
                build = {k: min(b for b, _ in v) for k, v in got.items()}
                run = {k: min(r for _, r in v) for k, v in got.items()}
                print(f"| {batch} | {width} | {rows} | {1e3 * build['loop']:.1f} / "
                      f"{1e3 * build['vectorized']:.1f} | {1e6 * run['loop']:.0f} / "
                      f"{1e6 * run['vectorized']:.0f} | {run['loop'] / run['vectorized']:.2f} |",
                      flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
