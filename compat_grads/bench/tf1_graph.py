"""TF1 graph build and run for m target elements (weights fed as placeholders, so constant
size does not dominate), and the few class rows through a small CNN. Run in its own
process: `python -m compat_grads.bench.tf1_graph REPEATS LOOP_MAX M... [--cnn BATCH]`;
prints one JSON line: {"graph": rows, "cnn": rows or null}."""

import json
import sys
import time

import numpy as np

from compat_grads._src.core.tf import tf

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


CLASSES = 10


def cnn_recipes():
    """The class rows of a CNN's logits: the loop of tf.gradients and what replaces it."""
    import compat_grads as cg
    from compat_grads.migrate import gradient_row_list, gradient_rows

    every = range(CLASSES)
    return {
        "Python loop of tf.gradients": lambda y, x: tf.stack(
            [tf.compat.v1.gradients(y[:, c], x)[0] for c in every]),
        "compat_grads stacked_jacobian (auto)": lambda y, x: cg.stacked_jacobian(
            tf.reduce_sum(y, 0), x),
        "compat_grads gradient_rows": lambda y, x: gradient_rows(y, x, every, axis=1),
        "compat_grads gradient_row_list": lambda y, x: tf.stack(
            gradient_row_list(y, x, every, axis=1)),
    }


def cnn_logits(x, seed=0):
    """Two 3x3 conv layers with ReLU and 2x2 max pooling, then a dense layer: (b, 10)."""
    rng = np.random.default_rng(seed)
    first = tf.constant(rng.standard_normal((3, 3, 1, 16)).astype(np.float32) * 0.3)
    second = tf.constant(rng.standard_normal((3, 3, 16, 32)).astype(np.float32) * 0.1)
    dense = tf.constant(rng.standard_normal((7 * 7 * 32, CLASSES)).astype(np.float32) / 40)
    h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, first, 1, "SAME")), 2, 2, "VALID")
    h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, second, 1, "SAME")), 2, 2, "VALID")
    return tf.reshape(h, [-1, 7 * 7 * 32]) @ dense


def measure_cnn(batch, repeats):
    """The CNN's class rows in one graph, each recipe checked against the loop, then
    timed side by side (interleaved)."""
    from compat_grads.bench.timing import interleaved_ms

    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 28, 28, 1])
        logits = cnn_logits(x)
        outs, builds = {}, {}
        for name, build in cnn_recipes().items():
            start = time.perf_counter()
            outs[name] = build(logits, x)
            builds[name] = time.perf_counter() - start
        feed = {x: np.random.default_rng(1).standard_normal((batch, 28, 28, 1)).astype(
            np.float32)}
        with tf.compat.v1.Session() as session:
            values = session.run(outs, feed)
            want = values["Python loop of tf.gradients"]
            for name, value in values.items():
                np.testing.assert_allclose(value, want, rtol=2e-3, atol=1e-5, err_msg=name)
            ms = interleaved_ms({name: lambda out=out: session.run(out, feed)
                                 for name, out in outs.items()}, repeats)
    return [{"batch": batch, "recipe": name, "build_s": builds[name], "run_ms": ms[name],
             "ratio": ms[name] / ms["Python loop of tf.gradients"]} for name in outs]


def main(argv):
    """`repeats loop_max m... [--cnn batch]`: prints {"graph": the rows of `measure` for each
    m, "cnn": the rows of `measure_cnn` (None without --cnn)}, both from this one TF1
    process."""
    tf.compat.v1.disable_v2_behavior()
    cnn_batch = None
    if "--cnn" in argv:
        at = argv.index("--cnn")
        cnn_batch, argv = int(argv[at + 1]), argv[:at] + argv[at + 2:]
    repeats, loop_max, *sizes = map(int, argv)
    rows = []
    for m in sizes:
        for name, build in recipes().items():
            if "Python loop" in name and m > loop_max:
                continue
            rows.append({"m": m, "recipe": name, **measure(m, build, repeats)})
    cnn = None if cnn_batch is None else measure_cnn(cnn_batch, repeats)
    print(json.dumps({"graph": rows, "cnn": cnn}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
