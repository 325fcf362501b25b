"""The suite's verdicts, over fresh processes: `python -m compat_grads.bench.verdict QUICK STEP
[STEP ...]` times the named steps of the suite again and prints one JSON line (`main`).

One run of the suite times every workload in one process, after the workloads before it:
its heap, its allocator's free lists and its caches are what they left, and a ratio of 0.97
or 1.04 between two recipes can be that history, not the recipes (measured: the same two
recipes' ratio moves by up to a tenth between processes). So the suite's speed goals are
judged again here: each workload in `PROCESSES` fresh processes of its own, each process
interleaving the workload's recipes (every recipe sees the same allocator state and the
same noise), and each goal on the median of the processes' ratios, reported with their
spread. Only the recipes the goals compare are timed again (`timed`): ours, TensorFlow's in
tf.function, the floors and JAX's; not the eager recipes users write.
"""

from __future__ import annotations

import json
import statistics
import sys

PROCESSES = 5
"""Fresh processes per workload in the full suite (the quick suite: 2, sharing one process
among the workloads of each environment)."""
TIE = 0.95
"""On a workload where ours and TensorFlow's best run the same graph (`SAME_GRAPH`), a median
ratio at or above TIE (ours at most 1.053 times theirs) is a tie, not a miss: the medians of
five processes of two identical graphs move by that much."""
SAME_GRAPH = {
    "per-example gradients, MLP": "the same graph: a dense layer's per-example gradients "
                                  "are the outer products vectorized_map builds too",
    "few rows through a CNN": "the same graph: one reverse pass per class row, as the loop "
                              "of tape.gradient runs them",
}
"""Workloads (by the start of their name) where ours runs the graph TensorFlow's best runs,
op for op, with why."""
ONEDNN_STEP = "oneDNN: "
"""The start of a step run with TensorFlow's oneDNN kernels (`suite.ONEDNN`'s environment)."""


def steps(sizes: dict) -> dict:
    """{name: (repeats) -> the measures of that step}: the suite's timed workloads in its
    order, those with oneDNN's kernels last (their names start with `ONEDNN_STEP`)."""
    from compat_grads.bench import per_call, workloads

    found = {
        "tall": lambda r: workloads.matrix_jacobian(
            f"tall {sizes['tall'][0]}x{sizes['tall'][1]}", *sizes["tall"], r),
        "wide": lambda r: workloads.matrix_jacobian(
            f"wide {sizes['wide'][0]}x{sizes['wide'][1]}", *sizes["wide"], r),
        "square": lambda r: workloads.square_mlp(sizes["square"], r),
        "batch": lambda r: workloads.batch_mlp(*sizes["batch"], r),
        "J·1": lambda r: workloads.per_element(*sizes["tall"], r),
    }
    for b, d in sizes["hessians"]:
        found[f"per-sample Hessian {b} {d}"] = (
            lambda r, b=b, d=d: workloads.per_sample_hessian(b, d, r))
    for kind in ("MLP", *workloads.CNN_KINDS):
        found[f"per-example {kind}"] = (
            lambda r, kind=kind: workloads.per_example(kind, sizes["per_example"], r))
    for function in per_call.OVERHEAD_FUNCTIONS:
        found[f"per-call {function}"] = (
            lambda r, function=function: per_call.call_overhead(function, r))
    found["few rows"] = lambda r: workloads.cnn_class_rows(sizes["cnn"], r)
    for kind in ("MLP", *workloads.CNN_KINDS):
        found[f"{ONEDNN_STEP}per-example {kind}"] = (
            lambda r, kind=kind: workloads.per_example(kind, sizes["per_example"], r,
                                                       onednn=True))
    return found


def timed(recipe: str) -> bool:
    """Whether a verdict process times `recipe`: one the goals compare (ours, TensorFlow's
    in tf.function with or without XLA, the floors) and JAX's (often the fastest: the
    recipes `timing.SLOW` times apart are then the single run's), not the eager recipes
    users write (seconds per call for the loop over examples), all slower than those."""
    from compat_grads.bench import per_call, workloads

    return (recipe.startswith((workloads.OURS, "jax")) or "tf.function" in recipe
            or recipe in (per_call.CONCRETE, workloads.FLOOR, workloads.SHARED,
                           workloads.PRIMAL, per_call.STUBBED, per_call.STUB))


def run(sizes: dict, quick: bool, env: dict, onednn_env: dict, log=print) -> dict:
    """{"processes": how many, "kernels": {environment: whether its processes ran oneDNN's
    kernels}, "runs": {workload: [{recipe: ms}, one per process]}}: the full suite's steps
    each in `PROCESSES` fresh processes of their own; the quick suite's 2 processes per
    environment, each timing all its steps."""
    from compat_grads.bench import timing

    names = list(steps(sizes))
    groups = [([n], n.startswith(ONEDNN_STEP)) for n in names]
    count = 2 if quick else PROCESSES
    if quick:
        groups = [([n for n in names if n.startswith(ONEDNN_STEP) == on], on)
                  for on in (False, True)]
    report = {"processes": count, "kernels": {}, "runs": {}}
    for group, on in groups:
        log(f"... verdict: {', '.join(group)} in {count} fresh processes")
        for _ in range(count):
            found = timing.in_subprocess("compat_grads.bench.verdict", [int(quick), *group],
                                         env=onednn_env if on else env)
            report["kernels"]["oneDNN" if on else "default"] = found["kernels"]
            for workload, ms in found["runs"].items():
                report["runs"].setdefault(workload, []).append(ms)
    return report


def judged(runs: list, measure) -> dict | None:
    """{"measured": the median, "spread": [lowest, highest], "processes": how many} of
    `measure({recipe: ms})` over a workload's processes, None where it measures nothing."""
    values = [value for ms in runs if (value := measure(ms)) is not None]
    if not values:
        return None
    return {"measured": statistics.median(values), "spread": [min(values), max(values)],
            "processes": len(values)}


def same_graph(workload: str) -> str | None:
    """Why ours and TensorFlow's best run the same graph on `workload`, or None."""
    return next((why for start, why in SAME_GRAPH.items() if workload.startswith(start)), None)


def is_tie(target: dict, workload: str, at_least: bool) -> bool:
    """Whether a missed at-least goal, judged over fresh processes, is a tie: within `TIE` of
    its goal on a workload where ours runs TensorFlow's graph."""
    return (at_least and not target["met"] and "spread" in target
            and same_graph(workload) is not None and target["measured"] >= TIE * target["goal"])


def measured_text(target: dict) -> str:
    """A target's measured value as the tables show it: with the spread of the fresh
    processes it is the median of, where it is one."""
    if "spread" not in target:
        return f"{target['measured']:.2f}"
    low, high = target["spread"]
    return f"{target['measured']:.2f} ({low:.2f}-{high:.2f}, {target['processes']} processes)"


def met_text(target: dict) -> str:
    """yes, NO, a tie where ours runs TensorFlow's graph (`SAME_GRAPH`), or "not judged"
    for a goal measured under kernels TensorFlow does not pick on the machine."""
    if target.get("judged", True) is False:
        return "not judged (" + ("met" if target["met"] else "missed") + ")"
    if target["met"]:
        return "yes"
    return "tie (the same graph)" if target.get("tie") else "NO"


def main(argv) -> int:
    """Times the steps named in argv[1:] (argv[0]: 1 for the quick sizes) and prints
    {"kernels": whether TensorFlow runs oneDNN's kernels here, "runs": {workload: {recipe:
    ms}}}."""
    from compat_grads.bench import onednn, timing
    from compat_grads.bench.sizes import FULL, QUICK

    sizes = QUICK if int(argv[0]) else FULL
    table, runs = steps(sizes), {}
    kernels = onednn.kernels_on()
    with timing.only(timed):
        for name in argv[1:]:
            if name.startswith(ONEDNN_STEP) and not kernels:
                continue  # no oneDNN here: its workloads are not measured (as the suite)
            for measure in table[name](sizes["repeats"]):
                runs.setdefault(measure.workload, {})[measure.recipe] = measure.ms
    print(json.dumps({"kernels": kernels, "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
