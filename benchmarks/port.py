"""Speed of the port harness: `python benchmarks/port.py [--tests N]`.

1. One pytest run of N small tests (default 100: N/4 parametrized cases in each of the four
   modes of the compat_grads plugin), against the same tests in the two TF2 modes only: the
   TF1 worker starts once per run, so a "tf1" test costs about what a "v1_graph" one does.
2. `compare_port` on a 3-layer MLP (inputs 32x16, 4,698 weights), stacked_jacobian and
   per_element_gradients with respect to the input and every weight, in a new process, with
   and without the TF1 worker's start.

Prints a markdown table. Wall times on a noisy machine: read the ratios.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time

TESTS = '''
import numpy as np
import pytest
import tensorflow as tf


@pytest.mark.parametrize("n", range({cases}))
def test_small(cg_run, n):
    x = np.arange(n + 2, dtype=np.float32)
    out = cg_run(lambda v: {{"y": tf.tanh(v) * 2.0, "s": tf.reduce_sum(v)}}, x)
    np.testing.assert_allclose(out["y"], np.tanh(x) * 2.0, rtol=1e-6)
'''

MLP = '''
import time

import numpy as np
import tensorflow as tf

from compat_grads.testing import compare_port

SIZES = [(16, 64), (64, 48), (48, 10)]


def legacy(x):
    h = x
    for i, (n_in, n_out) in enumerate(SIZES):
        with tf.compat.v1.variable_scope(f"layer{i}"):
            w = tf.compat.v1.get_variable("kernel", [n_in, n_out])
            b = tf.compat.v1.get_variable("bias", [n_out])
        h = tf.matmul(h, w) + b
        h = tf.tanh(h) if i < len(SIZES) - 1 else h
    return h


class Port(tf.Module):
    def __init__(self):
        self.weights = {f"layer{i}/{p}": tf.Variable(tf.zeros(s))
                        for i, (n_in, n_out) in enumerate(SIZES)
                        for p, s in (("kernel", (n_in, n_out)), ("bias", (n_out,)))}

    def __call__(self, x):
        h = x
        for i in range(len(SIZES)):
            h = h @ self.weights[f"layer{i}/kernel"] + self.weights[f"layer{i}/bias"]
            h = tf.tanh(h) if i < len(SIZES) - 1 else h
        return h


def run(port):
    import mlp  # this file as a module: the TF1 process imports legacy from it by name

    return compare_port(mlp.legacy, port, {"x": np.random.RandomState(0).randn(32, 16)
                                       .astype(np.float32)},
                        wrt=["x", *port.weights], weights=port.weights,
                        derivatives=("stacked_jacobian", "per_element_gradients"))


if __name__ == "__main__":
    port = Port()
    started = time.perf_counter()
    first = run(port)
    cold = time.perf_counter() - started
    started = time.perf_counter()
    second = run(port)
    warm = time.perf_counter() - started
    assert first.ok and second.ok, str(first)
    count = sum(int(np.prod(v.shape)) for v in port.weights.values())
    print(f"{cold} {warm} {count} {len(first.rows)}")
'''


def _timed(command, cwd):
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return time.perf_counter() - started, done.stdout


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=100, help="tests in the pytest run")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    cases = max(1, args.tests // 4)
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "test_small.py"), "w") as handle:
            handle.write(textwrap.dedent(TESTS.format(cases=cases)))
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        all_modes, _ = _timed(pytest, folder)
        tf2_only, _ = _timed([*pytest, "--tf-modes=function,eager"], folder)
        with open(os.path.join(folder, "mlp.py"), "w") as handle:
            handle.write(MLP)
        whole, out = _timed([sys.executable, "mlp.py"], folder)
    cold, warm, weights, rows = out.split()
    print("| measurement | wall time |\n|---|---|")
    print(f"| pytest, {cases * 4} tests in 4 modes (tf1, v1_graph, function, eager) "
          f"| {all_modes:.1f} s |")
    print(f"| pytest, the same {cases * 2} tests in 2 modes (function, eager) "
          f"| {tf2_only:.1f} s |")
    print(f"| compare_port, MLP with {weights} weights ({rows} rows), first call "
          f"(starts the TF1 worker) | {float(cold):.1f} s |")
    print(f"| compare_port, the same again (worker running) | {float(warm):.1f} s |")
    print(f"| compare_port script, whole process (TensorFlow import included) "
          f"| {whole:.1f} s |")
    print(f"\nRatio, 4 modes / 2 TF2 modes: {all_modes / tf2_only:.2f} "
          f"(twice the tests, one TF1 worker start)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
