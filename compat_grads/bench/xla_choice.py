"""When `jit_compile=True` pays, per function: `python -m compat_grads.bench.xla_choice
[--quick] [--json FILE]` (its processes run Eigen's kernels, as the suite's rows: `ENV`).

For each function on the workloads the suite holds against JAX (and per-example gradients),
with and without XLA: the first call (tracing, and XLA's compile, in a fresh process each,
after a tiny compile of something else has loaded XLA), then the time per later call of the
two side by side. XLA pays once its first call's extra cost is repaid by the calls after it:
`breakeven` calls. The docs' Performance page states, per function, what the measurements
show and the facts known before a call that decide it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

ENV = {"TF_ENABLE_ONEDNN_OPTS": "0"}
"""The processes' environment: Eigen's kernels, as the suite's rows (`docs/make_performance.py`)
and tox run them."""
CASES = ("stacked_jacobian: tall 4000x500", "stacked_jacobian: wide 100x5000",
         "stacked_jacobian: square MLP", "batch_jacobian: MLP b=128",
         "per_element_gradients: J·1 4000x500", "batch_hessian: b=1024, d=8",
         "batch_hessian: b=1024, d=32", "per_example_gradients: MLP b=256",
         "per_example_gradients: CNN b=256")
"""Each case: the function, then the workload (the suite's, with its sizes)."""
QUICK_SIZES = {"tall": (40, 5), "wide": (5, 40), "square": 8, "batch": (4, 6), "hessian": 4,
               "per_example": 4}
FULL_SIZES = {"tall": (4000, 500), "wide": (100, 5000), "square": 256, "batch": (128, 32),
              "hessian": 1024, "per_example": 256}
"""The sizes of the cases: the suite's (`compat_grads.bench.sizes.FULL`), or tiny ones."""


def _case(name: str, sizes: dict):
    """(the call, given jit_compile) of the case `name`."""
    import numpy as np

    import compat_grads as cg
    from compat_grads._src.core.tf import keras2, tf
    from compat_grads.bench import workloads as wl

    rng = np.random.default_rng(0)
    function, what = name.split(": ")
    if what.startswith(("tall", "wide", "J·1")):
        m, n = sizes["wide" if what.startswith("wide") else "tall"]
        a = tf.constant((rng.standard_normal((m, n)) / np.sqrt(n)).astype(np.float32))
        x = tf.constant(rng.standard_normal(n).astype(np.float32))

        def f(x):
            return tf.tanh(tf.linalg.matvec(a, x))
        return lambda jit: getattr(cg, function)(f, x, jit_compile=jit)
    if what.startswith("square"):
        width = sizes["square"]
        mlp, _ = wl._mlp([width, width, width])
        x = tf.constant(rng.standard_normal(width).astype(np.float32))

        def g(v):  # one callable for every call: the compile cache is keyed on it
            return mlp(v[None])[0]
        return lambda jit: cg.stacked_jacobian(g, x, jit_compile=jit)
    if function == "batch_jacobian":
        batch, features = sizes["batch"]
        mlp, _ = wl._mlp([features, 2 * features, features // 2])
        x = tf.constant(rng.standard_normal((batch, features)).astype(np.float32))
        return lambda jit: cg.batch_jacobian(mlp, x, jit_compile=jit)
    if function == "batch_hessian":
        d = int(what.split("d=")[1])
        mlp, _ = wl._mlp([d, 64, 64, 1])
        x = tf.constant(rng.standard_normal((sizes["hessian"], d)).astype(np.float32))

        def h(v):
            return tf.squeeze(mlp(v), axis=1)
        return lambda jit: cg.batch_hessian(h, x, jit_compile=jit)
    model, shape = wl._keras_model(what.split(" ")[0])
    batch = sizes["per_example"]
    x = tf.constant(rng.standard_normal((batch, *shape)).astype(np.float32))
    y = tf.constant(rng.integers(0, 10, batch))

    def loss(t, p):
        return keras2().losses.sparse_categorical_crossentropy(t, p, from_logits=True)
    return lambda jit: cg.per_example_gradients(loss, model, x, y, jit_compile=jit)


def _load_xla() -> None:
    """A tiny compile of something else: XLA's one-off start in a process is not a case's."""
    from compat_grads._src.core.tf import tf

    tf.function(lambda v: v * 2.0, jit_compile=True)(tf.ones(2)).numpy()
    tf.function(lambda v: v * 3.0)(tf.ones(2)).numpy()


def first_ms(name: str, jit: bool, quick: bool) -> float:
    """The first call's milliseconds (tracing, and XLA's compile with `jit`)."""
    from compat_grads.bench.timing import _block

    call = _case(name, QUICK_SIZES if quick else FULL_SIZES)
    _load_xla()
    start = time.perf_counter()
    _block(call(jit))
    return (time.perf_counter() - start) * 1e3


def steady_ms(name: str, quick: bool, repeats: int) -> dict:
    """{"default": ms, "xla": ms} per call after the first, side by side."""
    from compat_grads.bench.timing import interleaved_ms

    call = _case(name, QUICK_SIZES if quick else FULL_SIZES)
    found = interleaved_ms({"default": lambda: call(False), "xla": lambda: call(True)},
                           repeats)
    return {"default": found["default"], "xla": found["xla"]}


def run(quick: bool = False, log=print) -> dict:
    """{"cases": [{case, first_ms: {default, xla}, ms: {default, xla}, breakeven}]}, each
    first call in a fresh process."""
    from compat_grads.bench.timing import in_subprocess

    repeats, kernels = 2 if quick else 15, set()
    rows = []
    for name in CASES[:1] if quick else CASES:
        log(f"xla choice: {name}")
        first = {}
        for kind, jit in (("default", False), ("xla", True)):
            found = in_subprocess("compat_grads.bench.xla_choice",
                                  ["first", name, int(jit), int(quick)], env=ENV)
            first[kind] = found["ms"]
            kernels.add(found["onednn"])
        steady = in_subprocess("compat_grads.bench.xla_choice",
                               ["steady", name, int(quick), repeats], env=ENV)
        kernels.add(steady.pop("onednn"))
        rows.append({"case": name, "first_ms": first, "ms": steady,
                     "breakeven": breakeven(first, steady)})
    return {"cases": rows, "quick": quick, "onednn": sorted(kernels)}


def breakeven(first: dict, steady: dict) -> float | None:
    """The calls after which XLA's extra first-call cost is repaid by its faster calls, or
    None where XLA is not faster per call."""
    saving = steady["default"] - steady["xla"]
    if saving <= 0:
        return None
    return max(0.0, first["xla"] - first["default"]) / saving


def main(argv) -> int:
    """The command line (see the module's docstring); `first CASE JIT QUICK` and `steady CASE
    QUICK REPEATS` are one process's part of `run`, with whether it ran oneDNN's kernels."""
    from compat_grads.bench.onednn import kernels_on

    if argv and argv[0] == "first":
        print(json.dumps({"ms": first_ms(argv[1], bool(int(argv[2])), bool(int(argv[3]))),
                          "onednn": kernels_on()}))
        return 0
    if argv and argv[0] == "steady":
        print(json.dumps({**steady_ms(argv[1], bool(int(argv[2])), int(argv[3])),
                          "onednn": kernels_on()}))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    report = run(args.quick, log=lambda text: print(text, file=sys.stderr))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1)
    for row in report["cases"]:
        print(json.dumps(row, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
