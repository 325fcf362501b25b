"""The independent oracle: analytic numpy Jacobians or float64 central differences.

No TensorFlow is used here, so the oracle cannot share a bug with what it checks.
"""

from __future__ import annotations

import functools

import numpy as np

from compat_grads.testing.cases import Case

_STEP = 1e-6
_SECOND_STEP = 1e-4


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


def _moved(case, nest, k, value):
    """`nest` with flat leaf k, and every leaf that repeats it, replaced by `value`."""
    for index in case.group(k):
        nest = _replace(nest, index, value)
    return nest


def central_difference(evaluate, x, direction, step):
    """The derivative of `evaluate` at `x` along `direction` (an array of x's shape), by a
    float64 central difference: `(evaluate(x + step d) - evaluate(x - step d)) / 2 step`.
    The one difference quotient of every oracle (the matrix's and the Keras models')."""
    x = np.asarray(x, np.float64)
    plus, minus = (np.asarray(evaluate(x + d), np.float64) for d in (step * direction,
                                                                      -step * direction))
    return (plus - minus) / (2 * step)


def example_differences(evaluate, x, coupled, step=1e-6) -> np.ndarray:
    """d evaluate(x)[s] / d x[s] per example by central differences, shape `[b] +
    y.shape[1:] + x.shape[1:]`: every example moved at once when they are independent, one
    at a time when they are `coupled` (the others then see the batch change)."""
    flat = x.reshape(x.shape[0], -1)

    def along(direction):
        return central_difference(lambda f: evaluate(f.reshape(x.shape)), flat, direction,
                                  step)
    columns = []
    for j in range(flat.shape[1]):
        if coupled:
            columns.append(np.stack([along(unit(flat.shape, (s, j)))[s]
                                     for s in range(x.shape[0])]))
        else:
            columns.append(along(unit(flat.shape, (slice(None), j))))
    return np.stack(columns, axis=-1).reshape(*columns[0].shape, *x.shape[1:])


def unit(shape, index) -> np.ndarray:
    """The float64 array of `shape` that is 1 at the flat (or tuple) `index`, 0 elsewhere."""
    direction = np.zeros(shape)
    direction[np.unravel_index(index, shape) if np.isscalar(index) else index] = 1.0
    return direction


def steps(x, base) -> np.ndarray:
    """The difference step of each element of `x`: `base * max(1, |x_j|)`, so that a step
    moves a large value by the same relative amount as a small one."""
    return base * np.maximum(1.0, np.abs(np.asarray(x, np.float64)))


def difference_jacobian(evaluate, flat, step=_STEP) -> list:
    """The blocks `y.shape + x_k.shape` of the Jacobian of `evaluate` by float64 central
    differences, one per array of `flat`; `evaluate(k, x_k)` is the output with array k
    moved to `x_k` (the others where they are). `step` is the base of `steps`."""
    blocks = []
    for k, x in enumerate(flat):
        x = np.asarray(x, np.float64)
        y_shape = np.shape(evaluate(k, x))
        block, h = np.zeros((int(np.prod(y_shape)), x.size)), steps(x, step)
        for j in range(x.size):
            block[:, j] = central_difference(lambda moved, k=k: evaluate(k, moved), x,
                                             unit(x.shape, j), h.flat[j]).reshape(-1)
        blocks.append(block.reshape(y_shape + x.shape))
    return blocks


def _central_differences(case, sources, consts):
    def evaluate(k, moved):  # a repeated source moves with its every occurrence
        return case.numpy_fn(_moved(case, sources, k, moved), consts)
    return difference_jacobian(evaluate, _flatten(sources))


def _shift(moved, k, index, step):
    moved[k].flat[index] += step


def difference_hessian(evaluate, flat, step=_SECOND_STEP, shift=_shift) -> list:
    """H[i][j] = `y.shape + x_i.shape + x_j.shape` by float64 second-order central
    differences of `evaluate(arrays) -> y`, at the arrays `flat`. `shift(arrays, k, index,
    step)` moves element `index` of array k in place (by default that element alone);
    `step` is the base of `steps`. It costs 4 evaluations per pair of elements."""
    flat = [np.asarray(x, np.float64) for x in flat]
    y_shape = np.shape(evaluate([x.copy() for x in flat]))

    def at(moves):
        moved = [x.copy() for x in flat]
        for k, index, h in moves:
            shift(moved, k, index, h)
        return np.asarray(evaluate(moved), np.float64).reshape(-1)

    blocks = [[None] * len(flat) for _ in flat]
    for i, x_i in enumerate(flat):
        for j, x_j in enumerate(flat):
            block = np.zeros((int(np.prod(y_shape)), x_i.size, x_j.size))
            h_i, h_j = steps(x_i, step), steps(x_j, step)
            for a in range(x_i.size):
                for b in range(x_j.size):
                    h_a, h_b = h_i.flat[a], h_j.flat[b]
                    block[:, a, b] = (at([(i, a, h_a), (j, b, h_b)])
                                      - at([(i, a, h_a), (j, b, -h_b)])
                                      - at([(i, a, -h_a), (j, b, h_b)])
                                      + at([(i, a, -h_a), (j, b, -h_b)])) / (4 * h_a * h_b)
            blocks[i][j] = block.reshape(y_shape + x_i.shape + x_j.shape)
    return blocks


def _second_differences(case, sources, consts):
    def evaluate(moved):
        nest = sources
        for k, x in enumerate(moved):
            nest = _replace(nest, k, x)
        return case.numpy_fn(nest, consts)

    def shift(moved, k, index, h):  # a repeated source moves with its every occurrence
        for same in case.group(k):
            moved[same].flat[index] += h
    return difference_hessian(evaluate, _flatten(sources), shift=shift)


@functools.cache
def hessian(case: Case) -> list:
    """Full float64 Hessian blocks H[i][j], None where x_i or x_j is unconnected."""
    sources, consts = case.inputs()
    if case.hessian is not None:
        blocks = case.hessian(sources, consts)
    else:
        blocks = _second_differences(case, sources, consts)
    return [[None if i in case.unconnected or j in case.unconnected else np.asarray(b)
             for j, b in enumerate(row)] for i, row in enumerate(blocks)]


@functools.cache
def jacobian(case: Case) -> list:
    """Full float64 Jacobian blocks, `y.shape + x_k.shape`, None for unconnected sources."""
    sources, consts = case.inputs()
    if case.jacobian is not None:
        blocks = case.jacobian(sources, consts)
    else:
        blocks = _central_differences(case, sources, consts)
    return [None if k in case.unconnected else np.asarray(b, np.float64)
            for k, b in enumerate(blocks)]


def _y_shape(case, sources, consts):
    if case.numpy_fn is not None:
        return np.shape(case.numpy_fn(sources, consts))
    k, block = next((k, b) for k, b in enumerate(jacobian(case)) if b is not None)
    return block.shape[:block.ndim - np.ndim(_flatten(sources)[k])]


def expected(case: Case, function: str, unconnected: str = "none",
             independent: bool = True) -> list:
    """What `function` must return for `case`, flattened (None where None is expected)."""
    sources, consts = case.inputs()
    y_shape = _y_shape(case, sources, consts)
    x_shapes = [np.shape(x) for x in _flatten(sources)]
    if function in ("jvp", "vjp", "hvp"):
        return _transform(case, function, sources, consts, y_shape)
    if function in _TRACES:
        return _TRACES[function](case, unconnected, independent)
    if function in ("hessian", "batch_hessian"):
        shapes = [[y_shape + a + b for b in x_shapes] for a in x_shapes]
        blocks = [_fill(b, shape, unconnected) for row, row_shapes in zip(hessian(case), shapes)
                  for b, shape in zip(row, row_shapes)]
        if function == "hessian":
            return blocks
        return [None if b is None else diagonal(b, [y_shape, x_shapes[0], x_shapes[0]])
                for b in blocks]
    blocks = [_fill(b, y_shape + x, unconnected) for b, x in zip(jacobian(case), x_shapes)]
    return [None if b is None else _derive(function, b, y_shape, x)
            for b, x in zip(blocks, x_shapes)]


def _fill(block, shape, unconnected):
    if block is None:
        return None if unconnected == "none" else np.zeros(shape)
    return block


def _derive(function, block, y_shape, x_shape):
    if function == "stacked_jacobian":
        return block
    if function == "per_element_gradients":
        return block.reshape(y_shape + (-1,)).sum(axis=-1)
    if function == "batch_jacobian":
        return diagonal(block, [y_shape, x_shape])
    raise ValueError(f"no oracle for {function!r}")


def diagonal(block, shapes):
    """block[s, ..., s, ...] per sample s; each shape in `shapes` starts with the batch."""
    b = shapes[0][0]
    flat = block.reshape([dim for shape in shapes for dim in (b, int(np.prod(shape[1:])))])
    picks = [flat[(s, slice(None)) * len(shapes)] for s in range(b)]
    tails = [shape[1:] for shape in shapes]
    if len(shapes) == 3:  # per-sample Hessians: drop the target's (size-1) tail
        tails = tails[1:]
    return np.stack(picks).reshape((b,) + tuple(d for tail in tails for d in tail))


def _transform(case, function, sources, consts, y_shape):
    tangents, cotangent = case.directions()
    flat_t = [np.asarray(t, np.float64) for t in _flatten(tangents)]
    value = np.asarray(case.numpy_fn(sources, consts), np.float64)
    blocks = [np.zeros(y_shape + np.shape(t)) if b is None else b
              for b, t in zip(jacobian(case), flat_t)]
    if function == "jvp":
        product = sum(np.tensordot(b, t, axes=t.ndim) for b, t in zip(blocks, flat_t))
        return [value, np.broadcast_to(product, y_shape).astype(np.float64)]
    if function == "vjp":
        return [value] + [np.tensordot(cotangent, b, axes=len(y_shape)) for b in blocks]
    rows = hessian(case)
    return [sum(np.zeros(np.shape(flat_t[i])) if h is None else
                np.tensordot(h.reshape(h.shape[len(y_shape):]), t, axes=t.ndim)
                for h, t in zip(row, flat_t)) for i, row in enumerate(rows)]


def _diagonal_of_blocks(blocks, shapes):
    """Per source, the diagonal of its own block `H[k][k]` (`y` scalar), shaped like it."""
    return [None if blocks[k][k] is None else
            np.diagonal(blocks[k][k].reshape(int(np.prod(x)), -1)).reshape(x)
            for k, x in enumerate(shapes)]


def _hessian_diagonal(case, unconnected, independent):
    sources, _ = case.inputs()
    shapes = [np.shape(x) for x in _flatten(sources)]
    return [_fill(d, x, unconnected) for d, x in zip(_diagonal_of_blocks(hessian(case), shapes),
                                                      shapes)]


def _summed(parts, unconnected, axes=None):
    kept = [p.sum(axis=axes) for p in parts if p is not None]
    if kept:
        return [sum(kept)]
    return [None if unconnected == "none" else np.zeros(())]


def _laplacian(case, unconnected, independent):
    return _summed(_hessian_diagonal(case, "none", True), unconnected)


def _batch_hessian_diagonal(case, unconnected, independent):
    (block,) = expected(case, "batch_hessian", unconnected, independent)
    if block is None:
        return [None]
    sources, _ = case.inputs()
    x_shape = np.shape(_flatten(sources)[0])
    n = int(np.prod(x_shape[1:]))
    return [np.stack([np.diagonal(s.reshape(n, n)) for s in block]).reshape(x_shape)]


def _batch_laplacian(case, unconnected, independent):
    (diagonal_,) = _batch_hessian_diagonal(case, unconnected, independent)
    return [None if diagonal_ is None else diagonal_.reshape(diagonal_.shape[0], -1).sum(1)]


def _divergence(case, unconnected, independent):
    (block,) = expected(case, "stacked_jacobian", unconnected)
    if block is None:
        return [None]
    n = int(np.prod(block.shape)) ** 0.5
    return [np.trace(block.reshape(int(round(n)), -1))]


def _batch_divergence(case, unconnected, independent):
    (block,) = expected(case, "batch_jacobian", unconnected)
    if block is None:
        return [None]
    b = block.shape[0]
    n = int(round((block.size // b) ** 0.5))
    return [np.trace(block.reshape(b, n, n), axis1=1, axis2=2)]


_TRACES = {"hessian_diagonal": _hessian_diagonal, "laplacian": _laplacian,
           "batch_hessian_diagonal": _batch_hessian_diagonal,
           "batch_laplacian": _batch_laplacian, "divergence": _divergence,
           "batch_divergence": _batch_divergence}
"""The diagonals and traces, taken from the oracle's Hessian or Jacobian."""
