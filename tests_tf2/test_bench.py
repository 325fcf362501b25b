"""The benchmark suite runs end to end at tiny sizes (it is too slow and noisy for timings in
tests: the numbers are in the closing notes, measured with `compat-grads bench`)."""

import json
import os

from compat_grads.bench import suite


def test_quick_suite_runs_and_reports(tmp_path):
    report = suite.run(quick=True, out_dir=str(tmp_path), plot=False, log=lambda _: None)
    workloads = {m["workload"] for m in report["measures"]}
    assert len(workloads) == 8
    for workload in workloads:
        rows = [m for m in report["measures"] if m["workload"] == workload]
        assert sum(m["ours"] for m in rows) >= 1 and len(rows) >= 3
        assert all(m["ms"] > 0 for m in rows)
    recipes = {r["recipe"] for r in report["tf1_graph"]}
    assert any("map_fn" in r for r in recipes) and any("(auto)" in r for r in recipes)
    assert {(m["strategy"], bool(m["chunk_size"])) for m in report["memory"]} == {
        ("forward", False), ("forward", True), ("reverse", True)}
    assert {t["target"] for t in report["targets"]} >= {
        "per_element_gradients eager vs tape.jacobian then reduce_sum, eager (J·1)",
        "per_example_gradients eager vs eager loop over examples (per-example gradients, "
        "MLP (b=4))",
        "TF1 build time flat: build(largest m) / build(smallest m)"}
    with open(os.path.join(tmp_path, "bench.json")) as handle:
        assert json.load(handle)["quick"] is True
    table = suite.markdown(report)
    assert table.startswith("| workload | recipe | ms | their ms / our eager ms |")
    assert "| target | measured | goal | met |" in table
