"""The sections of docs/performance.rst beyond the main suite's tables (`make_performance.py`
builds the page): XLA's first calls, the measured routes, second-order rows, the traces bench
with its programs and memory, and the first run; and the reStructuredText helpers both use."""

from __future__ import annotations

import re
import statistics


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
