"""The arguments of a compiled call: which need converting, and the key of the concrete
function that serves them."""

from __future__ import annotations

import numpy as np

from compat_grads._src.core.tf import tf
from compat_grads._src.core.variables import unwrap_variable


def signature(args):
    """(The nest of `args` with each tensor's dtype and shape: a key of the concrete function
    that serves them; the tensors in `tf.nest.flatten`'s order: the concrete function's
    inputs), when its leaves are eager tensors in lists, tuples and dicts (dicts by sorted
    keys, as both flatten them); None otherwise (a variable, None, a ragged or sparse
    tensor, another container: the call goes through the tf.function). One walk gives both
    (this runs on every compiled call)."""
    leaves = []
    key = _keyed(args, leaves)
    return None if key is None else (key, leaves)


def _keyed(args, leaves):
    kind = type(args)
    if kind in (list, tuple):
        parts = tuple(_keyed(arg, leaves) for arg in args)
        return None if None in parts else (kind, parts)
    if kind is dict:
        if not all(type(key) is str for key in args):
            return None
        parts = tuple((key, _keyed(args[key], leaves)) for key in sorted(args))
        return None if any(part is None for _, part in parts) else (kind, parts)
    if isinstance(args, tf.Tensor):
        leaves.append(args)
        return args.dtype, tuple(args.shape)
    return None


def plain(sources) -> bool:
    """Whether the sources need no conversion (`as_tensor`): a tensor or tf.Variable, or a
    flat list or tuple of them."""
    if isinstance(sources, (tf.Tensor, tf.Variable)):
        return True
    return type(sources) in (list, tuple) and all(
        isinstance(leaf, (tf.Tensor, tf.Variable)) and unwrap_variable(leaf) is leaf
        for leaf in sources)


def flat_sequence(sources, flat) -> bool:
    """Whether `sources` is a list or tuple of its leaves themselves (no nest inside)."""
    return type(sources) in (list, tuple) and len(sources) == len(flat) and all(
        a is b for a, b in zip(sources, flat))


def as_tensor(leaf):
    """numpy and Python floats become tensors (tf.function would retrace per Python value);
    a Keras 3 variable becomes its tf.Variable (passed in as is, it would arrive as a copy
    of its value, which nothing depends on)."""
    leaf = unwrap_variable(leaf)
    if isinstance(leaf, (np.ndarray, np.generic, float)):
        return tf.convert_to_tensor(leaf)
    return leaf
