"""Runs `compat-grads bench` and writes docs/performance.rst with its tables and plot.

    python docs/make_performance.py              # the full suite (about 10 min on 2 cores)
    python docs/make_performance.py --quick      # tiny sizes: checks the page, not the speed
    python docs/make_performance.py --page-only  # the page again from the last run's files
    python docs/make_performance.py --traces     # only `compat-grads bench --traces`, then
                                                 # the page (with the last suite run's files)

The bench's JSON and PNG land in docs/_static/bench/, with run.json (how it ran); the page
records the date, the machine, the TensorFlow, JAX and NumPy versions and the command. Run
it with the environment tox uses (TF_CPP_MIN_LOG_LEVEL=3 TF_USE_LEGACY_KERAS=1
TF_ENABLE_ONEDNN_OPTS=0), with the bench extra installed (matplotlib for the plot, JAX).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent


def _beside(name):
    """The module `name`.py beside this script, whether it runs as a script or is loaded
    from its path (the tests)."""
    spec = importlib.util.spec_from_file_location(f"compat_grads_docs_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_sections = _beside("performance_sections")
_text, _table = _sections._text, _sections._table
_cnn_section, _first_run_section = _sections._cnn_section, _sections._first_run_section
_rule_section, _traces_section = _sections._rule_section, _sections._traces_section
_xla_section = _sections._xla_section
OUT = HERE / "_static" / "bench"
PAGE = HERE / "performance.rst"
_VERSIONS = """
import importlib, json
from importlib import metadata
out = {}
for name in ("tensorflow", "jax", "numpy"):
    try:
        out[name] = importlib.import_module(name).__version__
    except ImportError:
        out[name] = None
for name in ("folx", "deepxde"):  # by metadata: importing DeepXDE picks and logs a backend
    try:
        out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        out[name] = None
print(json.dumps(out))
"""


def _ratios(measures) -> dict:
    """{(workload, recipe): their ms / our eager ms}, as `compat-grads bench` prints them:
    "our eager ms" is the workload's first compat_grads recipe run eagerly."""
    ours = {}
    for m in measures:
        if m["ours"] and "eager" in m["recipe"]:
            ours.setdefault(m["workload"], m["ms"])
    return {(m["workload"], m["recipe"]): m["ms"] / ours[m["workload"]] for m in measures}


def _tf2_sections(measures) -> list:
    ratios = _ratios(measures)
    lines = []
    for workload in dict.fromkeys(m["workload"] for m in measures):
        lines += [_text(workload), "~" * len(_text(workload)), ""]
        rows = [(m["recipe"], f"{m['ms']:.2f}", f"{ratios[workload, m['recipe']]:.2f}")
                for m in measures if m["workload"] == workload]
        lines += _table(("recipe", "ms", "their ms / our eager ms"), rows, (60, 15, 25))
    return lines


# Why a side-by-side ratio is extreme (10 or more), by a part of its workload's name and
# its column (None: any; 0: TensorFlow's best in tf.function, 3: TensorFlow's best with XLA).
EXTREMES = {
    ("tall", None): "the best forward recipes (vectorized_map of ForwardAccumulator, JAX's "
                    "jacfwd) push the 500 one-hot tangents through A x, a product of A with "
                    "the 500 x 500 identity; stacked_jacobian takes each one-hot's tangent "
                    "as A's own column (compat_grads._src.jacobians.one_hot_products) and "
                    "is left with one elementwise pass.",
    ("J·1", 0): "TensorFlow's best in tf.function builds the whole 4,000 x 500 Jacobian and "
                "sums it; per_element_gradients is one forward product.",
    ("oneDNN on", 0): "with oneDNN's kernels, vectorized_map(GradientTape) "
                                       "runs a while_loop over the examples' filter "
                                       "gradients and pays oneDNN's per-call cost once per "
                                       "example (the note on oneDNN below).",
    ("per-example gradients, CNN depthwise", 3):
        "under XLA TensorFlow's recipe runs its depthwise filter gradient folded over the "
        "examples, which XLA on a CPU runs slowly; ours takes it as taps (see the note on "
        "XLA below).",
}
EXTREME = 10.0
UNKNOWN = "not explained yet: the workload's own table below has every recipe's time."


def _side_by_side_rows(report):
    """The side-by-side rows with a value (a row of n/a only is left out), each extreme
    ratio marked with the number of its explanation; and the explanations."""
    from compat_grads.bench import suite

    rows, notes = [], []
    for workload, *cells in suite.against_best(suite._ratios(report["measures"])):
        if all(cell == "-" for cell in cells):
            continue
        shown = []
        for column, cell in enumerate(cells):
            if cell != "-" and float(cell) >= EXTREME:
                why = next((text for (start, at), text in EXTREMES.items()
                            if start in workload and at in (None, column)), UNKNOWN)
                notes.append(f"{len(notes) + 1}. {workload}, {cell}: {why}")
                cell = f"{cell} ({len(notes)})"
            shown.append("n/a" if cell == "-" else cell)
        rows.append([workload, *shown])
    return rows, (["Ratios of 10 or more, numbered in the table:", "", *notes, ""]
                  if notes else [])


def _side_by_side(report) -> list:
    """Each TF2 workload against TensorFlow's best recipe in tf.function and JAX's best."""
    from compat_grads.bench import suite

    rows, notes = _side_by_side_rows(report)
    return ["Side by side", "------------", "",
            "Per workload, the best hand-written TensorFlow recipe in ``tf.function`` and the",
            "best JAX recipe (``jax.jit``), each as *their time / our eager time* (above 1:",
            "``compat_grads`` is faster; ours with the defaults, ``jit_compile=False``), then",
            "JAX's best, and TensorFlow's best compiled by XLA (``tf.function(jit_compile=True)``,",
            "timed for the per-example workloads), each against ours with ``jit_compile=True``",
            "where the workload times it (n/a where a workload has no such recipe; the",
            "workloads that time only ours, such as the per-call overheads, are in their own",
            "tables below). The misses",
            "are explained in :ref:`the notes below <side-by-side-notes>`.", "",
            *_table(("workload", *suite.AGAINST_BEST), rows, (28, 18, 18, 18, 18)),
            *notes, *SIDE_BY_SIDE_NOTES, *_j1_note(report), *_xla_per_example_note(report),
            *_onednn_note(report),
            *_own_cost_note(report)]


def _j1_note(report) -> list:
    """Why J·1 trails JAX: what TensorFlow takes for the primal product alone, and reading
    A once, from the J·1 workload's rows."""
    from compat_grads.bench import workloads

    workload = next((m["workload"] for m in report["measures"]
                     if m["workload"].startswith("J·1")), "")
    ms = {m["recipe"]: m["ms"] for m in report["measures"] if m["workload"] == workload}
    ours, xla = ms.get(workloads.OURS + " per_element_gradients, eager"), ms.get(
        workloads.XLA.format("per_element_gradients"))
    jax, primal = ms.get("jax.jit(jvp)"), ms.get(workloads.PRIMAL)
    (two, _), (once, _) = workloads.J1_BY_HAND
    if None in (ours, jax, primal) or two not in ms or once not in ms:
        return []
    with_xla = "" if xla is None else (
        f"; with ``jit_compile=True`` {xla:.3f} ms, {jax / xla:.2f}")
    floor = (f"already cost {primal / jax:.1f}x JAX's two products, so no J·1 built of "
             "TensorFlow's ops reaches JAX here without XLA" if primal > jax else
             f"cost {primal / jax:.2f}x JAX's two products")
    once_text = "does not help" if ms[once] >= ms[two] else "helps"
    return [
        f"- **J·1: TensorFlow's floor.** The {_text(workload)} of ``tanh(A x)`` is",
        f"  ``A x`` and ``A 1``. JAX's compiled J·1 took {jax:.3f} ms, ours {ours:.3f} ms",
        f"  ({jax / ours:.2f} of JAX's speed{with_xla}), and the primal product ``A x`` alone",
        f"  in ``tf.function`` {primal:.3f} ms: TensorFlow's call and its one-column",
        f"  ``MatMul`` {floor}. Reading A once {once_text} under these kernels: J·1 by hand",
        f"  with one ``MatMul`` of A by the two columns ``[x, 1]`` took {ms[once]:.3f} ms",
        f"  against {ms[two]:.3f} ms with two of one column. JAX's recipe takes A as an",
        "  argument of its compiled function, as TensorFlow's recipes read theirs (with a",
        "  closed-over numpy A, XLA folds ``A 1`` when it compiles: one product fewer).", ""]


def _own_cost_note(report) -> list:
    """What compat_grads' own Python adds to a small compiled call, per function: the
    judged targets (medians over fresh processes, with their spread, where the report has
    them), and how far TensorFlow's own dispatch moved between those processes."""
    from compat_grads.bench import per_call

    costs, python = (
        {t["target"][len(start):-1]: t for t in report["targets"]
         if t["target"].startswith(start)}
        for start in ("compat_grads' own µs per call over its concrete function (per-call "
                      "overhead: ", "compat_grads' own Python µs per call, TensorFlow's call a "
                      "stub (per-call overhead: "))
    runs = [ms for w, found in (report.get("verdict") or {}).get("runs", {}).items()
            if w.startswith("per-call overhead") for ms in found]
    floors = [ms[per_call.CONCRETE] * 1e3 for ms in runs if per_call.CONCRETE in ms] or [
        m["ms"] * 1e3 for m in report["measures"] if m["recipe"] == per_call.CONCRETE]
    if not floors or not costs:
        return []
    where = (f"the median of {report['verdict']['processes']} fresh processes with their "
             "lowest and highest" if runs else "one run")
    return ["- **Small calls: compat_grads' own cost.** On the per-call workloads (a",
            "  3-vector), our eager call less the concrete function it runs, called directly",
            "  (``_call_flat``, TensorFlow's own dispatch: "
            f"{min(floors):.0f}-{max(floors):.0f} µs here), in µs, {where}: " + "; ".join(
                f"``{name}`` {_micro(t)}" for name, t in costs.items()) + ".",
            "  A call like one before it (the same callable, plain option values, eager",
            "  tensors of the same dtypes and shapes) runs the concrete function the first",
            "  one chose without choosing again; anything else (nests, variables, a tape,",
            "  ``distribute=``) takes the whole path. The difference moves with TensorFlow's",
            "  own dispatch: the floor of one function alone moved by up to "
            f"{_widest(report):.0f} µs between processes.", *_own_python_note(python)]


def _own_python_note(python) -> list:
    """Our own Python alone per call (both calls of the concrete function a stub), and why
    the difference of the real calls is larger."""
    if not python:
        return [""]
    return ["  Our own Python alone, with the concrete function's call a stub in both (its",
            "  result returned at once), in µs: " + "; ".join(
                f"``{name}`` {_micro(t)}" for name, t in python.items()) + ".",
            "  The real calls differ by more: TensorFlow's call takes longer when Python ran",
            "  just before it (``python benchmarks/idle_gap.py``, three runs on 2026-12-07 on",
            "  the machine of this page's run: after 10",
            "  µs of spinning Python the call took 10-27 µs longer than the spin itself, after",
            "  20 µs 30-51 µs longer), so each µs of our Python counts more than once. In a",
            "  training step, where other work runs between calls, that wait is the step's.",
            ""]


def _micro(target) -> str:
    """A target in µs, with the spread of its processes where it has one."""
    measured = round(target["measured"])  # an int: never "-0"
    if "spread" not in target:
        return f"{measured}"
    low, high = (round(each) for each in target["spread"])
    return f"{measured} ({low} to {high})" if low < 0 else f"{measured} ({low}-{high})"


def _widest(report) -> float:
    """The widest range of one per-call workload's floor between its verdict processes, in
    µs (0 without verdict processes)."""
    from compat_grads.bench import per_call

    found = (report.get("verdict") or {}).get("runs", {})
    floors = [[ms[per_call.CONCRETE] * 1e3 for ms in runs if per_call.CONCRETE in ms]
              for w, runs in found.items() if w.startswith("per-call overhead")]
    return max((max(f) - min(f) for f in floors if f), default=0.0)


def _xla_per_example_note(report) -> list:
    """Where TensorFlow's per-example recipe compiled by XLA stands: against ours with the
    defaults (it is not held to them) and with XLA, and where XLA runs it slowly."""
    from compat_grads.bench import suite, workloads

    ratios = suite._ratios(report["measures"])
    name = workloads.TF_XLA.format("vectorized_map(GradientTape)")
    ours_xla = workloads.XLA.format("per_example_gradients")
    rows = {w: r for w, r in ratios.items() if name in r and ours_xla in r}
    if not rows:
        return []
    slowest = max(rows, key=lambda w: rows[w][name] / rows[w][ours_xla])
    ms = {m["recipe"]: m["ms"] for m in report["measures"] if m["workload"] == slowest}
    return [
        "- **TensorFlow's per-example recipe with XLA.** ``vectorized_map(GradientTape)`` in",
        "  a ``tf.function(jit_compile=True)`` against ours with the defaults (their time /",
        "  ours), per-example gradients of each model: " + "; ".join(
            f"{_text(w.replace('per-example gradients, ', ''))} {r[name]:.2f}"
            for w, r in rows.items()) + ".",
        "  Where it is ahead, ours with ``jit_compile=True`` is the fair match (the last",
        "  column). XLA on CPU runs TensorFlow's conversion of a depthwise layer's",
        "  per-example filter gradient (the examples folded into the channels of one",
        f"  depthwise op) slowly: {_text(slowest)}, {ms[name]:.1f} ms against "
        f"{ms[ours_xla]:.2f} ms",
        "  for ours with XLA, whose depthwise filter gradients under XLA are one matrix",
        "  product per kernel tap.", ""]


def _kernels_text(report) -> str:
    """Which kernels the other rows ran with, and which TensorFlow picks on this machine."""
    kernels = report.get("kernels")
    if not kernels:
        return "(The other rows run with the environment's setting.)"
    here = "oneDNN's" if kernels["here"] else "Eigen's (``TF_ENABLE_ONEDNN_OPTS=0``, as tox)"
    pick = "oneDNN" if kernels["tensorflow_default"] else "Eigen"
    return f"(The other rows run with {here} kernels; on this machine TensorFlow picks {pick}.)"


def _verdict_paragraph(report) -> list:
    """How the speed goals are judged: over fresh processes, with ties on the same graph."""
    from compat_grads.bench import verdict

    found = report.get("verdict")
    if not found:
        return []
    ties = "; ".join(f"*{start}*: {why}" for start, why in verdict.SAME_GRAPH.items())
    return [
        "The speed goals (*never slower than TensorFlow's best*, the per-example CNN goals,",
        f"the per-call goals) are judged on the median of {found['processes']} fresh",
        "processes per workload, each interleaving the workload's recipes, so every recipe",
        "meets the same allocator state; *measured* gives the median and the lowest and",
        "highest of the processes. Where ours runs the graph TensorFlow's best runs, op for",
        f"op, a median at or above {verdict.TIE} is a tie (*met*: tie), not a miss: the",
        f"medians of two identical graphs differ by that much. Those workloads: {ties}.",
        "The per-example CNN goal of twice ``vectorized_map(GradientTape)`` is judged under",
        "the kernels TensorFlow picks on the machine; a row under the other kernels says",
        "so in its name. The other goals come from the one run of the tables above.", ""]


def _onednn_note(report) -> list:
    """The per-example workloads run again with oneDNN's kernels: TensorFlow's recipe
    against ours there, and what the kernels did to it."""
    from compat_grads.bench import suite, workloads

    ratios = suite._ratios(report["measures"])
    rows = {w: r for w, r in ratios.items() if w.endswith(workloads.ONEDNN)}
    if not rows:
        return []
    ms = {(m["workload"], m["recipe"]): m["ms"] for m in report["measures"]}
    plain = next(iter(w for w in rows if "CNN (" in w), None)
    ours = workloads.OURS + " per_example_gradients, eager"
    default = plain and plain[:-len(workloads.ONEDNN)]
    slower = [] if plain is None else [
        "  Its ``while_loop`` over the examples' ``Conv2DBackpropFilter`` pays oneDNN's",
        "  per-call cost once per example: for the plain CNN "
        f"{ms[plain, workloads.VECTORIZED]:.1f} ms with oneDNN against "
        f"{ms[default, workloads.VECTORIZED]:.1f} ms without,",
        f"  ours {ms[plain, ours]:.2f} against {ms[default, ours]:.2f}."]
    return [
        "- **With oneDNN's kernels.** The rows ending in *oneDNN on* time the per-example",
        "  workloads again in a process of their own with ``TF_ENABLE_ONEDNN_OPTS=1``:",
        "  TensorFlow turns oneDNN on by default on x86 CPUs with AVX-512 VNNI and later, so",
        "  many users run these kernels without asking. " + _kernels_text(report),
        "  ``vectorized_map(GradientTape)`` in ``tf.function`` against ours there (their",
        "  time / ours): " + "; ".join(
            f"{_text(w.replace('per-example gradients, ', '').replace(workloads.ONEDNN, ''))}"
            f" {r[workloads.VECTORIZED]:.2f}" for w, r in rows.items()) + ".",
        *slower, ""]


SIDE_BY_SIDE_NOTES = [
    ".. _side-by-side-notes:", "",
    "Why JAX is ahead where it is, measured on this machine (2 cores, no GPU):", "",
    "- **XLA fuses, TensorFlow's executor does not.** A ``compat_grads`` graph runs op by",
    "  op: every elementwise step of a tanh MLP's derivative (``TanhGrad``, the products",
    "  with the activations' derivatives) writes a whole tensor to memory and reads it",
    "  back, and each op costs the executor a few microseconds. ``jax.jit`` compiles the",
    "  whole computation into a few fused loops. With ``jit_compile=True`` our graph is",
    "  compiled by the same XLA and the last column shows where that closes the gap.",
    "- **jit_compile stays False by default.** XLA pays for itself only once its compile",
    "  (a few hundred milliseconds on the first call with each input shape) has been",
    "  repaid by later calls with the same shapes, and nothing known while building the",
    "  graph says how often a call will repeat; XLA's values also differ from every other",
    "  route's in the last bits, where a ``tf.function`` and an eager call agree bit for",
    "  bit (:doc:`guide`, *Speed*). Ask for it where one shape repeats: a training step, a",
    "  residual at fixed collocation points (:ref:`xla-choice`: after how many calls it",
    "  pays, per function).", ""]


def _yardstick_section(report) -> list:
    """The per-example CNN workloads against the work every recipe shares: how far the 2x
    goal against vectorized_map is reachable at all."""
    from compat_grads.bench import suite, workloads

    ratios = suite._ratios(report["measures"])
    rows = [(workload, *(f"{r:.2f}" for r in suite.cnn_yardstick(ratio)))
            for workload, ratio in ratios.items() if workloads.SHARED in ratio]
    if not rows:
        return []
    return [
        ".. _per-example-yardstick:", "",
        "Per-example convolutions: the work every recipe shares", "-" * 54, "",
        "The goal for per-example CNN gradients is twice the speed of",
        "``vectorized_map(GradientTape)`` in ``tf.function``. Most of what either computes",
        "is the same work, made of the same TensorFlow kernels: the forward pass, the",
        "backward pass to the convolution's output, and each example's dense kernel (an",
        "outer product per example: 256 x 800 x 10 floats written for the plain CNN). The",
        "row *the work every recipe shares* does exactly that by hand in ``tf.function``,",
        "with the convolution kernel's gradient of the whole batch (one op) in place of one",
        "per example; it is checked against ours. It is a yardstick, not a bound: a",
        "recipe can do a part of that work faster than TensorFlow's batched ops (ours",
        "does for a dilated layer, whose taps skip the space-to-batch of TensorFlow's",
        "batched filter gradient, and for a depthwise one of one input channel, whose",
        "per-example filter gradients, taps as for a plain convolution, run faster than",
        "TensorFlow's batched depthwise one: *ours / shared* below 1). Where",
        "``vectorized_map`` takes less than about twice the shared work's time, the goal is",
        "out of reach of a recipe of TensorFlow's kernels; *ours / shared* is what is left",
        "to us (1.00: ours adds nothing to the shared work).", "",
        *_table(("workload", "vectorized_map / ours", "vectorized_map / shared",
                 "ours / shared"), rows, (40, 20, 20, 20))]


def page(report: dict, meta: dict, routes=None, traces=None, second_order=None,
         first_run=None, xla=None) -> str:
    """The reStructuredText of the Performance page for a bench report and its run (and
    the measurements of the routes, `python -m compat_grads.bench.routes`, of XLA's first
    calls, `python -m compat_grads.bench.xla_choice`,
    `python -m compat_grads.bench.second_order_rows` and, when measured alone,
    `python -m compat_grads.bench.first_run --json docs/_static/bench/first_run.json`)."""
    from compat_grads.bench import verdict

    size = "quick (tiny sizes, ``--quick``)" if report["quick"] else "full"
    jax = f"JAX {meta['jax']}" if meta.get("jax") else "no JAX (its columns are absent)"
    lines = [
        "Performance", "===========", "",
        ".. This page is generated by docs/make_performance.py: edit that, not this.", "",
        "``compat-grads bench`` times ``compat_grads`` side by side with the recipes users",
        "write today and with TensorFlow's (and JAX's) best, in one run on one machine.",
        "Each workload's last column is *their time / our eager time*: above 1, the",
        "``compat_grads`` eager call is faster. Absolute times depend on the machine;",
        "the ratios are the point.", "",
        "How these numbers were made", "---------------------------", "",
        f"- Date: {meta['date']}; run took {meta['minutes']:.1f} min ({size} suite).",
        f"- Machine: {_text(meta['machine'])}; load average {meta['load']:.1f} when the",
        "  run started (other processes share the cores: the suite interleaves its recipes",
        "  so that they all see the same noise).",
        "- A call's time ends when its result is ready: the suite waits on a view of each",
        "  tensor's buffer, never copies the result to NumPy (``numpy()``, a cost no",
        "  caller pays, 0.33 ms for 8 MB, which JAX's ``block_until_ready`` does not add).",
        f"- Python {meta['python']}, TensorFlow {meta['tensorflow']}, {jax},",
        f"  NumPy {meta['numpy']}.",
        "- Command (regenerates this page, the plot and the JSON):", "",
        "  .. code-block:: console", "",
        f"     $ {meta['command']}", "",
        f"  which runs ``{meta['bench']}``. The raw results:",
        "  :download:`bench.json <_static/bench/bench.json>`.", "",
        *_side_by_side(report),
        *_yardstick_section(report),
        *_first_run_section(first_run or report.get("first_run")),
        "TF2 workloads", "-------------", "",
        *_tf2_sections(report["measures"]),
        "TF1 graph: build and run", "------------------------", "",
        "A stacked Jacobian of ``tanh(W x)`` (``x`` of 50) in a TF1 graph, for growing",
        "``m`` target elements: seconds to build the graph, graph size and run time.", "",
        ".. image:: _static/bench/tf1_graph.png",
        "   :alt: TF1 graph build time and run time against m, one line per recipe", "",
        *_table(("m", "recipe", "build s", "ops", "run ms"),
                [(r["m"], r["recipe"], f"{r['build_s']:.3f}", r["ops"], f"{r['run_ms']:.2f}")
                 for r in report["tf1_graph"]], (8, 52, 13, 12, 15)),
        *_cnn_section(report.get("tf1_cnn")),
        *_rule_section(routes, second_order),
        *_xla_section(xla),
        *_traces_section(traces),
        "Memory", "------", "",
        "Peak resident memory of a Jacobian (its increase over the process before the",
        "call), against the size of the result, with and without ``chunk_size``. The",
        "last row runs the forward chunks again with glibc's mmap threshold fixed",
        "(*malloc*): by default glibc raises that threshold once a large block is",
        "freed, and then keeps the later chunk-sized temporaries it frees in its heap, in",
        "the resident set; fixed, the peak follows the tensors the graph holds. A bare",
        "``while_loop`` writing the same chunks into one buffer shows the same gap (1.37",
        "to 1.42 times the result by default, 1.07 fixed).", "",
        *_table(("m x n", "strategy", "chunk_size", "malloc", "result MB",
                 "peak RSS delta MB", "peak / result"),
                [(f"{r['m']}x{r['n']}", r["strategy"], r["chunk_size"] or "-",
                  r.get("malloc", "default"), f"{r['result_mb']:.0f}",
                  f"{r['peak_delta_mb']:.0f}", f"{r['ratio']:.2f}")
                 for r in report["memory"]]),
        "Targets", "-------", "",
        "The goals the suite checks (ratios; *met* compares with the goal).", "",
        *_verdict_paragraph(report),
        *_table(("target", "measured", "goal", "met"),
                [(t["target"], verdict.measured_text(t), f"{t['goal']:.2f}",
                  verdict.met_text(t)) for t in report["targets"]], (52, 24, 12, 12)),
    ]
    return "\n".join(lines).rstrip() + "\n"


def _machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()}"


def run(quick: bool) -> None:
    """Runs the bench; leaves its JSON and PNG, and how it ran (run.json), in OUT."""
    flags = ["--quick"] if quick else []
    load, started = os.getloadavg()[0], time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        # Eigen's kernels, as tox runs them; the per-example workloads again with oneDNN's
        subprocess.run([sys.executable, "-m", "compat_grads", "bench", "--out", folder, *flags],
                       check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0"))
        minutes = (time.monotonic() - started) / 60
        OUT.mkdir(parents=True, exist_ok=True)
        for name in ("bench.json", "tf1_graph.png"):
            shutil.copyfile(os.path.join(folder, name), OUT / name)
    versions = json.loads(subprocess.run([sys.executable, "-c", _VERSIONS], check=True,
                                         capture_output=True, text=True).stdout)
    meta = {"date": datetime.date.today().isoformat(), "minutes": minutes,
            "machine": _machine(), "load": load, "python": platform.python_version(), **versions,
            "command": " ".join(["python docs/make_performance.py", *flags]),
            "bench": " ".join(["TF_ENABLE_ONEDNN_OPTS=0 compat-grads bench --out "
                               "<temporary folder>", *flags])}
    (OUT / "run.json").write_text(json.dumps(meta, indent=1) + "\n", "utf-8")


def run_traces() -> None:
    """Runs `compat-grads bench --traces`; its JSON, with how it ran, and its plot land in
    OUT."""
    load, started = os.getloadavg()[0], time.monotonic()
    path = OUT / "traces.json"
    OUT.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "compat_grads", "bench", "--traces", "--json",
                    str(path)], check=True, stdout=subprocess.DEVNULL)
    versions = json.loads(subprocess.run([sys.executable, "-c", _VERSIONS], check=True,
                                         capture_output=True, text=True).stdout)
    report = json.loads(path.read_text("utf-8"))
    report["run"] = {"date": datetime.date.today().isoformat(), "load": load,
                     "minutes": (time.monotonic() - started) / 60, **versions,
                     "command": "python docs/make_performance.py --traces"}
    path.write_text(json.dumps(report, indent=1) + "\n", "utf-8")
    from compat_grads.bench import traces

    traces.plot(report, OUT / "traces.png")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the bench's tiny sizes")
    parser.add_argument("--page-only", action="store_true",
                        help="rewrite the page from the last run's files, without running")
    parser.add_argument("--traces", action="store_true",
                        help="run only the traces bench (Laplacians, divergences)")
    args = parser.parse_args(argv)
    if args.traces:
        run_traces()
    elif not args.page_only:
        run(args.quick)
    report = json.loads((OUT / "bench.json").read_text("utf-8"))
    from compat_grads.bench import suite

    alone = OUT / "first_run.json"  # the first run measured alone replaces the suite's
    if alone.exists():
        report["first_run"] = json.loads(alone.read_text("utf-8"))
    # the goals judged from the measurements with the suite's rules as they are now
    report["targets"] = suite.targets(report)
    (OUT / "bench.json").write_text(json.dumps(report, indent=1), "utf-8")
    meta = json.loads((OUT / "run.json").read_text("utf-8"))
    measured = (OUT / name for name in ("routes.json", "traces.json", "second_order_rows.json",
                                        "first_run.json", "xla.json"))
    PAGE.write_text(page(report, meta, *(json.loads(path.read_text("utf-8"))
                                         if path.exists() else None
                                         for path in measured)), "utf-8")
    print(f"wrote {PAGE.relative_to(HERE.parent)} and {OUT.relative_to(HERE.parent)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
