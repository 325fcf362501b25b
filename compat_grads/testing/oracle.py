"""The independent oracle: analytic numpy Jacobians or float64 central differences.

No TensorFlow is used here, so the oracle cannot share a bug with what it checks.
"""

from __future__ import annotations

import functools

import numpy as np

from compat_grads.testing.cases import Case

_STEP = 1e-6


def _flatten(nest):
    """Leaves in tf.nest order (dicts by sorted key) without importing TensorFlow's nest."""
    if isinstance(nest, dict):
        return [leaf for key in sorted(nest) for leaf in _flatten(nest[key])]
    if isinstance(nest, (list, tuple)):
        return [leaf for item in nest for leaf in _flatten(item)]
    return [nest]


def _replace(nest, index, value):
    """`nest` with flat leaf `index` replaced by `value`."""
    flat = _flatten(nest)
    flat[index] = value
    leaves = iter(flat)

    def rebuild(node):
        if isinstance(node, dict):
            return {key: rebuild(node[key]) for key in sorted(node)}
        if isinstance(node, (list, tuple)):
            return type(node)(rebuild(item) for item in node)
        return next(leaves)
    return rebuild(nest)


def _central_differences(fn, sources, consts):
    blocks = []
    for k, x in enumerate(_flatten(sources)):
        x = np.asarray(x, np.float64)
        y_shape = np.shape(fn(sources, consts))
        block = np.zeros((int(np.prod(y_shape)), x.size))
        for j in range(x.size):
            step = _STEP * max(1.0, abs(x.flat[j]))
            plus, minus = x.copy(), x.copy()
            plus.flat[j] += step
            minus.flat[j] -= step
            diff = (np.asarray(fn(_replace(sources, k, plus), consts))
                    - np.asarray(fn(_replace(sources, k, minus), consts)))
            block[:, j] = diff.reshape(-1) / (2 * step)
        blocks.append(block.reshape(y_shape + x.shape))
    return blocks


@functools.cache
def jacobian(case: Case) -> list:
    """Full float64 Jacobian blocks, `y.shape + x_k.shape`, None for unconnected sources."""
    sources, consts = case.inputs()
    if case.jacobian is not None:
        blocks = case.jacobian(sources, consts)
    else:
        blocks = _central_differences(case.numpy_fn, sources, consts)
    return [None if k in case.unconnected else np.asarray(b, np.float64)
            for k, b in enumerate(blocks)]


def _y_shape(case, sources, consts):
    if case.numpy_fn is not None:
        return np.shape(case.numpy_fn(sources, consts))
    k, block = next((k, b) for k, b in enumerate(jacobian(case)) if b is not None)
    return block.shape[:block.ndim - np.ndim(_flatten(sources)[k])]


def expected(case: Case, function: str, unconnected: str = "none") -> list:
    """What `function` must return for `case`, flat over sources (None where expected)."""
    sources, _ = case.inputs()
    y_shape = _y_shape(case, *case.inputs())
    out = []
    for x, block in zip(_flatten(sources), jacobian(case)):
        x_shape = np.shape(x)
        if block is None:
            block = None if unconnected == "none" else np.zeros(y_shape + x_shape)
        out.append(None if block is None else _derive(function, block, y_shape, x_shape))
    return out


def _derive(function, block, y_shape, x_shape):
    if function == "stacked_jacobian":
        return block
    if function == "per_element_gradients":
        return block.reshape(y_shape + (-1,)).sum(axis=-1)
    if function == "batch_jacobian":
        b = y_shape[0]
        square = block.reshape(b, -1, b, int(np.prod(x_shape[1:])))
        diagonal = np.stack([square[s, :, s, :] for s in range(b)])
        return diagonal.reshape((b,) + y_shape[1:] + x_shape[1:])
    raise ValueError(f"no oracle for {function!r}")
