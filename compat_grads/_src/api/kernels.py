"""Kernels of a network's parameters: the empirical neural tangent kernel (`empirical_ntk`):
its signature and docstring, one call into `compat_grads._src.curvature.ntk`, where the
arguments are checked and the Jacobians, products and chunks built; `compat_grads.api`
holds it with the others."""

from __future__ import annotations

from compat_grads._src.api import docs as _docs
from compat_grads._src.core.tf import tf
from compat_grads._src.core.types import Budget, ChunkSize, Nest, NtkMethod
from compat_grads._src.curvature import ntk as _ntk


@_docs.public
def empirical_ntk(f, params: Nest, x1, x2=None, *, trace_outputs: bool = True,
                  method: NtkMethod = "auto", chunk_size: ChunkSize = "auto",
                  memory_budget: Budget = None) -> tf.Tensor:
    """The empirical neural tangent kernel `K = J(x1) J(x2)ᵀ` of a network `f(params, x)`,
    J the Jacobian of its outputs with respect to the parameters.

    Shape: `[n1, n2]`, `K[i, j] = Σ_a ⟨∂f(x1_i)_a/∂θ, ∂f(x2_j)_a/∂θ⟩` summed over the
    outputs a (neural-tangents' `trace_axes=(-1,)` for a vector output); with
    `trace_outputs=False` every output pair, `[n1, n2] + out_shape + out_shape`. x2=None is
    x1 (the kernel's Gram matrix, symmetric). "jacobian" computes each side's per-example
    Jacobians (every example and output its own forward and backward pass, vectorized over
    them: O(n·o) one-example passes) and contracts them over the parameters, one matrix
    product per parameter; "products" takes J(x2)'s rows and pushes each through
    `f(params, x1)` by a JVP (one forward pass of x1 gives every output pair of a column,
    and J(x1) is never held). "auto" takes "products" for `trace_outputs=False` when the
    outputs times the weights come to at least 5 times the multiply-adds of one example's
    forward pass, counted in f's graph (the contraction's cost grows with the outputs
    squared there, the products' with the forward pass), else "jacobian" (the faster on
    every kernel summed over the outputs, and on convolutions, whose forward pass costs
    far more than their weights). When the Jacobians and the kernel do not fit
    `memory_budget`, x1's examples run in chunks (and x2's, when its Jacobian does not fit
    either) in a `tf.while_loop`, one block of the kernel at a time: a kernel whose
    Jacobians would not fit in memory is still computed, its Jacobians again for each
    block (`memory_plans()` shows the chunks). Every mode: in a TF1 graph one
    `Session.run`, x1 and x2 may be placeholders of unknown batch; in eager code a one-off
    `tf.function`, traced at each call.

    Args:
      f: a callable `f(params, x) -> outputs [n, ...]`, one row per example, the examples
        independent (a Keras model in inference: `lambda params, x: model(x)` with
        `params=model.trainable_weights`); its shape after the batch axis static.
      params: the parameters θ (a tensor, a variable, or a list / tuple / dict nest of
        them, one floating dtype, static shapes): the kernel is in their dtype.
      x1: the first inputs, a tensor `[n1, ...]` (batch axis first).
      x2: the second inputs `[n2, ...]`, or None (the default: x1).
      trace_outputs: True (the default) sums over the outputs, `[n1, n2]`; False keeps
        every pair, `[n1, n2] + out_shape + out_shape`.
      method: "auto" (the default), "jacobian" or "products", as above; the results agree.
      chunk_size: "auto" (the default: everything at once when it fits `memory_budget`,
        else the largest chunks that do, chosen when the graph is built), an int (at most
        that many examples of each side at once) or None (everything at once).
      {memory_budget}

    Returns:
      The kernel, a tensor in the parameters' dtype.

    Raises:
      TypeError: for an f that is not callable or does not return one tensor, params of
        two dtypes (or not floating point), and options of the wrong type.
      ValueError: for a parameter of unknown shape, an input without a batch axis,
        outputs without a static shape after the batch axis, an unknown method, a
        chunk_size that is not a positive int, and a memory_budget too small for one
        example of each side.
      compat_grads.ModeError: for a Keras 3 model in a TF1 graph.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> w = tf.constant([[1.0], [2.0]])
      >>> x = tf.constant([[1.0, 0.0], [1.0, 1.0]])
      >>> cg.empirical_ntk(lambda w, x: x @ w, w, x).numpy()  # x xᵀ for a linear model
      array([[1., 1.],
             [1., 2.]], dtype=float32)

    Migrating from TF1:
      Before: a Python loop of `tf.gradients` over every example and output, flattened
      and multiplied by hand (or neural-tangents' TensorFlow route through JAX). After:
      `cg.empirical_ntk(f, params, x1, x2)`, one graph.
    """
    return _ntk.empirical_ntk(f, params, x1, x2, trace_outputs, method, chunk_size,
                              memory_budget)
