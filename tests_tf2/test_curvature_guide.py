"""The Curvature page's examples run as written and do what the page says: the top
eigenvalues and trace of a Keras model's Hessian against the dense Hessian, Gauss-Newton
steps that reach the curve, influence by a conjugate-gradient inverse-Hessian product equal
to the exact inverse, a last-layer Laplace variance equal to the dense formula, a CNN's
empirical NTK equal to its Jacobians' product."""

import pathlib

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite.pinn import blocks

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "curvature.rst"


def _run(title):
    """The scope after running the python code blocks of the page's section `title`."""
    tf.keras.utils.set_random_seed(0)
    scope = {"tf": tf, "cg": cg}
    for block in blocks(PAGE, title):
        exec(block, scope)  # noqa: S102 - the documentation's own example
    return scope


def _dense(op):
    return op.to_dense().numpy().astype(np.float64)


def test_the_top_eigenvalues_and_trace_are_the_dense_hessians():
    scope = _run("The top Hessian eigenvalues of a Keras model")
    hessian = _dense(scope["H"])
    assert hessian.shape == (41, 41)
    exact = np.linalg.eigvalsh((hessian + hessian.T) / 2)[::-1]
    np.testing.assert_allclose(scope["values"].numpy(), exact[:5], rtol=1e-3,
                               atol=1e-4 * exact[0])
    assert scope["vectors"].shape == (41, 5)
    assert abs(float(scope["trace"]) - np.trace(hessian)) <= 0.1 * np.abs(exact).sum()


def test_gauss_newton_steps_reach_the_curve():
    scope = _run("Gauss-Newton steps")
    assert float(scope["amplitude"]) == pytest.approx(2.0, abs=1e-3)
    assert float(scope["rate"]) == pytest.approx(1.3, abs=1e-3)


def test_influence_uses_the_exact_inverse_hessian_product():
    scope = _run("Influence of training points")
    hessian = _dense(scope["H"])
    test_gradient = scope["gradient"](scope["x"][:1], scope["labels"][:1]).numpy()
    exact = np.linalg.solve(hessian + scope["damping"] * np.eye(5), test_gradient)
    np.testing.assert_allclose(scope["inverse"].numpy(), exact, rtol=1e-6)
    full = scope["gradient"](scope["x"], scope["labels"]).numpy()
    assert np.abs(full).max() < 1e-8  # Newton's steps reached the minimum
    assert scope["influence"].shape == (200,)
    rows = np.stack([scope["gradient"](scope["x"][s:s + 1], scope["labels"][s:s + 1])
                     for s in (0, 7)])
    np.testing.assert_allclose(scope["influence"].numpy()[[0, 7]], -rows @ exact, rtol=1e-6)


def test_the_last_layer_variance_is_the_dense_formula():
    scope = _run("A last-layer Laplace approximation")
    ggn = _dense(scope["G"])
    assert ggn.shape == (17, 17)
    posterior = np.linalg.inv(ggn + scope["prior_precision"] * np.eye(17))
    for x_new, got in (([[0.5]], scope["inside"]), ([[6.0]], scope["outside"])):
        with tf.GradientTape() as tape:
            prediction = scope["model"](tf.constant(x_new))[0, 0]
        J = np.concatenate([np.reshape(g, [-1]) for g in tape.gradient(
            prediction, scope["head"])])
        assert float(got) == pytest.approx(J @ posterior @ J, rel=1e-4)
    assert float(scope["outside"]) > float(scope["inside"])


def test_the_ntk_of_a_small_cnn_is_its_jacobians_product():
    scope = _run("The empirical neural tangent kernel")
    weights, images = scope["model"].trainable_weights, scope["images"]
    with tf.GradientTape(persistent=True) as tape:
        outputs = scope["model"](images)
    J = np.concatenate([np.reshape(j, [10, 3, -1]) for j in tape.jacobian(outputs, weights)],
                       axis=2)
    pairs = np.einsum("iap,jbp->ijab", J, J[:5])
    assert scope["K"].shape == (10, 5) and scope["pairs"].shape == (10, 5, 3, 3)
    np.testing.assert_allclose(scope["pairs"].numpy(), pairs, rtol=1e-4,
                               atol=1e-5 * np.abs(pairs).max())
    np.testing.assert_allclose(scope["K"].numpy(), np.einsum("ijaa->ij", pairs), rtol=1e-4,
                               atol=1e-5 * np.abs(pairs).max())
