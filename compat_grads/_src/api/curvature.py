"""Curvature without the matrix: the operators (hessian_operator, ggn_operator,
fisher_operator: `tf.linalg.LinearOperator`s over the flattened parameters, whose products
are Hessian-, Jacobian- and vector-Jacobian products) and the estimators on any square
operator (top_eigenvalues, trace_estimate, diagonal_estimate, solve): signatures and
docstrings, each one call into `compat_grads._src.curvature`, where the arguments are checked
and the products and loops built; `compat_grads.api` holds them with the others. The
estimators ask the operator for products only, so a matrix
(`tf.linalg.LinearOperatorFullMatrix`) and the operators here serve alike."""

from __future__ import annotations

from compat_grads._src.api import docs as _docs
from compat_grads._src.core.tf import tf
from compat_grads._src.core.types import FisherKind, Nest, Reorthogonalize, Seed, TraceMethod, Which
from compat_grads._src.curvature import lanczos as _lanczos
from compat_grads._src.curvature import operators as _operators
from compat_grads._src.curvature import solve as _solve
from compat_grads._src.curvature import trace as _trace


@_docs.public
def hessian_operator(f, params: Nest, *, data: tuple | tf.data.Dataset | None = None,
                     distribute=None) -> tf.linalg.LinearOperator:
    """The Hessian of a scalar function of the parameters as a `tf.linalg.LinearOperator`:
    Hessian-vector products, never the matrix.

    Shape: `[n, n]`, n = the total size of `params`, over their flat concatenation (the
    leaves in `tf.nest.flatten` order, each flattened row-major: the columns of
    `hessian(..., flat=True)`); `op.matvec(v)` is `[n]`, `op.matmul(V)` is `[n, m]`. The
    operator is the Hessian of `f(params)`, or with `data` of the sum over the batches of
    `f(params, *batch)` (a tuple batch is unpacked into f's further arguments, anything else
    passed as one). Each product is one Hessian-vector product of each batch, as `hvp` takes
    it: forward-over-reverse in eager code, reverse-over-reverse in a graph or `tf.function`
    (two gradients' cost); `matmul`'s columns are products one after another in a
    `tf.while_loop`, so `op.to_dense()` (the identity's n columns) holds the result and the
    loop's few products in flight, never n passes at once. It is self-adjoint
    (`is_self_adjoint=True`) and square, with the parameters' dtype; the estimators
    (`top_eigenvalues`, `trace_estimate`, `diagonal_estimate`, `solve`) take it as it is.
    The products are built when they are asked for, in the mode of that code: an operator
    made in eager code works in a `tf.function` too.

    Args:
      f: a callable `f(params) -> scalar`, or with `data` `f(params, *batch) -> scalar`
        (a loss): every mode. The parameters it is differentiated in are `params` (a
        model's variables: f may read them through the model).
      params: a tensor, a variable, or a list / tuple / dict nest of them, one dtype for
        all, each of static shape (the operator's size is known when it is built).
      data: None (the default: the Hessian of `f(params)`), a tuple of tensors (one batch:
        the Hessian of `f(params, *data)`), or a `tf.data.Dataset` of batches (the
        Hessian of the sum of `f(params, *batch)` over them, read with `Dataset.reduce`
        in each product: in a TF1 Session, a `tf.function` and eager code alike). For the
        Hessian of a mean over all examples, make f return each batch's sum divided by
        the total count.
      distribute: None (the default), a `tf.distribute.Strategy` (a MirroredStrategy, or
        a MultiWorkerMirroredStrategy across workers) whose replicas each take an even
        share of the batch's examples, their products added up across them; or a list of
        device names (the TF1 way: each share placed with `tf.device`). One batch only
        (not a Dataset). f runs on each share, so it must be a sum over the examples
        (a term of the parameters alone, such as a regularizer, would be counted once
        per share).

    Returns:
      A `tf.linalg.LinearOperator` of shape `[n, n]` in the parameters' dtype.

    Raises:
      TypeError: for an f that is not callable, params of two dtypes (or not floating
        point), a `data` that is neither a tuple nor a Dataset, and a `distribute` that is
        neither a supported strategy nor a list of device names.
      ValueError: for a parameter whose shape is not static, `distribute` without one
        batch of data, and, when a product is built (f runs then), an f that does not
        return a scalar.
      compat_grads.ModeError: as `hvp` (a Keras 3 model in a TF1 graph), and for a
        strategy in a TF1 graph (pass device names there).

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> w = tf.Variable([1.0, 2.0])
      >>> op = cg.hessian_operator(lambda w: w[0] ** 2 * w[1], w)
      >>> op.matvec(tf.constant([1.0, 0.0])).numpy()
      array([4., 2.], dtype=float32)
      >>> op.to_dense().numpy()
      array([[4., 2.],
             [2., 0.]], dtype=float32)

    Migrating from TF1:
      Before: a Python function around double `tf.gradients` (`tf.gradients(
      tf.reduce_sum(tf.gradients(loss, w)[0] * v), w)`), fed to scipy's `eigsh` or `cg`
      through one `Session.run` per product. After: `op = cg.hessian_operator(f, w)`, then
      `cg.top_eigenvalues(op, k)` or `cg.solve(op, v)`: one graph, one `Session.run`.
    """
    return _operators.hessian_operator(f, params, data, distribute)


@_docs.public
def ggn_operator(loss_fn, model, x, y=None, *, weights: Nest = None, distribute=None
                 ) -> tf.linalg.LinearOperator:
    """The generalized Gauss-Newton matrix of a model's loss as a
    `tf.linalg.LinearOperator`: `G = Σ_s J_sᵀ H_s J_s`, never the matrix.

    Shape: `[n, n]` over the flat concatenation of `weights` (as `hessian_operator`'s
    params). J_s is the Jacobian of example s's model output with respect to the weights,
    H_s the Hessian of its loss `loss_fn(y_s, ·)` with respect to that output, at the
    prediction: the Hessian of the loss without the term of the model's second
    derivatives, positive semi-definite for a convex loss (Levenberg-Marquardt's and
    Martens' Hessian-free optimization's curvature). Each product `G v` is one JVP of the
    outputs along v (forward mode: one forward pass in eager code), H_s applied in output
    space, then one VJP. H_s is applied in closed form where the loss is recognized:
    mean squared error (`(2 / k) I` for k outputs, as Keras averages them) and softmax
    cross-entropy from logits (`diag(p) - p pᵀ`, p the softmax), from Keras' functions
    (`keras.losses` or `tf_keras.losses`; `functools.partial(...,
    from_logits=True)` for the cross-entropies), Keras' `Loss` classes with
    `reduction="none"` (`from_logits=True` for the cross-entropies) and
    `tf.nn.(sparse_)softmax_cross_entropy_with_logits`; any other loss by a
    Hessian-vector product of the loss in the predictions, with the same result.

    Args:
      loss_fn: `loss_fn(y_true, y_pred) -> per-example losses`, shape `[b]` or `[b, ...]`
        (summed per example), as `per_example_gradients` takes it.
      model: a `tf_keras` model or layer (Keras 3 too, outside TF1 graphs), or any callable
        `model(x) -> y_pred` over variables.
      x: the batch of inputs (a tensor or a nest of them, batch axis first; in a TF1 graph
        a placeholder whose batch is unknown until it is fed), or a `tf.data.Dataset` of
        `(inputs, labels)` batches, as Keras' `fit` takes it: the operator is then the sum
        over its batches.
      y: the batch of labels, passed to `loss_fn`; None when x is a Dataset.
      weights: the variables (a list, tuple or dict nest, one dtype, static shapes);
        default `model.trainable_weights`.
      distribute: None (the default), a `tf.distribute.Strategy` (a MirroredStrategy, or
        a MultiWorkerMirroredStrategy across workers) whose replicas each take an even
        share of the batch's examples, their products added up across them; or a list of
        device names (the TF1 way: each share placed with `tf.device`). One batch only
        (not a Dataset): each product is then the same sum, computed in shares.

    Returns:
      A `tf.linalg.LinearOperator` of shape `[n, n]` in the weights' dtype.

    Raises:
      TypeError: for a loss_fn or model that is not callable, weights of two dtypes, a
        y of None with tensors x, a Dataset whose elements are not pairs.
      ValueError: for a weight of unknown shape, a y given with a Dataset x, and, when a
        product is built, losses that are not one per example or x and y of different
        batch sizes (in a graph, sizes known only at run time are checked then).
      compat_grads.ModeError: for a Keras 3 model in a TF1 graph.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> w = tf.Variable([[1.0], [1.0]])
      >>> squared = lambda y, p: tf.reduce_sum((y - p) ** 2, axis=-1)  # H_s = 2
      >>> op = cg.ggn_operator(squared, lambda x: x @ w, tf.constant([[1.0, 2.0]]),
      ...                      tf.constant([[0.0]]), weights=[w])
      >>> op.to_dense().numpy()  # 2 xᵀx
      array([[2., 4.],
             [4., 8.]], dtype=float32)

    Migrating from TF1:
      Before: the Gauss-Newton product by hand, `Jv` by the double-`tf.gradients` trick
      with a dummy, the loss's Hessian written out, `tf.gradients(outputs, w,
      grad_ys=HJv)`; or the Jacobian materialized. After: `cg.ggn_operator(loss_fn,
      model, x, y)`, with `cg.solve(op, g, damping=...)` for a Levenberg-Marquardt step.
    """
    return _operators.ggn_operator(loss_fn, model, x, y, weights, distribute)


@_docs.public
def fisher_operator(loss_fn, model, x, y=None, *, weights: Nest = None,
                    kind: FisherKind = "empirical", seed: Seed = 0, distribute=None
                    ) -> tf.linalg.LinearOperator:
    """The Fisher of a model's loss as a `tf.linalg.LinearOperator`: `F = Σ_s g_s g_sᵀ`,
    never the matrix, nor the per-example gradients g_s.

    Shape: `[n, n]` over the flat concatenation of `weights` (as `hessian_operator`'s
    params); g_s is the gradient of example s's loss `loss_fn(y_s, model(x_s))` with
    respect to the weights (what `per_example_gradients` gives). Each product `F v` is one
    JVP of the per-example losses along v (the `[b]` numbers g_s·v), then one VJP of the
    losses with those numbers: about three passes, whatever the batch size.
    "empirical" uses the given labels. "true" uses labels drawn from the model's
    predictive distribution, the one whose negative log-likelihood the loss is: a class
    drawn from the softmax of the logits for softmax cross-entropy from logits, and for
    mean squared error `p + sqrt(k / 2) ε` (ε standard normal, k outputs: Keras' MSE,
    a mean over the k outputs, is that Gaussian's negative log-likelihood up to a
    constant). So the true Fisher's expectation over the draws is the Gauss-Newton matrix
    (`ggn_operator`). The draws come from a stateless generator: one seed gives the
    same labels in every product and every mode (the operator is one fixed matrix), each
    batch of a Dataset its own.

    Args:
      loss_fn: `loss_fn(y_true, y_pred) -> per-example losses`, shape `[b]` or `[b, ...]`
        (summed per example). With kind="true", one of the losses `ggn_operator`
        recognizes (mean squared error, softmax cross-entropy from logits).
      model: a `tf_keras` model or layer (Keras 3 too, outside TF1 graphs), or any callable
        `model(x) -> y_pred` over variables (with kind="true", one tensor `[b, ..., k]`).
      x: the batch of inputs (batch axis first; in a TF1 graph a placeholder whose batch
        may be unknown), or a `tf.data.Dataset` of `(inputs, labels)` batches: the sum
        over its batches.
      y: the batch of labels; None when x is a Dataset. With kind="true" only its shape
        and dtype are used (the drawn labels take them).
      weights: the variables (a list, tuple or dict nest, one dtype, static shapes);
        default `model.trainable_weights`.
      kind: "empirical" (the default: the given labels) or "true" (labels drawn from the
        model's predictive distribution).
      seed: with kind="true", an int (or an integer scalar tensor) for the stateless
        draws: one seed, one operator, in every mode (TF1 graph included).
      distribute: None (the default), a `tf.distribute.Strategy` (a MirroredStrategy, or
        a MultiWorkerMirroredStrategy across workers) whose replicas each take an even
        share of the batch's examples, their products added up across them; or a list of
        device names (the TF1 way: each share placed with `tf.device`). One batch only
        (not a Dataset): each product is then the same sum, computed in shares.
        Not with kind="true" (each replica would draw its own share's labels).

    Returns:
      A `tf.linalg.LinearOperator` of shape `[n, n]` in the weights' dtype.

    Raises:
      TypeError: as `ggn_operator`, and for a kind or seed of the wrong type.
      ValueError: as `ggn_operator`; for an unknown kind; with kind="true", for a loss
        whose predictive distribution is not known, or (when a product is built) a
        model that does not return one tensor of rank 2 or more.
      compat_grads.ModeError: for a Keras 3 model in a TF1 graph.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> w = tf.Variable([[1.0], [1.0]])
      >>> squared = lambda y, p: tf.reduce_sum((y - p) ** 2, axis=-1)
      >>> op = cg.fisher_operator(squared, lambda x: x @ w, tf.constant([[1.0, 2.0]]),
      ...                         tf.constant([[0.0]]), weights=[w])
      >>> op.to_dense().numpy()  # g gᵀ, g = 2 (xw - y) xᵀ = [6, 12]
      array([[ 36.,  72.],
             [ 72., 144.]], dtype=float32)

    Migrating from TF1:
      Before: per-example gradients by one `Session.run` (or one `tf.gradients`) per
      example, stacked and multiplied out. After: `cg.fisher_operator(loss_fn, model, x,
      y)` (K-FAC-free natural-gradient steps by `cg.solve(op, g, damping=...)`).
    """
    return _operators.fisher_operator(loss_fn, model, x, y, weights, kind, seed, distribute)


@_docs.public
def top_eigenvalues(op: tf.linalg.LinearOperator, k: int = 1, *, which: Which = "LA",
                    num_iterations: int | None = None, seed: Seed = 0,
                    reorthogonalize: Reorthogonalize = "auto"):
    """The k extreme eigenvalues of a self-adjoint operator and their eigenvectors, from
    its products alone (Lanczos).

    Shape: `(values [k], vectors [n, k])` for `op` of shape `[n, n]`, with
    `op @ vectors[:, i] ≈ values[i] * vectors[:, i]`, the vectors orthonormal (each up to
    its sign). `values` run from the most extreme: descending for "LA", ascending for "SA",
    by descending magnitude for "LM". `num_iterations` steps take that many products; with
    full reorthogonalization they keep `[num_iterations, n]` basis vectors and steps >= n
    give the eigenpairs exactly, up to rounding; with local reorthogonalization they keep
    three vectors of n (memory of the order of one gradient's) and take the steps twice
    (the second pass sums the eigenvectors, which for k > 1 are orthonormal only as far as
    they have converged). The steps are one `tf.while_loop` (two for
    local): one `Session.run` in a TF1 graph (in eager code a one-off `tf.function`,
    traced at each call).

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
      reorthogonalize: "full" (each new basis vector against all before it, the basis
        kept), "local" (against the two before it; for k > 1 the copies of converged
        eigenvalues that this lets through are told apart from the rest as Cullum and
        Willoughby do: an eigenvalue of several copies is given once, and a value that
        has not converged may be taken for a spurious one and skipped, so check the
        vectors' residuals or use "full"; not under XLA), or "auto" (the default): "full",
        but "local" for k = 1 outside XLA when the basis would take more than 32 MiB
        (`num_iterations * n * 4` bytes in float32: n over 380,000 at the default 22
        steps), where the largest (or smallest) value of the local steps is the answer
        itself.

    Returns:
      `(values, vectors)` in the operator's dtype.

    Raises:
      TypeError: for an `op` that is not a LinearOperator or not float32 / float64, and
        arguments of the wrong type.
      ValueError: for an operator that is not square or whose size is unknown, one built
        with is_self_adjoint=False, k not in [1, n], an unknown `which`, or
        num_iterations < k, an unknown `reorthogonalize`, or "local" under XLA.

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
    return _lanczos.top_eigenvalues(op, k, which, num_iterations, seed, reorthogonalize)


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
