"""top_eigenvalues with local reorthogonalization (three vectors of n kept, the steps taken
twice): eigh's eigenpairs on float64 and float32 matrices, each eigenvalue once although
many more steps than the spectrum needs make ghost copies of the converged ones, the same
numbers bit for bit in every mode, "auto" choosing it by the basis' size, and its memory:
the basis of "full" never built."""

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads._src.curvature import lanczos
from compat_grads.testing import modes


def _spectrum_matrix(spectrum, seed=0):
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(spectrum.size, spectrum.size)))
    return (basis * spectrum) @ basis.T


def _full(matrix):
    return tf.linalg.LinearOperatorFullMatrix(matrix, is_self_adjoint=True)


def _want(spectrum, k, which):
    order = {"LA": np.argsort(-spectrum, kind="stable"),
             "SA": np.argsort(spectrum, kind="stable"),
             "LM": np.argsort(-np.abs(spectrum), kind="stable")}[which]
    return spectrum[order[:k]]


SPECTRUM = np.concatenate([[10.0, 9.0, 8.0, -8.5, -6.0, -5.0],
                           np.random.default_rng(3).uniform(-1, 1, size=194)])


@pytest.mark.parametrize("which", ("LA", "SA", "LM"))
@pytest.mark.parametrize("steps", (40, 150))
def test_local_gives_eighs_eigenpairs_once_each(which, steps):
    """n = 200: 40 steps converge the separated values; 150 steps make ghost copies of
    them (plain Lanczos loses orthogonality once a value converges), which come back once."""
    matrix = _spectrum_matrix(SPECTRUM)
    values, vectors = cg.top_eigenvalues(_full(matrix), 3, which=which,
                                         num_iterations=steps, reorthogonalize="local")
    want = _want(SPECTRUM, 3, which)
    np.testing.assert_allclose(values, want, rtol=1e-10)
    v = vectors.numpy()
    assert np.max(np.abs(matrix @ v - v * values.numpy())) <= 1e-6
    np.testing.assert_allclose(v.T @ v, np.eye(3), atol=1e-6)


def test_ghost_copies_are_there_and_given_once():
    """The tridiagonal of 150 local steps has several copies of 10 (so the filter is what
    keeps them out of the answer); full reorthogonalization has one."""
    op = _full(_spectrum_matrix(SPECTRUM))
    alphas, betas = lanczos.local_lanczos(op, 200, 150, 0)
    values = np.linalg.eigvalsh(lanczos._tridiagonal(alphas, betas, 150).numpy())
    assert np.sum(np.abs(values - 10.0) < 1e-8) >= 2
    top, _ = cg.top_eigenvalues(op, 5, num_iterations=150, reorthogonalize="local")
    np.testing.assert_allclose(top, [10.0, 9.0, 8.0, SPECTRUM[6:].max(),
                                     np.sort(SPECTRUM)[-5]], rtol=1e-9)


def test_float32_top_eigenvalue():
    matrix = _spectrum_matrix(SPECTRUM).astype(np.float32)
    values, vectors = cg.top_eigenvalues(_full(matrix), 2, reorthogonalize="local")
    np.testing.assert_allclose(values, [10.0, 9.0], rtol=1e-5)
    assert values.dtype == vectors.dtype == np.float32


def _in_mode(mode, build, matrix):
    if mode == "v1_graph":
        with tf.Graph().as_default():
            held = tf.compat.v1.placeholder(matrix.dtype, matrix.shape)
            return modes.session_values(build(held), {held: matrix})
    if mode == "function":
        return modes.to_numpy(tf.function(build)(tf.constant(matrix)))
    return modes.to_numpy(build(tf.constant(matrix)))


def test_one_seed_gives_the_same_numbers_in_every_mode():
    matrix = _spectrum_matrix(SPECTRUM[:40]).astype(np.float32)

    def build(m):
        return cg.top_eigenvalues(_full(m), 2, num_iterations=30, seed=4,
                                  reorthogonalize="local")
    eager = _in_mode("eager", build, matrix)
    for mode in ("function", "v1_graph"):
        for a, b in zip(_in_mode(mode, build, matrix), eager):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n, local", [(1000, False), (1001, True)])
def test_auto_keeps_the_basis_while_it_fits_its_bytes(n, local, monkeypatch):
    """22 float32 steps of 1,000 take 88,000 bytes: the threshold lowered to that (from 32
    MiB, which takes n over 380,000), 1,001 is "local": two while_loops, the second summing
    the vectors."""
    monkeypatch.setattr(lanczos, "FULL_BASIS_BYTES", 22 * 4 * 1000)
    spectrum = tf.concat([tf.range(1.0, n), [10.0 * n]], 0)  # the top one well separated
    diagonal = tf.linalg.LinearOperatorDiag(spectrum, is_self_adjoint=True)
    values, _ = cg.top_eigenvalues(diagonal, 1)
    graph = tf.function(lambda: cg.top_eigenvalues(diagonal, 1)).get_concrete_function().graph
    loops = [op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")]
    assert len(loops) == (2 if local else 1)
    assert values.numpy()[0] == pytest.approx(10 * n, rel=1e-5)


def test_close_float32_eigenvalues_are_not_taken_for_copies():
    """10.005 and 10.0 in float32 (60 steps): two eigenvalues, not one eigenvalue's ghost
    copies (the copies agree to about 10 sqrt(m) eps |T|, 9e-5 here)."""
    spectrum = np.concatenate([[10.005, 10.0, 9.0],
                               np.random.default_rng(4).uniform(0, 1, size=297)])
    matrix = _spectrum_matrix(spectrum).astype(np.float32)
    values, _ = cg.top_eigenvalues(_full(matrix), 3, num_iterations=60,
                                   reorthogonalize="local")
    np.testing.assert_allclose(values, [10.005, 10.0, 9.0], rtol=2e-5)


def test_auto_keeps_the_basis_for_several_pairs_and_under_xla(monkeypatch):
    """Past the threshold "auto" goes local for one pair only (its extreme value needs no
    telling apart from copies), and never under XLA, where "local" is an error."""
    monkeypatch.setattr(lanczos, "FULL_BASIS_BYTES", 100)
    diagonal = tf.linalg.LinearOperatorDiag(tf.concat([tf.range(1.0, 300.0), [3000.0]], 0),
                                            is_self_adjoint=True)

    def loops(fn):
        graph = tf.function(fn).get_concrete_function().graph
        return sum(op.type in ("While", "StatelessWhile") for op in graph.get_operations())
    assert loops(lambda: cg.top_eigenvalues(diagonal, 1)) == 2
    assert loops(lambda: cg.top_eigenvalues(diagonal, 2)) == 1
    xla = tf.function(lambda: cg.top_eigenvalues(diagonal, 1), jit_compile=True)
    assert xla()[0].numpy()[0] == pytest.approx(3000.0, rel=1e-5)
    with pytest.raises(ValueError, match="top_eigenvalues: reorthogonalize='local' cannot "
                                         "run under XLA"):
        tf.function(lambda: cg.top_eigenvalues(diagonal, 1, reorthogonalize="local"),
                    jit_compile=True)()


def test_an_unknown_reorthogonalize_is_a_clear_error():
    with pytest.raises(ValueError, match="top_eigenvalues.*reorthogonalize.*'auto'"):
        cg.top_eigenvalues(_full(np.eye(3)), 1, reorthogonalize="partial")
