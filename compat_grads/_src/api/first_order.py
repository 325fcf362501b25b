"""The first-order public functions: each is its signature, its docstring and one call of the
call path (`compat_grads._src.call.run`) with its spec (`compat_grads._src.call.specs`).
`compat_grads.api` is their face."""

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
def stacked_jacobian(target: Target, sources: Nest, *, tape: tf.GradientTape | None = None,
                     strategy: Strategy = "auto", unconnected_gradients: Unconnected = "none",
                     chunk_size: ChunkSize = "auto", max_bytes: int | None = MAX_BYTES,
                     memory_budget: Budget = None,
                     compile: bool = True, jit_compile: bool = False, distribute=None,
                     gather: bool = True,
                     has_aux: bool = False, return_value: bool = False, flat: bool = False) -> Nest:
    """The full Jacobian of `target` with respect to each source.

    Shape: `J[k].shape == y.shape + x_k.shape`, `J[k][i..., j...] = d y[i...] / d x_k[j...]`.

    Args:
      {target}
      sources: a tensor, a variable, or a list / tuple / dict nest of them. A tensor given
        twice (`[x, x]`) gets the total derivative in each place, as `tf.gradients` gives.
      tape: the `tf.GradientTape` that recorded an eager tensor target (a variable target
        is read on it).
      strategy: "auto" (forward mode when the sources are smaller than the target, else
        reverse; the rows vectorized, or one by one where that is faster, by the rule
        in the Performance guide), "reverse" (vectorized VJPs over target
        elements), "forward" (vectorized JVPs over source elements) or "loop" (one row at
        a time in a `while_loop`, the lowest memory). All give the same values.
      unconnected_gradients: "none" (None for a source the target does not depend on) or
        "zero" (zeros of the block's shape); a `tf.UnconnectedGradients` works too.
      {memory}
      {compiling}
      distribute: a `tf.distribute.Strategy` whose replicas share the work (rows of the
        flattened target each; columns, i.e. elements of each source, for a callable with
        strategy="forward").
        {devices}
      gather: with `distribute`, return one tensor per block (True), or the pieces
        (False): the strategy's per-replica values, or a list with one result per device,
        each block holding the piece's rows `[rows] + x.shape` (or its columns,
        `y.shape + [columns]`).
      {has_aux}
      {return_value}
      {flat_jacobian}

    Returns:
      The blocks in the structure of `sources`, each with its source's dtype.

    Raises:
      TypeError: for a target that is neither a float tensor nor a callable (or a callable
        that returns None), non-float, ragged or sparse sources, or an option of the wrong
        type (a list for strategy=, a string for a bool).
      ValueError: for empty sources, an unknown strategy, a target and sources from two
        different graphs, or a Jacobian larger than `max_bytes`.
      compat_grads.ModeError: for an eager tensor target without its tape, a source the
        tape never watched, a target another recording tape recorded, or graph tensors used
        outside their graph's `as_default()` block.
      compat_grads.DerivativeError: for what TensorFlow cannot differentiate row by row: a
        tensor target computed by a `tf.py_function` or a TF1 `tf.while_loop` (pass the
        callable, which then runs again for each row, with a `VectorizationWarning`).

    Example:
      >>> import tensorflow as tf
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
    return _call.run(_specs.STACKED_JACOBIAN, target, (sources,), compile=compile,
                     jit_compile=jit_compile, tape=tape, strategy=strategy,
                     chunk_size=chunk_size, unconnected_gradients=unconnected_gradients,
                     max_bytes=max_bytes,
                     memory_budget=memory_budget, distribute=distribute, gather=gather,
                     has_aux=has_aux, return_value=return_value, flat=flat)


@_docs.public_call
def per_element_gradients(target: Target, sources: Nest, *,
                          tape: tf.GradientTape | None = None,
                          unconnected_gradients: Unconnected = "none", compile: bool = True,
                          jit_compile: bool = False,
                          has_aux: bool = False, return_value: bool = False) -> Nest:
    """dy/dx with the shape of `y`: the Jacobian summed over each source's axes.

    Shape: `G[k].shape == y.shape`, `G[k][i...] = sum_j d y[i...] / d x_k[j...]` (`J_k·1`).
    Computed as one forward-mode product per source, never by building the Jacobian.
    Compare `tf.gradients(y, x)`, which sums over `y` instead and has the shape of `x`.

    Args:
      {target}
      sources: a tensor, a variable, or a list / tuple / dict nest of them.
      {tape}
      {unconnected_gradients}
      {compiling}
      {has_aux}
      {return_value}

    Returns:
      One `y`-shaped tensor per source, in the structure of `sources`, in the source's dtype.

    Raises:
      TypeError, ValueError, compat_grads.ModeError: as `stacked_jacobian`.
      compat_grads.DerivativeError: where a graph cannot differentiate the gradient (the
        forward-mode product), e.g. through a TF1 `tf.while_loop`.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> x = tf.constant(2.0)
      >>> cg.per_element_gradients(lambda x: tf.stack([x ** 2, x ** 3]), x).numpy()
      array([ 4., 12.], dtype=float32)

    Migrating from TF1:
      Before: the forward-mode trick, `g = tf.gradients(y, x, grad_ys=u)[0]` with a dummy
      `u` shaped like `y`, then `tf.gradients(g, u)[0]`; or a Jacobian summed over x's axes.
      After: `cg.per_element_gradients(y, x)`. A Python loop of `tf.gradients(y[i], x)` is
      another quantity, the Jacobian's rows (`y.shape[:1] + x.shape`): that is
      `cg.stacked_jacobian(y, x)`. Where each `y[i]` depends on `x[i]` alone (a PINN's
      `u(x)` on collocation points), plain `tf.gradients(y, x)` is already this result
      and one reverse pass: keep it (docs: "When not to switch").
    """
    return _call.run(_specs.PER_ELEMENT_GRADIENTS, target, (sources,), compile=compile,
                     jit_compile=jit_compile, tape=tape,
                     unconnected_gradients=unconnected_gradients,
                     has_aux=has_aux, return_value=return_value)


@_docs.public_call
def batch_jacobian(target: Target, source: TensorLike, *,
                   tape: tf.GradientTape | None = None, strategy: Strategy = "auto",
                   unconnected_gradients: Unconnected = "none", independent: bool = True,
                   chunk_size: ChunkSize = "auto", max_bytes: int | None = MAX_BYTES,
                   memory_budget: Budget = None,
                   compile: bool = True, jit_compile: bool = False, distribute=None,
                   gather: bool = True, has_aux: bool = False, return_value: bool = False,
                   flat: bool = False) -> tf.Tensor | None:
    """Per-sample Jacobians of a batched target with respect to a batched source.

    Shape: `[b] + y.shape[1:] + x.shape[1:]`, `B[s, i..., j...] = d y[s, i...] / d x[s, j...]`.
    A target of shape `(b,)` (one scalar per sample) gives per-sample gradients, `x.shape`.
    The batch size may be unknown until run time, in TF1 graphs too.

    Caveat: with `independent=True` (the default) samples are assumed independent (`y[s]`
    depends on `x[s]` only): one pass per per-sample element. Cross-sample terms (BatchNorm in
    training mode, attention across the batch) are then silently added in.
    `independent=False` takes the per-sample blocks of the full Jacobian instead: exact for
    coupled samples, at b times the cost and memory.

    Args:
      target: the batched tensor `y` (with `tape` in eager mode) or a callable `f(x) -> y`.
      source: one batched tensor or variable `x`.
      {tape}
      strategy: as `stacked_jacobian`, over per-sample elements.
      {unconnected_gradients}
      independent: whether samples are independent (see the caveat).
      {memory}
      {compiling}
      distribute: a `tf.distribute.Strategy` whose replicas share the samples (each
        computes the Jacobians of its share). Needs a callable target and independent=True.
        {devices}
      {results}
      {flat_batch_jacobian}

    Returns:
      The per-sample Jacobians, in the source's dtype (None if unconnected and "none").

    Raises:
      ValueError: when target or source has no leading dimension, their batch sizes
        differ (checked at run time when unknown while building the graph), or the result
        would take more than `max_bytes`.
      TypeError, compat_grads.ModeError: as `stacked_jacobian`.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
      >>> cg.batch_jacobian(lambda x: x ** 2, x).shape
      TensorShape([2, 2, 2])

    Migrating from TF1:
      Before: `parallel_for.gradients.batch_jacobian(y, x)` (private; crashes on an unknown
      batch size in a v1 Graph inside TF2). After: `cg.batch_jacobian(y, x)`.
    """
    return _call.run(_specs.BATCH_JACOBIAN, target, (source,), compile=compile,
                     jit_compile=jit_compile, tape=tape, strategy=strategy,
                     chunk_size=chunk_size, unconnected_gradients=unconnected_gradients,
                     independent=independent, max_bytes=max_bytes,
                     memory_budget=memory_budget, distribute=distribute,
                     gather=gather,
                     has_aux=has_aux, return_value=return_value, flat=flat)


@_docs.public_call
def per_example_gradients(loss_fn, model, x, y, *, weights: Nest = None,
                          independent: bool = True, strategy: Strategy = "auto",
                          unconnected_gradients: Unconnected = "none",
                          chunk_size: ChunkSize = "auto", max_bytes: int | None = MAX_BYTES,
                          memory_budget: Budget = None,
                          compile: bool = True, jit_compile: bool = False, distribute=None,
                          gather: bool = True, has_aux: bool = False,
                          return_value: bool = False) -> Nest:
    """Per-example gradients of a loss with respect to a model's weights.

    Shape: `G[k].shape == [b] + w_k.shape`, `G[k][s] = d loss_s / d w_k`, where
    `loss_s = sum(loss_fn(y[s:s+1], model(x[s:s+1])))` is example s's loss. With
    `independent=True` (the default) each example runs forward and backward on its own,
    vectorized over the batch: about the cost of one batched gradient, not of b gradients.
    That is exact when examples do not interact; BatchNorm in training mode (or anything
    else that mixes the batch) needs `independent=False`: the rows of the Jacobian of the
    batch's per-example losses, exact for coupled examples, at b backward passes through
    the whole batch.

    Args:
      loss_fn: `loss_fn(y_true, y_pred) -> per-example losses`, shape `[b]` or `[b, ...]`
        (summed per example): a Keras loss function, or a `tf.keras.losses.Loss` with
        `reduction="none"`.
      model: a `tf_keras` model or layer (Keras 3 too, outside TF1 graphs), or any
        callable `model(x) -> y_pred`. Call it in training mode with
        `lambda x: model(x, training=True)` (Dropout then draws a mask per example).
      x: the batch of inputs (a tensor or a nest of tensors, batch axis first).
      y: the batch of labels (a tensor or a nest, batch axis first), passed to `loss_fn`.
      weights: the variables (a list, tuple or dict nest) the model reads (tensors it
        reads by closure work too); default `model.trainable_weights`.
      independent: whether examples are independent (see above).
      strategy: "auto" or "reverse" (vectorized with pfor) or "loop" (a `while_loop` over
        examples, the lowest memory).
      unconnected_gradients: "none" (None for a weight the loss does not use) or "zero".
      chunk_size: "auto" (the default: every example at once when the gradients fit
        `memory_budget`, else the largest chunk that does), an int (at most this many
        examples in flight at once) or None (every example at once).
      max_bytes: the most memory, in bytes, the result and the examples in flight at once
        may take (default 16 GiB), as in `stacked_jacobian`; None: no limit.
      {memory_budget}
      compile: in eager mode, trace once per model, options and input shapes and cache the
        tf.function (False: run it eagerly under tapes).
      {jit_compile}
      distribute: a `tf.distribute.Strategy` whose replicas share the examples (each
        computes its share's gradients). Needs independent=True.
        {devices}
      {gather}
      {has_aux_model}
      {return_value_losses}

    Returns:
      The per-example gradients in the structure of `weights`, each in its weight's dtype.

    Raises:
      TypeError: for a model or loss that is not callable, weights=None without Keras
        trainable weights, or non-float weights.
      ValueError: for a loss that is not one per example, strategy="forward", or
        gradients larger than `max_bytes`.
      compat_grads.ModeError: for a Keras 3 model in a TF1 graph.

    Example (per-example clipping, as in DP-SGD):
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> tf.keras.utils.set_random_seed(0)
      >>> model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(3,))])
      >>> x, y = tf.ones([8, 3]), tf.zeros([8, 1])
      >>> grads = cg.per_example_gradients(tf.keras.losses.mean_squared_error, model, x, y)
      >>> [g.shape.as_list() for g in grads]  # kernel (3, 1) and bias (1,), per example
      [[8, 3, 1], [8, 1]]
      >>> norms = tf.sqrt(sum(tf.reduce_sum(tf.reshape(g, [8, -1]) ** 2, 1) for g in grads))
      >>> scale = tf.minimum(1.0, 1.0 / norms)  # clip each example to norm 1, then average
      >>> update = [tf.reduce_mean(g * tf.reshape(scale, [8] + [1] * (g.shape.rank - 1)), 0)
      ...           for g in grads]
      >>> [u.shape.as_list() for u in update]
      [[3, 1], [1]]

    Migrating from TF1:
      Before: a Python loop of `tf.gradients(loss[i], weights)` over the batch (b gradient
      graphs, a fixed batch size), or `tf.map_fn` over examples. After:
      `cg.per_example_gradients(loss_fn, model, x, y)`, one graph, any batch size.
    """
    return _call.run(_specs.PER_EXAMPLE_GRADIENTS, model, (weights, x, y), compile=compile,
                     jit_compile=jit_compile, loss_fn=loss_fn, independent=independent,
                     strategy=strategy, unconnected_gradients=unconnected_gradients,
                     chunk_size=chunk_size, max_bytes=max_bytes,
                     memory_budget=memory_budget, distribute=distribute,
                     gather=gather, has_aux=has_aux, return_value=return_value)


@_docs.public_call
def jvp(f, primals: Nest, tangents: Nest, *, compile: bool = True, jit_compile: bool = False,
        has_aux: bool = False):
    """Forward mode: the outputs of `f` and their directional derivative along `tangents`.

    Shape: `(f(primals), J·tangents)`, the second with the structure and shapes of the
    outputs. One forward pass in eager mode (`tf.autodiff.ForwardAccumulator`); the
    double-VJP trick in graphs.

    Args:
      f: a callable `f(primals) -> tensor or nest of tensors`.
      primals: a tensor, a variable, or a list / tuple / dict nest of them (a tensor given
        twice is one primal: its tangents add up).
      tangents: the direction, with the structure, shapes and dtypes of `primals`.
      {compiling}
      {has_aux_transform}

    Returns:
      `(outputs, output_tangents)`; an output that does not depend on the primals gets a
      zero tangent.

    Raises:
      TypeError: when `f` is not callable or `tangents` does not match `primals`.
      compat_grads.DerivativeError: where a graph cannot differentiate the gradient (the
        double-VJP trick), e.g. through a TF1 `tf.while_loop`.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> out, tangent = cg.jvp(lambda x: x ** 2, tf.constant([1.0, 3.0]),
      ...                       tf.constant([1.0, 0.0]))
      >>> tangent.numpy()
      array([2., 0.], dtype=float32)

    Migrating from TF1:
      Before: `g = tf.gradients(y, x, grad_ys=u); tf.gradients(g, u, grad_ys=v)` with a
      placeholder u. After: `cg.jvp(f, x, v)`.
    """
    return _call.run(_specs.JVP, f, (primals, tangents), compile=compile,
                     jit_compile=jit_compile, has_aux=has_aux)


@_docs.public_call
def vjp(f, primals: Nest, cotangents: Nest, *, compile: bool = True,
        jit_compile: bool = False,
        has_aux: bool = False):
    """Reverse mode: the outputs of `f` and the cotangents pulled back to the primals.

    Shape: `(f(primals), cotangentsᵀ·J)`, the second with the structure and shapes of
    `primals`, in their dtypes.

    Args:
      f: a callable `f(primals) -> tensor or nest of tensors`.
      primals: a tensor, a variable, or a list / tuple / dict nest of them.
      cotangents: with the structure and shapes of the outputs of `f`.
      {compiling}
      {has_aux_transform}

    Returns:
      `(outputs, gradients)`; a primal the outputs do not depend on gets zeros.

    Raises:
      TypeError / ValueError: when `f` is not callable or `cotangents` does not match.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> out, grads = cg.vjp(lambda x: x ** 2, tf.constant([1.0, 3.0]),
      ...                     tf.constant([1.0, 1.0]))
      >>> grads.numpy()
      array([2., 6.], dtype=float32)

    Migrating from TF1:
      Before: `tf.gradients(y, x, grad_ys=u)`. After: `cg.vjp(f, x, u)` in every mode.
    """
    return _call.run(_specs.VJP, f, (primals, cotangents), compile=compile,
                     jit_compile=jit_compile, has_aux=has_aux)
