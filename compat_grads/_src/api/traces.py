"""The diagonal and trace functions (hessian_diagonal, laplacian, divergence and their
per-sample forms): signatures and docstrings, each one call of the call path;
`compat_grads.api` holds them with the others. How they are computed, and which ops take the
forward Laplacian's fast path, is in `compat_grads._src.traces.traces` and the guide's "Laplacians,
diagonals and traces" page."""

from __future__ import annotations

from compat_grads._src.api import docs as _docs
from compat_grads._src.call import run as _call
from compat_grads._src.call import specs_traces as _specs_traces
from compat_grads._src.call.options import MAX_BYTES
from compat_grads._src.core.tf import tf
from compat_grads._src.core.types import (
    Budget,
    ChunkSize,
    Method,
    Nest,
    Strategy,
    Target,
    TensorLike,
    Unconnected,
)


@_docs.public_call
def hessian_diagonal(target: Target, sources: Nest, *, method: Method = "exact",
                     num_samples: int | None = None, seed: int = 0, return_std: bool = False,
                     strategy: Strategy = "auto", unconnected_gradients: Unconnected = "none",
                     chunk_size: ChunkSize = "auto", max_bytes: int | None = MAX_BYTES,
                     memory_budget: Budget = None,
                     compile: bool = True, jit_compile: bool = False, has_aux: bool = False,
                     return_value: bool = False) -> Nest:
    """The diagonal of the Hessian of a scalar target, without building the Hessian.

    Shape: `D[k].shape == x_k.shape`, `D[k][i...] = d² y / d x_k[i...]²`, in the structure of
    `sources`. Not the Hessian's row sums, which `tf.gradients(tf.gradients(y, x), x)` gives.

    In a graph (TF1, `tf.function`, and eager callables, which run in a cached tf.function)
    it is the forward Laplacian's one pass when every op between the sources and the target
    has a rule (its directions in chunks: see the "Laplacians, diagonals and traces" page);
    otherwise (and with an explicit strategy) n forward-over-reverse products, each reduced to
    its diagonal element as it is computed (a `VectorizationWarning` names an op without a
    rule).

    Args:
      target: a callable `f(sources) -> scalar` (every mode), or the scalar tensor `y` in a
        graph or `tf.function`.
      sources: a tensor, a variable, or a list / tuple / dict nest of them.
      {method}
      {num_samples}
      {seed}
      {return_std}
      strategy: "auto" (the forward Laplacian where it applies), or "forward", "reverse"
        or "loop": the outer direction of the products, which then compute it.
      {unconnected_gradients}
      {memory}
      {compiling}
      {has_aux}
      {return_value}

    Returns:
      The diagonals in the structure of `sources`, each in its source's dtype (None for a
      source that does not reach the gradient, with "none").

    Raises:
      ValueError: for a non-scalar target (use batch_hessian_diagonal for one scalar per
        sample), or options that do not go together (num_samples= with method="exact").
      compat_grads.ModeError: for an eager tensor target.
      compat_grads.DerivativeError: for a target TensorFlow has no second derivative of
        (a `tf.py_function`), as `hessian`.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> x = tf.constant([1.0, 2.0])
      >>> cg.hessian_diagonal(lambda x: x[0] ** 3 * x[1] + x[1] ** 2, x).numpy()
      array([12.,  2.], dtype=float32)

    Migrating from TF1:
      Before: `tf.stack([tf.gradients(tf.gradients(y, x)[0][i], x)[0][i] for i in
      range(n)])` (n gradient graphs). After: `cg.hessian_diagonal(y, x)`.
    """
    return _call.run(_specs_traces.HESSIAN_DIAGONAL, target, (sources,), compile=compile,
                     jit_compile=jit_compile, method=method, num_samples=num_samples,
                     seed=seed, return_std=return_std, strategy=strategy,
                     unconnected_gradients=unconnected_gradients, chunk_size=chunk_size,
                     max_bytes=max_bytes,
                     memory_budget=memory_budget, has_aux=has_aux, return_value=return_value)


@_docs.public_call
def laplacian(target: Target, sources: Nest, *, method: Method = "exact",
              num_samples: int | None = None, seed: int = 0, return_std: bool = False,
              strategy: Strategy = "auto", unconnected_gradients: Unconnected = "none",
              chunk_size: ChunkSize = "auto", max_bytes: int | None = MAX_BYTES,
              memory_budget: Budget = None,
              compile: bool = True, jit_compile: bool = False, has_aux: bool = False,
              return_value: bool = False) -> tf.Tensor | None:
    """The Laplacian (trace of the Hessian) of a scalar target, without building the Hessian.

    Shape: `[]`, `L = sum_k sum_i d² y / d x_k[i...]²` over every element of every source.
    Computed as `hessian_diagonal` is, summed.

    Args:
      target: a callable `f(sources) -> scalar` (every mode), or the scalar tensor `y` in a
        graph or `tf.function`.
      sources: a tensor, a variable, or a list / tuple / dict nest of them, of one dtype.
      {method}
      {num_samples}
      {seed}
      {return_std}
      strategy: as in `hessian_diagonal`.
      {unconnected_gradients}
      {memory}
      {compiling}
      {has_aux}
      {return_value}

    Returns:
      A scalar in the sources' dtype (None when no source reaches the gradient, with
      "none").

    Raises:
      ValueError: for a non-scalar target (use batch_laplacian for one scalar per sample).
      TypeError: for sources of different dtypes.
      compat_grads.ModeError: for an eager tensor target.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> x = tf.constant([1.0, 2.0, 3.0])
      >>> float(cg.laplacian(lambda x: tf.reduce_sum(x ** 3), x))  # 6 · (1 + 2 + 3)
      36.0

    Migrating from TF1:
      Before: `tf.add_n([tf.gradients(tf.gradients(y, x)[0][i], x)[0][i] for i in
      range(n)])`. After: `cg.laplacian(y, x)`.
    """
    return _call.run(_specs_traces.LAPLACIAN, target, (sources,), compile=compile,
                     jit_compile=jit_compile, method=method, num_samples=num_samples,
                     seed=seed, return_std=return_std, strategy=strategy,
                     unconnected_gradients=unconnected_gradients, chunk_size=chunk_size,
                     max_bytes=max_bytes,
                     memory_budget=memory_budget, has_aux=has_aux, return_value=return_value)


@_docs.public_call
def batch_hessian_diagonal(target: Target, source: Nest, *, method: Method = "exact",
                           num_samples: int | None = None, seed: int = 0,
                           return_std: bool = False, strategy: Strategy = "auto",
                           unconnected_gradients: Unconnected = "none",
                           independent: bool = True, chunk_size: ChunkSize = "auto",
                           max_bytes: int | None = MAX_BYTES,
                           memory_budget: Budget = None, compile: bool = True,
                           jit_compile: bool = False, distribute=None, gather: bool = True,
                           has_aux: bool = False,
                           return_value: bool = False) -> Nest:
    """Per-sample Hessian diagonals of per-sample scalars, without the per-sample Hessians.

    Shape: `[b] + x.shape[1:]`, `D[s, i...] = d² y[s] / d x[s, i...]²`, for a target of shape
    `(b,)` or `(b, 1)`: PINNs' `u_xx`, `u_yy`, ... for every point at once. Memory
    O(b·d) per direction in flight, never the `b·d²` of `batch_hessian`.

    Args:
      target: a callable `f(x) -> y` (every mode), or the tensor `y` in a graph or
        `tf.function`.
      source: a batched tensor or variable `x`, or a nest of them with one batch (a PINN's
        coordinates held apart, `[x, t]`: a callable then takes the nest): the result has
        that structure, one diagonal per source.
      {method}
      {num_samples}
      {seed}
      {return_std}
      strategy: as in `hessian_diagonal`.
      {unconnected_gradients}
      {independent_traces}
      {memory}
      {compiling}
      distribute: a `tf.distribute.Strategy` whose replicas share the samples (exact, with
        independent samples). Needs a callable target.
        {devices}
      {results}

    Returns:
      The diagonals in the source's dtype (None if unconnected and "none"), in the
      structure of `source`.

    Raises:
      ValueError: if the target is not one scalar per sample (checked at run time when its
        shape is unknown while building), or batch sizes differ.
      compat_grads.ModeError: for an eager tensor target.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> xy = tf.constant([[-6.0, -3.0], [1.0, 8.0]])
      >>> f = lambda xy: 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2
      >>> cg.batch_hessian_diagonal(f, xy).numpy()  # [6y, 2] per sample
      array([[-18.,   2.],
             [ 48.,   2.]], dtype=float32)

    Migrating from TF1:
      Before: `tf.gradients(tf.gradients(u, x)[0][:, i], x)[0][:, i]` for each dimension i.
      After: `cg.batch_hessian_diagonal(u, x)[:, i]`.
    """
    return _call.run(_specs_traces.BATCH_HESSIAN_DIAGONAL, target, (source,), compile=compile,
                     jit_compile=jit_compile, method=method, num_samples=num_samples,
                     seed=seed, return_std=return_std, strategy=strategy,
                     unconnected_gradients=unconnected_gradients, independent=independent,
                     chunk_size=chunk_size, max_bytes=max_bytes,
                     memory_budget=memory_budget, distribute=distribute,
                     gather=gather, has_aux=has_aux, return_value=return_value)


@_docs.public_call
def batch_laplacian(target: Target, source: Nest, *, method: Method = "exact",
                    num_samples: int | None = None, seed: int = 0, return_std: bool = False,
                    strategy: Strategy = "auto", unconnected_gradients: Unconnected = "none",
                    independent: bool = True, chunk_size: ChunkSize = "auto",
                    max_bytes: int | None = MAX_BYTES,
                    memory_budget: Budget = None, compile: bool = True,
                    jit_compile: bool = False, distribute=None, gather: bool = True,
                    has_aux: bool = False, return_value: bool = False) -> tf.Tensor | None:
    """Per-sample Laplacians of per-sample scalars: the PINN's `u_xx + u_yy + ...`.

    Shape: `[b]`, `L[s] = sum_i d² y[s] / d x[s, i...]²` (summed over every source of a
    nest), for a target of shape `(b,)` or `(b, 1)`. Computed as `batch_hessian_diagonal`
    is, summed (the forward Laplacian carries
    only the sum, so it is cheaper still).

    Args:
      target: a callable `f(x) -> y` (every mode), or the tensor `y` in a graph or
        `tf.function`.
      source: a batched tensor or variable `x`, or a nest of them with one batch (a PINN's
        coordinates held apart: `[x, y]` gives `u_xx + u_yy`), all of one dtype.
      {method}
      {num_samples}
      {seed}
      {return_std}
      strategy: as in `hessian_diagonal`.
      {unconnected_gradients}
      {independent_traces}
      {memory}
      {compiling}
      distribute: as in `batch_hessian_diagonal`.
        {devices}
      {results}

    Returns:
      The `[b]` Laplacians in the source's dtype (None if unconnected and "none").

    Raises:
      ValueError: as `batch_hessian_diagonal`.
      compat_grads.ModeError: for an eager tensor target.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> xy = tf.constant([[-6.0, -3.0], [1.0, 8.0]])
      >>> f = lambda xy: 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2
      >>> cg.batch_laplacian(f, xy).numpy()  # 6y + 2
      array([-16.,  50.], dtype=float32)

    Migrating from TF1:
      Before: `sum(tf.gradients(tf.gradients(u, x)[0][:, i], x)[0][:, i] for i in
      range(d))`. After: `cg.batch_laplacian(u, x)`.
    """
    return _call.run(_specs_traces.BATCH_LAPLACIAN, target, (source,), compile=compile,
                     jit_compile=jit_compile, method=method, num_samples=num_samples,
                     seed=seed, return_std=return_std, strategy=strategy,
                     unconnected_gradients=unconnected_gradients, independent=independent,
                     chunk_size=chunk_size, max_bytes=max_bytes,
                     memory_budget=memory_budget, distribute=distribute,
                     gather=gather, has_aux=has_aux, return_value=return_value)


@_docs.public_call
def divergence(target: Target, source: TensorLike, *, tape: tf.GradientTape | None = None,
               method: Method = "exact", num_samples: int | None = None, seed: int = 0,
               return_std: bool = False, strategy: Strategy = "auto",
               unconnected_gradients: Unconnected = "none", chunk_size: ChunkSize = "auto",
               max_bytes: int | None = MAX_BYTES,
               memory_budget: Budget = None, compile: bool = True,
               jit_compile: bool = False, has_aux: bool = False,
               return_value: bool = False) -> tf.Tensor | None:
    """The divergence (trace of the square Jacobian) of a vector field, without the Jacobian.

    Shape: `[]`, `div = sum_i d y[i...] / d x[i...]`, for `y.shape == x.shape`. Exact: n
    Jacobian-vector products (forward) or vector-Jacobian products (reverse), each reduced
    to its diagonal element as it is computed.

    Args:
      {target}
      source: one tensor or variable `x`, shaped like the target.
      {tape}
      {method}
      {num_samples}
      {seed}
      {return_std}
      strategy: "auto", "forward", "reverse" or "loop", as in `stacked_jacobian`.
      {unconnected_gradients}
      {memory}
      {compiling}
      {has_aux}
      {return_value}

    Returns:
      A scalar in the source's dtype (None if unconnected and "none").

    Raises:
      ValueError: when the target is not shaped like the source (use stacked_jacobian).
      compat_grads.ModeError: for an eager tensor target without its tape.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> x = tf.constant([1.0, 2.0])
      >>> float(cg.divergence(lambda x: tf.stack([x[0] * x[1], x[1] ** 2]), x))  # 2 + 4
      6.0

    Migrating from TF1:
      Before: `tf.add_n([tf.gradients(y[i], x)[0][i] for i in range(n)])`. After:
      `cg.divergence(y, x)`.
    """
    return _call.run(_specs_traces.DIVERGENCE, target, (source,), compile=compile,
                     jit_compile=jit_compile, tape=tape, method=method,
                     num_samples=num_samples, seed=seed, return_std=return_std,
                     strategy=strategy, unconnected_gradients=unconnected_gradients,
                     chunk_size=chunk_size, max_bytes=max_bytes,
                     memory_budget=memory_budget, has_aux=has_aux,
                     return_value=return_value)


@_docs.public_call
def batch_divergence(target: Target, source: TensorLike, *,
                     tape: tf.GradientTape | None = None, method: Method = "exact",
                     num_samples: int | None = None, seed: int = 0, return_std: bool = False,
                     strategy: Strategy = "auto", unconnected_gradients: Unconnected = "none",
                     chunk_size: ChunkSize = "auto", max_bytes: int | None = MAX_BYTES,
                     memory_budget: Budget = None,
                     compile: bool = True, jit_compile: bool = False, distribute=None,
                     gather: bool = True, has_aux: bool = False,
                     return_value: bool = False) -> tf.Tensor | None:
    """Per-sample divergences of a batched vector field (normalizing flows, score matching).

    Shape: `[b]`, `div[s] = sum_i d y[s, i...] / d x[s, i...]`, for `y.shape == x.shape`
    and independent samples: n products for n features per sample, not b·n.

    Args:
      {target}
      source: one batched tensor or variable `x`, shaped like the target.
      {tape}
      {method}
      {num_samples}
      {seed}
      {return_std}
      strategy: as in `divergence`.
      {unconnected_gradients}
      {memory}
      {compiling}
      distribute: as in `batch_hessian_diagonal`.
        {devices}
      {results}

    Returns:
      The `[b]` divergences in the source's dtype (None if unconnected and "none").

    Raises:
      ValueError: when the target is not shaped like the source, or batch sizes differ.
      compat_grads.ModeError: for an eager tensor target without its tape.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
      >>> cg.batch_divergence(lambda x: x ** 2, x).numpy()  # 2 x0 + 2 x1
      array([ 6., 14.], dtype=float32)

    Migrating from TF1:
      Before: `tf.add_n([tf.gradients(y[:, i], x)[0][:, i] for i in range(n)])` (FFJORD's
      exact trace). After: `cg.batch_divergence(y, x)`, for independent samples; where
      samples interact, `strategy="reverse"` keeps the loop's values (each term is the
      gradient of a column's batch sum).
    """
    return _call.run(_specs_traces.BATCH_DIVERGENCE, target, (source,), compile=compile,
                     jit_compile=jit_compile, tape=tape, method=method,
                     num_samples=num_samples, seed=seed, return_std=return_std,
                     strategy=strategy, unconnected_gradients=unconnected_gradients,
                     chunk_size=chunk_size, max_bytes=max_bytes,
                     memory_budget=memory_budget, distribute=distribute,
                     gather=gather, has_aux=has_aux, return_value=return_value)
