"""The Curvature page's TF1 example runs as written in a TF1 process (v2 behaviour is
already disabled here: the block's own `disable_v2_behavior()` is then a no-op) and gives the
logistic regression's Hessian `Xᵀ diag(p (1 - p)) X`, written out in numpy."""

import pathlib

import numpy as np
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite.pinn import blocks

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "curvature.rst"


def test_the_tf1_example_is_the_hessian_written_out():
    with tf.Graph().as_default():
        scope = {"cg": cg}
        for block in blocks(PAGE, "In a TF1 graph"):
            exec(block, scope)  # noqa: S102 - the documentation's own example
    values, trace, step = scope["found"]
    x, labels = scope["features"], scope["labels"]
    assert labels.any() and not labels.all()
    p = 1 / (1 + np.exp(-x @ np.array([0.5, -1.0, 2.0])))
    hessian = x.T @ (x * (p * (1 - p))[:, None])
    np.testing.assert_allclose(values, np.linalg.eigvalsh(hessian)[::-1], rtol=1e-8)
    assert trace == np.trace(hessian) or abs(trace - np.trace(hessian)) <= 1e-8 * trace
    np.testing.assert_allclose(step, np.linalg.solve(hessian + 1e-3 * np.eye(3),
                                                     [1.0, 0.0, 0.0]), rtol=1e-5)
