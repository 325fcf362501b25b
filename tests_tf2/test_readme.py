"""The README's TF1 and TF2 examples run as written (each in its own process: the TF1 one
disables v2 behaviour)."""

import os
import re
import subprocess
import sys

import pytest

README = os.path.join(os.path.dirname(__file__), os.pardir, "README.md")
with open(README) as handle:
    BLOCKS = re.findall(r"```python\n(.*?)```", handle.read(), re.S)


def test_readme_has_a_tf1_and_a_tf2_example():
    assert len(BLOCKS) == 2
    assert any("disable_v2_behavior" in block for block in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=["tf2", "tf1"])
def test_readme_example_runs(block):
    done = subprocess.run([sys.executable, "-c", block + "\nprint('done')"],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("done")
