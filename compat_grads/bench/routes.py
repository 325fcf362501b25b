"""The measurements behind the static rule of `compat_grads._src.stacking.cost`: rows vectorized
(pfor),
in chunks, in a while_loop or as separate passes, against the legacy loop each replaces, in
a TF1 graph. Run in its own process: `python -m compat_grads.bench.routes [REPEATS]`;
prints one JSON line: a list of rows (workload, recipe, ms, ratio to the legacy loop,
the rule's plan)."""

import json
import sys

import numpy as np

from compat_grads._src.core.tf import tf
from compat_grads.bench.tf1_graph import CLASSES, cnn_logits

LEGACY = "legacy loop"
_MLP = [(6, 50), (50,), (50, 14), (14,), (14, 1), (1,)]  # 1,079 parameters


def _while_rows(loop, count, row):
    """`loop` (tf.while_loop or row_while_loop) writing `row(i)` into a TensorArray."""
    def body(i, acc):
        return i + 1, acc.write(i, row(i))
    _, acc = loop(lambda i, _: i < count, body, [0, tf.TensorArray(tf.float32, count)])
    return acc.stack()


def _mlp(theta, x):
    parts, start = [], 0
    for shape in _MLP:
        size = int(np.prod(shape))
        parts.append(tf.reshape(theta[start:start + size], shape))
        start += size
    h = tf.tanh(x @ parts[0] + parts[1])
    h = tf.tanh(h @ parts[2] + parts[3])
    return tf.squeeze(h @ parts[4] + parts[5], 1)


def _parameters():
    size = sum(int(np.prod(shape)) for shape in _MLP)
    theta = tf.compat.v1.placeholder(tf.float32, [size])
    value = (np.random.default_rng(0).standard_normal(size) * 0.3).astype(np.float32)
    return theta, size, {theta: value}


def _data(batch):
    rng = np.random.default_rng(1)
    return (tf.constant(rng.standard_normal((batch, 6)).astype(np.float32)),
            tf.constant(rng.standard_normal(batch).astype(np.float32)))


def hessian(batch):
    """A Newton step's Hessian of an MLP's mean squared error: a while_loop of tf.gradients
    over the gradient's elements, as legacy code builds it."""
    import compat_grads as cg
    from compat_grads.migrate import row_while_loop

    theta, size, feed = _parameters()
    x, y = _data(batch)
    loss = 0.5 * tf.reduce_mean((_mlp(theta, x) - y) ** 2)
    grad = tf.compat.v1.gradients(loss, theta)[0]
    row = lambda i: tf.compat.v1.gradients(grad[i], theta)[0]  # noqa: E731
    return {LEGACY: _while_rows(tf.compat.v1.while_loop, size, row),
            "row_while_loop (--fix)": _while_rows(row_while_loop, size, row),
            "pfor (strategy='reverse')": cg.hessian(loss, theta, strategy="reverse"),
            "pfor, chunks of 64": cg.hessian(loss, theta, strategy="reverse", chunk_size=64),
            "compat_grads (auto)": cg.hessian(loss, theta)}, feed, ([grad], [theta], size)


def residuals(batch):
    """A Levenberg-Marquardt Jacobian of the residuals by the parameters."""
    import compat_grads as cg

    theta, size, feed = _parameters()
    x, y = _data(batch)
    res = _mlp(theta, x) - y
    row = lambda i: tf.compat.v1.gradients(res[i], theta)[0]  # noqa: E731
    return {LEGACY: _while_rows(tf.compat.v1.while_loop, batch, row),
            "pfor (strategy='reverse')": cg.stacked_jacobian(res, theta, strategy="reverse"),
            "pfor, chunks of 16": cg.stacked_jacobian(res, theta, strategy="reverse",
                                                      chunk_size=16),
            "compat_grads (auto)": cg.stacked_jacobian(res, theta)}, feed, ([res], [theta],
                                                                             batch)


def cnn(batch):
    """The class rows of a small CNN's logits: a Python loop of tf.gradients."""
    import compat_grads as cg

    x = tf.compat.v1.placeholder(tf.float32, [batch, 28, 28, 1])
    logits = cnn_logits(x)
    sums = tf.reduce_sum(logits, 0)
    feed = {x: np.random.default_rng(1).standard_normal((batch, 28, 28, 1)).astype(np.float32)}
    return {LEGACY: tf.stack([tf.compat.v1.gradients(logits[:, c], x)[0]
                              for c in range(CLASSES)]),
            "pfor (strategy='reverse')": cg.stacked_jacobian(sums, x, strategy="reverse"),
            "while_loop (strategy='loop')": cg.stacked_jacobian(sums, x, strategy="loop"),
            "pfor, chunks of 5": cg.stacked_jacobian(sums, x, strategy="reverse",
                                                     chunk_size=5),
            "compat_grads (auto)": cg.stacked_jacobian(sums, x)}, feed, ([sums], [x],
                                                                          CLASSES)


def wide(m, n):
    """tanh(A x) with m < n: m rows, each a reverse pass; legacy: a while_loop over them."""
    import compat_grads as cg

    x = tf.compat.v1.placeholder(tf.float32, [n])
    a = tf.constant((np.random.default_rng(0).standard_normal((m, n)) / np.sqrt(n)).astype(
        np.float32))
    y = tf.tanh(tf.linalg.matvec(a, x))
    row = lambda i: tf.compat.v1.gradients(y[i], x)[0]  # noqa: E731
    return {LEGACY: _while_rows(tf.compat.v1.while_loop, m, row),
            "pfor (strategy='reverse')": cg.stacked_jacobian(y, x, strategy="reverse"),
            "pfor, chunks of 128": cg.stacked_jacobian(y, x, strategy="reverse",
                                                       chunk_size=128),
            "compat_grads (auto)": cg.stacked_jacobian(y, x)}, {x: np.linspace(-1, 1, n)}, (
                [y], [x], m)


WORKLOADS = {
    "CNN class rows (10 rows, b=64)": lambda: cnn(64),
    "MLP Hessian (1,079 rows, b=32)": lambda: hessian(32),
    "MLP Hessian (1,079 rows, b=375)": lambda: hessian(375),
    "residual Jacobian (64 rows, b=64)": lambda: residuals(64),
    "residual Jacobian (375 rows, b=375)": lambda: residuals(375),
    "tanh(A x) (1,000 rows, n=2,000)": lambda: wide(1000, 2000),
}


def measure(name, build, repeats):
    """The workload's recipes checked against the legacy loop, then timed interleaved."""
    from compat_grads._src.stacking import cost as _cost
    from compat_grads.bench.timing import interleaved_ms

    with tf.Graph().as_default():
        outs, feed, (targets, sources, rows) = build()
        facts = _cost.graph_facts(targets, sources)
        with tf.compat.v1.Session() as session:
            values = session.run(outs, feed)
            for recipe, value in values.items():
                np.testing.assert_allclose(np.reshape(value, values[LEGACY].shape),
                                           values[LEGACY], rtol=2e-3, atol=1e-4,
                                           err_msg=f"{name}: {recipe}")
            ms = interleaved_ms({recipe: lambda out=out: session.run(out, feed)
                                 for recipe, out in outs.items()}, repeats)
    plan = _cost.plan(rows, facts)
    return [{"workload": name, "recipe": recipe, "ms": ms[recipe],
             "ratio": ms[recipe] / ms[LEGACY], "row_kib": facts.row_bytes / 1024,
             "plan": _described(plan)} for recipe in outs]


def _described(plan) -> str:
    if not plan.vectorized:
        return "separate passes" if plan.separate else "while_loop"
    return "vectorized"


def main(argv):
    repeats = int(argv[0]) if argv else 7
    tf.compat.v1.disable_v2_behavior()
    rows = []
    for name, build in WORKLOADS.items():
        rows += measure(name, build, repeats)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
