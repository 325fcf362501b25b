"""The diagonals and traces in a TF1 graph: the guide's PINN residual, and Hutchinson's
estimate equal to the documented one (the TF2 suite checks its routes against the same)."""

import pathlib

import numpy as np
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing import estimates, pinn

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "traces.rst"
XY = np.array([[-6.0, -3.0], [1.0, 8.0], [0.5, -1.5], [2.0, 0.25]])


def test_the_pinn_example_in_a_tf1_graph():
    scope = {}
    first, in_tf1, _ = pinn.blocks(PAGE, "A PINN residual in TF1 and TF2")
    with tf.Graph().as_default():
        for block in (first, in_tf1):
            exec(block, scope)  # noqa: S102 - the documentation's own example
    want = pinn.burgers_residual(*(scope[k] for k in ("points", "w1", "w2", "w3", "nu")))
    np.testing.assert_allclose(scope["r_tf1"], want, rtol=1e-10, atol=1e-12)


def test_an_estimate_is_the_documented_one_in_a_tf1_graph():
    with tf.Graph().as_default():
        xy = tf.compat.v1.placeholder(tf.float64, [None, 2])
        u = 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2
        got = cg.batch_laplacian(u, xy, method="hutchinson", num_samples=estimates.PROBES,
                                 seed=estimates.SEED, return_std=True)
        diagonal = cg.batch_hessian_diagonal(u, xy, method="hutchinson",
                                             num_samples=estimates.PROBES,
                                             seed=estimates.SEED, return_std=True)
        probes = estimates.probes_op(XY.shape)
        with tf.compat.v1.Session() as session:
            got, diagonal, probes = session.run([got, diagonal, probes], {xy: XY})
    hessians = estimates.per_sample_3x2y_plus_y2(XY)
    for g, w in zip((*got, *diagonal), (*estimates.batch_laplacian(probes, hessians),
                                        *estimates.batch_diagonal(probes, hessians))):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_a_divergence_in_a_tf1_graph():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float64, [None, 2])
        div = cg.batch_divergence(tf.sin(x) * x[:, ::-1], x)
        with tf.compat.v1.Session() as session:
            got = session.run(div, {x: XY})
    want = np.cos(XY[:, 0]) * XY[:, 1] + np.cos(XY[:, 1]) * XY[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-12)
