"""The benchmark suite runs end to end at tiny sizes (it is too slow and noisy for timings in
tests: the numbers are in the closing notes, measured with `compat-grads bench`)."""

import json
import os

from compat_grads.bench import suite


def test_quick_suite_runs_and_reports(tmp_path):
    report = suite.run(quick=True, out_dir=str(tmp_path), plot=False, log=lambda _: None)
    workloads = {m["workload"] for m in report["measures"]}
    assert len(workloads) == 9
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
    assert "| TF1 CNN class rows: batch | recipe |" in table


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
