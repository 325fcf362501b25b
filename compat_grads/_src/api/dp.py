"""Private training: each example's gradient norm, and the sum of the clipped per-example
gradients (DP-SGD), without materializing the per-example gradients where a rule knows the
layer. `compat_grads.api` is their face."""

from __future__ import annotations

from compat_grads._src.api import docs as _docs
from compat_grads._src.call import run as _call
from compat_grads._src.call import specs as _specs
from compat_grads._src.call.options import MAX_BYTES
from compat_grads._src.core.types import Budget, ChunkSize, Nest, Unconnected


@_docs.public_call
def per_example_gradient_norms(loss_fn, model, x, y, *, weights: Nest = None,
                               per_weight: bool = False, independent: bool = True,
                               chunk_size: ChunkSize = "auto",
                               max_bytes: int | None = MAX_BYTES, memory_budget: Budget = None,
                               compile: bool = True, jit_compile: bool = False,
                               distribute=None, gather: bool = True,
                               has_aux: bool = False, return_value: bool = False):
    """Each example's L2 gradient norm, without materializing its gradient.

    Shape: `[b]`, `norms[s] = ||d loss_s / d weights||` over all `weights` together, where
    `loss_s = sum(loss_fn(y[s:s+1], model(x[s:s+1])))` as in `per_example_gradients`; with
    `per_weight=True`, the structure of `weights` with one `[b]` norm each. One forward
    and one backward pass: each weight's per-example gradient is read from its layer's
    inputs and output gradients (Dense and EinsumDense of any input rank, convolutions,
    embeddings, normalizations, attention, biases) by Gram matrices or by materializing,
    whichever is smaller; a weight used twice is one weight. A weight no rule knows (a
    recurrent layer's, a custom op's) gets its per-example gradients materialized as
    `per_example_gradients` computes them, with one `compat_grads.MaterializedWarning`
    naming it: the values are the same either way.

    Args:
      loss_fn: `loss_fn(y_true, y_pred) -> per-example losses`, shape `[b]` or `[b, ...]`
        (summed per example): a Keras loss function, or a `tf.keras.losses.Loss` with
        `reduction="none"`.
      model: a `tf_keras` model or layer (Keras 3 too, outside TF1 graphs), or any callable
        `model(x) -> y_pred` over variables.
      x: the batch of inputs (a tensor or a nest of tensors, batch axis first).
      y: the batch of labels, passed to `loss_fn`.
      weights: the variables (a list, tuple or dict nest); default `model.trainable_weights`.
      per_weight: return one `[b]` norm per weight, in the structure of `weights`.
      independent: whether examples are independent (True: the default). A model seen to
        mix them (BatchNormalization in training mode) is an error then; False computes the
        exact per-example gradients of the coupled batch, materialized.
      {memory}
      {compiling}
      distribute: a `tf.distribute.Strategy` whose replicas share the examples (each reads
        the norms of its share; they are joined along the batch axis). Needs
        independent=True.
        {devices}
      {gather}
      {has_aux_forward}
      {return_value_forward}

    Returns:
      `[b]` norms in the losses' dtype (or their structure with `per_weight=True`).

    Raises:
      TypeError: for a model or loss that is not callable, or weights that are not float.
      ValueError: for a loss that is not one per example, or a model that mixes the
        examples with independent=True.
      compat_grads.ModeError: for a Keras 3 model in a TF1 graph.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> tf.keras.utils.set_random_seed(0)
      >>> model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
      >>> x, y = tf.ones([4, 3]), tf.zeros([4, 2])
      >>> norms = cg.per_example_gradient_norms(tf.keras.losses.mean_squared_error,
      ...                                       model, x, y)
      >>> norms.shape.as_list()
      [4]

    Migrating from TF1:
      Before: `tf.gradients(loss[i], weights)` for each example, then the norms (b gradient
      graphs, a fixed batch size). After: `cg.per_example_gradient_norms(loss_fn, model, x,
      y)`, one forward and one backward pass.
    """
    return _call.run(_specs.PER_EXAMPLE_GRADIENT_NORMS, model, (weights, x, y),
                     compile=compile, jit_compile=jit_compile, loss_fn=loss_fn,
                     per_weight=per_weight, independent=independent, chunk_size=chunk_size,
                     max_bytes=max_bytes, memory_budget=memory_budget, distribute=distribute,
                     gather=gather, has_aux=has_aux, return_value=return_value)


@_docs.public_call
def clipped_gradients(loss_fn, model, x, y, *, l2_norm_clip: float, weights: Nest = None,
                      noise_multiplier: float = 0.0, seed=None,
                      reduction: str = "sum", return_norms: bool = False,
                      independent: bool = True, unconnected_gradients: Unconnected = "none",
                      chunk_size: ChunkSize = "auto", max_bytes: int | None = MAX_BYTES,
                      memory_budget: Budget = None, compile: bool = True,
                      jit_compile: bool = False, distribute=None, gather: bool = True,
                      has_aux: bool = False, return_value: bool = False):
    """The sum of the per-example gradients, each clipped to an L2 norm of at most
    `l2_norm_clip`, optionally noised: the gradient of one DP-SGD step.

    Shape: the structure of `weights`, `sum_s g_s * min(1, C / ||g_s||)` with C =
    `l2_norm_clip` and `g_s` example s's gradient over all `weights` (as
    `per_example_gradient_norms` measures it), plus Gaussian noise of standard deviation
    `noise_multiplier * C` on every element when `noise_multiplier > 0`, divided by the
    batch size with `reduction="mean"`. The per-example gradients are never materialized
    where a rule knows the layer: one forward and one backward pass, then one product per
    weight use (the weight gradient of an ordinary step, reweighted).

    Args:
      loss_fn: `loss_fn(y_true, y_pred) -> per-example losses` (see
        `per_example_gradient_norms`).
      model: a `tf_keras` model or layer (Keras 3 too, outside TF1 graphs), or any callable
        `model(x) -> y_pred` over variables.
      x: the batch of inputs (a tensor or a nest of tensors, batch axis first).
      y: the batch of labels, passed to `loss_fn`.
      l2_norm_clip: C, the largest norm an example's gradient keeps (a positive number).
      weights: the variables (a list, tuple or dict nest); default `model.trainable_weights`.
      noise_multiplier: the noise's standard deviation in units of C (0: no noise). The
        privacy this buys for a number of steps and a sampling rate is an accountant's
        job (`dp-accounting`): see the Private training guide.
      seed: an int, needed with noise: the noise comes from a stateless generator, so one
        seed gives the same noise in every mode (TF1 graph included); pass a new seed each
        step (a repeated seed repeats the noise). In eager code a new seed does not
        retrace; in a compiled training step (Keras' `train_step`, a `tf.function`, a TF1
        graph) pass an integer scalar tensor that changes every step, such as
        `optimizer.iterations` or the global step.
      reduction: "sum" (the default) or "mean" (the noised sum divided by the batch size).
      return_norms: return `(gradients, norms)`, the `[b]` norms before clipping.
      independent: whether examples are independent (see `per_example_gradient_norms`).
      unconnected_gradients: "none" (None for a weight the loss does not use, when there is
        no noise) or "zero".
      {memory}
      {compiling}
      distribute: a `tf.distribute.Strategy` whose replicas share the examples: each clips
        and sums its share, the shares' sums are added up (an all-reduce), then the noise
        is added once and the mean taken over the whole batch: the result of one device,
        noise included, for one seed. Needs independent=True.
        {devices}
      gather: with `distribute`, True (the default) only: the replicas' shares of the
        clipped sum are not a result without the noise added to their total (ValueError).
      {has_aux_forward}
      {return_value_forward}

    Returns:
      The clipped (noised) sum in the structure of `weights`, each in its weight's dtype.

    Raises:
      TypeError: for a model or loss that is not callable, weights that are not float, or
        options of the wrong type.
      ValueError: for `l2_norm_clip` not positive, `noise_multiplier` negative, noise
        without a seed, an unknown `reduction`, a loss that is not one per example, or a
        model that mixes the examples with independent=True.

    Example (a DP-SGD step):
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> tf.keras.utils.set_random_seed(0)
      >>> model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(3,))])
      >>> x, y = tf.ones([8, 3]), tf.zeros([8, 1])
      >>> grads = cg.clipped_gradients(tf.keras.losses.mean_squared_error, model, x, y,
      ...                              l2_norm_clip=1.0, noise_multiplier=1.1, seed=7,
      ...                              reduction="mean")
      >>> [g.shape.as_list() for g in grads]
      [[3, 1], [1]]

    Migrating from TF1:
      Before: TF Privacy's `DPGradientDescentGaussianOptimizer` with one microbatch per
      example (a gradient per example). After: `cg.clipped_gradients(...)` and any
      optimizer's `apply_gradients`.
    """
    return _call.run(_specs.CLIPPED_GRADIENTS, model, (weights, x, y), compile=compile,
                     jit_compile=jit_compile, loss_fn=loss_fn, l2_norm_clip=l2_norm_clip,
                     noise_multiplier=noise_multiplier, noise_seed=seed,
                     reduction=reduction, return_norms=return_norms,
                     independent=independent, unconnected_gradients=unconnected_gradients,
                     chunk_size=chunk_size, max_bytes=max_bytes, memory_budget=memory_budget,
                     distribute=distribute, gather=gather, has_aux=has_aux,
                     return_value=return_value)
