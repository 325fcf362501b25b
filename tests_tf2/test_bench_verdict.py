"""The suite's verdicts over fresh processes (`compat_grads.bench.verdict`): medians and
spreads, ties only where ours runs TensorFlow's graph, and the recipes they time."""

import pytest

from compat_grads.bench import per_call, suite, timing, verdict, xla_choice
from compat_grads.bench import workloads as wl

pytestmark = pytest.mark.tooling  # CI runs these on the newest release only

OURS, THEIRS = f"{wl.OURS} per_example_gradients, eager", wl.VECTORIZED


def _report(workload, ratios):
    """A report with one workload, its single run at 1.0 and one verdict process per ratio
    (TensorFlow's best in tf.function over ours)."""
    runs = [{OURS: 2.0, THEIRS: 2.0 * r} for r in ratios]
    measures = [{"workload": workload, "recipe": OURS, "ms": 2.0, "ours": True},
                {"workload": workload, "recipe": THEIRS, "ms": 2.0, "ours": False}]
    return {"measures": measures, "verdict": {"runs": {workload: runs}, "processes": len(runs)}}


def _never_slower(report, workload):
    (target,) = [t for t in suite._speed_targets(report)
                 if t["target"] == f"never slower than TensorFlow's best in tf.function "
                                   f"({workload})"]
    return target


def test_a_goal_is_the_median_of_the_processes_with_their_spread():
    target = _never_slower(_report("tall 4000x500", [0.9, 1.3, 1.1, 0.8, 1.2]), "tall 4000x500")
    assert target["measured"] == pytest.approx(1.1) and target["met"]
    assert target["spread"] == pytest.approx([0.8, 1.3]) and target["processes"] == 5
    assert verdict.measured_text(target) == "1.10 (0.80-1.30, 5 processes)"
    assert verdict.met_text(target) == "yes"


@pytest.mark.parametrize("workload, median, shown", [
    ("per-example gradients, MLP (b=256)", 0.96, "tie (the same graph)"),
    ("per-example gradients, MLP (b=256), oneDNN on", 0.95, "tie (the same graph)"),
    ("few rows through a CNN (b=64)", 0.97, "tie (the same graph)"),
    ("per-example gradients, MLP (b=256)", 0.9499, "NO"),  # beyond the tie
    ("per-example gradients, CNN (b=256)", 0.97, "NO"),  # not the same graph
])
def test_a_tie_is_a_miss_within_five_percent_on_the_same_graph_only(workload, median, shown):
    target = _never_slower(_report(workload, [median] * 3), workload)
    assert not target["met"] and verdict.met_text(target) == shown


def test_a_tie_needs_fresh_processes_and_an_at_least_goal_within_five_percent_of_it():
    workload = "per-example gradients, MLP (b=256)"
    report = _report(workload, [0.96])
    del report["verdict"]
    report["measures"][1]["ms"] = 2.0 * 0.96  # the single run only: a miss, no tie
    assert verdict.met_text(_never_slower(report, workload)) == "NO"
    judged = {"met": False, "measured": 1.92, "goal": 2.0, "spread": [1.9, 1.95]}
    assert verdict.is_tie(judged, workload, at_least=True)  # within 5 % of a 2x goal
    assert not verdict.is_tie({**judged, "measured": 1.89}, workload, at_least=True)
    at_most = {"met": False, "measured": 21.0, "goal": 20.0, "spread": [20.5, 22.0]}
    assert not verdict.is_tie(at_most, workload, at_least=False)


def test_a_cnn_goal_under_kernels_tensorflow_does_not_pick_is_shown_not_judged():
    workload = "per-example gradients, CNN (b=256)"
    report = _report(workload, [1.5, 1.6])
    report["kernels"] = {"here": False, "tensorflow_default": True}
    (target,) = [t for t in suite._speed_targets(report) if t["target"].startswith(
        f"per_example_gradients eager vs {THEIRS}")]
    assert target["target"].endswith(f"Eigen{suite.OTHER_KERNELS} ({workload})")
    assert not target["met"] and verdict.met_text(target) == "not judged (missed)"
    report["kernels"]["tensorflow_default"] = False  # Eigen is TensorFlow's pick: judged
    (target,) = [t for t in suite._speed_targets(report) if t["target"].startswith(
        f"per_example_gradients eager vs {THEIRS}")]
    assert target["target"].endswith(f"{THEIRS} ({workload})")
    assert verdict.met_text(target) == "NO"


def test_without_verdict_processes_a_goal_is_the_single_run():
    report = _report("square MLP", [0.5, 0.5])
    del report["verdict"]
    target = _never_slower(report, "square MLP")
    assert target["measured"] == pytest.approx(1.0) and "spread" not in target
    assert verdict.measured_text(target) == "1.00"


def test_verdict_processes_time_only_the_recipes_the_goals_compare():
    kept = [OURS, wl.XLA.format("stacked_jacobian"), "tape.jacobian in tf.function",
            wl.TF_XLA.format(THEIRS), per_call.CONCRETE, wl.FLOOR, wl.SHARED,
            per_call.STUBBED, per_call.STUB,
            "the same tf.function, called directly", "jax.jit(jacfwd)"]
    dropped = ["tape.jacobian, eager", "eager loop of GradientTape.gradient over examples",
               "eager ForwardAccumulator, one product"]
    assert all(map(verdict.timed, kept)) and not any(map(verdict.timed, dropped))


def test_a_workload_checks_and_times_only_what_only_keeps():
    called = []

    def recipe(name):
        return lambda: called.append(name) or [1.0]
    recipes = {name: recipe(name) for name in ("kept", "dropped")}
    with timing.only(lambda name: name == "kept"):
        measures = wl.timed("w", recipes, lambda: [1.0], repeats=1)
    assert [m.recipe for m in measures] == ["kept"] and set(called) == {"kept"}
    assert [m.recipe for m in wl.timed("w", recipes, lambda: [1.0], repeats=1)] == [
        "kept", "dropped"]


def test_the_steps_hold_every_workload_once_with_the_onednn_ones_last():
    names = list(verdict.steps(suite.QUICK))
    onednn = [n for n in names if n.startswith(verdict.ONEDNN_STEP)]
    assert names[-len(onednn):] == onednn and len(onednn) == 1 + len(wl.CNN_KINDS)
    assert [n for n in names if n.startswith("per-call ")] == [
        f"per-call {f}" for f in suite.OVERHEAD_FUNCTIONS]


def test_xla_pays_after_its_extra_first_call_over_what_each_call_saves():
    assert xla_choice.breakeven({"default": 100.0, "xla": 400.0},
                                {"default": 0.6, "xla": 0.3}) == pytest.approx(1000.0)
    assert xla_choice.breakeven({"default": 100.0, "xla": 90.0},
                                {"default": 0.6, "xla": 0.3}) == 0.0
    assert xla_choice.breakeven({"default": 1.0, "xla": 9.0}, {"default": 0.3, "xla": 0.3}) is None


@pytest.mark.parametrize("case", xla_choice.CASES)
def test_each_xla_case_computes_the_same_derivative_with_and_without_xla(case):
    import numpy as np

    call = xla_choice._case(case, xla_choice.QUICK_SIZES)
    plain, compiled = call(False), call(True)
    for a, b in zip(*(x if isinstance(x, (list, tuple)) else [x] for x in (plain, compiled))):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-5)


def test_xla_choice_times_a_first_call_and_later_calls_of_both():
    case = xla_choice.CASES[0]
    first = xla_choice.first_ms(case, True, quick=True)
    steady = xla_choice.steady_ms(case, quick=True, repeats=1)
    assert set(steady) == {"default", "xla"} and min(steady.values()) > 0
    assert first > 2 * steady["xla"]  # tracing and XLA's compile, not a cached call


@pytest.mark.parametrize("case", xla_choice.CASES)
def test_each_xla_case_traces_once(case):
    """Later calls reuse the first call's trace: a new callable per call would retrace."""
    import compat_grads as cg
    from compat_grads._src.call import compile as _compile

    call = xla_choice._case(case, xla_choice.QUICK_SIZES)
    cg.clear_cache()
    for _ in range(3):
        call(False)
    (entry,) = _compile.CACHE._entries.values()
    assert len(entry.compiled._concrete) == 1
