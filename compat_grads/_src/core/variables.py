"""Keras objects among the sources: a Keras 3 variable is the tf.Variable it wraps, and a
Keras 3 object is told from a `tf_keras` one. Below the input checks
(`compat_grads._src.core.structure`) and the model helpers (`compat_grads._src.core.models`)."""

from __future__ import annotations

from compat_grads._src.core.tf import is_keras3_class, tf


def is_keras3(obj) -> bool:
    """Whether `obj` is a Keras 3 object (a Keras 3 class in its bases, so subclassed
    models count), not `tf_keras` / `tf.keras` 2."""
    return any(is_keras3_class(cls) for cls in type(obj).__mro__)


def is_keras_layer(obj) -> bool:
    """Whether `obj` is a Keras layer or model (Keras 2 or 3, `tf.keras` or `tf_keras`)."""
    return any(cls.__name__ == "Layer" and cls.__module__.split(".")[0] in ("keras", "tf_keras")
               for cls in type(obj).__mro__)


def unwrap_variable(leaf):
    """A Keras 3 variable on the TensorFlow backend wraps a tf.Variable: the one that tapes,
    accumulators and tf.gradients know. Anything else is returned as it is."""
    if isinstance(getattr(leaf, "value", None), tf.Variable) and is_keras3(leaf):
        return leaf.value
    return leaf
