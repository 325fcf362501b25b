"""The parts of `compat-grads bench --traces` that need a process of their own, and the
models every part shares (the same fixed-seed weights in TF2, TF1, JAX and DeepXDE).

    python -m compat_grads.bench.traces_process tf1 REPEATS B D...   # TF1 graph: build, run
    python -m compat_grads.bench.traces_process deepxde REPEATS B D...
    python -m compat_grads.bench.traces_process memory B D WHAT     # a key of MEMORY

Each prints one JSON line. The TF1 and DeepXDE rows carry our per-sample Laplacians at the
same size (`values`), so that the parent checks them against its own.
"""

import json
import sys
import time

import numpy as np

WIDTH, DEPTH = 64, 3
FEW = 2
"""Directions at a time in the rows of ours with fewer than the default: what holding the
memory table's peak within 3x of one gradient pass's costs in time."""


def weights(d, out, seed=0):
    """The tanh MLP R^d -> R^out, 3 hidden layers of 64: [(W, b)] as float32 numpy."""
    rng = np.random.default_rng(seed)
    sizes = [d, *[WIDTH] * DEPTH, out]
    return [((rng.standard_normal((a, c)) / np.sqrt(a)).astype(np.float32),
             (0.1 * rng.standard_normal(c)).astype(np.float32))
            for a, c in zip(sizes[:-1], sizes[1:])]


def points(b, d, seed=1):
    return np.random.default_rng(seed).standard_normal((b, d)).astype(np.float32)


def mlp(layers, np_like):
    """f(x) for x of shape (b, d) in the array library `np_like` (tf.math or jax.numpy):
    tanh on the hidden layers, linear output."""
    def f(x):
        for k, (w, b) in enumerate(layers):
            x = x @ w + b
            if k < len(layers) - 1:
                x = np_like.tanh(x)
        return x
    return f


def scalar_mlp(d, tf):
    """u: (b, d) -> (b,), the Laplacian workloads' target, in TensorFlow."""
    f = mlp([(tf.constant(w), tf.constant(b)) for w, b in weights(d, 1)], tf.math)
    return lambda x: tf.squeeze(f(x), axis=1)


def _loop_graph(tf, u, x, d):
    """The per-dimension Python loop of tf.gradients, the gradient taken once (the best
    form of it): sum over i of d(du/dx[:, i])/dx[:, i]."""
    g = tf.compat.v1.gradients(u, x)[0]
    return tf.add_n([tf.compat.v1.gradients(g[:, i], x)[0][:, i] for i in range(d)])


def tf1(repeats, b, dims):
    """Ours (the tensor form of batch_laplacian) and the loop in a TF1 graph: seconds to
    build, graph ops, then run times measured side by side."""
    from compat_grads._src.core.tf import tf

    tf.compat.v1.disable_v2_behavior()
    import compat_grads as cg
    from compat_grads.bench.timing import interleaved_ms

    rows = []
    for d in dims:
        recipes = {"compat_grads batch_laplacian (TF1 graph)": cg.batch_laplacian,
                   "Python loop of tf.gradients (TF1 graph)": lambda u, x, d=d: _loop_graph(
                       tf, u, x, d)}
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [None, d])
            u = scalar_mlp(d, tf)(x)
            outs, builds, ops = {}, {}, {}
            for name, build in recipes.items():
                before, start = len(graph.get_operations()), time.perf_counter()
                outs[name] = build(u, x)
                builds[name] = time.perf_counter() - start
                ops[name] = len(graph.get_operations()) - before
            feed = {x: points(b, d)}
            with tf.compat.v1.Session() as session:
                values = session.run(outs, feed)
                ms = interleaved_ms({name: lambda out=out, feed=feed: session.run(out, feed)
                                     for name, out in outs.items()}, repeats)
        rows += [{"d": d, "b": b, "recipe": name, "build_s": builds[name], "ops": ops[name],
                  "run_ms": ms[name], "values": values[name].tolist()} for name in outs]
    return rows


def deepxde(repeats, b, dims):
    """DeepXDE's `dde.grad.hessian(y, x, i=k, j=k)` summed over k (TensorFlow backend, in a
    tf.function as its models train) next to ours, in this process."""
    import deepxde as dde

    import compat_grads as cg
    from compat_grads._src.core.tf import tf
    from compat_grads.bench.timing import interleaved_ms

    rows = []
    for d in dims:
        u, x = scalar_mlp(d, tf), tf.constant(points(b, d))

        @tf.function
        def summed(x, u=u, d=d):
            y = u(x)[:, None]
            out = tf.add_n([dde.grad.hessian(y, x, i=k, j=k) for k in range(d)])
            dde.grad.clear()  # its cache holds graph tensors: none may outlive the trace
            return out[:, 0]

        recipes = {"compat_grads batch_laplacian, eager (compiled)": lambda u=u, x=x:
                   cg.batch_laplacian(u, x),
                   "DeepXDE dde.grad.hessian(i=k, j=k) summed, tf.function": lambda x=x,
                   summed=summed: summed(x)}
        values = {name: fn().numpy() for name, fn in recipes.items()}
        ms = interleaved_ms(recipes, repeats)
        rows += [{"d": d, "b": b, "recipe": name, "ms": ms[name],
                  "values": values[name].tolist()} for name in recipes]
    return rows


MEMORY = {"laplacian": "batch_laplacian",
          "laplacian-few": f"batch_laplacian, chunk_size={FEW}",
          "laplacian-at-once": "batch_laplacian, every direction at once (chunk_size=d)",
          "gradient": "one gradient pass (tape.gradient of sum(u), tf.function)"}


def memory(b, d, what):
    """The rise of peak RSS (VmHWM, reset first) over the first call, tracing included (as
    bench/memory.py measures), and the CPU allocator's peak (tensors only) when TensorFlow
    runs with TF_CPU_ALLOCATOR_USE_BFC=true."""
    import compat_grads as cg
    from compat_grads._src.core.tf import tf
    from compat_grads.bench.timing import reset_peak_rss, rss_mb

    u, x = scalar_mlp(d, tf), tf.constant(points(b, d))

    @tf.function
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(u(x))
        return tape.gradient(y, x)

    call = {"laplacian": lambda: cg.batch_laplacian(u, x),
            "laplacian-few": lambda: cg.batch_laplacian(u, x, chunk_size=FEW),
            "laplacian-at-once": lambda: cg.batch_laplacian(u, x, chunk_size=d),
            "gradient": lambda: gradient(x)}
    _ = (tf.constant(1.0) + 1.0).numpy()  # start the runtime before the baseline
    reset_peak_rss()
    tf.config.experimental.reset_memory_stats("CPU:0")
    baseline = rss_mb()
    call[what]().numpy()
    peak = rss_mb("VmHWM:") - baseline
    allocator = tf.config.experimental.get_memory_info("CPU:0")["peak"] / 2 ** 20
    return {"b": b, "d": d, "what": MEMORY[what], "peak_rss_delta_mb": peak,
            "allocator_peak_mb": allocator}


def main(argv):
    kind, *numbers = argv
    if kind == "memory":
        print(json.dumps(memory(int(numbers[0]), int(numbers[1]), numbers[2])))
        return 0
    repeats, b, *dims = map(int, numbers)
    print(json.dumps({"tf1": tf1, "deepxde": deepxde}[kind](repeats, b, dims)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
