"""`compat-grads bench --traces`: per-sample Laplacians and divergences of a tanh MLP (3
hidden layers of 64, float32, fixed-seed weights) against the recipes users write today,
side by side in one run. Ratios are `their time / our time` (above 1: we are faster).

TF2 recipes run in this process; the TF1 graph (build and run apart), DeepXDE (its backend
is chosen when it is imported) and each memory peak run in processes of their own
(`compat_grads.bench.traces_process`). Every recipe's values are checked against ours
before anything is timed, and the largest difference is kept in the report (`error`,
relative to the largest |value|).
"""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads.bench import jax_recipes as jr
from compat_grads.bench import programs, timing
from compat_grads.bench.traces_process import FEW, MEMORY, mlp, points, scalar_mlp, weights

try:  # optional: pip install "compat_grads[bench]"
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - depends on the machine
    jax = None
try:
    import folx
except ImportError:  # pragma: no cover - depends on the machine
    folx = None

FULL = {"b": 1024, "laplacian": [2, 10, 100], "divergence": [10, 100],
        "memory": [(512, 200), (1024, 100)], "memory_runs": 3, "repeats": 9}
QUICK = {"b": 8, "laplacian": [2], "divergence": [2], "memory": [(8, 2)], "memory_runs": 1,
         "repeats": 1}
TOLERANCE = 2e-3
"""The largest |recipe - ours| allowed, over the largest |ours| (float32, sums of d terms)."""
OURS = "compat_grads batch_laplacian, eager (compiled)"
OURS_DIV = "compat_grads batch_divergence, eager (compiled)"


def _functioned(fn, x):
    compiled = tf.function(fn)
    return lambda: compiled(x)


def _nested_tapes(u, d):
    """Nested GradientTapes, one inner-gradient column per dimension, in a tf.function:
    the columns are sliced while the outer tape records (a slice made after it stops is a
    new tensor, and its gradient None)."""
    def laplacian(x):
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = u(x)
            g = inner.gradient(y, x)
            columns = [g[:, i] for i in range(d)]
        return tf.add_n([outer.gradient(c, x)[:, i] for i, c in enumerate(columns)])
    return laplacian


def _tape_rows(f, d):
    """The loop of per-dimension tape gradients of a vector field, in a tf.function."""
    def divergence(x):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = f(x)
            columns = [y[:, i] for i in range(d)]
        return tf.add_n([tape.gradient(c, x)[:, i] for i, c in enumerate(columns)])
    return divergence


def _batch_jacobian_trace(f):
    def divergence(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        return tf.linalg.trace(tape.batch_jacobian(y, x))
    return divergence


def _jax_mlp(p, x):
    return mlp(p, jnp)(x)


def _jax_laplacians(d, x):
    """JAX's Laplacians, the weights an argument of the compiled function (`jax_recipes`)."""
    if jax is None:
        return {}

    def sample(g):  # one sample of the batch model g: R^d -> R
        return lambda v: g(v[None])[0, 0]
    out = {"JAX jit(trace(vmap(hessian)))": jr.call(
        lambda g: lambda x: jnp.trace(jax.vmap(jax.hessian(sample(g)))(x), axis1=1, axis2=2),
        _jax_mlp, weights(d, 1), x)}
    if folx is not None:
        out["folx forward_laplacian, jit(vmap)"] = jr.call(
            lambda g: jax.vmap(lambda v: folx.forward_laplacian(sample(g))(v).laplacian),
            _jax_mlp, weights(d, 1), x)
    return out


def _jax_divergence(d, x):
    if jax is None:
        return {}
    return {"JAX jit(trace(vmap(jacfwd)))": jr.call(
        lambda g: lambda x: jnp.trace(jax.vmap(jax.jacfwd(lambda v: g(v[None])[0]))(x),
                                      axis1=1, axis2=2), _jax_mlp, weights(d, d), x)}


def _time(workload, d, b, recipes, reference, repeats):
    """Checks every recipe against ours (`reference`), then times them side by side."""
    want = np.asarray(recipes[reference]())
    errors = {name: _error(np.asarray(fn()), want) for name, fn in recipes.items()}
    for name, error in errors.items():
        if not error <= TOLERANCE:
            raise AssertionError(f"{workload}, d={d}: {name} differs from ours by {error:.2e} "
                                 f"of the largest value (tolerance {TOLERANCE})")
    ms = timing.interleaved_ms(recipes, repeats)
    return [{"workload": workload, "d": d, "b": b, "recipe": name, "ms": ms[name],
             "ours": name.startswith("compat_grads"), "error": errors[name],
             "ratio": ms[name] / ms[reference]} for name in recipes]


def _error(got, want) -> float:
    return float(np.max(np.abs(np.reshape(got, want.shape) - want)) / max(
        1e-6, np.max(np.abs(want))))


def laplacian(b, d, repeats):
    u, x = scalar_mlp(d, tf), tf.constant(points(b, d))
    ours_in_function = tf.function(lambda x: cg.batch_laplacian(u, x))
    recipes = {
        OURS: lambda: cg.batch_laplacian(u, x),
        "compat_grads batch_laplacian in tf.function": lambda: ours_in_function(x),
        "nested tapes per dimension, tf.function": _functioned(_nested_tapes(u, d), x),
        "compat_grads batch_hessian + tf.linalg.trace, eager (compiled)": lambda:
            tf.linalg.trace(cg.batch_hessian(u, x)),
        **_jax_laplacians(d, x),
    }
    if d > FEW:
        recipes[OURS_FEW] = lambda: cg.batch_laplacian(u, x, chunk_size=FEW)
    return _time("Laplacian", d, b, recipes, OURS, repeats)


OURS_FEW = f"compat_grads batch_laplacian, chunk_size={FEW}, eager (compiled)"


def divergence(b, d, repeats):
    f = mlp([(tf.constant(w), tf.constant(c)) for w, c in weights(d, d)], tf.math)
    x = tf.constant(points(b, d))
    recipes = {
        OURS_DIV: lambda: cg.batch_divergence(f, x),
        "loop of per-dimension tape.gradient, tf.function": _functioned(_tape_rows(f, d), x),
        "tape.batch_jacobian + tf.linalg.trace, tf.function": _functioned(
            _batch_jacobian_trace(f), x),
        **_jax_divergence(d, x),
    }
    return _time("divergence", d, b, recipes, OURS_DIV, repeats)


def _subprocess_rows(kind, sizes, ours, env=None):
    """Rows from a process of its own, their values checked against ours (`ours`: {d:
    values}) and replaced by the error."""
    rows = timing.in_subprocess("compat_grads.bench.traces_process",
                                [kind, sizes["repeats"], sizes["b"], *sizes["laplacian"]],
                                env=env)
    for row in rows:
        row["error"] = _error(np.asarray(row.pop("values")), ours[row["d"]])
        if not row["error"] <= TOLERANCE:
            raise AssertionError(f"{kind}, d={row['d']}: {row['recipe']} differs from ours by "
                                 f"{row['error']:.2e} (tolerance {TOLERANCE})")
    return rows


def _ratios(rows, time_key):
    for row in rows:
        ours = next(r for r in rows if r["d"] == row["d"] and r["recipe"].startswith(
            "compat_grads"))
        row["ratio"] = row[time_key] / ours[time_key]
    return rows


def _median(runs):
    """The run with the median allocator peak, with every run's peaks beside it. A memory
    row takes FULL's `memory_runs` processes: peaks vary from process to process (measured,
    batch_laplacian at b=512, d=200: allocator peaks of 2.5 to 3.5 MB in six runs of the
    same code) with the order two threads run a chunk's ops in and with how the allocator
    splits its free blocks."""
    row = dict(sorted(runs, key=lambda r: r["allocator_peak_mb"])[len(runs) // 2])
    row["allocator_runs_mb"] = sorted(r["allocator_peak_mb"] for r in runs)
    row["rss_runs_mb"] = sorted(r["peak_rss_delta_mb"] for r in runs)
    return row


def _memory(b, d, runs):
    """Peaks of batch_laplacian (default chunks, and every direction at once) over one
    gradient pass's, each the median of `runs` processes of its own: [{b, d, what,
    peak_rss_delta_mb, allocator_peak_mb, rss_ratio, allocator_ratio, and every run's
    peaks}]."""
    rows = [_median([timing.in_subprocess("compat_grads.bench.traces_process",
                                          ["memory", b, d, what],
                                          env={"TF_CPU_ALLOCATOR_USE_BFC": "true"})
                     for _ in range(runs)])
            for what in ("laplacian", "laplacian-few", "laplacian-at-once", "gradient")]
    for row in rows:
        row["rss_ratio"] = row["peak_rss_delta_mb"] / max(1e-3, rows[-1]["peak_rss_delta_mb"])
        row["allocator_ratio"] = row["allocator_peak_mb"] / max(
            1e-3, rows[-1]["allocator_peak_mb"])
    return rows


def run(quick=False, log=print) -> dict:
    """Runs the traces bench; returns the report (raw numbers, ratios and targets)."""
    sizes = QUICK if quick else FULL
    b, repeats = sizes["b"], sizes["repeats"]
    measures = []
    for d in sizes["laplacian"]:
        measures += laplacian(b, d, repeats)
        log(f"... Laplacian, d={d}")
    for d in sizes["divergence"]:
        measures += divergence(b, d, repeats)
        log(f"... divergence, d={d}")
    ours = {d: cg.batch_laplacian(scalar_mlp(d, tf), tf.constant(points(b, d))).numpy()
            for d in sizes["laplacian"]}
    tf1 = _ratios(_subprocess_rows("tf1", sizes, ours), "run_ms")
    log("... TF1 graph")
    report = {"quick": quick, "b": b, "measures": measures, "tf1_graph": tf1,
              "deepxde": None, "deepxde_note": None}
    missing = [name for name in ("deepxde", "tensorflow_probability")  # its TF backend's
               if importlib.util.find_spec(name) is None]
    if missing:
        report["deepxde_note"] = f"not installed: {', '.join(missing)}"
    else:
        report["deepxde"] = _ratios(_subprocess_rows(
            "deepxde", sizes, ours, env={"DDE_BACKEND": "tensorflow"}), "ms")
        log("... DeepXDE")
    report["memory"] = [row for b, d in sizes["memory"]
                        for row in _memory(b, d, sizes["memory_runs"])]
    log("... memory")
    report["programs"] = programs.run(quick, log=log)
    report["targets"] = targets(report, sizes) + programs.targets(report["programs"])
    return report


def _find(rows, d, start):
    return next((r["ratio"] for r in rows if r["d"] == d and r["recipe"].startswith(start)),
                None)


def targets(report, sizes) -> list:
    """The issue's targets, each {target, measured, goal, met}."""
    laplacians = [m for m in report["measures"] if m["workload"] == "Laplacian"]
    big, mid = max(sizes["laplacian"]), 10 if 10 in sizes["laplacian"] else min(
        sizes["laplacian"])
    out = []

    def add(what, measured, goal, at_least=True):
        if measured is not None:
            out.append({"target": what, "measured": measured, "goal": goal,
                        "met": bool(measured >= goal if at_least else measured <= goal)})

    add(f"batch_laplacian vs batch_hessian + trace (d={big})",
        _find(laplacians, big, "compat_grads batch_hessian"), 1.5)
    add(f"batch_laplacian vs nested tapes per dimension in tf.function (d={mid})",
        _find(laplacians, mid, "nested tapes"), mid / 2)
    add(f"TF1 batch_laplacian vs Python loop of tf.gradients, run (d={mid})",
        _find(report["tf1_graph"], mid, "Python loop"), mid / 2)
    for memory in report["memory"]:
        if memory["what"] == MEMORY["laplacian"]:
            at = f"b={memory['b']}, d={memory['d']}"
            add(f"peak RSS: batch_laplacian / one gradient pass ({at})", memory["rss_ratio"], 3,
                at_least=False)
            add(f"allocator peak (tensors): batch_laplacian / one gradient pass ({at})",
                memory["allocator_ratio"], 3, at_least=False)
    for d in sizes["laplacian"]:
        add(f"within 2x of folx (folx time / ours, d={d})",
            _find(laplacians, d, "folx"), 0.5)
    return out


def markdown(report) -> str:
    lines = [f"Per-sample Laplacians and divergences of a tanh MLP (3 x 64), b={report['b']}",
             "", "| workload | d | recipe | ms | their ms / our ms | max rel. error |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {m['workload']} | {m['d']} | {m['recipe']} | {m['ms']:.2f} | "
              f"{m['ratio']:.2f} | {m['error']:.1e} |" for m in report["measures"]]
    lines += ["", "| TF1 graph: d | recipe | build s | ops | run ms | their run / ours |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {r['d']} | {r['recipe']} | {r['build_s']:.3f} | {r['ops']} | "
              f"{r['run_ms']:.2f} | {r['ratio']:.2f} |" for r in report["tf1_graph"]]
    if report["deepxde"]:
        lines += ["", "| DeepXDE: d | recipe | ms | their ms / our ms |", "|---|---|---|---|"]
        lines += [f"| {r['d']} | {r['recipe']} | {r['ms']:.2f} | {r['ratio']:.2f} |"
                  for r in report["deepxde"]]
    else:
        lines += ["", f"DeepXDE: not measured ({report['deepxde_note']})."]
    lines += ["", "| memory: b, d | what | peak RSS rise MB | / gradient pass | CPU allocator "
              "peak MB | / gradient pass |", "|---|---|---|---|---|---|"]
    lines += [f"| {m['b']}, {m['d']} | {m['what']} | {m['peak_rss_delta_mb']:.1f} | "
              f"{m['rss_ratio']:.2f} | {m['allocator_peak_mb']:.1f} | "
              f"{m['allocator_ratio']:.2f} |" for m in report["memory"]]
    lines += ["", *programs.markdown(report["programs"])]
    lines += ["", "| target | measured | goal | met |", "|---|---|---|---|"]
    lines += [f"| {t['target']} | {t['measured']:.2f} | {t['goal']:.2f} | "
              f"{'yes' if t['met'] else 'NO'} |" for t in report["targets"]]
    return "\n".join(lines)


def bench(args, log) -> int:
    """`compat-grads bench --traces [--quick] [--json F]`: prints the table; writes the raw
    numbers to F (default: OUT/traces.json)."""
    report = run(args.quick, log=log)
    path = args.json or os.path.join(args.out, "traces.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(report, handle, indent=1)
    print(markdown(report))
    return 0



def plot(report, path):
    """ms per call against d, one line per recipe, a panel per workload (log-log); None
    without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    # the page shows it at content width (about 800 px): large type, each panel's legend
    # below it, one recipe a line
    figure, panels = plt.subplots(1, 2, figsize=(12, 9))
    for panel, workload in zip(panels, ("Laplacian", "divergence")):
        rows = [m for m in report["measures"] if m["workload"] == workload]
        for recipe in dict.fromkeys(m["recipe"] for m in rows):
            points = sorted((m["d"], m["ms"]) for m in rows if m["recipe"] == recipe)
            panel.plot(*zip(*points), marker="o", label=recipe)
        panel.set(xscale="log", yscale="log")
        panel.set_xlabel("d, features per sample", fontsize=12)
        panel.set_ylabel("ms per call", fontsize=12)
        panel.set_title(f"per-sample {workload}, b = {report['b']}", fontsize=13)
        panel.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.12),
                     frameon=False)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
