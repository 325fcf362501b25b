"""Extreme eigenpairs of a self-adjoint operator by Lanczos with full reorthogonalization.

m steps of Lanczos build an orthonormal basis Q (`[m, n]`) of the Krylov space of a random
start vector and the tridiagonal T = Q A Qᵀ; T's eigenpairs (θ, s) give the Ritz pairs
(θ, Qᵀs), whose extreme values converge to A's extreme eigenvalues first. Every new vector is
orthogonalized against all of Q, twice (twice is enough: Kahan, Parlett), so no ghost copies
of converged eigenvalues appear; a vector that vanishes (an invariant subspace: A has fewer
distinct eigenvalues than m, or the start vector missed some) is replaced by a fresh random
vector orthogonal to Q, so that m = n steps span the whole space and give A's eigenpairs
exactly, up to rounding. The m steps are one `tf.while_loop`: one `Session.run` in a TF1
graph.

That basis takes m vectors of n. Where it would be large and one eigenpair is asked for
("auto": more than `FULL_BASIS_BYTES`, k = 1, not under XLA), "local" reorthogonalization
keeps three: each new vector is orthogonalized against the two before it only, T alone is
kept, and a second pass of the same steps (the same seed: the same vectors, up to rounding:
the alphas of the two passes agreed to 2e-15 in float64 on CPU) sums the Ritz vectors.
Without the full basis, converged eigenvalues come back as ghost copies in T, and a few
values of T are spurious; they are told apart as Cullum and Willoughby do: a group of equal
values is one eigenvalue, and a single value that T with its first row and column removed
also has is spurious. Twice the products, O(n) memory.
"""

from __future__ import annotations

import math

import numpy as np

from compat_grads._src.core.errors import message
from compat_grads._src.core.mode import as_graph, compiles_with_xla
from compat_grads._src.core.tf import tf
from compat_grads._src.curvature import checks, probes

FUNCTION = "top_eigenvalues"
WHICH = ("LA", "SA", "LM")
"""As scipy's `eigsh`: largest algebraic, smallest algebraic, largest magnitude."""
EXTRA_ITERATIONS = 20
"""The default number of steps is 2k + EXTRA_ITERATIONS (at most n)."""
SEQUENTIAL = 1
"""`parallel_iterations` of the loops whose steps take a product each: a loop runs up to ten
iterations at once by default, and the part of a product that does not depend on the step's
vector (a model's forward pass) then runs ahead and is held ten times over (measured on the
670k-weight MLP's Hessian: 10 products in a loop peaked at 20.7 MiB, 6.0 MiB one at a time,
one product alone 5.1 MiB)."""
REORTHOGONALIZE = ("auto", "full", "local")
FULL_BASIS_BYTES = 32 * 2 ** 20
"""reorthogonalize="auto" keeps the full basis while it takes at most this many bytes."""


def default_iterations(n: int, k: int) -> int:
    """Enough steps for the k extreme Ritz values of a small or well-separated spectrum to
    converge (their error falls geometrically with the steps); all n for n <= 2k + 20, which
    is exact."""
    return min(n, 2 * k + EXTRA_ITERATIONS)


def top_eigenvalues(op, k, which, num_iterations, seed, reorthogonalize="auto"):
    """`(values [k], vectors [n, k])`, the arguments checked first. In eager code the loop
    is traced into a one-off `tf.function` (`as_graph`): one program instead of m steps of
    op-by-op dispatch, and the very ops a graph runs, so one seed gives the same numbers bit
    for bit in every mode."""
    n = checks.square_operator(FUNCTION, op)
    checks.self_adjoint(FUNCTION, op)
    k = checks.at_most(FUNCTION, "k", checks.count(FUNCTION, "k", k, "how many eigenpairs"),
                       n, "the operator's size n")
    which = checks.choice(FUNCTION, "which", which, WHICH)
    steps = _steps(num_iterations, n, k)
    seed = checks.seed(FUNCTION, seed)
    reorthogonalize = checks.choice(FUNCTION, "reorthogonalize", reorthogonalize,
                                    REORTHOGONALIZE)

    def pairs():
        full = _keeps_basis(reorthogonalize, (steps, n, k), op.dtype)
        return (ritz_pairs if full else local_ritz_pairs)(op, n, k, which, steps, seed)
    return as_graph(pairs)


def _keeps_basis(reorthogonalize: str, sizes, dtype) -> bool:
    """Whether the steps keep the full basis: "full"; "auto" unless the basis would take
    more than `FULL_BASIS_BYTES` for one eigenpair (whose value, the extreme one of T, needs
    no telling apart from ghost copies) outside XLA. "local" under XLA is an error: its
    second pass must repeat the first's vectors, which two loops XLA fuses on its own do
    not closely enough (measured: wrong pairs for 8 of 10 seeds, k = 3)."""
    steps, n, k = sizes
    if reorthogonalize == "local" and compiles_with_xla():
        raise ValueError(message(
            FUNCTION, "reorthogonalize='local' cannot run under XLA (jit_compile=True): its "
            "second pass recomputes the first's vectors, and XLA compiles the two loops "
            "apart, to different roundings", "Pass reorthogonalize='full' (or 'auto') "
            "there, or call it outside the XLA-compiled function."))
    if reorthogonalize != "auto":
        return reorthogonalize == "full"
    return (k > 1 or compiles_with_xla()
            or steps * n * tf.as_dtype(dtype).size <= FULL_BASIS_BYTES)


def _steps(num_iterations, n, k) -> int:
    """The Lanczos steps: `num_iterations` (at least k; more than n is n, already exact), or
    the default."""
    if num_iterations is None:
        return default_iterations(n, k)
    steps = checks.count(FUNCTION, "num_iterations", num_iterations, "the Lanczos steps")
    checks.at_least(FUNCTION, "num_iterations", steps, k, "k Ritz pairs need k steps")
    return min(steps, n)


def ritz_pairs(op, n, k, which, steps, seed):
    """The k Ritz pairs `which` selects from `steps` Lanczos steps."""
    basis, alphas, betas = lanczos(op, n, steps, seed)
    values, vectors = tf.linalg.eigh(_tridiagonal(alphas, betas, steps))
    order = _order(values, which)[:k]
    ritz = tf.linalg.matmul(basis, tf.gather(vectors, order, axis=1), transpose_a=True)
    return tf.gather(values, order), ritz


def _order(values, which):
    """Indices of the ascending `values`, most extreme first: descending for "LA",
    ascending for "SA", by descending magnitude for "LM" (a tie: the lower value first)."""
    if which == "SA":
        return tf.range(tf.size(values))
    if which == "LA":
        return tf.range(tf.size(values) - 1, -1, -1)
    return tf.argsort(-tf.abs(values), stable=True)


def _tridiagonal(alphas, betas, m):
    """T `[m, m]`: the m alphas on the diagonal, the first m - 1 betas beside it."""
    beside = betas[:-1]
    return (tf.linalg.diag(alphas) + tf.linalg.diag(beside, k=1, num_rows=m, num_cols=m)
            + tf.linalg.diag(beside, k=-1, num_rows=m, num_cols=m))


def lanczos(op, n, steps, seed):
    """(Q `[steps, n]`, alphas `[steps]`, betas `[steps]`) of `steps` Lanczos steps from a
    stateless normal start vector, in one `tf.while_loop`. betas[j] couples step j to
    j + 1 (0 where a fresh vector restarted the space; the last one is unused)."""
    dtype = op.dtype

    def step(j, q, basis, alphas, betas, scale):
        basis = tf.tensor_scatter_nd_update(basis, [[j]], q[None])
        product = op.matvec(q)
        alpha = tf.tensordot(q, product, 1)
        q, _, tridiagonal = _advanced(_orthogonalized(product, basis), (j, alpha, n), (
            alphas, betas, scale), lambda: _fresh(basis, n, seed, j + 1, dtype))
        return (j + 1, q, basis, *tridiagonal)

    start = _unit(probes.normal([n], seed, 0, dtype))
    zeros = tf.zeros([steps], dtype)
    state = (tf.constant(0), start, tf.zeros([steps, n], dtype), zeros, zeros,
             tf.zeros([], dtype))
    _, _, basis, alphas, betas, _ = tf.while_loop(lambda j, *_: j < steps, step, state,
                                                  maximum_iterations=steps,
                                                  parallel_iterations=SEQUENTIAL)
    return basis, alphas, betas


def _advanced(w, step, tridiagonal, fresh):
    """(the next vector, beta, (alphas, betas, scale)) after step j, whose product's
    coefficient along its vector is `alpha` and whose orthogonalized remainder is `w`: w / |w|
    and beta = |w|, or `fresh()` and beta = 0 where w vanished, below `sqrt(n) eps` times a
    running estimate of |A| (`scale`): the Krylov space closed, what is left is rounding."""
    (j, alpha, n), (alphas, betas, scale) = step, tridiagonal
    tiny = math.sqrt(n) * float(np.finfo(w.dtype.as_numpy_dtype).eps)
    beta = tf.norm(w)
    scale = tf.maximum(scale, tf.abs(alpha) + beta)
    vanished = beta <= tiny * scale
    after = tf.cond(vanished, fresh, lambda: w / beta)
    beta = tf.where(vanished, tf.zeros_like(beta), beta)
    alphas = tf.tensor_scatter_nd_update(alphas, [[j]], alpha[None])
    betas = tf.tensor_scatter_nd_update(betas, [[j]], beta[None])
    return after, beta, (alphas, betas, scale)


def _orthogonalized(w, basis):
    """w minus its components along the rows of `basis`, removed twice: one pass leaves
    components of the order of rounding times |w| / |result|, which the second removes."""
    for _ in range(2):
        w = w - tf.linalg.matvec(basis, tf.linalg.matvec(basis, w), transpose_a=True)
    return w


def _fresh(basis, n, seed, salt, dtype):
    """A random unit vector orthogonal to the rows of `basis`: the next basis vector where
    the Krylov space closed."""
    return _unit(_orthogonalized(probes.normal([n], seed, salt, dtype), basis))


def _unit(v):
    """v / |v| (v itself when it is zero: only after the last of n steps, and unused)."""
    norm = tf.norm(v)
    return v / tf.where(norm > 0, norm, tf.ones_like(norm))


def local_ritz_pairs(op, n, k, which, steps, seed):
    """The k Ritz pairs `which` selects from `steps` Lanczos steps with local
    reorthogonalization: T from a first pass, the Ritz vectors from a second."""
    alphas, betas = local_lanczos(op, n, steps, seed)
    tridiagonal = _tridiagonal(alphas, betas, steps)
    values, vectors = tf.linalg.eigh(tridiagonal)
    order = _order_genuine(values, tridiagonal[1:, 1:], which)[:k]
    coefficients = tf.reshape(tf.gather(vectors, order, axis=1), [steps, k])
    ritz = local_lanczos(op, n, steps, seed, coefficients)
    return tf.gather(values, order), ritz / tf.norm(ritz, axis=0, keepdims=True)


def _order_genuine(values, rest, which):
    """`_order(values, which)` with each group of equal values (ghost copies of a converged
    eigenvalue) once and the spurious values (single values that `rest`, T without its
    first row and column, has too) after every genuine one. Equal means within
    `10 sqrt(m) eps |T|` (float32, 60 steps, |T| = 10: 9e-5)."""
    m = tf.size(values)
    eps = float(np.finfo(values.dtype.as_numpy_dtype).eps)
    tol = 10.0 * eps * tf.sqrt(tf.cast(m, values.dtype)) * tf.reduce_max(tf.abs(values))
    gaps = values[1:] - values[:-1]
    copy_of_lower = tf.concat([[False], gaps <= tol], 0)
    in_group = copy_of_lower | tf.concat([gaps <= tol, [False]], 0)
    rest_values = tf.linalg.eigvalsh(rest)
    in_rest = tf.reduce_any(tf.abs(values[:, None] - rest_values[None, :]) <= tol, axis=1)
    genuine = ~copy_of_lower & (in_group | ~in_rest)
    order = _order(values, which)
    return tf.concat([tf.boolean_mask(order, tf.gather(genuine, order)),
                      tf.boolean_mask(order, ~tf.gather(genuine, order))], 0)


def local_lanczos(op, n, steps, seed, coefficients=None):
    """(alphas `[steps]`, betas `[steps]`) of `steps` Lanczos steps that keep the last two
    vectors only; with `coefficients` (`[steps, k]`), the same steps again returning
    `sum_j q_j coefficients[j]` (`[n, k]`) instead."""
    dtype = op.dtype
    sums = coefficients is not None

    def step(j, previous, q, beta_before, alphas, betas, scale, total):
        if sums:
            total = total + q[:, None] * coefficients[j][None, :]
        product = op.matvec(q)
        alpha = tf.tensordot(q, product, 1)
        w = product - alpha * q - beta_before * previous
        w = w - tf.tensordot(q, w, 1) * q - tf.tensordot(previous, w, 1) * previous
        after, beta, tridiagonal = _advanced(w, (j, alpha, n), (alphas, betas, scale), lambda: (
            _fresh(tf.stack([previous, q]), n, seed, j + 1, dtype)))
        return (j + 1, q, after, beta, *tridiagonal, total)

    start = _unit(probes.normal([n], seed, 0, dtype))
    zeros = tf.zeros([steps], dtype)
    total = tf.zeros([n, coefficients.shape[1] if sums else 0], dtype)  # [n, k]
    state = (tf.constant(0), tf.zeros([n], dtype), start, tf.zeros([], dtype), zeros, zeros,
             tf.zeros([], dtype), total)
    out = tf.while_loop(lambda j, *_: j < steps, step, state, maximum_iterations=steps,
                        parallel_iterations=SEQUENTIAL)
    return out[-1] if sums else (out[4], out[5])
