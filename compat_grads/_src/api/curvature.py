"""The estimators on a square `tf.linalg.LinearOperator` (top_eigenvalues, trace_estimate,
diagonal_estimate, solve): signatures and docstrings, each one call into
`compat_grads._src.curvature`, where the arguments are checked and the loops built;
`compat_grads.api` holds them with the others. They ask the operator for products only, so
a matrix (`tf.linalg.LinearOperatorFullMatrix`) and an operator whose `_matmul` computes
Hessian-vector products of a model (with `hvp`) serve alike."""

from __future__ import annotations

from compat_grads._src.api import docs as _docs
from compat_grads._src.core.tf import tf
from compat_grads._src.core.types import Seed, TraceMethod, Which
from compat_grads._src.curvature import lanczos as _lanczos
from compat_grads._src.curvature import solve as _solve
from compat_grads._src.curvature import trace as _trace


@_docs.public
def top_eigenvalues(op: tf.linalg.LinearOperator, k: int = 1, *, which: Which = "LA",
                    num_iterations: int | None = None, seed: Seed = 0):
    """The k extreme eigenvalues of a self-adjoint operator and their eigenvectors, from
    its products alone (Lanczos with full reorthogonalization).

    Shape: `(values [k], vectors [n, k])` for `op` of shape `[n, n]`, with
    `op @ vectors[:, i] ≈ values[i] * vectors[:, i]`, the vectors orthonormal (each up to
    its sign). `values` run from the most extreme: descending for "LA", ascending for "SA",
    by descending magnitude for "LM". `num_iterations` steps take that many products and
    keep `[num_iterations, n]` basis vectors; steps >= n give the eigenpairs exactly, up to
    rounding. The steps are one `tf.while_loop`: one `Session.run` in a TF1 graph (in eager
    code a one-off `tf.function`, traced at each call).

    Args:
      op: a square `tf.linalg.LinearOperator` `[n, n]`, float32 or float64, n known when
        the graph is built, assumed self-adjoint (symmetric): a matrix
        (`tf.linalg.LinearOperatorFullMatrix(m)`), or any operator whose `_matmul`
        computes its products (Hessian-vector products of a model, with `hvp`).
      k: how many eigenpairs, 1 <= k <= n.
      which: "LA" (largest algebraic, the default), "SA" (smallest algebraic) or "LM"
        (largest magnitude), as scipy's `eigsh`.
      num_iterations: the Lanczos steps, at least k (more than n counts as n); default
        `min(n, 2 * k + 20)`, exact for n <= 2k + 20 and, beyond, accurate for the
        eigenvalues well separated from the rest (pass more for clustered spectra: the
        error of an extreme eigenvalue falls geometrically with the steps).
      seed: an int (or an integer scalar tensor) for the stateless random start vector:
        one seed gives the same numbers in every mode (TF1 graph included).

    Returns:
      `(values, vectors)` in the operator's dtype.

    Raises:
      TypeError: for an `op` that is not a LinearOperator or not float32 / float64, and
        arguments of the wrong type.
      ValueError: for an operator that is not square or whose size is unknown, one built
        with is_self_adjoint=False, k not in [1, n], an unknown `which`, or
        num_iterations < k.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> op = tf.linalg.LinearOperatorFullMatrix(tf.constant([[2.0, 1.0], [1.0, 2.0]]))
      >>> values, vectors = cg.top_eigenvalues(op, k=2)
      >>> values.numpy().round(4)
      array([3., 1.], dtype=float32)

    Migrating from TF1:
      Before: power iteration or a hand-written Lanczos in Python, one `Session.run` per
      step of double `tf.gradients` products. After: `cg.top_eigenvalues(op, k)`, one
      `tf.while_loop` and one `Session.run`.
    """
    return _lanczos.top_eigenvalues(op, k, which, num_iterations, seed)


@_docs.public
def trace_estimate(op: tf.linalg.LinearOperator, *, num_samples: int,
                   method: TraceMethod = "hutchinson", seed: Seed = 0,
                   return_std: bool = False):
    """An unbiased random estimate of the trace of a square operator, from `num_samples`
    of its products.

    Shape: a scalar. "hutchinson": the mean of `zᵀ op z` over `num_samples` Rademacher
    (±1) probes z; the sum of `diagonal_estimate` with the same seed. "hutch++" (Meyer,
    Musco, Musco and Woodruff, 2021): `num_samples // 3` products sketch the operator's
    range Q, as many more give `tr(Qᵀ op Q)` exactly, and the rest probe the remainder
    `(I - QQᵀ) op (I - QQᵀ)` as Hutchinson does: far less variance at the same number of
    products when the spectrum decays (a Hessian's, a low-rank-plus-small matrix's). The
    probes go through one `op.matmul` (three for "hutch++": the sketch, Q, the rest).

    Args:
      op: a square `tf.linalg.LinearOperator` `[n, n]`, float32 or float64, n known when
        the graph is built (it need not be symmetric).
      num_samples: how many products the estimate takes (a positive int; at least 3 for
        "hutch++", and with return_std=True at least 2, or 4 for "hutch++"). The standard
        error falls as 1/sqrt(num_samples) for "hutchinson".
      method: "hutchinson" (the default) or "hutch++".
      seed: an int (or an integer scalar tensor) for the stateless probes: one seed gives
        the same estimate in every mode (TF1 graph included).
      return_std: return `(estimate, standard error)`: the standard deviation of the
        averaged samples over the square root of their number. For "hutch++" the samples
        are the residual probes', so it is the standard error given the sketch; as the
        exact part and the remainder's trace add up to the trace for every sketch, it is
        the whole estimate's standard error as well (in mean square over sketches).

    Returns:
      The estimate in the operator's dtype (with return_std, the pair).

    Raises:
      TypeError: for an `op` that is not a LinearOperator or not float32 / float64, and
        arguments of the wrong type (a bool is not an int).
      ValueError: for an operator that is not square or whose size is unknown, an unknown
        `method`, or num_samples too small.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> op = tf.linalg.LinearOperatorFullMatrix(tf.linalg.diag([1.0, 2.0, 3.0]))
      >>> float(cg.trace_estimate(op, num_samples=4))  # zᵀAz = tr(A) for a diagonal A
      6.0

    Migrating from TF1:
      Before: a Python loop of double `tf.gradients` products against `tf.random.normal`
      probes (other probes in each run). After: `cg.trace_estimate(op, num_samples=100)`.
    """
    return _trace.trace_estimate(op, num_samples, method, seed, return_std)


@_docs.public
def diagonal_estimate(op: tf.linalg.LinearOperator, *, num_samples: int, seed: Seed = 0):
    """Hutchinson's unbiased random estimate of the diagonal of a square operator.

    Shape: `[n]`, the mean of `z ⊙ (op z)` over `num_samples` Rademacher (±1) probes z
    (Bekas, Kokiopoulou and Saad, 2007), through one `op.matmul`; its sum is
    `trace_estimate` with the same seed. Element i's error is the spread of the
    off-diagonal row i, falling as 1/sqrt(num_samples).

    Args:
      op: a square `tf.linalg.LinearOperator` `[n, n]`, float32 or float64, n known when
        the graph is built.
      num_samples: how many probes to average (a positive int).
      seed: an int (or an integer scalar tensor) for the stateless probes: one seed gives
        the same estimate in every mode (TF1 graph included).

    Returns:
      The `[n]` estimate in the operator's dtype.

    Raises:
      TypeError: for an `op` that is not a LinearOperator or not float32 / float64, and
        arguments of the wrong type.
      ValueError: for an operator that is not square or whose size is unknown, or
        num_samples < 1.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> op = tf.linalg.LinearOperatorFullMatrix(tf.linalg.diag([1.0, 2.0, 3.0]))
      >>> cg.diagonal_estimate(op, num_samples=2).numpy()
      array([1., 2., 3.], dtype=float32)

    Migrating from TF1:
      Before: `tf.gradients(tf.gradients(loss, w)[0] * z, w)[0] * z` for each of many
      probes z, averaged in Python. After: `cg.diagonal_estimate(op, num_samples=100)`.
    """
    return _trace.diagonal_estimate(op, num_samples, seed)


@_docs.public
def solve(op: tf.linalg.LinearOperator, rhs, *, damping: float = 0.0, tol: float = 1e-5,
          max_iterations: int | None = None):
    """x with `(op + damping * I) x = rhs`, by conjugate gradients: inverse-Hessian-vector
    products for influence functions and Newton-CG, without the matrix.

    Shape: `x.shape == rhs.shape`, `[n]` or `[n, m]` (m right-hand sides, solved side by
    side with one `op.matmul` per step). Each column stops once its residual is at most
    `tol` times its right-hand side's norm, or after `max_iterations` steps (then the last
    iterate is returned as it is). The steps are one `tf.while_loop`: one `Session.run` in
    a TF1 graph (in eager code a one-off `tf.function`, traced at each call). Conjugate
    gradients need `op + damping * I` positive definite; a step that shows it is not
    (`pᵀ (op + damping * I) p <= 0`) is an error that says so.

    Args:
      op: a square `tf.linalg.LinearOperator` `[n, n]`, float32 or float64, n known when
        the graph is built, assumed self-adjoint (symmetric).
      rhs: the right-hand side(s), `[n]` or `[n, m]`, in the operator's dtype (a tensor, an
        array or a list).
      damping: λ >= 0 added to the diagonal (Levenberg-Marquardt's, a Laplace
        approximation's prior precision): it makes a positive semi-definite operator
        definite and improves the conditioning.
      tol: the relative residual `|rhs - (op + damping * I) x| / |rhs|` to reach, per
        column (as the recurrence measures the residual), a positive number.
      max_iterations: the most steps (a positive int); default 10 n (scipy's `cg`
        default: n steps are exact in exact arithmetic, rounding can need more).

    Returns:
      x in the operator's dtype, shaped like `rhs`.

    Raises:
      TypeError: for an `op` that is not a LinearOperator or not float32 / float64, an
        `rhs` of another dtype, and arguments of the wrong type.
      ValueError: for an operator that is not square or whose size is unknown, one built
        with is_self_adjoint=False, an `rhs` not of shape `[n]` or `[n, m]`, a negative
        `damping`, a `tol` that is not positive, and, in eager code, an operator plus
        damping that is not positive definite (breakdown).
      tf.errors.InvalidArgumentError: in a graph or `tf.function`, the breakdown, when x
        is computed (the same message).

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> op = tf.linalg.LinearOperatorFullMatrix(tf.constant([[4.0, 1.0], [1.0, 3.0]]))
      >>> cg.solve(op, tf.constant([1.0, 2.0])).numpy().round(4)  # [1/11, 7/11]
      array([0.0909, 0.6364], dtype=float32)

    Migrating from TF1:
      Before: scipy's `fmin_ncg` or `cg` with one `Session.run` of a double
      `tf.gradients` product per step. After: `cg.solve(op, v, damping=0.01)`, one
      `tf.while_loop`.
    """
    return _solve.solve(op, rhs, damping, tol, max_iterations)
