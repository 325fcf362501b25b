"""The worked example of docs/check_derivatives.rst: the page includes this file's lines
between the `# [...]` markers, and the test below holds the output the page shows to what
check_derivatives prints today."""

import pathlib
import re

import numpy as np
import tensorflow as tf

import compat_grads as cg

PAGE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "check_derivatives.rst"


# [the bug]
@tf.custom_gradient
def softplus(x):
    """log(1 + exp(x)), with a hand-written gradient: sigmoid(x), or so it was meant."""
    def grad(upstream):
        return upstream * tf.sigmoid(-x)  # the sign error
    return tf.math.softplus(x), grad


def check_softplus():
    report = cg.check_derivatives(softplus, np.array([-1.0, 0.5, 2.0], np.float32))
    print(report)  # a table: each function, mode and strategy, and where it is wrong
    return report
# [the bug end]


# [the fix]
@tf.custom_gradient
def softplus_fixed(x):
    def grad(upstream):
        return upstream * tf.sigmoid(x)
    return tf.math.softplus(x), grad


def test_softplus_fixed(cg_check):  # the pytest plugin's fixture
    cg_check(softplus_fixed, np.array([-1.0, 0.5, 2.0], np.float32), order=2)
# [the fix end]


def _shown(marker) -> list:
    """The lines of the page's text block after the comment `.. marker`."""
    lines = PAGE.read_text().split(f".. {marker}\n", 1)[1].splitlines()
    block = lines[lines.index("   :class: wrap") + 2:]
    end = next(i for i, line in enumerate(block) if line and not line.startswith("   "))
    return [line.strip() for line in block[:end] if line.strip()]


def test_the_page_shows_what_the_bug_gives():
    report = check_softplus()
    head, *reasons = _shown("the bug's report")
    # the page shows TensorFlow 2.21's count: how many rows pass depends on whether eager
    # forward mode calls the custom gradient (it does not in 2.21)
    assert re.sub(r"\d+ of", "N of", head) == re.sub(r"\d+ of", "N of", str(report).splitlines()[0])
    assert reasons and set(reasons) - {"..."} <= {f"{row.function}: {row.reason}"
                                                  for row in report.failing}
    passing = {(r.function, r.mode, r.strategy) for r in report.rows if r.ok}
    assert passing <= {("stacked_jacobian", "eager", "forward"),
                       ("per_element_gradients", "eager", "-"), ("jvp", "eager", "-")}
