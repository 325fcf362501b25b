"""Private training in the Keras model cases (`compat_grads.testing.models`): how a model
item calls `per_example_gradient_norms` and `clipped_gradients`, and their expected values
from the oracle's per-example gradients (a Python loop of one-example gradients)."""

from __future__ import annotations

import numpy as np

FUNCTIONS = ("per_example_gradient_norms", "clipped_gradients")
FALLBACKS = tuple(f"{function}@*" for function in FUNCTIONS)
"""Where a model whose layer no rule knows may warn (`compat_grads.MaterializedWarning`)."""
CLIP = 0.5
"""The clip of the model items: some of their examples' gradients are longer, some shorter."""


def invoke(function, loss_fn, model, x, y, weights, independent, compile):
    """The compat_grads call of a model item, as a flat list: the `[b]` norms, or the
    clipped sum per weight."""
    import compat_grads as cg

    if function == "per_example_gradient_norms":
        return [cg.per_example_gradient_norms(loss_fn, model, x, y, weights=weights,
                                              independent=independent, compile=compile)]
    return list(cg.clipped_gradients(loss_fn, model, x, y, weights=weights,
                                     l2_norm_clip=CLIP, independent=independent,
                                     compile=compile))


def expected(function, grads):
    """The values `function` must give, from per-example gradients (`[b] + w.shape` per
    weight, numpy); any other function's are the gradients themselves."""
    if function not in FUNCTIONS:
        return grads
    batch = grads[0].shape[0]
    norms = np.sqrt(sum(np.sum(np.reshape(g, (batch, -1)) ** 2, axis=1) for g in grads))
    if function == "per_example_gradient_norms":
        return [norms]
    scale = CLIP / np.maximum(norms, CLIP)
    return [np.tensordot(scale, g, axes=1) for g in grads]
