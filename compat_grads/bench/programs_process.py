"""One fresh process of `compat-grads bench --traces`' program workloads, the forms real
TF1-era programs use (`compat_grads.bench.programs` runs several and takes medians):

    python -m compat_grads.bench.programs_process wavefunction MODE RECIPE ELECTRONS B
    python -m compat_grads.bench.programs_process pde tf1 RECIPE 0 B

- wavefunction: the Laplacian of a wavefunction's log (a quantum Monte Carlo kinetic
  energy): electron-nucleus distances (`tf.norm`), electron pairs (`tf.gather`), two tanh
  layers with a mean-field term, orbitals times an envelope (`exp`), `tf.linalg.slogdet`
  and a pair factor; 3 · ELECTRONS coordinates per walker. MODE tf1 (a TF1 graph: the loop
  is `tf.map_fn` of `tf.gradients` over the dimensions, `back_prop=False`) or tf2 (a
  `tf.function`: nested tapes, a column per dimension).
- pde: `u_xx` of a one-dimensional tanh MLP inside a PDE residual loss, minimised by Adam
  (TF1 graph); the loop recipe is the nested `tf.gradients`. The build covers the
  derivative, the loss and the optimizer's update ops.

RECIPE is "ours" or "loop". Prints one JSON line: build seconds (TF2: the first call,
tracing included), the median run ms, the graph's ops (TF1), and the values; in a TF1
graph, a digest of the ops the build added (`graph`), which tells whether both recipes
built the same graph. Run with -m, the package is imported before TensorFlow: each workload then
loads compat_grads' functions as `import compat_grads` does after a program's `import
tensorflow`, so that the build does not time compat_grads' own imports.
"""

import json
import sys
import time

import numpy as np

WIDTH, RUNS = 32, 15


def _weights(electrons, seed=0):
    rng = np.random.default_rng(seed)

    def dense(a, c):
        return ((rng.standard_normal((a, c)) / np.sqrt(a)).astype(np.float32),
                (0.1 * rng.standard_normal(c)).astype(np.float32))
    return [dense(4, WIDTH), dense(2 * WIDTH, WIDTH), dense(WIDTH, electrons), dense(1, 1)]


def wavefunction(tf, electrons, dtype=np.float32):
    """log|ψ|: (b, 3 · electrons) -> (b,), in the ops of a TF1 wavefunction."""
    layers = [(tf.constant(w.astype(dtype)), tf.constant(c.astype(dtype)))
              for w, c in _weights(electrons)]
    first, second = np.triu_indices(electrons, 1)

    def log_psi(x):
        r = tf.reshape(x, [-1, electrons, 3])
        d = tf.norm(r, axis=-1, keepdims=True)
        pairs = tf.norm(tf.gather(r, first, axis=1) - tf.gather(r, second, axis=1), axis=-1)
        (w1, b1), (w2, b2), (w3, b3), (w4, b4) = layers
        h = tf.tanh(tf.matmul(tf.concat([r, d], -1), w1) + b1)
        mean = tf.reduce_mean(h, 1, keepdims=True) + 0 * h
        h = h + tf.tanh(tf.matmul(tf.concat([h, mean], -1), w2) + b2)
        logdet = tf.linalg.slogdet((tf.matmul(h, w3) + b3) * tf.exp(-d))[1]
        return logdet + tf.tanh(tf.reduce_sum(pairs, 1, keepdims=True) @ w4 + b4)[:, 0]
    return log_psi


def walkers(b, dims, seed=1):
    return np.random.default_rng(seed).standard_normal((b, dims)).astype(np.float32)


def _tf1_laplacian(tf, cg, recipe, f, x, dims):
    if recipe == "ours":
        return tf.stop_gradient(cg.batch_laplacian(f, x))
    df = tf.compat.v1.gradients(f, x)[0]
    return tf.reduce_sum(tf.map_fn(
        lambda i: tf.compat.v1.gradients(tf.expand_dims(df[..., i], -1), x)[0][..., i],
        tf.range(dims), dtype=tf.float32, back_prop=False), 0)


def _run_ms(step):
    step()
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def wavefunction_tf1(recipe, electrons, b):
    import tensorflow as tf  # first, as a program imports it

    tf.compat.v1.disable_v2_behavior()
    import compat_grads as cg

    cg._load_functions()  # as `import compat_grads` after a program's `import tensorflow`

    dims, graph = 3 * electrons, tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [b, dims])
        f = wavefunction(tf, electrons)(x)
        before, start = len(graph.get_operations()), time.perf_counter()
        laplacian = _tf1_laplacian(tf, cg, recipe, f, x, dims)
        build = time.perf_counter() - start
        ops = len(graph.get_operations()) - before
        built = _graph_digest(graph.get_operations()[before:])
    feed = {x: walkers(b, dims)}
    with tf.compat.v1.Session(graph=graph) as session:
        values = session.run(laplacian, feed)
        run_ms = _run_ms(lambda: session.run(laplacian, feed))
    return {"build_s": build, "run_ms": run_ms, "ops": ops, "graph": built,
            "values": values.tolist()}


def wavefunction_tf2(recipe, electrons, b):
    import tensorflow as tf  # first, as a program imports it

    import compat_grads as cg

    cg._load_functions()  # as `import compat_grads` after a program's `import tensorflow`

    dims, log_psi = 3 * electrons, wavefunction(tf, electrons)
    if recipe == "ours":
        laplacian = tf.function(lambda x: cg.batch_laplacian(log_psi, x))
    else:
        from compat_grads.bench.traces import _nested_tapes

        laplacian = tf.function(_nested_tapes(log_psi, dims))
    x = tf.constant(walkers(b, dims))
    start = time.perf_counter()
    values = laplacian(x).numpy()
    build = time.perf_counter() - start
    return {"build_s": build, "run_ms": _run_ms(lambda: laplacian(x).numpy()), "ops": None,
            "values": values.tolist()}


def pde_tf1(recipe, b):
    import tensorflow as tf  # first, as a program imports it

    tf.compat.v1.disable_v2_behavior()
    import compat_grads as cg

    cg._load_functions()  # as `import compat_grads` after a program's `import tensorflow`

    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 1])
        h = x
        for width_in, width_out in [(1, 16), (16, 16), (16, 16)]:
            w = tf.Variable((rng.standard_normal((width_in, width_out)) / np.sqrt(width_in)
                             ).astype(np.float32))
            h = tf.tanh(tf.matmul(h, w) + tf.Variable(np.zeros(width_out, np.float32)))
        u = tf.matmul(h, tf.Variable(rng.standard_normal((16, 1)).astype(np.float32)))
        before, start = len(graph.get_operations()), time.perf_counter()
        u_xx = (cg.batch_hessian_diagonal(u, x) if recipe == "ours"
                else tf.compat.v1.gradients(tf.compat.v1.gradients(u, x)[0], x)[0])
        loss = tf.reduce_mean(tf.square(u_xx + tf.sin(x))) + tf.reduce_mean(tf.square(u))
        train = tf.compat.v1.train.AdamOptimizer(1e-3).minimize(loss)
        build = time.perf_counter() - start
        ops = len(graph.get_operations()) - before
        built = _graph_digest(graph.get_operations()[before:])
        init = tf.compat.v1.global_variables_initializer()
    feed = {x: np.linspace(0, 1, b, dtype=np.float32)[:, None]}
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        values = session.run(u_xx, feed)[:, 0]
        run_ms = _run_ms(lambda: session.run(train, feed))
    return {"build_s": build, "run_ms": run_ms, "ops": ops, "graph": built,
            "values": values.tolist()}


def _graph_digest(ops) -> str:
    """What two recipes' graphs must share to be the same graph op for op: each op's type,
    name and inputs (control inputs as a set: their order varies from process to process)."""
    import hashlib

    text = repr([(op.type, op.name, [t.name for t in op.inputs],
                  sorted(c.name for c in op.control_inputs)) for op in ops])
    return hashlib.sha256(text.encode()).hexdigest()


def main(argv):
    kind, mode, recipe, size, b = argv[0], argv[1], argv[2], int(argv[3]), int(argv[4])
    if kind == "pde":
        row = pde_tf1(recipe, b)
    else:
        row = (wavefunction_tf1 if mode == "tf1" else wavefunction_tf2)(recipe, size, b)
    print(json.dumps(row))


if __name__ == "__main__":
    main(sys.argv[1:])
