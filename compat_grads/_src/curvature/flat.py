"""The operator class behind `hessian_operator`, `ggn_operator` and `fisher_operator`: a
`tf.linalg.LinearOperator` over the flat concatenation of the parameters, whose products come
from a function of one batch and the parameters' pieces of a vector.

This module knows no derivative: `compat_grads._src.curvature.operators` hands it the
product of one batch (built from the backends' VJPs and JVPs), and this module lays vectors
out over the parameters, runs the product on each column and adds it up over the batches of
a `tf.data.Dataset`. It imports `core/` only, so the operators' import chain stays short.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from compat_grads._src.core import replicas as _replicas
from compat_grads._src.core.errors import message
from compat_grads._src.core.mode import as_graph
from compat_grads._src.core.tf import tf


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where each parameter sits in the flat vector: `tf.nest.flatten` order, each
    flattened row-major (`flat=True`'s convention, so `hessian(..., flat=True)` is this
    operator's matrix)."""

    shapes: tuple
    dtype: tf.DType

    @property
    def sizes(self) -> list:
        return [shape.num_elements() for shape in self.shapes]

    @property
    def n(self) -> int:
        return sum(self.sizes)

    def split(self, vector) -> list:
        """The `[n]` vector as one piece per parameter, shaped like it."""
        return [tf.reshape(piece, shape)
                for piece, shape in zip(tf.split(vector, self.sizes), self.shapes)]

    def join(self, pieces):
        """One piece per parameter (None: zeros) as the `[n]` vector."""
        return tf.concat([tf.zeros([size], self.dtype) if piece is None else
                          tf.reshape(tf.cast(piece, self.dtype), [size])
                          for piece, size in zip(pieces, self.sizes)], axis=0)


def layout(function: str, argument: str, flat: list, paths: list) -> Layout:
    """The layout of the checked leaves `flat` of the argument `argument`: one dtype (the
    operator's) and static shapes (its size n is known when it is built)."""
    first = flat[0].dtype.base_dtype
    for leaf, path in zip(flat, paths):
        if leaf.dtype.base_dtype != first:
            raise TypeError(message(
                function, f"{argument} must share one dtype, the operator's, but {paths[0]} "
                f"is {first.name} and {path} is {leaf.dtype.base_dtype.name}",
                "Cast them to one dtype (float64 for the most accurate products), or build "
                "one operator per dtype."))
        if not leaf.shape.is_fully_defined():
            raise ValueError(message(
                function, f"{path} must have a static shape (the operator's size n is known "
                f"when it is built), but its shape is {leaf.shape}",
                "Pass variables, or tensors and placeholders with every dimension given."))
    return Layout(tuple(leaf.shape for leaf in flat), first)


@dataclasses.dataclass(frozen=True)
class Products:
    """What an operator multiplies by: `product(batch, salt, pieces) -> pieces`, the
    product of one batch with a vector laid out by `layout`, and `data`: None (no batch),
    one batch (a tuple) or a `tf.data.Dataset` of them (the products are summed; `salt` is
    the batch's index, 0, 1, ..., for the random labels of a true Fisher). `function` is
    the public function that built it: the operator's name and its errors'. `distribute`:
    None, or a strategy or device list (`compat_grads._src.core.replicas`) over whose
    replicas one batch's examples are split, their products added up."""

    function: str
    layout: Layout
    product: Callable
    data: object
    distribute: object = None


class CurvatureOperator(tf.linalg.LinearOperator):
    """A symmetric `[n, n]` operator whose products are `Products`': never a matrix.

    `matvec` is one product; `matmul` of m columns runs them one after another in a
    `tf.while_loop` (in eager code a one-off `tf.function`: one program, not m rounds of
    op-by-op dispatch), so `to_dense()` (the base class's `matmul` of the identity) holds
    the result and the loop's few products in flight (its `parallel_iterations`), never n
    forward passes at once."""

    def __init__(self, products: Products):
        self._products = products
        super().__init__(dtype=products.layout.dtype, is_self_adjoint=True, is_square=True,
                         name=products.function)

    def _shape(self):
        return tf.TensorShape([self._products.layout.n] * 2)

    def _shape_tensor(self):
        return tf.constant([self._products.layout.n] * 2)

    def _matvec(self, x, adjoint=False):  # self-adjoint: `adjoint` changes nothing
        if x.shape.rank == 1:  # one product of x itself: no column to cut out and put back
            return self._summed(lambda batch, salt: self._one(batch, salt, x), x)
        return self._matmul(x[..., None])[..., 0]

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        columns, restore = _as_columns(self._products.function,
                                       tf.linalg.adjoint(x) if adjoint_arg else x)
        if tf.compat.dimension_value(columns.shape[1]) == 1:  # one product, no loop
            return restore(self._summed(lambda batch, salt: self._one(
                batch, salt, columns[:, 0])[:, None], columns))
        return restore(as_graph(lambda: self._summed(lambda batch, salt: _each_column(
            lambda v: self._one(batch, salt, v), columns), columns)))

    def _one(self, batch, salt, vector):
        """The product of one batch with one `[n]` vector (summed over the replicas'
        shares of its examples with `distribute`)."""
        products = self._products
        layout = products.layout

        def share(part):
            return layout.join(products.product(part, salt, layout.split(vector)))
        if products.distribute is None:
            return share(batch)

        def piece(r, count):
            leaves = tf.nest.flatten(batch)
            start, end = _replicas.bounds(r, count, tf.shape(leaves[0])[0])
            return [share(tf.nest.pack_sequence_as(batch, [t[start:end] for t in leaves]))]
        split = _replicas.Split(piece, lambda: [None], lambda blocks: blocks[0],
                                lambda blocks: blocks[0])
        return _replicas.run(products.function, products.distribute, True, split)

    def _summed(self, of_batch, like):
        return summed(self._products.data, of_batch, like)


def summed(data, of_batch, like):
    """`of_batch(batch, salt)` for the one batch `data` (salt 0), or its sum over the
    batches of a `tf.data.Dataset` (salt: the batch's index), by `Dataset.reduce`: a
    graph op, so it runs in a TF1 Session, a `tf.function` and eager code alike. `like`
    gives the result's shape."""
    if not isinstance(data, tf.data.Dataset):
        return of_batch(data, 0)

    # tf.data would convert the reduce function with AutoGraph, and with it everything it
    # calls: the library (slowly: seconds) and the caller's own code
    @tf.autograph.experimental.do_not_convert
    def add(state, batch):
        total, index = state
        return total + of_batch(batch, index), index + 1

    start = (tf.zeros_like(like), tf.constant(0, tf.int64))
    total, _ = data.reduce(start, add)
    return total


def _each_column(product, columns):
    """`product` of each column of `[n, m]`, one after another in a `tf.while_loop`."""
    count = tf.shape(columns)[1]

    def step(j, done):
        return j + 1, done.write(j, product(tf.gather(columns, j, axis=1)))

    written = tf.TensorArray(columns.dtype, size=count, element_shape=columns.shape[:1])
    _, written = tf.while_loop(lambda j, _: j < count, step, (tf.constant(0), written),
                               parallel_iterations=1)  # as `lanczos.SEQUENTIAL` says why
    return tf.transpose(written.stack())


def _as_columns(function, x):
    """(`[n, m]` columns of x `[..., n, m]`, the function that puts a result back in x's
    shape): a matrix is its own columns, a batch of them is laid side by side."""
    rank = x.shape.rank
    if rank == 2:
        return x, lambda y: y
    if rank is None:
        raise ValueError(message(
            function, "matmul's x must have a known rank (a matrix [n, m], or a batch of "
            "them), but its rank is unknown", "Give x a static rank (tf.ensure_shape)."))
    first = [rank - 2, *range(rank - 2), rank - 1]
    moved = tf.transpose(x, first)
    shape = tf.shape(moved)
    back = [*range(1, rank - 1), 0, rank - 1]
    return (tf.reshape(moved, [x.shape[-2], -1]),
            lambda y: tf.transpose(tf.reshape(y, shape), back))
