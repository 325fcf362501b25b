"""The curvature estimators (top_eigenvalues, trace_estimate, diagonal_estimate, solve) on
small symmetric matrices against numpy, float32 and float64: eigh's eigenpairs, the exact
trace and diagonal, np.linalg.solve; one seed's numbers bit for bit in eager code, a
tf.function and a v1 Graph; Hutchinson unbiased with an honest standard error, Hutch++
ahead of it; the breakdown of CG; every bad input; and an operator whose products are
Hessian-vector products (never a matrix). The TF1 graph's side is
tests_tf1/test_curvature_estimators_tf1.py."""

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads.testing import modes
from compat_grads.testing._suite.operators import HessianOf

TOLERANCE = {np.float32: 1e-4, np.float64: 1e-9}
DTYPES = (np.float32, np.float64)


def _symmetric(n, kind, dtype=np.float64, seed=0):
    """A random symmetric n x n matrix: "psd" (B Bᵀ / n, some eigenvalues near 0), "spd"
    (B Bᵀ / n + I) or "indefinite" ((A + Aᵀ) / 2)."""
    rng = np.random.default_rng(seed)
    b = rng.normal(size=(n, n))
    matrix = {"psd": b @ b.T / n, "spd": b @ b.T / n + np.eye(n),
              "indefinite": (b + b.T) / 2}[kind]
    return matrix.astype(dtype)


def _full(matrix):
    return tf.linalg.LinearOperatorFullMatrix(matrix)


def _scaled_error(got, want):
    return np.max(np.abs(np.asarray(got, np.float64) - want)) / max(1.0, np.max(np.abs(want)))


def _in_mode(mode, build, *arrays):
    """`build(*tensors)` as numpy: eager, in a tf.function, or in a v1 Graph in TF2 with a
    Session and placeholders of static shape."""
    if mode == "v1_graph":
        with tf.Graph().as_default():
            held = [tf.compat.v1.placeholder(a.dtype, a.shape) for a in arrays]
            return modes.session_values(build(*held), dict(zip(held, arrays)))
    tensors = [tf.constant(a) for a in arrays]
    if mode == "function":
        return modes.to_numpy(tf.function(build)(*tensors))
    return modes.to_numpy(build(*tensors))


def _selected(matrix, k, which):
    """numpy's k eigenvalues `which` selects, in the documented order."""
    values = np.linalg.eigvalsh(matrix.astype(np.float64))
    order = {"LA": np.argsort(-values, kind="stable"), "SA": np.argsort(values, kind="stable"),
             "LM": np.argsort(-np.abs(values), kind="stable")}[which]
    return values[order[:k]]


def _assert_eigenpairs(matrix, values, vectors, want, tolerance):
    assert values.shape == want.shape and vectors.shape == (matrix.shape[0], want.size)
    assert _scaled_error(values, want) <= tolerance
    residual = matrix.astype(np.float64) @ vectors - vectors * values
    assert np.max(np.abs(residual)) <= 10 * tolerance * max(1.0, np.max(np.abs(want)))
    assert np.max(np.abs(vectors.T @ vectors - np.eye(want.size))) <= 10 * tolerance


# -- top_eigenvalues ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("kind", ("psd", "indefinite"))
@pytest.mark.parametrize("which", ("LA", "SA", "LM"))
def test_top_eigenvalues_are_eighs(which, kind, dtype):
    """n = 12 <= the default's 2k + 20 steps: exact up to rounding."""
    matrix = _symmetric(12, kind, dtype)
    values, vectors = cg.top_eigenvalues(_full(matrix), 3, which=which)
    assert values.dtype == vectors.dtype == dtype
    _assert_eigenpairs(matrix, values.numpy(), vectors.numpy(), _selected(matrix, 3, which),
                       TOLERANCE[dtype])


def test_more_steps_than_n_are_n_steps():
    matrix = _symmetric(10, "indefinite")
    once = cg.top_eigenvalues(_full(matrix), 2, num_iterations=10)
    more = cg.top_eigenvalues(_full(matrix), 2, num_iterations=500)
    np.testing.assert_array_equal(once[0], more[0])
    _assert_eigenpairs(matrix, more[0].numpy(), more[1].numpy(), _selected(matrix, 2, "LA"),
                       1e-9)


@pytest.mark.parametrize("which, top", [("LA", [10.0, 9.0, 8.0]), ("LM", [10.0, 9.0, -8.5])])
def test_well_separated_eigenvalues_converge_in_fewer_steps_than_n(which, top):
    """n = 30, the default 2k + 20 = 26 steps: the separated top three to 1e-6."""
    rng = np.random.default_rng(1)
    basis, _ = np.linalg.qr(rng.normal(size=(30, 30)))
    spectrum = np.concatenate([top, rng.uniform(-1, 1, size=27)])
    matrix = basis @ np.diag(spectrum) @ basis.T
    values, vectors = cg.top_eigenvalues(_full(matrix), 3, which=which)
    np.testing.assert_allclose(values, top, rtol=1e-6)
    residual = matrix @ vectors.numpy() - vectors.numpy() * values.numpy()
    assert np.max(np.abs(residual)) <= 1e-3


def test_a_krylov_space_that_closes_early_is_restarted():
    """Three distinct eigenvalues close the start vector's Krylov space after three steps:
    fresh vectors carry on, and n steps still give every eigenpair, vectors orthonormal."""
    spectrum = np.array([3.0, 3.0, 3.0, 1.0, 1.0, -2.0, -2.0, 0.0])
    values, vectors = cg.top_eigenvalues(_full(np.diag(spectrum)), 8, num_iterations=8)
    _assert_eigenpairs(np.diag(spectrum), values.numpy(), vectors.numpy(),
                       np.sort(spectrum)[::-1], 1e-12)
    values, vectors = cg.top_eigenvalues(_full(np.zeros([4, 4])), 2)
    np.testing.assert_array_equal(values, [0.0, 0.0])
    np.testing.assert_allclose(vectors.numpy().T @ vectors.numpy(), np.eye(2), atol=1e-12)


# -- one seed, one number -------------------------------------------------------------------

SEEDED = {
    "top_eigenvalues": lambda m, seed: cg.top_eigenvalues(
        _full(m), 3, which="LM", num_iterations=6, seed=seed),
    "hutchinson": lambda m, seed: cg.trace_estimate(_full(m), num_samples=7, seed=seed,
                                                    return_std=True),
    "hutch++": lambda m, seed: cg.trace_estimate(_full(m), num_samples=9, method="hutch++",
                                                 seed=seed, return_std=True),
    "diagonal_estimate": lambda m, seed: cg.diagonal_estimate(_full(m), num_samples=7,
                                                              seed=seed),
    "solve": lambda m, seed: cg.solve(_full(m), tf.ones([10, 2], m.dtype), damping=0.1),
}


@pytest.mark.parametrize("name", SEEDED)
def test_one_seed_gives_the_same_numbers_in_every_mode(name):
    """Eager code, a tf.function and a v1 Graph's Session: bit for bit, with the seed an int
    or an integer tensor; another seed, other numbers (CG draws none)."""
    matrix = _symmetric(10, "spd", np.float32)
    build = SEEDED[name]

    def seeded(m):
        return build(m, 5)

    def seeded_by_tensor(m):
        return build(m, tf.constant(5, tf.int64))

    def reseeded(m):
        return build(m, 6)
    eager = _in_mode("eager", seeded, matrix)
    for got in (_in_mode("function", seeded, matrix), _in_mode("v1_graph", seeded, matrix),
                _in_mode("eager", seeded_by_tensor, matrix)):
        for a, b in zip(tf.nest.flatten(got), tf.nest.flatten(eager)):
            np.testing.assert_array_equal(a, b)
    other = _in_mode("eager", reseeded, matrix)
    same = all(np.array_equal(a, b) for a, b in zip(tf.nest.flatten(other),
                                                      tf.nest.flatten(eager)))
    assert same == (name == "solve")


# -- traces and diagonals -------------------------------------------------------------------


def _estimates(matrix, seeds, **options):
    """(estimates, reported standard errors) of trace_estimate for each seed: one
    tf.function, the seed an integer tensor (no retrace per seed)."""
    estimate = tf.function(lambda seed: cg.trace_estimate(
        _full(matrix), seed=seed, return_std=True, **options))
    pairs = [estimate(tf.constant(seed, tf.int64)) for seed in seeds]
    return np.array([float(e) for e, _ in pairs]), np.array([float(s) for _, s in pairs])


def test_hutchinson_is_unbiased_and_its_standard_error_honest():
    matrix = _symmetric(20, "indefinite")
    truth = np.trace(matrix)
    estimates, reported = _estimates(matrix, range(200), num_samples=30)
    spread = np.std(estimates, ddof=1)
    assert abs(np.mean(estimates) - truth) <= 4 * spread / np.sqrt(len(estimates))
    assert 0.8 <= np.mean(reported) / spread <= 1.25
    # many probes: close, within a few of the reported standard errors
    estimate, error = cg.trace_estimate(_full(matrix), num_samples=4000, return_std=True)
    assert abs(float(estimate) - truth) <= 4 * float(error) and float(error) < 0.1 * spread


def test_hutch_plus_plus_beats_hutchinson_on_a_low_rank_plus_small_matrix():
    """The same 12 products each: Hutch++ takes the three large eigenvalues exactly. Its
    standard error is the residual's given the sketch; as tr(QᵀAQ) + tr(PAP) = tr(A) for
    every sketch, it is the estimate's too."""
    rng = np.random.default_rng(2)
    u = rng.normal(size=(30, 3))
    matrix = u @ np.diag([30.0, 20.0, 10.0]) @ u.T + 0.01 * _symmetric(30, "indefinite")
    truth = np.trace(matrix)
    plain, _ = _estimates(matrix, range(100), num_samples=12)
    plus, reported = _estimates(matrix, range(100), num_samples=12, method="hutch++")
    assert np.mean((plus - truth) ** 2) < 1e-3 * np.mean((plain - truth) ** 2)
    assert abs(np.mean(plus) - truth) <= 4 * np.std(plus, ddof=1) / np.sqrt(len(plus))
    assert 0.8 <= np.sqrt(np.mean(reported ** 2)) / np.std(plus, ddof=1) <= 1.25


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_exact_cases(dtype):
    """Hutchinson on a diagonal matrix (zᵢ² = 1) and Hutch++ whose sketch spans the space
    (num_samples // 3 >= n) are exact."""
    matrix = _symmetric(6, "indefinite", dtype)
    diagonal = np.diag(np.diag(matrix))
    estimate, error = cg.trace_estimate(_full(diagonal), num_samples=3, return_std=True)
    assert estimate.dtype == dtype and abs(float(estimate) - np.trace(matrix)) <= 10 * (
        TOLERANCE[dtype]) and float(error) <= TOLERANCE[dtype]
    np.testing.assert_allclose(cg.diagonal_estimate(_full(diagonal), num_samples=1),
                               np.diag(matrix), rtol=TOLERANCE[dtype])
    estimate = cg.trace_estimate(_full(matrix), num_samples=18, method="hutch++")
    assert _scaled_error(estimate, np.trace(matrix)) <= 10 * TOLERANCE[dtype]


def test_the_diagonal_estimate_is_unbiased_and_sums_to_the_trace_estimate():
    matrix = _symmetric(15, "indefinite")
    estimate = cg.diagonal_estimate(_full(matrix), num_samples=3000, seed=4).numpy()
    assert estimate.shape == (15,)
    # element i's probe samples have variance sum_{j != i} A_ij²
    errors = np.sqrt((np.sum(matrix ** 2, axis=1) - np.diag(matrix) ** 2) / 3000)
    assert np.all(np.abs(estimate - np.diag(matrix)) <= 4 * errors)
    trace = cg.trace_estimate(_full(matrix), num_samples=3000, seed=4)
    np.testing.assert_allclose(np.sum(estimate), trace, rtol=1e-10)


# -- solve ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("columns", (None, 3))
@pytest.mark.parametrize("kind, damping", [("spd", 0.0), ("psd", 0.5), ("indefinite", 5.0)])
def test_solve_is_numpys_solve(kind, damping, columns, dtype):
    """A positive definite matrix, a semi-definite one made definite by damping, an
    indefinite one shifted past its smallest eigenvalue; one right-hand side or three."""
    matrix = _symmetric(15, kind, dtype)
    assert np.linalg.eigvalsh(matrix.astype(np.float64))[0] + damping > 0.1
    shape = (15,) if columns is None else (15, columns)
    rhs = np.random.default_rng(3).normal(size=shape).astype(dtype)
    x = cg.solve(_full(matrix), rhs, damping=damping, tol=1e-10 if dtype == np.float64 else 1e-6)
    assert x.shape == shape and x.dtype == dtype
    damped = matrix.astype(np.float64) + damping * np.eye(15)
    want = np.linalg.solve(damped, rhs.astype(np.float64))
    assert _scaled_error(x, want) <= 10 * TOLERANCE[dtype]


def test_solve_stops_at_its_tolerance_or_its_steps():
    matrix, rhs = _symmetric(20, "spd"), np.ones(20)
    for tol in (1e-2, 1e-8):
        x = cg.solve(_full(matrix), rhs, tol=tol).numpy()
        residual = np.linalg.norm(rhs - matrix @ x) / np.linalg.norm(rhs)
        assert tol / 1e4 < residual <= 1.01 * tol
    # one step: the line search along rhs
    x = cg.solve(_full(matrix), rhs, max_iterations=1)
    np.testing.assert_allclose(x, rhs * (rhs @ rhs) / (rhs @ matrix @ rhs), rtol=1e-12)
    np.testing.assert_array_equal(cg.solve(_full(matrix), np.zeros([20, 2])), 0.0)


def _breaking():
    """An indefinite matrix and its most negative eigenvector: pᵀAp < 0 at the first step."""
    matrix = _symmetric(8, "indefinite")
    return matrix, np.linalg.eigh(matrix)[1][:, 0]


BREAKDOWN = ("compat_grads.solve: conjugate gradients broke down: op + damping * I is not "
             "positive definite")


def test_a_breakdown_is_an_error_in_eager_code():
    matrix, rhs = _breaking()
    with pytest.raises(ValueError) as caught:
        cg.solve(_full(matrix), rhs)
    assert str(caught.value).startswith(BREAKDOWN) and "larger damping=" in str(caught.value)


@pytest.mark.parametrize("mode", ("function", "v1_graph"))
def test_a_breakdown_is_a_run_time_error_in_a_graph(mode):
    matrix, rhs = _breaking()
    with pytest.raises(tf.errors.InvalidArgumentError, match="larger damping=") as caught:
        _in_mode(mode, lambda m, b: cg.solve(_full(m), b), matrix, rhs)
    assert BREAKDOWN in str(caught.value)


# -- bad input ------------------------------------------------------------------------------

M = np.eye(4)


def _unknown_size():
    with tf.Graph().as_default():
        return _full(tf.compat.v1.placeholder(tf.float64, [None, None]))


def _not_self_adjoint():
    return tf.linalg.LinearOperatorFullMatrix(M, is_self_adjoint=False)


BAD = [
    ("matrix", lambda: cg.trace_estimate(M, num_samples=2), TypeError, "trace_estimate",
     ("op must be a tf.linalg.LinearOperator", "LinearOperatorFullMatrix(m)")),
    ("not_square", lambda: cg.top_eigenvalues(_full(np.ones([3, 4]))), ValueError,
     "top_eigenvalues", ("op must be square",)),
    ("batch", lambda: cg.diagonal_estimate(_full(np.ones([2, 3, 3])), num_samples=1),
     ValueError, "diagonal_estimate", ("op must have a static shape [n, n]",)),
    ("unknown_size", lambda: cg.solve(_unknown_size(), np.ones(4)), ValueError, "solve",
     ("op must have a static shape [n, n]",)),
    ("complex", lambda: cg.top_eigenvalues(_full(M.astype(np.complex64))), TypeError,
     "top_eigenvalues", ("op must be float32 or float64",)),
    ("float16", lambda: cg.solve(_full(M.astype(np.float16)), np.ones(4)), TypeError, "solve",
     ("op must be float32 or float64",)),
    ("not_self_adjoint", lambda: cg.top_eigenvalues(_not_self_adjoint()), ValueError,
     "top_eigenvalues", ("op must be self-adjoint",)),
    ("k_zero", lambda: cg.top_eigenvalues(_full(M), 0), ValueError, "top_eigenvalues",
     ("k must be a positive int",)),
    ("k_float", lambda: cg.top_eigenvalues(_full(M), 1.0), TypeError, "top_eigenvalues",
     ("k must be a positive int",)),
    ("k_bool", lambda: cg.top_eigenvalues(_full(M), True), TypeError, "top_eigenvalues",
     ("k must be a positive int",)),
    ("k_over_n", lambda: cg.top_eigenvalues(_full(M), 5), ValueError, "top_eigenvalues",
     ("k must be at most 4",)),
    ("which", lambda: cg.top_eigenvalues(_full(M), which="BE"), ValueError, "top_eigenvalues",
     ("which must be one of 'LA', 'SA', 'LM'",)),
    ("which_type", lambda: cg.top_eigenvalues(_full(M), which=None), TypeError,
     "top_eigenvalues", ("which must be one of",)),
    ("iterations_under_k", lambda: cg.top_eigenvalues(_full(M), 3, num_iterations=2),
     ValueError, "top_eigenvalues", ("num_iterations must be at least 3",)),
    ("iterations_float", lambda: cg.top_eigenvalues(_full(M), num_iterations=5.0), TypeError,
     "top_eigenvalues", ("num_iterations must be a positive int",)),
    ("random_key_float", lambda: cg.top_eigenvalues(_full(M), seed=1.5), TypeError,
     "top_eigenvalues", ("seed must be an int",)),
    ("random_key_float_tensor", lambda: cg.diagonal_estimate(
        _full(M), num_samples=1, seed=tf.constant(1.0)), TypeError,
     "diagonal_estimate", ("seed must be an int or an integer scalar tensor",)),
    ("samples_zero", lambda: cg.trace_estimate(_full(M), num_samples=0), ValueError,
     "trace_estimate", ("num_samples must be a positive int",)),
    ("samples_bool", lambda: cg.diagonal_estimate(_full(M), num_samples=True), TypeError,
     "diagonal_estimate", ("num_samples must be a positive int",)),
    ("samples_float", lambda: cg.trace_estimate(_full(M), num_samples=10.0), TypeError,
     "trace_estimate", ("num_samples must be a positive int",)),
    ("samples_hutch++", lambda: cg.trace_estimate(_full(M), num_samples=2, method="hutch++"),
     ValueError, "trace_estimate", ("num_samples must be at least 3",)),
    ("samples_std", lambda: cg.trace_estimate(_full(M), num_samples=1, return_std=True),
     ValueError, "trace_estimate", ("num_samples must be at least 2",)),
    ("method", lambda: cg.trace_estimate(_full(M), num_samples=2, method="exact"),
     ValueError, "trace_estimate", ("method must be one of 'hutchinson', 'hutch++'",)),
    ("return_std", lambda: cg.trace_estimate(_full(M), num_samples=2, return_std="yes"),
     TypeError, "trace_estimate", ("return_std must be a bool",)),
    ("damping", lambda: cg.solve(_full(M), np.ones(4), damping=-0.1), ValueError, "solve",
     ("damping must be a number >= 0",)),
    ("damping_type", lambda: cg.solve(_full(M), np.ones(4), damping="0"), TypeError, "solve",
     ("damping must be a number >= 0",)),
    ("tol", lambda: cg.solve(_full(M), np.ones(4), tol=0.0), ValueError, "solve",
     ("tol must be a positive number",)),
    ("max_iterations", lambda: cg.solve(_full(M), np.ones(4), max_iterations=0), ValueError,
     "solve", ("max_iterations must be a positive int",)),
    ("rhs_size", lambda: cg.solve(_full(M), np.ones(5)), ValueError, "solve",
     ("rhs must have shape [4] or [4, m]",)),
    ("rhs_rank", lambda: cg.solve(_full(M), np.ones([4, 1, 1])), ValueError, "solve",
     ("rhs must have shape [4] or [4, m]",)),
    ("rhs_dtype", lambda: cg.solve(_full(M), tf.ones(4, tf.float32)), TypeError, "solve",
     ("rhs must have the operator's dtype float64",)),
]


@pytest.mark.parametrize("call, error, function, words", [case[1:] for case in BAD],
                         ids=[case[0] for case in BAD])
def test_bad_input_is_a_clear_error(call, error, function, words):
    with pytest.raises(error) as caught:
        call()
    text = str(caught.value)
    assert text.startswith(f"compat_grads.{function}: "), text
    assert all(word in text for word in words), text


# -- an operator that is not a matrix -------------------------------------------------------


def _curved(x):
    w = tf.constant(np.random.default_rng(4).normal(size=(4, 6)))
    return tf.reduce_sum(tf.tanh(tf.linalg.matvec(w, x))) + 0.1 * tf.reduce_sum(x ** 4)


@pytest.mark.parametrize("mode", ("eager", "function"))
def test_the_estimators_on_hessian_vector_products(mode):
    """An operator of `cg.hvp` products against `cg.hessian`'s matrix: the eigenpairs,
    Hutch++'s exact trace, CG's solve, and the same Hutchinson estimates as the matrix's."""
    x0 = np.random.default_rng(5).normal(size=6)

    def estimates(x):
        op, dense = HessianOf(_curved, x), _full(cg.hessian(_curved, x))
        return (cg.hessian(_curved, x), cg.top_eigenvalues(op, 2),
                cg.trace_estimate(op, num_samples=18, method="hutch++"),
                cg.solve(op, tf.ones([6], tf.float64), damping=3.0),
                cg.diagonal_estimate(op, num_samples=4, seed=1),
                cg.diagonal_estimate(dense, num_samples=4, seed=1))
    hessian, (values, vectors), trace, x, diagonal, dense_diagonal = _in_mode(
        mode, estimates, x0)
    assert np.linalg.eigvalsh(hessian)[0] + 3.0 > 0.1
    _assert_eigenpairs(hessian, values, vectors, _selected(hessian, 2, "LA"), 1e-9)
    np.testing.assert_allclose(trace, np.trace(hessian), rtol=1e-9)
    np.testing.assert_allclose(x, np.linalg.solve(hessian + 3.0 * np.eye(6), np.ones(6)),
                               rtol=1e-8)
    np.testing.assert_allclose(diagonal, dense_diagonal, rtol=1e-10, atol=1e-12)
