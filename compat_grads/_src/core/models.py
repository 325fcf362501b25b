"""Keras models as targets: Keras 3 variables, a model's default weights, per-example losses.

Mode-agnostic like `compat_grads._src.core.structure`: whether a model can run in the current
mode is decided in `compat_grads._src.backends.select`.
"""

from __future__ import annotations

from compat_grads._src.core.checks import run_time_check
from compat_grads._src.core.errors import describe, message
from compat_grads._src.core.tf import tf
from compat_grads._src.core.variables import is_keras3, is_keras_layer, unwrap_variable

__all__ = ["is_keras3", "is_keras_layer", "unwrap_variable"]  # kept here for their importers


def default_weights(function, model, weights):
    """`weights`, or the model's trainable weights when it is None."""
    if weights is not None:
        return weights
    found = getattr(model, "trainable_weights", None)
    if not isinstance(found, (list, tuple)) or not found:
        raise TypeError(message(
            function, f"weights=None needs a Keras model or layer with trainable weights, "
            f"but model is {describe(model)}"
            + ("" if found is None else " without trainable weights"),
            "Pass weights=[...] (the variables to differentiate with respect to), or a "
            "built Keras model."))
    return list(found)


def check_callables(function, loss_fn, model):
    for name, value, form in (("loss_fn", loss_fn, "loss_fn(y_true, y_pred)"),
                              ("model", model, "model(x)")):
        if not callable(value):
            raise TypeError(message(
                function, f"{name} must be callable as {form}, but got {describe(value)}",
                "Pass a Keras model (or any function of the inputs) and a loss function "
                "that returns one loss per example."))


def as_tensors(function, name, nest):
    """Inputs and labels as tensors (numpy arrays and Python lists converted)."""
    if tf.is_tensor(nest):  # the common case skips the nest
        return nest
    try:
        return tf.nest.map_structure(
            lambda t: t if tf.is_tensor(t) else tf.convert_to_tensor(t), nest)
    except (TypeError, ValueError) as err:
        raise TypeError(message(
            function, f"{name} must be a tensor or a nest of tensors, but got "
            f"{describe(nest)} ({err})", f"Pass {name} as tensors or numpy arrays.")) from err


def per_example_losses(function, loss_fn, model, x, y, batch):
    """`loss_fn(y, model(x))` summed over all axes but the first: shape `(b,)`, checked to
    have `batch` (an int, or None when unknown) entries."""
    predictions = _returned(function, "model", model(x))
    losses = tf.convert_to_tensor(_returned(function, "loss_fn", loss_fn(y, predictions)))
    if losses.shape.rank == 0 or not losses.shape[:1].is_compatible_with([batch]):
        raise ValueError(_loss_shape_error(function, losses, batch))
    if losses.shape.rank == 1:
        return losses
    if losses.shape.rank is not None:
        return tf.reduce_sum(losses, axis=list(range(1, losses.shape.rank)))
    return tf.reduce_sum(tf.reshape(losses, [tf.shape(losses)[0], -1]), axis=1)


def _returned(function, name, value):
    if value is None:
        raise TypeError(message(
            function, f"{name} returned None (a missing return statement?)",
            f"Make {name} return its result: end it with `return ...`."))
    return value


def _loss_shape_error(function, losses, batch):
    return message(
        function, f"loss_fn must return one loss per example, shape [{batch or 'b'}] or "
        f"[{batch or 'b'}, ...], but it returned shape {losses.shape}",
        "Pass a loss without reduction over the batch, e.g. "
        "tf.keras.losses.MeanSquaredError(reduction='none') or "
        "tf.keras.losses.sparse_categorical_crossentropy.")


def example(nest, i):
    """Example `i` of every batched tensor in `nest`, keeping a batch axis of 1."""
    return tf.nest.map_structure(lambda t: tf.gather(t, tf.reshape(i, [1])), nest)


def check_batches(function, x, y):
    """Checks that every input and label has the same number of examples (first dimension).
    Returns an assertion to run when a count is only known at run time, else None."""
    leaves = [("x", t) for t in tf.nest.flatten(x)] + [("y", t) for t in tf.nest.flatten(y)]
    (_, first), guards = leaves[0], []
    for name, leaf in leaves[1:]:
        if leaf.shape.rank == 0:
            raise ValueError(message(
                function, f"{name} must be batched (one entry per example), but got "
                f"{describe(leaf)}", f"Pass {name} with the examples on its first axis."))
        mine, theirs = (tf.compat.dimension_value(t.shape[0]) for t in (leaf, first))
        if mine is not None and theirs is not None and mine != theirs:
            raise ValueError(message(
                function, f"x and y must have the same number of examples (first "
                f"dimension), but x has {theirs} and {name} has {mine} ({describe(leaf)})",
                "Pass one label per input example."))
        if mine is None or theirs is None:
            guards.append(run_time_check(
                function, "x and y must have the same number of examples (first dimension)",
                "Pass one label per input example.", tf.debugging.assert_equal,
                tf.shape(leaf)[0], tf.shape(first)[0]))
    return tf.group(guards) if guards else None


def batch_size(function, x):
    """The batch size of the inputs (an int when static, else a scalar tensor)."""
    leaves = tf.nest.flatten(x)
    if not leaves or leaves[0].shape.rank == 0:
        raise ValueError(message(
            function, f"x must be batched (a leading example axis), but got "
            f"{describe(x)}", "Pass a batch of inputs, shape [b, ...]."))
    static = tf.compat.dimension_value(leaves[0].shape[0])  # a Dimension in TF1 graphs
    return static if static is not None else tf.shape(leaves[0])[0]
