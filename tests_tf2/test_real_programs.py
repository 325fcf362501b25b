"""benchmarks/real_programs.py end to end on a program directory written here: a TF1 script
with a loop of tf.gradients is copied, scanned, fixed, run before and after in subprocesses,
and its outputs compared."""

import importlib.util
import json
import pathlib
import subprocess
import sys
import textwrap

import numpy as np

HARNESS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "real_programs.py"

LOOP_PROGRAM = '''
import json
import os
import time

import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()

started = time.perf_counter()
values = np.random.RandomState(0).randn(5, 3).astype(np.float32)
if os.environ.get("PERTURB_ULP"):
    values = np.nextafter(values, np.float32(np.inf))
x = tf.constant(values)
w = tf.constant(np.random.RandomState(1).randn(3, 4).astype(np.float32))
logits = tf.tanh(tf.matmul(x, w))
rows = []
for c in range(4):
    rows.append(tf.gradients(logits[:, c], x)[0])
J = tf.stack(rows)
built = time.perf_counter()
with tf.Session() as sess:
    np.save("jacobian.npy", sess.run(J))
json.dump({"build": built - started, "run": time.perf_counter() - built},
          open("timings.json", "w"))
'''


def _harness():
    spec = importlib.util.spec_from_file_location("real_programs", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _program(folder: pathlib.Path, source: str, outputs: list) -> None:
    folder.mkdir(parents=True)
    (folder / "run.py").write_text(textwrap.dedent(source))
    (folder / "manifest.json").write_text(json.dumps(
        {"entry": "run.py", "outputs": outputs, "timings": "timings.json",
         "perturbed_env": {"PERTURB_ULP": "1"}, "rtol": 1e-5, "atol": 1e-6}))


def test_the_harness_scans_fixes_runs_and_compares_a_loop_of_gradients(tmp_path):
    _program(tmp_path / "programs" / "class_rows", LOOP_PROGRAM, ["jacobian.npy"])
    rows_file = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, str(HARNESS), str(tmp_path / "programs"),
                           "--repeats", "1", "--work", str(tmp_path / "work"),
                           "--json", str(rows_file)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    header, _, line = done.stdout.splitlines()[:3]
    assert header.startswith("| program | findings | fixable | fixed | outputs |")
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[0] == "class_rows"
    assert int(cells[1]) > 0 and int(cells[2]) > 0 and int(cells[3]) > 0
    assert cells[4] in ("identical", "close") or cells[4].startswith("close (rounding")
    (row,) = json.loads(rows_file.read_text())
    assert row["findings"] == row["fixed"] == 1 and row["remaining"] == []
    assert row["spread"] is not None and row["spread"] > 0  # one ulp moved the Jacobian
    assert row["build"][0] > 0 and row["build"][1] > 0
    assert row["ratio"] > 0 and row["wall_ratio"] > 0
    fixed = (tmp_path / "work" / "class_rows" / "fixed" / "run.py").read_text()
    assert "cg.stacked_jacobian(" in fixed and "tf.gradients" not in fixed
    assert "tf.gradients" in (tmp_path / "work" / "class_rows" / "original" / "run.py").read_text()
    got = np.load(tmp_path / "work" / "class_rows" / "fixed" / "jacobian.npy")
    assert got.shape == (4, 5, 3)


def test_a_fixed_program_that_crashes_or_differs_is_reported():
    harness = _harness()
    same = {"a": np.arange(4.0, dtype=np.float32)}
    moved = {"a": same["a"] + np.float32([0, 0, 1e-3, 0])}
    assert harness._difference(same, dict(same)) == (True, 0.0, 0.0)
    identical, worst_abs, worst_rel = harness._difference(same, moved)
    assert not identical and np.isclose(worst_abs, 1e-3, rtol=1e-3)
    assert np.isclose(worst_rel, 1e-3 / 2, rtol=1e-3)
    assert harness._difference(same, {"a": same["a"][:3]})[1] == float("inf")
    row = harness.Row("p")
    harness._verdict(row, harness.Run(1.0, True, "", same, {}),
                     harness.Run(1.0, True, "", moved, {}), {"rtol": 1e-6, "atol": 1e-6})
    assert row.outputs == "DIFFERENT"
    crashed = harness.Row("q", findings=2, fixable=1, fixed=1, outputs="fixed CRASHES",
                          errors=["fixed failed: DerivativeError"])
    table = harness.markdown([crashed])
    assert "| q | 2 | 1 | 1 | fixed CRASHES |" in table
    assert "- q: fixed failed: DerivativeError" in table
