"""The traces bench's program workloads (`compat_grads.bench.programs_process`): a
wavefunction's Laplacian (TF1 graph and `tf.function`) and a 1-D `u_xx` in a PDE loss under
Adam (TF1 graph), each recipe in fresh processes, their build and run times the medians
over them. Ratios are the loop's time over ours (above 1: ours is faster), for the build
and for the run."""

from __future__ import annotations

import datetime
import json
import os
import statistics
import sys
import time

import numpy as np

from compat_grads.bench import timing

FULL = {"processes": 5, "pde_processes": 11, "b": 128, "electrons": [4, 10], "pde_b": 256}
QUICK = {"processes": 1, "pde_processes": 1, "b": 8, "electrons": [2], "pde_b": 16}
TIE = 0.95
"""Where both recipes build the same graph (op for op, names and inputs included), the
build differs only by compat_grads' own Python around it (its input checks: about 3 ms of
0.14 s in fresh processes); the build is then a tie at this much of the loop's speed or
more, as the PDE's 1-D u_xx is. Its processes are more (11): the builds differ by less than
the noise of 5."""
RECIPES = {
    "tf1": {"ours": "tf.stop_gradient(cg.batch_laplacian(f, x))",
            "loop": "tf.map_fn of tf.gradients per dimension, back_prop=False"},
    "tf2": {"ours": "cg.batch_laplacian in tf.function",
            "loop": "nested tapes per dimension, tf.function"},
    "pde": {"ours": "cg.batch_hessian_diagonal(u, x)",
            "loop": "tf.gradients(tf.gradients(u, x)[0], x)[0]"},
}
TOLERANCE = 5e-4
"""The largest |loop - ours| over the largest |ours| (float32; a determinant's
cancellations): 1.1e-5 at d=12 and 3.6e-5 at d=30 with Eigen's kernels
(`TF_ENABLE_ONEDNN_OPTS=0`), 1.8e-4 at d=30 with oneDNN's (TensorFlow's default on x86), at
walkers near a node of the wavefunction (docs/traces.rst: rounding near a singular
matrix)."""
# Each process compiles nothing of ours again: the measured build is the program's, not
# Python's (a machine without cached bytecode would add ~0.1 s to every first call).
_ENV = {"PYTHONDONTWRITEBYTECODE": ""}


def _workloads(sizes):
    for electrons in sizes["electrons"]:
        for mode in ("tf1", "tf2"):
            yield "wavefunction", mode, electrons, sizes["b"]
    yield "pde", "pde", 0, sizes["pde_b"]


def _medians(kind, mode, size, b, processes):
    """{recipe: {build_s, run_ms, ops, values}}: medians over fresh processes, the recipes
    taking turns."""
    runs = {recipe: [] for recipe in ("ours", "loop")}
    for turn in range(processes):
        for recipe in (list(runs) if turn % 2 == 0 else list(runs)[::-1]):
            runs[recipe].append(timing.in_subprocess(
                "compat_grads.bench.programs_process",
                [kind, "tf1" if mode == "pde" else mode, recipe, size, b], env=_ENV))
    return {recipe: {"build_s": statistics.median(r["build_s"] for r in rows),
                     "run_ms": statistics.median(r["run_ms"] for r in rows),
                     "ops": rows[0]["ops"], "graph": rows[0].get("graph"),
                     "values": rows[0]["values"]}
            for recipe, rows in runs.items()}


def run(quick=False, log=print) -> list:
    """One row per workload: both recipes' medians, the error and the two ratios."""
    sizes = QUICK if quick else FULL
    if not quick:  # a first process writes the bytecode the timed ones read
        timing.in_subprocess("compat_grads.bench.programs_process",
                             ["pde", "tf1", "ours", 0, 4], env=_ENV)
    rows = []
    for kind, mode, size, b in _workloads(sizes):
        processes = sizes["pde_processes" if kind == "pde" else "processes"]
        found = _medians(kind, mode, size, b, processes)
        ours, loop = (np.asarray(found[r].pop("values")) for r in ("ours", "loop"))
        graphs = {found[r].pop("graph") for r in ("ours", "loop")}
        error = float(np.max(np.abs(loop - ours)) / max(1e-6, np.max(np.abs(ours))))
        if not error <= TOLERANCE:
            raise AssertionError(f"{kind} {mode}: the loop differs from ours by {error:.1e}")
        rows.append({"workload": kind, "mode": mode, "dims": 3 * size if size else 1,
                     "b": b, "processes": processes, "error": error,
                     "same_graph": len(graphs) == 1 and None not in graphs,
                     "recipes": {RECIPES[mode][r]: found[r] for r in found},
                     "build_ratio": found["loop"]["build_s"] / found["ours"]["build_s"],
                     "run_ratio": found["loop"]["run_ms"] / found["ours"]["run_ms"]})
        log(f"... {kind}, {mode}, d={rows[-1]['dims']}")
    return rows


def targets(rows) -> list:
    """At least as fast as the loop replaced, to run and to build: the build within 1.1x the
    loop's plus 50 ms (the first call of a library is not free), and at least as fast
    (`TIE` of it where both built the same graph)."""
    out = []
    for row in rows:
        where = f"{row['workload']} ({row['mode']}, d={row['dims']})"
        loop, ours = (row["recipes"][RECIPES[row["mode"]][r]] for r in ("loop", "ours"))
        out.append({"target": f"{where}: run, loop / ours", "measured": row["run_ratio"],
                    "goal": 1.0, "met": row["run_ratio"] >= 1.0})
        allowed = 1.1 * loop["build_s"] + 0.05
        out.append({"target": f"{where}: build, (1.1 x loop + 50 ms) / ours",
                    "measured": allowed / ours["build_s"], "goal": 1.0,
                    "met": ours["build_s"] <= allowed})
        goal = TIE if row.get("same_graph") else 1.0
        out.append({"target": f"{where}: build, loop / ours" + (
            " (the same graph: a tie)" if row.get("same_graph") else ""),
            "measured": row["build_ratio"], "goal": goal, "met": row["build_ratio"] >= goal})
    return out


def markdown(rows) -> list:
    lines = ["| program workload | d | recipe | build s | run ms | ops |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        for name, r in row["recipes"].items():
            lines.append(f"| {row['workload']} ({row['mode']}) | {row['dims']} | {name} | "
                         f"{r['build_s']:.3f} | {r['run_ms']:.2f} | {r['ops'] or '-'} |")
    return lines


def merge(path, quick=False, log=print) -> dict:
    """Runs the program workloads and puts them into the traces bench's JSON at `path`
    (`report["programs"]`, how they ran, and their targets in place of the old ones)."""
    with open(path) as handle:
        report = json.load(handle)
    load, start = os.getloadavg()[0], time.perf_counter()
    report["programs"] = run(quick, log=log)
    report["programs_run"] = {
        "date": datetime.date.today().isoformat(), "load": load,
        "minutes": (time.perf_counter() - start) / 60,
        "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "TensorFlow's default"),
        "command": f"python -m compat_grads.bench.programs {path}"}
    ours = {t["target"] for t in targets(report["programs"])}
    report["targets"] = [t for t in report["targets"] if t["target"] not in ours and not any(
        t["target"].startswith(w) for w in ("wavefunction (", "pde ("))]
    report["targets"] += targets(report["programs"])
    with open(path, "w") as handle:
        json.dump(report, handle, indent=1)
    return report


if __name__ == "__main__":  # python -m compat_grads.bench.programs TRACES_JSON [--quick]
    merge(sys.argv[1], quick="--quick" in sys.argv[2:])
