"""The benchmark suite runs end to end at tiny sizes (it is too slow and noisy for timings in
tests: the numbers are in the closing notes, measured with `compat-grads bench`)."""

import contextlib
import importlib.util
import io
import json
import math
import os
import statistics

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.bench import first_run, per_call, suite, timing, verdict
from compat_grads.bench import workloads as wl
from compat_grads.bench.onednn import kernels_on as onednn_kernels_on

pytestmark = pytest.mark.tooling  # CI runs these on the newest release only


def test_quick_suite_runs_and_reports(tmp_path):
    report = suite.run(quick=True, out_dir=str(tmp_path), plot=False, log=lambda _: None)
    workloads = {m["workload"] for m in report["measures"]}
    overhead = {w for w in workloads if w.startswith("per-call overhead: ")}
    assert {w.split(": ")[1] for w in overhead} == set(suite.OVERHEAD_FUNCTIONS)
    cnns = {w for w in workloads if w.startswith("per-example gradients, CNN")}
    onednn = {w for w in workloads if w.endswith(wl.ONEDNN)}
    assert len(cnns) == 8 and len(workloads) == 9 + 3 + len(overhead) + len(onednn)
    # the per-example workloads again, with oneDNN's kernels in a process of their own:
    # the same recipes but the eager loop and the XLA ones
    per_example = {w for w in workloads if w.startswith("per-example")}
    assert report["onednn"] is True  # TensorFlow has oneDNN's kernels on x86 machines
    assert onednn == {w + wl.ONEDNN for w in per_example - onednn} and len(onednn) == 5
    for workload in onednn:
        recipes = {m["recipe"] for m in report["measures"] if m["workload"] == workload}
        default = {m["recipe"] for m in report["measures"]
                   if m["workload"] == workload[:-len(wl.ONEDNN)]}
        assert recipes == {r for r in default if not wl.with_xla(r)
                           and not r.startswith("eager loop")}, recipes
    for workload in workloads:
        rows = [m for m in report["measures"] if m["workload"] == workload]
        assert sum(m["ours"] for m in rows) >= 1 and len(rows) >= (
            2 if workload in overhead else 3)
        assert all(m["ms"] > 0 for m in rows)
    targets = {t["target"] for t in report["targets"]}
    kernels = report["kernels"]  # the kernels this process runs (tox: Eigen's)
    assert kernels["here"] is onednn_kernels_on()
    assert isinstance(kernels["tensorflow_default"], bool)
    for workload in cnns:
        onednn = workload.endswith(wl.ONEDNN)
        against = [t for t in targets if t.startswith(
            "per_example_gradients eager vs vectorized_map(GradientTape) in tf.function")
            and t.endswith(f"({workload})")]
        picked = onednn == kernels["tensorflow_default"]
        assert len(against) == 1 and (
            "not TensorFlow's pick here" not in against[0]) == picked, against
        eigen = (f"per_example_gradients eager vs one batched gradient, within 1.1x under "
                 f"Eigen ({workload})")
        assert (eigen in targets) == (not onednn)
        assert f"per_example_gradients eager vs one batched gradient ({workload})" in targets
        yardstick = [t for t in report["targets"] if t["target"] == (
            f"the 2x goal's yardstick: vectorized_map(GradientTape) in tf.function vs the "
            f"work every recipe shares ({workload})")]
        rows = {m["recipe"]: m["ms"] for m in report["measures"] if m["workload"] == workload}
        assert len(yardstick) == 1 and yardstick[0]["measured"] == pytest.approx(
            rows["vectorized_map(GradientTape) in tf.function"] / rows[wl.SHARED])
    assert sum(t.startswith("the bare tf.function vs ours") for t in targets) == len(overhead)
    assert sum(t.startswith("compat_grads' own Python µs per call, TensorFlow's call a stub")
               for t in targets) == len(overhead)
    _check_verdicts(report, workloads)
    recipes = {r["recipe"] for r in report["tf1_graph"]}
    assert any("map_fn" in r for r in recipes) and any("(auto)" in r for r in recipes)
    assert [(m["strategy"], bool(m["chunk_size"]), m["malloc"]) for m in report["memory"]] == [
        ("forward", False, "default"), ("forward", True, "default"), ("reverse", True, "default"),
        ("forward", True, "MALLOC_MMAP_THRESHOLD_=1048576")]
    assert sum(t.startswith("chunk_size peak memory / result size") for t in targets) == 3
    bigger = report["bigger"]  # a budget that makes it chunk; the values against jvp
    assert bigger["pieces"] > 1 and bigger["chunk_size"] < bigger["n"]
    assert bigger["all_at_once_bytes"] > bigger["budget_bytes"] == 2000000
    assert bigger["max_abs_vs_jvp"] < 1e-5
    assert {t["target"] for t in report["targets"]} >= {
        "per_element_gradients eager vs tape.jacobian then reduce_sum, eager (J·1)",
        "per_example_gradients eager vs eager loop over examples (per-example gradients, "
        "MLP (b=4))",
        "TF1 build time flat: build(largest m) / build(smallest m)"}
    # J·1's floor (the primal product alone) and J·1 by hand, A read twice and once: both
    # by-hand rows are TensorFlow recipes in tf.function, so TF's best is the faster
    j1 = {m["recipe"]: m["ms"] for m in report["measures"] if m["workload"].startswith("J·1")}
    assert {wl.PRIMAL, *(name for name, _ in wl.J1_BY_HAND)} <= set(j1)
    workload = next(w for w in workloads if w.startswith("J·1"))
    ratio = suite._ratios(report["measures"])[workload]
    assert suite._bests(ratio)[0] == min(ratio[r] for r in ratio if "in tf.function" in r)
    assert {name for name, _ in wl.J1_BY_HAND} < {r for r in ratio if "in tf.function" in r}
    few = [m["recipe"] for m in report["measures"] if m["workload"].startswith("few rows")]
    assert {"loop of tape.gradient in tf.function", "compat_grads gradient_rows in "
            "tf.function", "compat_grads gradient_row_list in tf.function"} <= set(few)
    assert {r["recipe"] for r in report["tf1_cnn"]} == {
        "Python loop of tf.gradients", "compat_grads stacked_jacobian (auto)",
        "compat_grads gradient_rows", "compat_grads gradient_row_list"}
    assert sum("(few rows, CNN)" in t["target"] for t in report["targets"]) == 6
    with open(os.path.join(tmp_path, "bench.json")) as handle:
        assert json.load(handle)["quick"] is True
    table = suite.markdown(report)
    assert table.startswith("| workload | recipe | ms | their ms / our eager ms |")
    assert "| target | measured | goal | met |" in table
    assert ("| workload | vs TF's best in tf.function | vs JAX's best | vs JAX's best, ours "
            "with jit_compile=True | vs TF's best with XLA, ours with jit_compile=True |") in table
    side = {row[0]: row[1:] for row in suite.against_best(suite._ratios(report["measures"]))}
    with_xla = [w for w in side if w.startswith(("tall", "wide", "square", "batch Jacobian",
                                                 "J·1", "per-sample Hessian"))]
    assert len(with_xla) == 6, side
    # ours with XLA is timed on each of them; the JAX columns are filled only where JAX is
    # installed (the bench extra), and are "-" where it is not, as in CI's suites
    xla_rows = {m["workload"] for m in report["measures"] if m["recipe"].endswith(
        "jit_compile=True")}
    assert set(with_xla) <= xla_rows
    jax_here = importlib.util.find_spec("jax") is not None
    assert all((side[w][1] != "-") == (side[w][2] != "-") == jax_here for w in with_xla), side
    assert side["per-call overhead: jvp"] == ("-", "-", "-", "-")
    # TensorFlow's per-example recipe compiled by XLA: held against ours with XLA only
    per_example = [w for w in side if w.startswith("per-example") and
                   not w.endswith(wl.ONEDNN)]
    assert len(per_example) == 5 and all(side[w][3] != "-" for w in per_example)
    assert all(side[w][3] == "-" for w in side if w not in per_example)
    for workload in per_example:
        rows = {m["recipe"]: m["ms"] for m in report["measures"] if m["workload"] == workload}
        ours, theirs = wl.XLA.format("per_example_gradients"), wl.TF_XLA.format(
            "vectorized_map(GradientTape)")
        assert float(side[workload][3]) == pytest.approx(rows[theirs] / rows[ours], abs=0.006)
        assert float(side[workload][0]) == pytest.approx(min(
            rows[k] for k in rows if "in tf.function" in k and not wl.with_xla(k)
            and not k.startswith(wl.OURS)) / rows[f"{wl.OURS} per_example_gradients, eager"],
            abs=0.006)
        assert (f"never slower than TensorFlow's best with XLA, ours with jit_compile=True "
                f"({workload})") in targets
    assert "| TF1 CNN class rows: batch | recipe |" in table
    assert "| bigger than memory: m x n | result MB | all at once (estimate) MB |" in table


def _check_verdicts(report, workloads):
    """The speed goals of the quick suite come from its verdict processes: 2 per environment,
    each timing only the recipes the goals compare; each goal the median of their ratios."""
    found = report["verdict"]
    assert found["processes"] == 2
    assert found["kernels"] == {"default": onednn_kernels_on(), "oneDNN": report["onednn"]}
    assert set(found["runs"]) == workloads
    judged = {t["target"]: t for t in report["targets"] if "spread" in t}
    for workload, runs in found["runs"].items():
        assert len(runs) == 2 and all(verdict.timed(recipe) for ms in runs for recipe in ms)
        best = [suite._tf_best(ms) for ms in runs]
        if best[0] is None:
            continue
        target = judged[f"never slower than TensorFlow's best in tf.function ({workload})"]
        assert target["measured"] == pytest.approx(statistics.median(best))
        assert target["spread"] == [min(best), max(best)] and target["processes"] == 2
        assert target["met"] == (target["measured"] >= 1.0)
        assert target["tie"] == (not target["met"] and target["measured"] >= verdict.TIE
                                 and verdict.same_graph(workload) is not None)
    assert not any(r.startswith("eager loop") or r.endswith(", eager") and not r.startswith(
        wl.OURS) for runs in found["runs"].values() for ms in runs for r in ms)
    table = suite.markdown(report)
    assert ", 2 processes) | 1.00 |" in table


def test_distribute_bench_runs_on_logical_devices_and_reports(tmp_path, capsys):
    """`compat-grads bench --distribute 2 --quick`: the tall workload on two logical CPUs
    (in its own process) next to one device, with the peak memory of one replica's share."""
    from compat_grads import cli

    assert cli.main(["bench", "--distribute", "2", "--quick", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    with open(os.path.join(tmp_path, "distribute.json")) as handle:
        report = json.load(handle)
    assert report["devices"] == 2 and (report["m"], report["n"]) == suite.QUICK["tall"]
    assert set(report["ms"]) == {"one device", "2 replicas (MirroredStrategy), gathered",
                                 "2 devices (a list), gathered"}
    assert all(ms > 0 for ms in report["ms"].values())
    assert set(report["peak_mb"]) == {"whole Jacobian, one device",
                                      "one replica's share, alone",
                                      "all 2 replicas at once, gather=False"}
    assert "| 2 replicas (MirroredStrategy), gathered |" in table
    assert "| one replica's share, alone |" in table


@pytest.fixture(scope="module")
def traces_report(tmp_path_factory):
    """`compat-grads bench --traces --quick --json F` once: d=2, b=8, one repeat."""
    from compat_grads import cli

    path = tmp_path_factory.mktemp("traces") / "traces.json"
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert cli.main(["bench", "--traces", "--quick", "--json", str(path)]) == 0
    with open(path) as handle:
        return json.load(handle), out.getvalue()


def _has(module):
    return importlib.util.find_spec(module) is not None


def test_traces_bench_has_every_recipe_with_positive_finite_ratios(traces_report):
    from compat_grads.bench import traces

    report, _ = traces_report
    laplacian = {m["recipe"] for m in report["measures"] if m["workload"] == "Laplacian"}
    assert laplacian == {traces.OURS, "compat_grads batch_laplacian in tf.function",
                         "nested tapes per dimension, tf.function",
                         "compat_grads batch_hessian + tf.linalg.trace, eager (compiled)",
                         *(["JAX jit(trace(vmap(hessian)))"] if _has("jax") else []),
                         *(["folx forward_laplacian, jit(vmap)"] if _has("folx") else [])}
    divergence = {m["recipe"] for m in report["measures"] if m["workload"] == "divergence"}
    assert divergence == {traces.OURS_DIV, "loop of per-dimension tape.gradient, tf.function",
                          "tape.batch_jacobian + tf.linalg.trace, tf.function",
                          *(["JAX jit(trace(vmap(jacfwd)))"] if _has("jax") else [])}
    assert {(r["d"], r["recipe"]) for r in report["tf1_graph"]} == {
        (2, "compat_grads batch_laplacian (TF1 graph)"),
        (2, "Python loop of tf.gradients (TF1 graph)")}
    assert all(r["build_s"] > 0 and r["ops"] > 0 for r in report["tf1_graph"])
    assert (report["deepxde"] is not None) == (_has("deepxde") and _has(
        "tensorflow_probability"))
    rows = report["measures"] + report["tf1_graph"] + (report["deepxde"] or [])
    assert all(math.isfinite(r["ratio"]) and r["ratio"] > 0 for r in rows)
    assert [m["what"] for m in report["memory"]] == [
        "batch_laplacian", f"batch_laplacian, chunk_size={traces.FEW}",
        "batch_laplacian, every direction at once (chunk_size=d)",
        "one gradient pass (tape.gradient of sum(u), tf.function)"]
    for memory in report["memory"]:
        assert [(memory["b"], memory["d"])] == traces.QUICK["memory"]
        assert all(math.isfinite(memory[k]) and memory[k] > 0 for k in ("rss_ratio",
                                                                          "allocator_ratio"))
    assert any(t["target"].startswith("peak RSS") for t in report["targets"])
    assert any(t["target"].startswith("allocator peak") for t in report["targets"])


def test_traces_bench_recipes_agree_with_ours(traces_report):
    """Every recipe, in this process and in the TF1 and DeepXDE processes, computed what
    ours computes (the bench raises otherwise; the error it kept is checked here too)."""
    from compat_grads.bench import traces

    report, _ = traces_report
    rows = report["measures"] + report["tf1_graph"] + (report["deepxde"] or [])
    assert len(rows) >= 9  # without the optional packages: 4 Laplacian, 3 divergence, 2 TF1
    for row in rows:
        assert 0 <= row["error"] <= traces.TOLERANCE, row


def test_traces_bench_runs_the_programs_forms_in_fresh_processes(traces_report):
    """A wavefunction's Laplacian (TF1 graph and tf.function) and a 1-D u_xx under Adam:
    both recipes per workload, their values agreeing, a run and a build target each."""
    from compat_grads.bench import programs

    report, table = traces_report
    rows = report["programs"]
    assert [(r["workload"], r["mode"]) for r in rows] == [
        ("wavefunction", "tf1"), ("wavefunction", "tf2"), ("pde", "pde")]
    for row in rows:
        assert set(row["recipes"]) == set(programs.RECIPES[row["mode"]].values())
        assert 0 <= row["error"] <= programs.TOLERANCE
        assert all(math.isfinite(row[k]) and row[k] > 0 for k in ("build_ratio", "run_ratio"))
        assert all(r["build_s"] > 0 and r["run_ms"] > 0 for r in row["recipes"].values())
    assert rows[0]["recipes"][programs.RECIPES["tf1"]["ours"]]["ops"] > 0
    names = [t["target"] for t in report["targets"]]
    assert "wavefunction (tf1, d=6): run, loop / ours" in names
    assert "pde (pde, d=1): build, (1.1 x loop + 50 ms) / ours" in names
    assert "pde (pde, d=1): build, loop / ours (the same graph: a tie)" in names
    assert [r["same_graph"] for r in rows] == [False, False, True]
    assert "| program workload | d | recipe | build s | run ms | ops |" in table


_BUILD_WINDOW_PROBE = """
import sys, time
import compat_grads.bench.programs_process as process  # the package first, as -m runs it
assert "compat_grads.api" not in sys.modules
real, seen = time.perf_counter, []
def probe():
    if sys._getframe(1).f_code.co_name == "pde_tf1":
        seen.append("compat_grads.api" in sys.modules)
    return real()
time.perf_counter = probe
process.pde_tf1("ours", 4)
print(seen)
"""


def test_the_program_bench_times_the_build_not_compat_grads_imports():
    """Run with -m, the bench's process imports compat_grads before TensorFlow; its build
    window must still start with the functions loaded, as in a program that imports
    TensorFlow first (about 30 ms of imports had landed in the 1-D u_xx's build)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _BUILD_WINDOW_PROBE], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[True, True]"


def test_traces_bench_prints_its_tables(traces_report):
    report, table = traces_report
    assert "| workload | d | recipe | ms | their ms / our ms | max rel. error |" in table
    assert "| TF1 graph: d | recipe | build s | ops | run ms | their run / ours |" in table
    assert "| target | measured | goal | met |" in table
    assert table.count("| Laplacian | 2 |") == sum(
        m["workload"] == "Laplacian" for m in report["measures"])


def test_traces_check_rejects_a_recipe_that_disagrees():
    from compat_grads.bench import traces

    right = lambda: np.array([1.0, 2.0])  # noqa: E731
    with pytest.raises(AssertionError, match="wrong differs from ours"):
        traces._time("Laplacian", 2, 2, {traces.OURS: right,
                                         "wrong": lambda: np.array([1.0, 2.1])},
                     traces.OURS, 1)


def test_traces_plot_draws_both_workloads_or_says_it_cannot(traces_report, tmp_path):
    """A PNG with matplotlib (the bench extra), None without it: never a crash."""
    from compat_grads.bench import traces

    report, _ = traces_report
    path = traces.plot(report, tmp_path / "traces.png")
    if _has("matplotlib"):
        assert path == tmp_path / "traces.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert path is None and not (tmp_path / "traces.png").exists()


def test_functions_far_slower_than_the_fastest_are_timed_after_the_others():
    import time

    from compat_grads.bench import timing

    log = []
    fns = {"slow": lambda: (time.sleep(0.03), log.append("slow")),
           "fast": lambda: log.append("fast"), "also fast": lambda: log.append("also fast")}
    ms = timing.interleaved_ms(fns, repeats=3, sample_s=0.001)
    timed = log[6:]  # after two warm-up calls each
    assert timed.index("slow") > max(i for i, name in enumerate(timed) if name != "slow")
    assert timed.count("slow") == 3 and ms["slow"] > 25 > 1 > ms["fast"]


def test_onednn_workloads_refuse_a_process_not_asked_for_onednn():
    """`python -m compat_grads.bench.onednn` measures nothing in a process started without
    TF_ENABLE_ONEDNN_OPTS=1 (this process's tox setting): it says so and how to fix it."""
    with pytest.raises(RuntimeError, match=r"set TF_ENABLE_ONEDNN_OPTS=1 before running it "
                       r"\(got '0'\)"):
        timing.in_subprocess("compat_grads.bench.onednn", [2, 1],
                             env={"TF_ENABLE_ONEDNN_OPTS": "0"})


def test_onednn_workloads_report_a_tensorflow_without_onednn_and_measure_nothing(
        monkeypatch, capsys):
    """Asked for oneDNN where TensorFlow has no such kernels (not x86): no measures, and the
    report says so, so that the suite runs on."""
    from compat_grads.bench import onednn

    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    monkeypatch.setattr(onednn, "kernels_on", lambda: False)
    assert onednn.main(["2", "1"]) == 0
    assert json.loads(capsys.readouterr().out) == {"kernels": False, "measures": []}


def test_timing_waits_for_eager_results_without_copying_them():
    """Each timed call waits for its eager tensors through a view of their buffers: never
    `numpy()`, which copies the whole result (a cost no caller pays, and JAX's recipes do
    not pay it)."""
    from compat_grads._src.core.tf import tf

    class Result(np.ndarray):  # an array whose copy through numpy() fails the test
        def numpy(self):
            raise AssertionError("the timing copied a result")

    values = [np.zeros((2, 3)).view(Result), tf.ones([256, 800, 10])]
    timing._block(values)
    timing._block(values[1])
    ms = timing.interleaved_ms({"tensor": lambda: values, "one": lambda: values[0]}, 2, 0.001)
    assert set(ms) == {"tensor", "one"} and all(t > 0 for t in ms.values())


def test_first_run_times_the_check_in_fresh_processes():
    report = first_run.run(2, first_run.QUICK_ARGS, wait_s=0, attempts=1)
    assert report["command"] == "compat-grads check " + " ".join(first_run.QUICK_ARGS)
    assert len(report["runs"]) == 2 and report["cores"] == os.cpu_count()
    for run in report["runs"]:
        # the CPU time counts the check's TF1 process too: two TensorFlow imports
        assert run["status"] == 0 and run["wall_s"] > 0 and run["cpu_s"] > run["user_s"] > 0
        assert run["summary"].startswith("1 of 1 rows agree") and run["others_cpu_s"] >= 0
    quiet = [r["wall_s"] for r in report["runs"] if r["quiet"]]
    assert report["max_wall_s"] == max(quiet or [r["wall_s"] for r in report["runs"]])
    table = first_run.markdown(report).splitlines()
    assert table[0].startswith("| first run: compat-grads check -k ") and len(table) == 4


def test_the_full_suite_holds_the_first_run_to_the_goal():
    first = {"command": "compat-grads check", "cores": 2, "max_wall_s": 31.0,
             "runs": [{"wall_s": 31.0, "quiet": True}] * 3 + [{"wall_s": 45.0, "quiet": False}]}
    report = {"measures": [], "tf1_cnn": [], "memory": [], "first_run": first,
              "tf1_graph": [{"m": 1000, "recipe": r, "run_ms": 1.0, "build_s": 1.0}
                            for r in ("ours (auto)", "map_fn")]}
    (target,) = [t for t in suite.targets(report) if t["target"].startswith("first run")]
    assert target == {"target": "first run: compat-grads check wall s, slowest of 3 quiet runs "
                                "(2 cores)",
                      "measured": 31.0, "goal": first_run.GOAL_S, "met": False}


def test_our_own_python_is_timed_with_tensorflows_call_a_stub_then_restored():
    """The per-call workload times our call and its concrete function's call again with
    `_call_flat` a stub (values checked, both return the real result), then takes the stub
    off: a later call runs TensorFlow's function again."""
    from compat_grads._src.call import compile as _compile

    rows = {m.recipe: m.ms for m in per_call.call_overhead("jvp", 3)}
    assert {per_call.STUBBED, per_call.STUB, per_call.CONCRETE} <= set(rows)
    assert rows[per_call.STUB] < rows[per_call.CONCRETE]  # the stub skips TensorFlow
    own = suite._own_python(rows)
    assert own == pytest.approx((rows[per_call.STUBBED] - rows[per_call.STUB]) * 1e3)
    (entry,) = _compile.CACHE._entries.values()
    (concrete,) = entry.compiled._concrete.values()
    assert "_call_flat" not in vars(concrete)
    # the same target and shapes: the same concrete function, whose stub returned the
    # workload's result; new values must come out
    x, v = tf.constant([1.5, 0.25, -2.0]), tf.constant([-1.0, 3.0, 0.5])
    _, tangent = cg.jvp(per_call._OVERHEAD_TARGETS["jvp"], x, v)
    assert len(_compile.CACHE) == 1
    want = (np.cos(x.numpy()) * x.numpy() + np.sin(x.numpy())) * v.numpy()
    np.testing.assert_allclose(tangent, want, rtol=1e-6)


def test_compiled_for_finds_the_concrete_function_our_call_runs():
    """`per_call.compiled_for` (the per-call workloads and benchmarks/idle_gap.py): the
    cache holds one entry after our call, and its concrete function, called flat, gives
    our call's values."""
    from compat_grads._src.call import compile as _compile

    x = tf.constant([0.5, -1.0, 2.0])
    cg.per_element_gradients(tf.tanh, x)  # another entry: compiled_for starts from none
    assert len(_compile.CACHE) >= 1
    traced, concrete = per_call.compiled_for(lambda: cg.per_element_gradients(tf.sin, x))
    assert len(_compile.CACHE) == 1 and hasattr(traced, "get_concrete_function")
    flat = concrete._call_flat([x], concrete.captured_inputs)
    got = tf.nest.flatten(flat)[0].numpy()
    np.testing.assert_allclose(got, np.cos(x.numpy()), rtol=1e-6)
