"""The public functions: validate, ask the shim for a backend, compose, return."""

from __future__ import annotations

from compat_grads import _jacobians, dispatch
from compat_grads import _structure as st
from compat_grads._errors import message
from compat_grads._tf import tf
from compat_grads._types import Nest, Strategy, Target, TensorLike, Unconnected


def stacked_jacobian(target: Target, sources: Nest, *, tape: tf.GradientTape | None = None,
                     strategy: Strategy = "auto",
                     unconnected_gradients: Unconnected = "none") -> Nest:
    """The full Jacobian of `target` with respect to each source.

    Shape: `J[k].shape == y.shape + x_k.shape`, `J[k][i..., j...] = d y[i...] / d x_k[j...]`.

    Args:
      target: the tensor `y` (graph mode and `tf.function`; in eager mode together with the
        `tape` that recorded it), or a callable `f(sources) -> y` (every mode).
      sources: a tensor, a variable, or a list / tuple / dict nest of them.
      tape: the `tf.GradientTape` that recorded an eager tensor target.
      strategy: "auto" (forward mode when the sources are smaller than the target, else
        reverse), "reverse" (vectorized VJPs over target elements), "forward" (vectorized
        JVPs over source elements) or "loop" (one row at a time in a `while_loop`, the
        lowest memory). All give the same values.
      unconnected_gradients: "none" (None for a source the target does not depend on) or
        "zero" (zeros of the block's shape); a `tf.UnconnectedGradients` works too.

    Returns:
      The blocks in the structure of `sources`, each with its source's dtype.

    Raises:
      TypeError: for a target that is neither a float tensor nor a callable, or non-float
        sources.
      ValueError: for empty sources or an unknown strategy.
      compat_grads.ModeError: for an eager tensor target without its tape.

    Example:
      >>> import compat_grads as cg
      >>> x = tf.constant([1.0, 2.0])
      >>> cg.stacked_jacobian(lambda x: tf.stack([x[0] * x[1], x[1] ** 2]), x).numpy()
      array([[2., 1.],
             [0., 4.]], dtype=float32)

    Migrating from TF1:
      Before: `tf.stack([tf.gradients(y[i], x)[0] for i in range(100)])` (100 gradient
      graphs, and an extra axis if you `expand_dims`). After:
      `cg.stacked_jacobian(y, x)`, one graph of constant size, shape `y.shape + x.shape`.
    """
    name = "stacked_jacobian"
    problem = st.make_problem(name, target, sources, tape)
    strategy = st.check_strategy(name, strategy)
    unconnected = st.check_unconnected(name, unconnected_gradients)
    backend = dispatch.backend_for(problem)
    return problem.pack(_jacobians.jacobian_blocks(backend, problem.flat, strategy, unconnected))


def per_element_gradients(target: Target, sources: Nest, *,
                          tape: tf.GradientTape | None = None,
                          unconnected_gradients: Unconnected = "none") -> Nest:
    """dy/dx with the shape of `y`: the Jacobian summed over each source's axes.

    Shape: `G[k].shape == y.shape`, `G[k][i...] = sum_j d y[i...] / d x_k[j...]` (`J_k·1`).
    Computed as one forward-mode product per source, never by building the Jacobian.
    Compare `tf.gradients(y, x)`, which sums over `y` instead and has the shape of `x`.

    Args:
      target: the tensor `y` (graph mode and `tf.function`; in eager mode together with the
        `tape` that recorded it), or a callable `f(sources) -> y` (every mode).
      sources: a tensor, a variable, or a list / tuple / dict nest of them.
      tape: the `tf.GradientTape` that recorded an eager tensor target.
      unconnected_gradients: "none" or "zero", as in `stacked_jacobian`.

    Returns:
      One `y`-shaped tensor per source, in the structure of `sources`, in the source's dtype.

    Raises:
      TypeError, ValueError, compat_grads.ModeError: as `stacked_jacobian`.

    Example:
      >>> import compat_grads as cg
      >>> x = tf.constant(2.0)
      >>> cg.per_element_gradients(lambda x: tf.stack([x ** 2, x ** 3]), x).numpy()
      array([ 4., 12.], dtype=float32)

    Migrating from TF1:
      Before: `tf.map_fn(lambda yi: tf.gradients(yi, x)[0], y)` (fails at run time) or a
      Python loop of `tf.gradients(y[i], x)`. After: `cg.per_element_gradients(y, x)`.
    """
    name = "per_element_gradients"
    problem = st.make_problem(name, target, sources, tape)
    unconnected = st.check_unconnected(name, unconnected_gradients)
    backend = dispatch.backend_for(problem)
    return problem.pack(_jacobians.per_element(backend, problem.flat, unconnected))


def batch_jacobian(target: Target, source: TensorLike, *,
                   tape: tf.GradientTape | None = None, strategy: Strategy = "auto",
                   unconnected_gradients: Unconnected = "none") -> tf.Tensor | None:
    """Per-sample Jacobians of a batched target with respect to a batched source.

    Shape: `[b] + y.shape[1:] + x.shape[1:]`, `B[s, i..., j...] = d y[s, i...] / d x[s, j...]`.
    A target of shape `(b,)` (one scalar per sample) gives per-sample gradients, `x.shape`.
    The batch size may be unknown until run time, in TF1 graphs too.

    Caveat: samples are assumed independent (`y[s]` depends on `x[s]` only). Cross-sample
    terms (BatchNorm in training mode, attention across the batch) are silently added in;
    use `stacked_jacobian` and take the diagonal blocks there.

    Args:
      target: the batched tensor `y` (with `tape` in eager mode) or a callable `f(x) -> y`.
      source: one batched tensor or variable `x`.
      tape: the `tf.GradientTape` that recorded an eager tensor target.
      strategy: as `stacked_jacobian`, over per-sample elements.
      unconnected_gradients: "none" or "zero", as in `stacked_jacobian`.

    Returns:
      The per-sample Jacobians, in the source's dtype (None if unconnected and "none").

    Raises:
      ValueError: when target or source has no leading dimension, or their batch sizes
        differ (checked at run time when unknown while building the graph).
      TypeError, compat_grads.ModeError: as `stacked_jacobian`.

    Example:
      >>> import compat_grads as cg
      >>> x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
      >>> cg.batch_jacobian(lambda x: x ** 2, x).shape
      TensorShape([2, 2, 2])

    Migrating from TF1:
      Before: `parallel_for.gradients.batch_jacobian(y, x)` (private; crashes on an unknown
      batch size in a v1 Graph inside TF2). After: `cg.batch_jacobian(y, x)`.
    """
    name = "batch_jacobian"
    problem = st.make_problem(name, target, source, tape)
    strategy = st.check_strategy(name, strategy)
    unconnected = st.check_unconnected(name, unconnected_gradients)
    (flat_source,) = _single_source(name, problem)
    backend = dispatch.backend_for(problem)
    guard = st.check_batch(name, backend.target, flat_source)
    block = _jacobians.batch_jacobian_block(backend, flat_source, strategy, unconnected)
    return st.with_guard(block, guard)


def _single_source(name, problem):
    if len(problem.flat) != 1 or tf.nest.is_nested(problem.structure):
        raise TypeError(message(
            name, f"source must be one tensor or variable, but got a "
            f"{type(problem.structure).__name__} of {len(problem.flat)}",
            "Call it once per source, or use stacked_jacobian for a nest of sources."))
    return problem.flat
