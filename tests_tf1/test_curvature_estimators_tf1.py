"""The curvature estimators in a TF1 graph (v2 behaviour disabled): operators over a
placeholder of static shape, fed in a Session; the top eigenpairs in one `Session.run`; the
traces, the diagonal and CG against numpy; CG's breakdown a run-time error; a seed fed as a
placeholder; and an operator of Hessian-vector products. The TF2 side is
tests_tf2/test_curvature_estimators.py."""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite.operators import HessianOf

TOLERANCE = {np.float32: 1e-4, np.float64: 1e-9}
DTYPES = (np.float32, np.float64)


def _symmetric(n, kind, dtype=np.float64, seed=0):
    """A random symmetric n x n matrix: "spd" (B Bᵀ / n + I) or "indefinite"."""
    rng = np.random.default_rng(seed)
    b = rng.normal(size=(n, n))
    matrix = b @ b.T / n + np.eye(n) if kind == "spd" else (b + b.T) / 2
    return matrix.astype(dtype)


def _fed(n, dtype):
    """A placeholder [n, n] and the operator over it."""
    held = tf.compat.v1.placeholder(dtype, [n, n])
    return held, tf.linalg.LinearOperatorFullMatrix(held)


class _CountingSession(tf.compat.v1.Session):
    """A Session that counts its `run` calls."""

    runs = 0

    def run(self, *args, **kwargs):
        self.runs += 1
        return super().run(*args, **kwargs)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("which", ("LA", "SA", "LM"))
def test_top_eigenpairs_in_one_session_run(which, dtype):
    """One graph, built once over the placeholder; each fed matrix one `run`: the eigh's
    eigenpairs (n = 12 steps: exact), the vectors orthonormal."""
    with tf.Graph().as_default():
        held, op = _fed(12, dtype)
        values, vectors = cg.top_eigenvalues(op, 3, which=which)
        assert values.dtype == vectors.dtype == dtype
        with _CountingSession() as session:
            for seed in (0, 1):
                matrix = _symmetric(12, "indefinite", dtype, seed)
                got, v = session.run([values, vectors], {held: matrix})
                exact = np.linalg.eigvalsh(matrix.astype(np.float64))
                order = {"LA": exact[::-1], "SA": exact,
                         "LM": exact[np.argsort(-np.abs(exact), kind="stable")]}[which]
                np.testing.assert_allclose(got, order[:3], atol=10 * TOLERANCE[dtype])
                residual = matrix @ v - v * got
                assert np.max(np.abs(residual)) <= 100 * TOLERANCE[dtype]
                assert np.max(np.abs(v.T @ v - np.eye(3))) <= 100 * TOLERANCE[dtype]
            assert session.runs == 2


def test_local_reorthogonalization_in_one_session_run():
    """Both of its passes (T, then the vectors) in the one `run`: n = 60 with the top three
    well separated and 50 steps, eigh's eigenpairs to 1e-9."""
    rng = np.random.default_rng(2)
    basis, _ = np.linalg.qr(rng.normal(size=(60, 60)))
    spectrum = np.concatenate([[10.0, 9.0, 8.0], rng.uniform(-1, 1, size=57)])
    matrix = (basis * spectrum) @ basis.T
    with tf.Graph().as_default():
        held, op = _fed(60, np.float64)
        values, vectors = cg.top_eigenvalues(tf.linalg.LinearOperatorFullMatrix(
            held, is_self_adjoint=True), 3, num_iterations=50, reorthogonalize="local")
        with _CountingSession() as session:
            got, v = session.run([values, vectors], {held: matrix})
            assert session.runs == 1
    np.testing.assert_allclose(got, [10.0, 9.0, 8.0], rtol=1e-9)
    assert np.max(np.abs(matrix @ v - v * got)) <= 1e-6


def test_a_seed_fed_as_a_placeholder_is_the_int_seed():
    """A step counter as the seed (an integer scalar tensor): the same numbers as the int."""
    matrix = _symmetric(10, "indefinite")
    with tf.Graph().as_default():
        held, op = _fed(10, tf.float64)
        step = tf.compat.v1.placeholder(tf.int64, [])
        by_tensor = cg.trace_estimate(op, num_samples=5, seed=step)
        by_int = cg.trace_estimate(op, num_samples=5, seed=3)
        lanczos = [cg.top_eigenvalues(op, 2, num_iterations=4, seed=s)[0] for s in (step, 3)]
        with tf.compat.v1.Session() as session:
            a, b, (c, d) = session.run([by_tensor, by_int, lanczos], {held: matrix, step: 3})
            other = session.run(by_tensor, {held: matrix, step: 4})
    assert a == b and other != a
    np.testing.assert_array_equal(c, d)


def test_traces_and_diagonals_in_a_session():
    """Hutchinson within 4 of its standard errors of the trace, the diagonal estimate's sum
    the trace estimate (one seed, the same probes), Hutch++ exact when its sketch spans the
    space, and Hutchinson exact on a diagonal matrix."""
    matrix = _symmetric(10, "indefinite")
    with tf.Graph().as_default():
        held, op = _fed(10, tf.float64)
        fetches = {
            "hutchinson": cg.trace_estimate(op, num_samples=2000, seed=2, return_std=True),
            "diagonal": cg.diagonal_estimate(op, num_samples=2000, seed=2),
            "hutch++": cg.trace_estimate(op, num_samples=30, method="hutch++"),
            "of_diagonal": cg.trace_estimate(
                tf.linalg.LinearOperatorFullMatrix(tf.linalg.diag(tf.linalg.diag_part(held))),
                num_samples=2),
        }
        with tf.compat.v1.Session() as session:
            got = session.run(fetches, {held: matrix})
    estimate, error = got["hutchinson"]
    truth = np.trace(matrix)
    assert abs(estimate - truth) <= 4 * error and 0 < error < 0.2
    errors = np.sqrt((np.sum(matrix ** 2, axis=1) - np.diag(matrix) ** 2) / 2000)
    assert np.all(np.abs(got["diagonal"] - np.diag(matrix)) <= 4 * errors)
    np.testing.assert_allclose(np.sum(got["diagonal"]), estimate, rtol=1e-10)
    np.testing.assert_allclose(got["hutch++"], truth, rtol=1e-10)
    np.testing.assert_allclose(got["of_diagonal"], truth, rtol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_solve_in_a_session(dtype):
    """Three right-hand sides (their count known, their size only when fed), damped; the
    same graph fed another matrix."""
    with tf.Graph().as_default():
        held, op = _fed(12, dtype)
        rhs = tf.compat.v1.placeholder(dtype, [None, 3])
        x = cg.solve(op, rhs, damping=0.25, tol=1e-6 if dtype == np.float32 else 1e-11)
        assert x.shape.as_list() == [12, 3]
        with tf.compat.v1.Session() as session:
            for seed in (0, 1):
                matrix = _symmetric(12, "spd", dtype, seed)
                b = np.random.default_rng(seed).normal(size=(12, 3)).astype(dtype)
                want = np.linalg.solve(matrix.astype(np.float64) + 0.25 * np.eye(12), b)
                np.testing.assert_allclose(session.run(x, {held: matrix, rhs: b}), want,
                                           rtol=10 * TOLERANCE[dtype],
                                           atol=10 * TOLERANCE[dtype])


def test_a_breakdown_is_a_run_time_error_with_the_fix():
    """An indefinite matrix and its most negative eigenvector: the assertion fails when x is
    fetched; a damping past the smallest eigenvalue then solves in the same graph."""
    matrix = _symmetric(8, "indefinite")
    values, vectors = np.linalg.eigh(matrix)
    with tf.Graph().as_default():
        held, op = _fed(8, tf.float64)
        damping = float(-values[0]) + 1.0
        broken, damped = cg.solve(op, vectors[:, 0]), cg.solve(op, vectors[:, 0],
                                                               damping=damping)
        with tf.compat.v1.Session() as session:
            with pytest.raises(tf.errors.InvalidArgumentError) as caught:
                session.run(broken, {held: matrix})
            x = session.run(damped, {held: matrix})
    assert ("compat_grads.solve: conjugate gradients broke down: op + damping * I is not "
            "positive definite") in str(caught.value)
    assert "Pass a larger damping=" in str(caught.value)
    np.testing.assert_allclose(x, vectors[:, 0] / (values[0] + damping), rtol=1e-9)


def test_bad_input_is_raised_when_the_graph_is_built():
    with tf.Graph().as_default():
        unknown = tf.linalg.LinearOperatorFullMatrix(
            tf.compat.v1.placeholder(tf.float64, [None, 4]))
        with pytest.raises(ValueError, match=r"^compat_grads\.top_eigenvalues: op must have "
                           r"a static shape"):
            cg.top_eigenvalues(unknown)
        _, op = _fed(4, tf.float64)
        with pytest.raises(ValueError, match=r"^compat_grads\.solve: damping must be"):
            cg.solve(op, tf.ones([4], tf.float64), damping=-1.0)
        with pytest.raises(TypeError, match=r"^compat_grads\.trace_estimate: num_samples "
                           "must be a positive int"):
            cg.trace_estimate(op, num_samples=False)


def test_the_estimators_on_hessian_vector_products_over_a_placeholder():
    """An operator of `cg.hvp` products at a fed point against `cg.hessian`'s matrix."""
    w = np.random.default_rng(4).normal(size=(4, 6))

    def f(x):
        return tf.reduce_sum(tf.tanh(tf.linalg.matvec(tf.constant(w), x))) + 0.1 * (
            tf.reduce_sum(x ** 4))
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float64, [6])
        op = HessianOf(f, x)
        fetches = (cg.hessian(f, x), cg.top_eigenvalues(op, 2, which="LM"),
                   cg.trace_estimate(op, num_samples=18, method="hutch++"),
                   cg.solve(op, tf.ones([6], tf.float64), damping=3.0))
        with tf.compat.v1.Session() as session:
            hessian, (values, vectors), trace, solution = session.run(
                fetches, {x: np.random.default_rng(5).normal(size=6)})
    exact = np.linalg.eigvalsh(hessian)
    np.testing.assert_allclose(values, exact[np.argsort(-np.abs(exact))[:2]], rtol=1e-9)
    np.testing.assert_allclose(hessian @ vectors, vectors * values, atol=1e-9)
    np.testing.assert_allclose(trace, np.trace(hessian), rtol=1e-9)
    assert exact[0] + 3.0 > 0.1
    np.testing.assert_allclose(solution, np.linalg.solve(hessian + 3 * np.eye(6), np.ones(6)),
                               rtol=1e-8)
