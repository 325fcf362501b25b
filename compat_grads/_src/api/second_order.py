"""The second-order public functions (hessian, batch_hessian, hvp): their signatures and
docstrings, each one call of the call path; `compat_grads.api` holds them with the others."""

from __future__ import annotations

from compat_grads._src.api import docs as _docs
from compat_grads._src.call import run as _call
from compat_grads._src.call import specs as _specs
from compat_grads._src.call.options import MAX_BYTES
from compat_grads._src.core.tf import tf
from compat_grads._src.core.types import (
    Budget,
    ChunkSize,
    Nest,
    Strategy,
    Target,
    TensorLike,
    Unconnected,
)


@_docs.public_call
def hessian(target: Target, sources: Nest, *, strategy: Strategy = "auto",
            unconnected_gradients: Unconnected = "none", chunk_size: ChunkSize = "auto",
            max_bytes: int | None = MAX_BYTES, memory_budget: Budget = None, compile: bool = True,
            jit_compile: bool = False, distribute=None, gather: bool = True,
            has_aux: bool = False, return_value: bool = False, flat: bool = False) -> Nest:
    """Second derivatives of `target`, cross terms between sources included.

    Shape: `H[i][j].shape == y.shape + x_i.shape + x_j.shape`, i.e. `x.shape + x.shape` for a
    scalar target and one source; `H[i][j][a..., b..., c...] = d² y[a...] / d x_i[b...]
    d x_j[c...]`. For a nest of sources the result is a nest of nests (blocks by row source,
    then column source).

    Computed as the Jacobian of the gradient: forward-over-reverse when a callable runs in
    eager mode, reverse-over-reverse in graphs ("auto"); "forward", "reverse" or "loop" pick
    the outer direction. A non-scalar target is one loop over (target element, source
    element) pairs, never a loop inside a loop.

    Args:
      target: a callable `f(sources) -> y` (every mode), or the tensor `y` in a graph or
        `tf.function` (an eager tensor cannot be differentiated twice after the fact).
      sources: a tensor, a variable, or a list / tuple / dict nest of them.
      strategy: "auto", "forward", "reverse" or "loop" (the outer Jacobian's direction).
      unconnected_gradients: "none" gives None for a block whose sources do not reach the
        gradient; "zero" gives zeros.
      {memory}
      {compiling}
      distribute: a `tf.distribute.Strategy` whose replicas share the rows (of the target's
        first Jacobian, flattened). Needs a callable target.
        {devices}
      {results}
      {flat_hessian}

    Returns:
      The blocks, in the structure of `sources` nested in itself, each in the dtype of its
      column source.

    Raises:
      compat_grads.ModeError: for an eager tensor target or a tape.
      TypeError, ValueError: as `stacked_jacobian` (a Hessian larger than `max_bytes` too).

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> x = tf.constant([1.0, 2.0])
      >>> cg.hessian(lambda x: x[0] ** 2 * x[1], x).numpy()
      array([[4., 2.],
             [2., 0.]], dtype=float32)

    Migrating from TF1:
      Before: `tf.hessians(y, x)` (graph only, one row at a time, no cross terms between
      sources). After: `cg.hessian(y, x)` in graphs, `cg.hessian(f, x)` everywhere.
    """
    return _call.run(_specs.HESSIAN, target, (sources,), compile=compile,
                     jit_compile=jit_compile, strategy=strategy, chunk_size=chunk_size,
                     unconnected_gradients=unconnected_gradients, max_bytes=max_bytes,
                     memory_budget=memory_budget,
                     distribute=distribute, gather=gather,
                     has_aux=has_aux, return_value=return_value, flat=flat)


@_docs.public_call
def batch_hessian(target: Target, source: TensorLike, *, strategy: Strategy = "auto",
                  unconnected_gradients: Unconnected = "none", independent: bool = True,
                  chunk_size: ChunkSize = "auto", max_bytes: int | None = MAX_BYTES,
                  memory_budget: Budget = None,
                  compile: bool = True, jit_compile: bool = False, distribute=None,
                  gather: bool = True, has_aux: bool = False, return_value: bool = False,
                  flat: bool = False) -> tf.Tensor | None:
    """Per-sample Hessians of per-sample scalars.

    Shape: `[b] + x.shape[1:] + x.shape[1:]`, `B[s, i..., j...] = d² y[s] / d x[s, i...]
    d x[s, j...]`, for a target of shape `(b,)` or `(b, 1)`.

    With `independent=True` (the default) it is the batch Jacobian of the batch-summed
    gradient: O(d) passes for d features per sample, not O(b·d). That assumes samples do not
    interact (`y[s]` depends on `x[s]` only); with BatchNorm in training mode, attention
    across the batch or any other coupling the result silently includes cross-sample terms.
    `independent=False` takes the exact per-sample blocks of the full Hessian instead:
    correct for coupled samples, at O(b·d) passes and O(b³·d²) memory.

    Args:
      target: a callable `f(x) -> y` (every mode), or the tensor `y` in a graph or
        `tf.function`.
      source: one batched tensor or variable `x`.
      strategy: "auto", "forward", "reverse" or "loop", as in `hessian`.
      {unconnected_gradients}
      independent: whether samples are independent (see above).
      {memory}
      {compiling}
      distribute: a `tf.distribute.Strategy` whose replicas share the samples (each
        computes the Hessians of its share). Needs a callable target and independent=True.
        {devices}
      {results}
      {flat_batch_hessian}

    Returns:
      The per-sample Hessians in the source's dtype (None if unconnected and "none").

    Raises:
      ValueError: if the target is not one scalar per sample, batch sizes differ (checked
        at run time when unknown while building the graph), or the Hessians would take
        more than `max_bytes`.
      compat_grads.ModeError: for an eager tensor target or a tape.
      TypeError: as `stacked_jacobian`.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> xy = tf.constant([[-6.0, -3.0], [1.0, 8.0]])
      >>> f = lambda xy: 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2
      >>> cg.batch_hessian(f, xy).numpy()[1]  # [[6y, 6x], [6x, 2]] at x=1, y=8
      array([[48.,  6.],
             [ 6.,  2.]], dtype=float32)

    Migrating from TF1:
      Before: nested tapes and `tape.batch_jacobian`, or `tf.hessians(tf.reduce_sum(y), x)`
      (mixes samples). After: `cg.batch_hessian(f, x)`.
    """
    return _call.run(_specs.BATCH_HESSIAN, target, (source,), compile=compile,
                     jit_compile=jit_compile, strategy=strategy, chunk_size=chunk_size,
                     unconnected_gradients=unconnected_gradients, independent=independent,
                     max_bytes=max_bytes,
                     memory_budget=memory_budget, distribute=distribute, gather=gather,
                     has_aux=has_aux, return_value=return_value, flat=flat)


@_docs.public_call
def hvp(f, primals: Nest, vector: Nest, *, compile: bool = True,
        jit_compile: bool = False,
        has_aux: bool = False, return_value: bool = False) -> Nest:
    """Hessian-vector product `H·v` of a scalar `f`, without building the Hessian.

    Shape: the structure and shapes of `primals`; `(H·v)[i] = sum_j H[i][j]·v[j]`. Computed
    in eager code as the JVP of the gradient along `vector` (forward-over-reverse), in a
    graph or `tf.function` as the gradient of `<gradient, vector>` (reverse-over-reverse,
    `vector` held constant: the double `tf.gradients` of a TF1 program, op for op, fewer
    ops than forward mode takes there): the cost of about two gradients, whatever the
    number of parameters.

    Args:
      f: a callable `f(primals) -> scalar`.
      primals: a tensor, a variable, or a list / tuple / dict nest of them.
      vector: with the structure, shapes and dtypes of `primals`.
      {compiling}
      {has_aux}
      {return_value}

    Returns:
      `H·v` in the structure of `primals` (zeros for primals that do not reach the gradient).

    Raises:
      ValueError: when `f` does not return a scalar.
      TypeError: when `vector` does not match `primals`.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> x = tf.constant([1.0, 2.0])
      >>> cg.hvp(lambda x: x[0] ** 2 * x[1], x, tf.constant([1.0, 0.0])).numpy()
      array([4., 2.], dtype=float32)

    Migrating from TF1:
      Before: `tf.gradients(tf.reduce_sum(tf.gradients(f, x)[0] * v), x)`. After:
      `cg.hvp(f, x, v)`.
    """
    return _call.run(_specs.HVP, f, (primals, vector), compile=compile, jit_compile=jit_compile,
                     has_aux=has_aux, return_value=return_value)
