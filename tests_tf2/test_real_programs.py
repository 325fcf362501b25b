"""benchmarks/real_programs.py end to end on a program directory written here: a TF1 script
with a loop of tf.gradients is copied, scanned, fixed, run before and after in subprocesses,
and its outputs compared; a program whose original varies from run to run is judged against
its own spread, one with nothing to fix is "unchanged", and every time ratio has its noise band."""

import importlib.util
import json
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.tooling  # CI runs these on the newest release only

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


UNTOUCHED_PROGRAM = '''
import json
import time

import numpy as np

started = time.perf_counter()
np.save("values.npy", np.random.rand(3) * 1e-3 + 1)
json.dump({"build": 0.0, "run": time.perf_counter() - started}, open("timings.json", "w"))
'''

# The loop of tf.gradients, its output moved by 1e-3 per earlier run in the same folder: the
# original's runs differ (by 1e-3) and the fixed copy's first run lies inside their spread.
DRIFTING_PROGRAM = LOOP_PROGRAM.replace('''    np.save("jacobian.npy", sess.run(J))''', '''\
    runs = int(open("runs.txt").read()) if os.path.exists("runs.txt") else 0
    open("runs.txt", "w").write(str(runs + 1))
    np.save("jacobian.npy", sess.run(J) + np.float32(1e-3 * runs))''')


def _harness():
    spec = importlib.util.spec_from_file_location("real_programs", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _program(folder: pathlib.Path, source: str, outputs: list, **manifest) -> None:
    folder.mkdir(parents=True)
    (folder / "run.py").write_text(textwrap.dedent(source))
    (folder / "manifest.json").write_text(json.dumps(
        {"entry": "run.py", "outputs": outputs, "timings": "timings.json",
         "perturbed_env": {"PERTURB_ULP": "1"}, "rtol": 1e-5, "atol": 1e-6} | manifest))


def _table(tmp_path: pathlib.Path, repeats: int) -> tuple:
    """The harness on tmp_path/programs: (exit code, its output, {column: cell}, json row)."""
    rows_file = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, str(HARNESS), str(tmp_path / "programs"),
                           "--repeats", str(repeats), "--work", str(tmp_path / "work"),
                           "--json", str(rows_file)], capture_output=True, text=True)
    output = done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) >= 3 and rows_file.exists(), output
    header, line = ([c.strip() for c in text.strip("|").split("|")] for text in lines[:3:2])
    (row,) = json.loads(rows_file.read_text())
    return done.returncode, output, dict(zip(header, line)), row


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
    row = harness.Row("p", fixed=1)
    harness._verdict(row, [harness.Run(1.0, True, "", same, {})] * 2,
                     harness.Run(1.0, True, "", moved, {}), {"rtol": 1e-6, "atol": 1e-6})
    assert row.outputs == "DIFFERENT" and not row.passed
    crashed = harness.Row("q", findings=2, fixable=1, fixed=1, outputs="fixed CRASHES",
                          errors=["fixed failed: DerivativeError"])
    table = harness.markdown([crashed])
    assert "| q | 2 | 1 | 1 | fixed CRASHES |" in table
    assert "- q: fixed failed: DerivativeError" in table


def test_an_untouched_program_that_varies_from_run_to_run_is_unchanged_and_passes(tmp_path):
    _program(tmp_path / "programs" / "noisy", UNTOUCHED_PROGRAM, ["values.npy"],
             perturbed_env=None)
    code, output, cells, row = _table(tmp_path, repeats=1)
    assert code == 0, output
    assert cells["fixed"] == "0" and cells["outputs"] == "unchanged (not deterministic)", output
    assert float(cells["run-to-run spread"]) > 0, output  # two runs, even at --repeats 1
    assert row["passed"]


def test_a_fixed_program_whose_original_varies_is_judged_against_its_spread(tmp_path):
    _program(tmp_path / "programs" / "drifting", DRIFTING_PROGRAM, ["jacobian.npy"],
             perturbed_env=None, rtol=1e-9, atol=1e-9)
    code, output, cells, row = _table(tmp_path, repeats=2)
    assert int(cells["fixed"]) == 1, output
    assert cells["outputs"] == "not deterministic; after within its spread", output
    assert np.isclose(float(cells["run-to-run spread"]), 1e-3, rtol=1e-2)
    assert code == 0 and row["passed"], output


def test_a_fixed_program_outside_the_spread_fails_unless_within_tolerance():
    harness = _harness()
    runs = [harness.Run(1.0, True, "", {"a": np.float32([1, 2]) + d}, {}) for d in (0, 1e-3)]
    verdicts = {}
    for moved, tolerance in [(5e-4, 1e-9), (1e-2, 1e-9), (1e-2, 1e-1)]:
        row = harness.Row("p", fixed=1)
        fixed = harness.Run(1.0, True, "", {"a": np.float32([1, 2]) + np.float32(moved)}, {})
        harness._verdict(row, runs, fixed, {"rtol": tolerance, "atol": tolerance})
        verdicts[moved, tolerance] = (row.outputs, row.passed)
        assert np.isclose(row.run_spread, 1e-3, rtol=1e-3)
    assert verdicts == {
        (5e-4, 1e-9): ("not deterministic; after within its spread", True),
        (1e-2, 1e-9): ("not deterministic; after outside its spread", False),
        (1e-2, 1e-1): ("close (not deterministic; after outside its spread)", True)}
    renamed = harness.Row("r", fixed=1)
    harness._verdict(renamed, runs, harness.Run(1.0, True, "", {"b": np.float32([1, 2])}, {}),
                     {"rtol": 1e-1, "atol": 1e-1})
    assert renamed.outputs == "not deterministic; after outside its spread"
    untouched = harness.Row("q", fixed=0)
    harness._verdict(untouched, runs, fixed, {"rtol": 1e-9, "atol": 1e-9})
    assert untouched.outputs == "unchanged (not deterministic)" and untouched.passed


def test_each_time_ratio_comes_with_the_noise_band_of_same_code_runs(tmp_path):
    harness = _harness()
    assert harness._band([[1.0, 2.0], [3.0]]) == (0.5, 2.0)
    assert harness._band([[1.0], [3.0]]) is None
    row = harness.Row("p", fixed=1, outputs="close", before=[1.0, 1.1], after=[1.2],
                      build=(0.4, 0.5), run=(0.6, 0.7), same_code=[[1.0, 1.25], [1.2]],
                      same_code_wall=[[1.0, 1.1], [1.2]])
    assert row.noise == (0.8, 1.25) and np.allclose(row.wall_noise, (1 / 1.1, 1.1))
    header, _, line = harness.markdown([row]).splitlines()[:3]
    cells = dict(zip(header.strip("| ").split(" | "), line.strip("| ").split(" | ")))
    assert cells["ratio (build+run)"] == "1.20" and cells["noise band (build+run)"] == "0.80–1.25"
    assert cells["wall ratio"] == "1.14" and cells["wall noise band"] == "0.91–1.10"
    _program(tmp_path / "programs" / "class_rows", LOOP_PROGRAM, ["jacobian.npy"])
    code, output, cells, run_row = _table(tmp_path, repeats=2)
    low, high = run_row["noise"]
    assert code == 0 and 0 < low <= 1 <= high and np.isclose(low * high, 1), output
    assert cells["noise band (build+run)"] == f"{low:.2f}–{high:.2f}", output
    assert cells["wall noise band"] != "-", output
