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
import json
import os
import pathlib
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
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


def _text(value) -> str:
    """Plain text in reStructuredText: no markup character keeps its meaning."""
    return re.sub(r"([\\*`|_])", r"\\\1", str(value))


def _table(header, rows, widths=None) -> list:
    """A list-table: one header row, then the rows (cells are plain text)."""
    lines = [".. list-table::", "   :header-rows: 1", "   :width: 100%"]
    if widths:
        lines.append("   :widths: " + " ".join(str(w) for w in widths))
    lines.append("")
    for row in [header, *rows]:
        cells = [_text(cell) for cell in row]
        lines += [f"   * - {cells[0]}", *[f"     - {cell}" for cell in cells[1:]]]
    return lines + [""]


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


def _speedup(case) -> float:
    """An XLA case's time per call without XLA over with it."""
    return case["ms"]["default"] / case["ms"]["xla"]


def _xla_section(xla) -> list:
    """When `jit_compile=True` pays, per function (`python -m compat_grads.bench.xla_choice
    --json docs/_static/bench/xla.json`)."""
    if not xla:
        return []
    rows = [(r["case"], f"{r['first_ms']['default']:.0f} / {r['first_ms']['xla']:.0f}",
             f"{r['ms']['default']:.2f} / {r['ms']['xla']:.2f}",
             f"{r['ms']['default'] / r['ms']['xla']:.2f}",
             "never" if r["breakeven"] is None else f"{r['breakeven']:.0f}")
            for r in xla["cases"]]
    faster = [r for r in xla["cases"] if r["breakeven"] is not None]
    slower = [r["case"] for r in xla["cases"] if r["breakeven"] is None]
    speedups = [_speedup(r) for r in faster]
    calls = [r["breakeven"] for r in faster]
    summary = ([f"XLA was faster per call on {len(faster)} of {len(rows)} cases",
                f"({min(speedups):.2f}x to {max(speedups):.2f}x) and repaid its first call",
                f"after {min(calls):.0f} to {max(calls):.0f} calls"] if faster else
               ["XLA was faster per call on none of the cases"])
    summary[-1] += (f"; it was not faster on {', '.join(slower)}." if slower else ".")
    longest = max(xla["cases"], key=lambda r: r["first_ms"]["xla"] - r["first_ms"]["default"])
    most, least = max(xla["cases"], key=_speedup), min(xla["cases"], key=_speedup)
    kernels = {True: "oneDNN's", False: "Eigen's"}
    ran = " and ".join(kernels[k] for k in xla.get("onednn", []))
    return [
        ".. _xla-choice:", "",
        "When jit_compile=True pays", "-" * 26, "",
        "Every function takes ``jit_compile=True``. Per function, on the workloads the suite",
        "holds against JAX and on per-example gradients: the first call without and with",
        "XLA (tracing, and XLA's compile; each in a fresh process, after a tiny compile of",
        "something else has started XLA), the time per later call side by side, the speed",
        "XLA gives per call, and after how many calls its first call's extra cost is repaid",
        f"(*pays after*); with {ran or 'the environment'} kernels, as the tables above.", "",
        *_table(("function: workload", "first call ms (default / XLA)",
                 "per call ms (default / XLA)", "XLA faster per call", "pays after (calls)"),
                rows, (40, 20, 20, 12, 12)),
        " ".join(summary), "",
        "What decides it, known before the call:", "",
        "- **How often the same shapes repeat.** The compile is paid once per input shape",
        "  (dtype, and option values): a training step, a residual at fixed collocation",
        "  points or an evaluation loop over equal batches repays it after the calls in",
        "  the last column; a call whose shapes change every time (a last short batch is",
        "  one more compile, a varying sequence length one per length) never does.",
        "- **What the graph is made of.** XLA fuses the elementwise ops of a derivative (a",
        "  tanh MLP's ``TanhGrad`` and the products with the activations' derivatives) into",
        "  loops around the matrix products, where TensorFlow writes each to memory. Here",
        f"  it gained most on {_text(most['case'])} ({_speedup(most):.2f}x) and least on",
        f"  {_text(least['case'])} ({_speedup(least):.2f}x). Its compile grows with the graph:",
        f"  the longest extra first call here was {_text(longest['case'])}'s,",
        f"  {longest['first_ms']['xla'] - longest['first_ms']['default']:.0f} ms.",
        "- **Whether values must match other routes bit for bit.** XLA's results differ",
        "  from every other route's in the last bits (a ``tf.function`` and an eager call",
        "  agree bit for bit without it): a port checked with ``compare_port`` against a TF1",
        "  graph keeps the default.",
        "- **Whether XLA compiles every op.** An op XLA cannot compile makes the call fall",
        "  back to the compiled function without XLA, with one ``XlaWarning``: the first",
        "  call pays the failed attempt as well.", "",
        "So the default stays ``jit_compile=False`` for every function: nothing in a call",
        "says how often its shapes will repeat. Ask for XLA in a loop that repeats one",
        "shape more often than the *pays after* column, where the last bits may differ.",
        "The command:", "",
        ".. code-block:: console", "",
        "   $ python -m compat_grads.bench.xla_choice --json docs/_static/bench/xla.json", ""]


def _rule_section(routes, second_order=None) -> list:
    """When compat_grads vectorizes: the rule, its thresholds read from
    compat_grads._src.stacking.cost
    (written there once), and the measurements behind it (`routes`, from
    `python -m compat_grads.bench.routes`; `second_order`, from
    `python -m compat_grads.bench.second_order_rows`), when there are any."""
    from compat_grads._src.stacking import cost as _cost

    kib = _cost.ROW_BYTES // 2**10
    low, high = _cost.GRADIENT_ROWS
    lines = [
        ".. _vectorize-rule:", "",
        "When compat_grads vectorizes", "----------------------------", "",
        "Vectorized rows (pfor) compute every row of a Jacobian at once: each intermediate",
        "of one row's pass becomes one tensor as many times larger. That wins while a row",
        "is cheap next to the cost of running its ops one after another (a loop is then",
        "mostly overhead) and loses once a row's intermediates are large: the stacked",
        "tensors leave the cache, pfor adds Transposes of them around every matrix",
        "product, and a loop's rows run at full speed on data that fits. Through",
        "convolutions and pooling pfor loses at every size measured: its converters for",
        "the gradients of ``MaxPool`` and ``Conv2D`` tile the forward activations once",
        "per row (a profile of the CNN below: a quarter of the time in ``Tile``). Through",
        "a TF2 loop (``tf.while_loop``, ``tf.foldl``, ``tf.scan``) pfor traces the loop's",
        "body again to convert it: a second-order ``batch_jacobian`` through ``tf.foldl``",
        "took 37 s to build vectorized against 4 s in a ``while_loop`` (and 6 s as",
        "separate passes, each tracing the loop's gradient again). A Keras ``LSTM`` or",
        "``GRU`` layer runs its loop inside a function of its own: a ``batch_jacobian``",
        "through an LSTM (3 outputs, 20 steps) built in 2.7 to 2.9 s vectorized against",
        "0.73 to 0.76 s in a ``while_loop``, which then ran in 4.0 ms against 3.5 (8",
        "samples) and 4.1 ms against 6.2 (64 samples). Rows that run a loop *and*",
        "differentiate it (per-example gradients through an LSTM) pfor cannot vectorize",
        "at all: it converts the forward loop, then fails on its gradient.", "",
        "So ``strategy=\"auto\"`` follows a static rule, decided while the graph is built",
        "from the row count, the sizes and the op types of the graph the rows",
        "differentiate (never from timings, nor from this machine's cores: a graph runs",
        "the same way wherever it is built and run):", "",
        "- through a convolution or pooling op (forward or gradient), or when one row's",
        f"  intermediates take more than {kib} KiB (the float tensors between the sources",
        "  and the target; a dimension unknown while building counts as "
        f"{_cost.UNKNOWN_DIM}),",
        f"  the rows run one by one: as separate reverse passes up to {_cost.FEW_ROWS} rows",
        "  (what the legacy Python loop of ``tf.gradients`` built), in a ``while_loop``",
        "  beyond;",
        "- but rows that differentiate a gradient (a Hessian's, a per-sample Hessian's)",
        "  stay vectorized, however large their intermediates, while the largest tensor of",
        f"  one row takes more than {low // 2**10} KiB and the rows' largest tensors together",
        f"  (rows x largest) at most {high // 2**20} MiB (measured below);",
        "- through a TF2 loop, also one inside a function an op calls (a Keras ``LSTM``",
        "  or ``GRU`` layer), in a ``while_loop``;",
        "- rows that differentiate a loop they run go to a ``while_loop`` whatever the",
        "  strategy, with a ``VectorizationWarning``, before pfor converts anything (the",
        "  failed attempt was 3.9 of 5.3 s of a Keras LSTM's per-example gradients);",
        "- otherwise vectorized, every row at once (pfor in chunks was measured too: no",
        "  faster than all rows at once, up to 1.5 times slower in forward mode, and no",
        "  faster than the loop for large rows; ``chunk_size`` stays a memory bound);",
        "- an explicit ``strategy`` (``\"reverse\"``, ``\"forward\"``, ``\"loop\"``)",
        "  keeps its meaning.", "",
        "The migration helpers follow the same rule: ``gradient_rows`` runs the loop",
        "itself where the rule runs rows one by one; ``row_while_loop`` and",
        "``gradient_map_fn`` read the ops and sizes of the one row pfor traces, and run",
        "the ``while_loop`` / ``map_fn`` itself where the rule says so (before pfor",
        "converts the row: the body is traced once either way). Rows kept as a list",
        "(``gradient_row_list``, ``fill_gradient_rows``) are always computed each on",
        "its own, as the loop did: real code fetches them a row at a time (a saliency",
        "map's ``sess.run(grads[k])``, a class-gradient cache), and a row sliced from one",
        "Jacobian would compute every row at each fetch.", "",
        *_second_order_paragraph(second_order)]
    if not routes:
        return lines
    lines += [
        "The measurements behind the thresholds: a TF1 graph in a Session, each recipe",
        "checked against the legacy loop, timed interleaved; *ratio* is the recipe's",
        "time over the legacy loop's (below 1 is faster), *row KiB* and *plan* are what",
        "the rule reads and decides. On 2 shared cores (load 3 to 5 from other",
        "processes), two identical graphs (``row_while_loop`` running the legacy loop",
        "itself) still differ by up to 10%: ratios between 0.9 and 1.1 are ties. Command:",
        "",
        ".. code-block:: console", "",
        "   $ python -m compat_grads.bench.routes 11 > docs/_static/bench/routes.json", ""]
    return lines + _table(
        ("workload", "recipe", "ms", "ratio", "row KiB", "plan"),
        [(r["workload"], r["recipe"], f"{r['ms']:.1f}", f"{r['ratio']:.2f}",
          f"{r['row_kib']:.0f}", r["plan"]) for r in routes], (30, 30, 10, 10, 10, 10))


def _second_order_paragraph(rows) -> list:
    """The window for rows through a gradient, and its measurements (`rows`) when there are
    any: what they show in each state, then per size nested tapes' time over each plan's."""
    from compat_grads._src.stacking import cost as _cost
    from compat_grads.bench import second_order_rows as sor

    lines = [
        "Rows that differentiate a gradient have a window of their own. A per-sample",
        "Hessian's rows (``batch_hessian``: one per feature) are large by the first-order",
        "rule at any useful batch, so it runs them one by one; nested tapes +",
        "``batch_jacobian`` in ``tf.function``, TensorFlow's own recipe, vectorizes them",
        "(our vectorized rows are its rows without its ``Tile`` ops). Which is faster",
        "depends on the sizes, and in the middle on the state of the process: how the",
        "allocator serves tensors of a few hundred KiB after other work, which no graph",
        "shows. Below the window (small tensors: the cost of running each op rules)",
        "separate passes win in every state, above it (large tensors together) too;",
        "inside it, the window takes the plan that keeps up with nested tapes in both",
        "states.", ""]
    if not rows:
        return lines
    return lines + _window_summary(rows, sor) + [
        "Per size (batch, rows, hidden width of a tanh MLP), each in a process of its",
        "own, fresh or after the bench's first workloads (*used*): nested tapes' time",
        "over ours (above 1: ours is faster), with the rule's plan and with the rows one",
        f"by one (the first-order rule: separate passes up to {_cost.FEW_ROWS} rows, a",
        "``while_loop`` beyond). Command:", "",
        ".. code-block:: console", "",
        "   $ python -m compat_grads.bench.second_order_rows 15 > "
        "docs/_static/bench/second_order_rows.json", "",
        *_table(("b, rows, width", "row tensor KiB", "together MiB", "plan",
                 "fresh: plan", "fresh: one by one", "used: plan", "used: one by one"),
                _window_table(rows, sor), (16, 10, 10, 16, 12, 12, 12, 12))]


def _window_summary(rows, sor) -> list:
    """What the window's measurements show, per state: ranges over the sizes in it."""
    def span(values):
        return f"{min(values):.2f} to {max(values):.2f} (median {statistics.median(values):.2f})"

    lines = []
    for state, name in (("used", "After other work"), ("fresh", "In a fresh process")):
        inside = [r["ms"] for r in rows if r["state"] == state and r["plan"] == "vectorized"]
        if inside:
            lines += [
                f"{name}, inside the window ({len(inside)} sizes), vectorized rows ran at",
                f"{span([m[sor.ONE_BY_ONE] / m[sor.VECTORIZED] for m in inside])} times the",
                "speed of separate passes; nested tapes' time over the rule's plan was",
                f"{span([m[sor.NESTED] / m[sor.RULE] for m in inside])}, over the rows one",
                f"by one {span([m[sor.NESTED] / m[sor.ONE_BY_ONE] for m in inside])}."]
    outside = [r["ms"] for r in rows if r["plan"] != "vectorized"]
    if outside:
        lines += [
            f"Outside it ({len(outside)} measurements), separate passes ran at",
            f"{span([m[sor.VECTORIZED] / m[sor.ONE_BY_ONE] for m in outside])} times the",
            "speed of vectorized rows."]
    return lines + [""]


def _window_table(rows, sor) -> list:
    """One row per size: nested tapes' time over the rule's plan and over the rows one by
    one, in each state."""
    by_size = {}
    for r in rows:
        by_size.setdefault((r["batch"], r["features"], r["hidden"]), {})[r["state"]] = r

    def ratios(r):
        ms = r["ms"]
        return (f"{ms[sor.NESTED] / ms[sor.RULE]:.2f}",
                f"{ms[sor.NESTED] / ms[sor.ONE_BY_ONE]:.2f}")

    table = []
    for (b, d, h), states in by_size.items():
        first = next(iter(states.values()))
        fresh, used = (ratios(states[s]) if s in states else ("", "") for s in sor.STATES)
        table.append((f"{b}, {d}, {h}", f"{first['largest_kib']:.0f}",
                      f"{first['together_mib']:.2f}", first["plan"], *fresh, *used))
    return table


def _cnn_section(rows) -> list:
    """The TF1 part of the few-rows CNN workload."""
    if not rows:
        return []
    return ["TF1 graph: few rows through a CNN", "---------------------------------", "",
            "The 10 class rows of a small CNN's logits (batch "
            f"{rows[0]['batch']}) in a TF1 Session: *ratio* is the time over the Python",
            "loop of ``tf.gradients``'s (below 1 is faster).", "",
            *_table(("recipe", "build s", "run ms", "ratio"),
                    [(r["recipe"], f"{r['build_s']:.3f}", f"{r['run_ms']:.2f}",
                      f"{r['ratio']:.2f}") for r in rows], (52, 16, 16, 16))]


def _programs_rows(traces) -> list:
    """The program workloads (`compat_grads.bench.programs`), when the run has them."""
    rows, run = traces.get("programs"), traces.get("programs_run")
    if not rows:
        return []
    lines = [".. _programs-bench:", "",
             "Programs' forms: a wavefunction's Laplacian (Slater determinant, norms, pair",
             "gathers, a mean field; 3 coordinates per electron) against the loop it",
             "replaces, in a TF1 graph and in ``tf.function``, and a 1-D ``u_xx`` in a PDE",
             "loss under Adam (the build covers the optimizer's ops). Each recipe in",
             f"{rows[0]['processes']} fresh processes, taking turns; build and run are the",
             "medians (TF2's build is the first call, tracing included). *Ratios* are the",
             "loop's time over ours."]
    if run:
        lines += [f"Run {run['date']} ({run['minutes']:.1f} min), load average "
                  f"{run['load']:.1f} at the start; command: ``{run['command']}``"
                  + (f" (``TF_ENABLE_ONEDNN_OPTS``: {run['onednn']})." if "onednn" in run
                     else ".")]
    same = [f"{r['workload']} ({r['mode']})" for r in rows if r.get("same_graph")]
    if same:
        lines += ["", f"Same graph: {', '.join(same)} built the loop's graph op for op (names",
                  "and inputs included), so its build differs only by compat_grads' input",
                  "checks: a tie at 0.95 of the loop's speed or more. Its row is the median",
                  f"of {next(r['processes'] for r in rows if r.get('same_graph'))} processes."]
    table = []
    for row in rows:
        for name, r in row["recipes"].items():
            table.append((f"{row['workload']} ({row['mode']})", row["dims"], name,
                          f"{r['build_s']:.3f}", f"{r['run_ms']:.2f}",
                          "-" if r["ops"] is None else r["ops"]))
    return [*lines, "", *_table(("workload", "d", "recipe", "build s", "run ms", "ops"),
                                table, (16, 6, 42, 12, 12, 12))]


def _traces_section(traces) -> list:
    """Laplacians and divergences (`compat-grads bench --traces`), when there is a run."""
    if not traces:
        return []
    meta = traces["run"]
    lines = [".. _traces-bench:", "", "Laplacians and divergences", "--------------------------",
             "",
             "Per-sample Laplacians (``batch_laplacian``) of a tanh MLP ``R^d -> R`` and",
             "divergences (``batch_divergence``) of a tanh MLP ``R^d -> R^d`` (3 hidden",
             f"layers of 64, float32, fixed-seed weights), batch {traces['b']}, against the",
             "recipes users write today. Every recipe's values are checked against ours",
             "before it is timed (*error*: the largest difference over the largest value).",
             "*ratio* is their time over ours (above 1: ours is faster).",
             f"Run {meta['date']} ({meta['minutes']:.1f} min), load average "
             f"{meta['load']:.1f} at the start (shared cores: the recipes are interleaved),",
             f"TensorFlow {meta['tensorflow']}, JAX {meta.get('jax')}, folx "
             f"{meta.get('folx')}, DeepXDE {meta.get('deepxde')}.",
             "Raw numbers: :download:`traces.json <_static/bench/traces.json>`; command:", "",
             ".. code-block:: console", "", f"   $ {meta['command']}", "",
             ".. image:: _static/bench/traces.png",
             "   :alt: ms per call against d for every recipe, Laplacians and divergences", ""]
    lines += _table(("workload", "d", "recipe", "ms", "ratio", "error"),
                    [(m["workload"], m["d"], m["recipe"], f"{m['ms']:.2f}",
                      f"{m['ratio']:.2f}", f"{m['error']:.1e}") for m in traces["measures"]],
                    (12, 6, 46, 12, 12, 12))
    lines += ["In a TF1 graph (its own process): the graph's build time and ops, and run",
              "times side by side; *ratio* is the run time over ours.", "",
              *_table(("d", "recipe", "build s", "ops", "run ms", "ratio"),
                      [(r["d"], r["recipe"], f"{r['build_s']:.3f}", r["ops"],
                        f"{r['run_ms']:.2f}", f"{r['ratio']:.2f}")
                       for r in traces["tf1_graph"]], (6, 46, 12, 12, 12, 12))]
    if traces.get("deepxde"):
        lines += ["DeepXDE (TensorFlow backend, in its own process, next to ours there):", "",
                  *_table(("d", "recipe", "ms", "ratio"),
                          [(r["d"], r["recipe"], f"{r['ms']:.2f}", f"{r['ratio']:.2f}")
                           for r in traces["deepxde"]], (8, 60, 16, 16))]
    lines += _programs_rows(traces)
    lines += ["Memory, each the median of three processes of its own, first call (tracing",
              "included): the rise of peak RSS, and the CPU allocator's peak (tensors only,",
              "with TensorFlow's BFC allocator), each also over one gradient pass's. The",
              "forward Laplacian carries its directions through every layer, a gradient pass",
              "one; by default it takes them in chunks (as many as keep the largest tensor of",
              "tangents within 4 MiB, however many loop steps: 29 directions at b=512, d=200,",
              "15 at b=1024, d=100), ``chunk_size=d`` all at once;", *_few_directions(traces),
              "",
              *_table(("b, d", "what", "peak RSS rise MB", "/ gradient", "allocator peak MB",
                       "/ gradient"),
                      [(f"{r['b']}, {r['d']}", r["what"], f"{r['peak_rss_delta_mb']:.1f}",
                        f"{r['rss_ratio']:.2f}", f"{r['allocator_peak_mb']:.1f}",
                        f"{r['allocator_ratio']:.2f}") for r in traces["memory"]],
                      (10, 56, 15, 12, 15, 12)),
              *_table(("target", "measured", "goal", "met"),
                      [(t["target"], f"{t['measured']:.2f}", f"{t['goal']:.2f}",
                        "yes" if t["met"] else "NO") for t in traces["targets"]],
                      (64, 12, 12, 12))]
    return lines


def _few_directions(traces) -> list:
    """What a few directions at a time (`chunk_size=FEW`) buy in memory and cost in time,
    from the traces bench."""
    from compat_grads.bench import traces as bench

    few = [m for m in traces["memory"] if m["what"] == f"batch_laplacian, chunk_size={bench.FEW}"]
    times = {m["d"]: m["ratio"] for m in traces["measures"]
             if m["workload"] == "Laplacian" and m["recipe"] == bench.OURS_FEW}
    if not few or not times:
        return []
    d, sizes = max(times), "; ".join(f"{m['b']}, {m['d']}" for m in few)
    return [f"``chunk_size={bench.FEW}`` peaks at {_range(m['allocator_ratio'] for m in few)}x one",
            f"gradient pass's (b, d: {sizes}) and took {times[d]:.2f}x the default's",
            f"time at d={d} (the timing table)."]


def _range(values) -> str:
    values = sorted(values)
    return f"{values[0]:.1f}" if values[0] == values[-1] else f"{values[0]:.1f}-{values[-1]:.1f}"


def _first_run_section(first) -> list:
    """The first-run workload (`compat_grads.bench.first_run`): `compat-grads check` in a
    fresh process, each run's wall and CPU time."""
    from compat_grads.bench import first_run

    if not first:
        return []
    return [
        "First run: ``compat-grads check``", "---------------------------------", "",
        f"A new user's first command, ``{first['command']}`` (the quick check), each run in a",
        "fresh process, once the machine is quiet: TensorFlow's import, the TF1 process's",
        "start and the check. *CPU s* is the user + system time of all its processes (other",
        "processes' load changes it less than the wall time); *others* is the CPU time other",
        "processes took meanwhile: a run is *quiet* when they used under "
        f"{first_run.QUIET:.0%} of the",
        "cores, and a run that was not is repeated; *load* is the load average when the run",
        f"started, on {first['cores']} cores.", "",
        *_table(("run", "wall s", "CPU s", "others CPU s", "quiet", "load"),
                [(k, f"{r['wall_s']:.1f}", f"{r['cpu_s']:.1f}", f"{r['others_cpu_s']:.1f}",
                  "yes" if r["quiet"] else "no", f"{r['load']:.2f}")
                 for k, r in enumerate(first["runs"], 1)]),
    ]


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
