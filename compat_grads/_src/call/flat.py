"""`flat=True`: the derivative as one matrix, as Newton, Gauss-Newton and Levenberg-Marquardt
code needs it, every statically known dimension kept.

The sources are joined in the order of `tf.nest.flatten(sources)`, each flattened in row-major
order, so column `c` of the matrix is element `c - offset_k` of source `k`. A block that is
None (a source the target does not depend on) becomes zeros: a matrix has no holes.
"""

from __future__ import annotations

import numpy as np

from compat_grads._src.core import structure as st
from compat_grads._src.core.errors import message
from compat_grads._src.core.tf import tf
from compat_grads._src.core.variables import unwrap_variable


def jacobian(function, blocks, y, sources):
    """`[size(y), sum_k size(x_k)]` from the blocks `y.shape + x_k.shape`."""
    y, xs = _shaped(y), [_shaped(x) for x in tf.nest.flatten(sources)]
    rows = st.size(y)
    dtype = _one_dtype(function, tf.nest.flatten(blocks), xs)
    return _joined([_matrix(b, [rows, st.size(x)], dtype) for b, x in
                    zip(tf.nest.flatten(blocks), xs)], axis=1)


def hessian(function, blocks, y, sources):
    """`[n, n]` for a scalar target, else `[size(y), n, n]`, n = sum_k size(x_k), from the
    blocks `H[i][j]` of shape `y.shape + x_i.shape + x_j.shape`."""
    y, xs = _shaped(y), [_shaped(x) for x in tf.nest.flatten(sources)]
    rows = st.size(y)
    grid = _grid(blocks, len(xs))
    dtype = _one_dtype(function, [b for row in grid for b in row], xs)
    matrix = _joined([_joined([_matrix(b, [rows, st.size(x_i), st.size(x_j)], dtype)
                               for b, x_j in zip(row, xs)], axis=2)
                      for row, x_i in zip(grid, xs)], axis=1)
    if y.shape.rank == 0:
        return _reshaped(matrix, [_dim(matrix, 1), _dim(matrix, 2)])
    return matrix


def batch_jacobian(function, block, y, source):
    """`[b, per-sample size(y), per-sample size(x)]` from `[b] + y.shape[1:] + x.shape[1:]`."""
    y, x = _shaped(y), _shaped(source)
    return _matrix(block, [_batch(y, x), st.per_sample_size(y), st.per_sample_size(x)],
                   _one_dtype(function, [block], [x]))


def batch_hessian(function, block, y, source):
    """`[b, n, n]`, n the per-sample size of x, from `[b] + x.shape[1:] + x.shape[1:]`."""
    x = _shaped(source)
    n = st.per_sample_size(x)
    return _matrix(block, [_batch(_shaped(y), x), n, n], _one_dtype(function, [block], [x]))


# -- shapes ------------------------------------------------------------------------------


def _grid(blocks, count):
    """The Hessian's blocks as rows of flat blocks (a nest of nests, like the sources)."""
    flat = tf.nest.flatten(blocks)
    return [flat[i * count:(i + 1) * count] for i in range(count)]


def _shaped(x):
    """A tensor (a variable read, a Keras 3 variable's too, numpy converted), for its static
    and dynamic shape and its dtype."""
    x = unwrap_variable(x)
    return x if isinstance(x, tf.Tensor) else tf.convert_to_tensor(x)


def _batch(y, x):
    static = tf.compat.dimension_value(y.shape[0]) if y.shape.rank else None
    static = static if static is not None else (
        tf.compat.dimension_value(x.shape[0]) if x.shape.rank else None)
    return static if static is not None else tf.shape(x)[0]


def _dim(x, axis):
    static = tf.compat.dimension_value(x.shape[axis])
    return static if static is not None else tf.shape(x)[axis]


def _static(dims) -> tf.TensorShape:
    return tf.TensorShape([d if isinstance(d, (int, np.integer)) else None for d in dims])


def _dynamic(dims):
    if any(tf.is_tensor(d) for d in dims):
        return tf.stack([tf.cast(d, tf.int32) for d in dims])
    return [int(d) for d in dims]


def _reshaped(x, dims):
    return st.reshape(x, _dynamic(dims), _static(dims))


def _matrix(block, dims, dtype):
    if block is None:
        return st.zeros(_static(dims), _dynamic(dims), dtype)
    return _reshaped(block, dims)


def _joined(parts, axis):
    return parts[0] if len(parts) == 1 else tf.concat(parts, axis)


def _one_dtype(function, blocks, xs):
    dtypes = {st.dtype_of(b) for b in blocks if b is not None} | {st.dtype_of(x) for x in xs}
    if len(dtypes) > 1:
        names = ", ".join(sorted(d.name for d in dtypes))
        raise TypeError(message(
            function, f"flat=True joins every block into one matrix, so the sources must "
            f"share one dtype, but they have {names}",
            "Cast the sources to one dtype, or drop flat=True and join the blocks yourself."))
    return dtypes.pop()
