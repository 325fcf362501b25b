"""The README's front page runs as written and prints what it says: its TF2 example in this
process, its TF1 example in a process of its own (it disables v2 behaviour), both checked
against numpy; and docs/index.rst shows exactly those lines."""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
INDEX = (ROOT / "docs" / "index.rst").read_text()
TF2, TF1 = re.findall(r"```python\n(.*?)```", README, re.S)[:2]
COMMANDS = re.findall(r"```bash\n(.*?)```", README, re.S)[0]

# The README's inputs, and what the examples must print: dy/dx = J·1 with y's shape, and the
# per-sample Hessians of sum(x**3), diag(6 x).
A = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
X = np.array([[1.0], [2.0]], np.float32)
XB = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
DYDX = A @ np.ones_like(X)
HESSIANS = np.stack([np.diag(6 * sample) for sample in XB])
PRINTED = f"{DYDX}\n{HESSIANS}\n"


def test_readme_opens_with_a_tf2_and_a_tf1_example():
    lines = README.splitlines()
    first_block = next(n for n, line in enumerate(lines) if line.startswith("```"))
    assert first_block < 40 and lines[first_block] == "```python"
    assert "import compat_grads as cg" in TF2 and "disable_v2_behavior" not in TF2
    assert "tf.disable_v2_behavior()" in TF1 and "tf.Session()" in TF1
    for block in (TF2, TF1):
        assert "cg.per_element_gradients(" in block and "cg.batch_hessian(" in block


def test_tf2_example_runs_here_and_agrees_with_numpy(capsys):
    names = {}
    exec(TF2, names)  # the README's own example, as a reader runs it
    for name, value in (("A", A), ("x", X), ("xb", XB)):
        np.testing.assert_array_equal(names[name].numpy(), value)
    assert names["dydx"].shape == (3, 1)  # y's shape, not x's
    np.testing.assert_allclose(names["dydx"].numpy(), DYDX, rtol=1e-6)
    np.testing.assert_allclose(names["H"].numpy(), HESSIANS, rtol=1e-6)
    assert capsys.readouterr().out == PRINTED


def test_tf1_example_prints_the_same_in_a_tf1_process():
    done = subprocess.run([sys.executable, "-c", TF1], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == PRINTED


def test_readme_gives_the_install_check_and_test_commands():
    assert COMMANDS.splitlines()[0].startswith('pip install ".[cpu]" && compat-grads check ')
    assert COMMANDS.splitlines()[1].startswith("tox ")


def _included(start_at, end_before):
    """What Sphinx's literalinclude takes from README.md: from the first line containing
    start_at to the first line after it containing end_before."""
    lines = README.splitlines(keepends=True)
    start = next(n for n, line in enumerate(lines) if start_at in line)
    end = next(n for n in range(start, len(lines)) if end_before in lines[n])
    return lines[start - 1].strip(), "".join(lines[start:end])


def test_index_shows_the_readme_examples_and_commands():
    includes = re.findall(r"\.\. literalinclude:: \.\./README\.md\n   :language: (\w+)\n"
                          r"   :start-at: (.*)\n   :end-before: (.*)\n", INDEX)
    assert [language for language, _, _ in includes] == ["python", "python", "bash"]
    for _, start_at, _ in includes:
        assert README.count(start_at) == 1  # the first match is the only one
    assert [_included(start_at, end_before) for _, start_at, end_before in includes] == [
        ("```python", TF2), ("```python", TF1), ("```bash", COMMANDS)]
