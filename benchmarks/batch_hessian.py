"""Per-sample Hessians of a tanh MLP (b = 1024 samples, d = 8 and 32 features): batch_hessian
against nested GradientTapes with batch_jacobian (the second seed article's recipe, fixed to
a (b, 1) target), in eager mode and inside tf.function, side by side in one run.

Run: python benchmarks/batch_hessian.py [--repeats N]. Prints a markdown table: median
milliseconds per call and the ratio recipe / compat_grads (higher is better for us).
"""

import argparse
import statistics
import time

import numpy as np
import tensorflow as tf

import compat_grads as cg

BATCH, HIDDEN = 1024, 64


def make_mlp(d, seed=0):
    rng = np.random.default_rng(seed)
    w1 = tf.constant(rng.standard_normal((d, HIDDEN)) / np.sqrt(d), tf.float32)
    w2 = tf.constant(rng.standard_normal((HIDDEN, HIDDEN)) / 8, tf.float32)
    w3 = tf.constant(rng.standard_normal((HIDDEN, 1)) / 8, tf.float32)

    def mlp(x):  # one scalar per sample, shape (b,)
        return tf.squeeze(tf.tanh(tf.tanh(x @ w1) @ w2) @ w3, axis=1)
    return mlp


def nested_tapes(mlp, x):
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = mlp(x)[:, None]  # batch_jacobian rejects the (b,) target the seed uses
        gradient = tf.squeeze(inner.batch_jacobian(y, x), axis=1)
    return outer.batch_jacobian(gradient, x)


def ours(mlp, x):
    return cg.batch_hessian(mlp, x)


def _median_ms(fn, x, repeats):
    fn(x)  # warm up (traces tf.functions)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.asarray(fn(x))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(repeats):
    print("| d | mode | nested tapes + batch_jacobian ms | cg.batch_hessian ms | ratio |")
    print("|---|---|---|---|---|")
    for d in (8, 32):
        mlp = make_mlp(d)
        x = tf.constant(np.random.default_rng(1).standard_normal((BATCH, d)), tf.float32)
        np.testing.assert_allclose(ours(mlp, x), nested_tapes(mlp, x), rtol=1e-4, atol=1e-5)
        for mode in ("eager", "tf.function"):
            wrap = tf.function if mode == "tf.function" else (lambda f: f)
            recipe = wrap(lambda x, mlp=mlp: nested_tapes(mlp, x))
            mine = wrap(lambda x, mlp=mlp: ours(mlp, x))
            theirs_ms = _median_ms(recipe, x, repeats)
            ours_ms = _median_ms(mine, x, repeats)
            print(f"| {d} | {mode} | {theirs_ms:.1f} | {ours_ms:.1f} | "
                  f"{theirs_ms / ours_ms:.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    main(parser.parse_args().repeats)
