"""The losses whose curvature in output space is known in closed form: mean squared error
and softmax cross-entropy from logits (sparse and categorical).

For these, the Gauss-Newton operator applies the loss's Hessian with respect to the
predictions directly, and the true Fisher samples labels from the distribution whose
negative log-likelihood the loss is. A loss is recognized only where the object itself
proves what it computes: Keras' own functions by identity (`keras.losses`, `tf_keras.losses`,
whichever are loaded), a `functools.partial` of one with keyword arguments, a Keras `Loss`
of exactly Keras' class with `reduction="none"`, TensorFlow's
`tf.nn.(sparse_)softmax_cross_entropy_with_logits`; and only with the arguments that keep
the closed form (`from_logits=True`, the last axis, no label smoothing, no ignored class).
Any other loss has its Hessian applied by a Hessian-vector product in output space
(`compat_grads._src.curvature.operators`), which is always right.

Imports `core/` and the probes only.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable

from compat_grads._src.core.tf import tf
from compat_grads._src.curvature import probes


@dataclasses.dataclass(frozen=True)
class Loss:
    """A loss known in closed form: `hessian(labels, predictions, u)`, the per-example
    Hessian with respect to the predictions applied to u (the shape of the predictions),
    and `sample(predictions, labels, seed, salt)`, labels shaped and typed like `labels`
    drawn from the predictive distribution at `predictions`."""

    name: str
    hessian: Callable
    sample: Callable


def _classes(predictions) -> tf.Tensor:
    """The size of the last axis (the classes, the outputs an MSE averages over) in the
    predictions' dtype."""
    static = tf.compat.dimension_value(predictions.shape[-1])
    count = static if static is not None else tf.shape(predictions)[-1]
    return tf.cast(count, predictions.dtype)


def _mse_hessian(labels, predictions, u):
    """mean_k (y_k - p_k)^2 has the Hessian (2 / k) I in p."""
    return (2 / _classes(predictions)) * u


def _mse_sample(predictions, labels, seed, salt):
    """p + sqrt(k / 2) ε: the Gaussian whose negative log-likelihood is the loss
    (|y - p|² / k, up to a constant), so that the expected true Fisher is the GGN."""
    noise = probes.normal(tf.shape(predictions), seed, salt, predictions.dtype)
    drawn = predictions + tf.sqrt(_classes(predictions) / 2) * noise
    return tf.reshape(tf.cast(drawn, labels.dtype), tf.shape(labels))


def _softmax_hessian(logits, u):
    """diag(s) - s sᵀ applied to u along the last axis, s = softmax(logits): the Hessian of
    -log softmax(z)_c in z, whatever the class c."""
    s = tf.nn.softmax(logits)
    su = s * u
    return su - s * tf.reduce_sum(su, axis=-1, keepdims=True)


def _sparse_hessian(labels, logits, u):
    return _softmax_hessian(logits, u)


def _categorical_hessian(labels, logits, u):
    """-Σ_c y_c log softmax(z)_c = -yᵀz + (Σ_c y_c) logsumexp(z): the softmax Hessian times
    the labels' sum (1 for one-hot labels and probabilities)."""
    mass = tf.reduce_sum(tf.cast(labels, logits.dtype), axis=-1, keepdims=True)
    return mass * _softmax_hessian(logits, u)


def _drawn_classes(logits, seed, salt):
    """A class for each row of logits, drawn from its softmax: the argmax of the logits
    plus Gumbel noise."""
    gumbel = -tf.math.log(-tf.math.log(probes.uniform(tf.shape(logits), seed, salt,
                                                      logits.dtype)))
    return tf.argmax(logits + gumbel, axis=-1)


def _sparse_sample(logits, labels, seed, salt):
    drawn = _drawn_classes(logits, seed, salt)
    return tf.reshape(tf.cast(drawn, labels.dtype), tf.shape(labels))


def _categorical_sample(logits, labels, seed, salt):
    drawn = _drawn_classes(logits, seed, salt)
    return tf.one_hot(drawn, tf.shape(logits)[-1], dtype=labels.dtype)


MSE = Loss("mean squared error", _mse_hessian, _mse_sample)
SPARSE = Loss("sparse softmax cross-entropy from logits", _sparse_hessian, _sparse_sample)
CATEGORICAL = Loss("softmax cross-entropy from logits", _categorical_hessian,
                   _categorical_sample)

KNOWN = {"mean_squared_error": MSE, "sparse_categorical_crossentropy": SPARSE,
         "categorical_crossentropy": CATEGORICAL}
"""Keras' loss functions by name."""
CLASSES = {"MeanSquaredError": "mean_squared_error",
           "SparseCategoricalCrossentropy": "sparse_categorical_crossentropy",
           "CategoricalCrossentropy": "categorical_crossentropy"}
"""Keras' loss classes, by the name of the function each wraps."""
NEUTRAL = {"from_logits": True, "axis": -1, "ignore_class": None, "label_smoothing": 0}
"""The keyword arguments the closed forms allow, with the values they must have."""
DESCRIBED = ("tf.keras.losses.mean_squared_error or MeanSquaredError(reduction='none'); "
             "sparse_categorical_crossentropy or categorical_crossentropy with "
             "from_logits=True (functools.partial, or the Loss classes with "
             "reduction='none'); tf.nn.sparse_softmax_cross_entropy_with_logits or "
             "tf.nn.softmax_cross_entropy_with_logits")
"""What `recognized` knows, for error messages."""


def recognized(loss_fn) -> Loss | None:
    """The closed form of `loss_fn`, or None when it cannot be proven (see the module)."""
    if isinstance(loss_fn, functools.partial):
        return None if loss_fn.args else _keras_function(loss_fn.func, loss_fn.keywords)
    for losses in _keras_losses():
        name = CLASSES.get(type(loss_fn).__name__)
        if name is not None and getattr(losses, type(loss_fn).__name__, None) is type(loss_fn):
            if getattr(loss_fn, "reduction", None) not in ("none", None):
                return None
            return _keras_function(getattr(loss_fn, "fn", None),
                                   getattr(loss_fn, "_fn_kwargs", None))
    if loss_fn is tf.nn.sparse_softmax_cross_entropy_with_logits:
        return SPARSE
    if loss_fn is tf.nn.softmax_cross_entropy_with_logits:
        return CATEGORICAL
    return _keras_function(loss_fn, {})


def _keras_losses() -> list:
    """The `losses` modules of the Keras packages already loaded (a loss of theirs can only
    come from one of them): nothing is imported here."""
    packages = (sys.modules.get(name) for name in ("keras", "tf_keras"))
    return [losses for losses in (getattr(p, "losses", None) for p in packages) if losses]


def _keras_function(fn, keywords) -> Loss | None:
    """The closed form of Keras' loss function `fn` called with `keywords`, or None."""
    found = next((loss for losses in _keras_losses() for name, loss in KNOWN.items()
                  if fn is not None and getattr(losses, name, None) is fn), None)
    if found is None or not isinstance(keywords, dict):
        return None
    if found is not MSE and keywords.get("from_logits") is not True:
        return None
    return found if all(_neutral(key, value) for key, value in keywords.items()) else None


def _neutral(key, value) -> bool:
    """Whether `key=value` keeps the closed form (Python values only: a tensor does not)."""
    if key not in NEUTRAL:
        return False
    wanted = NEUTRAL[key]
    if wanted is None or isinstance(wanted, bool):
        return value is wanted
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == wanted
