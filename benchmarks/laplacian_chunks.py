"""The forward Laplacian's directions a step: `batch_laplacian`'s default against a chunk
given explicitly (the memory budget's choice before it only bounded the default's), on the
traces bench's tanh MLP (3 x 64): the CPU allocator's peak (tensors only, TensorFlow's BFC
allocator, a fresh process per row), the time of a call, and of a training step that
differentiates the Laplacian's mean square with respect to the weights.

    python benchmarks/laplacian_chunks.py              # b=512, d=1000 against chunks of 500
    python benchmarks/laplacian_chunks.py B D CHUNK...

Run it with TF_ENABLE_ONEDNN_OPTS=0 to time Eigen's kernels, as the bench does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np


def _model(b, d):
    from compat_grads._src.core.tf import tf
    from compat_grads.bench.traces_process import points, weights

    layers = [(tf.Variable(w), tf.Variable(c)) for w, c in weights(d, 1)]

    def u(x):
        for k, (w, c) in enumerate(layers):
            x = x @ w + c
            x = tf.tanh(x) if k < len(layers) - 1 else x
        return tf.squeeze(x, 1)
    return u, [v for layer in layers for v in layer], tf.constant(points(b, d))


def _options(chunk):
    return {} if chunk == "default" else {"chunk_size": int(chunk)}


def peak(b, d, chunk):
    """The allocator's peak in MB over the first call (tracing included)."""
    import compat_grads as cg
    from compat_grads._src.core.tf import tf

    u, _, x = _model(b, d)
    _ = (tf.constant(1.0) + 1.0).numpy()
    tf.config.experimental.reset_memory_stats("CPU:0")
    cg.batch_laplacian(u, x, **_options(chunk)).numpy()
    return tf.config.experimental.get_memory_info("CPU:0")["peak"] / 2**20


def times(b, d, chunks, repeats=7, calls=5):
    """{chunk: (ms of a call, ms of a training step)}, side by side in this process, after
    checking that every chunk gives the default's values and gradients."""
    import compat_grads as cg
    from compat_grads._src.core.tf import tf

    u, weights, x = _model(b, d)

    def step(chunk):
        @tf.function
        def train(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(cg.batch_laplacian(u, x, **_options(chunk)) ** 2)
            return [g for g in tape.gradient(loss, weights) if g is not None]
        return train
    recipes = {}
    for chunk in chunks:
        train = step(chunk)
        recipes[chunk, "call"] = lambda c=chunk: cg.batch_laplacian(u, x, **_options(c)).numpy()
        recipes[chunk, "step"] = lambda t=train: [g.numpy() for g in t(x)]
    want = {kind: recipes["default", kind]() for kind in ("call", "step")}
    for (_, kind), fn in recipes.items():
        got, expected = ((fn(), want[kind]) if kind == "step" else ([fn()], [want[kind]]))
        for a, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)
    runs = {key: [] for key in recipes}
    for _ in range(repeats):
        for key, fn in recipes.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            runs[key].append((time.perf_counter() - start) / calls * 1e3)
    return {chunk: tuple(float(np.median(runs[chunk, kind])) for kind in ("call", "step"))
            for chunk in chunks}


def main(argv) -> int:
    if argv[:1] == ["--peak"]:
        print(json.dumps(peak(int(argv[1]), int(argv[2]), argv[3])))
        return 0
    if len(argv) == 1:
        raise SystemExit("usage: python benchmarks/laplacian_chunks.py [B D CHUNK...]")
    b, d, *given = (argv or ["512", "1000", "500"])
    chunks = ["default", *given]
    env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true")
    peaks = {chunk: json.loads(subprocess.run(
        [sys.executable, __file__, "--peak", b, d, chunk], env=env, check=True,
        capture_output=True, text=True).stdout.strip().splitlines()[-1]) for chunk in chunks}
    timed = times(int(b), int(d), chunks)
    print(f"b={b}, d={d}: chunk | allocator peak MB | call ms | training step ms")
    for chunk in chunks:
        call, step = timed[chunk]
        print(f"{chunk} | {peaks[chunk]:.1f} | {call:.1f} | {step:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
