"""What every rule reads besides its use: the batch size, and which tensors hold the
examples in blocks (`compat_grads._src.core.rows.elements_per_example`), proved once per
tensor."""

from __future__ import annotations

from compat_grads._src.core import example_rows as _examples
from compat_grads._src.core.rows import key, walk
from compat_grads._src.core.tf import tf


def _inputs(t) -> list:
    return list(t.op.inputs)


class Context:
    """The batch size `batch` (an int, or a scalar tensor when known at run time) and the
    proof that a tensor is example-major, from the batch's inputs and labels `sources`."""

    def __init__(self, batch, sources):
        self.batch = batch
        self._sources = [s for s in sources if isinstance(s, tf.Tensor)]
        # What the walks found, kept between questions: each op is walked once per call.
        self._elements: dict = {}
        self._reaches: dict = {}

    def elements(self, tensor) -> int | None:
        """E when `tensor` holds example s's elements in block s of E, else None."""
        return _examples.elements_per_example(tensor, self._sources, self._elements)

    def fixed(self, tensor) -> bool:
        """Whether `tensor` is the same for every example: proved that none of the batch's
        inputs and labels is among the tensors it is made from (a walk that gives up
        proves nothing)."""
        sources = {key(s): True for s in self._sources}
        return walk(tensor, sources, _inputs, lambda t, found: any(found),
                    self._reaches) is False

    def rows(self, tensor) -> int | None:
        """How many first-axis rows of `tensor` each example holds (None: not proved)."""
        return _examples.rows_per_example(tensor, self.elements(tensor))

    def by_example(self, tensor, like=None):
        """`tensor` as `[batch, rows] + tensor.shape[1:]` (each example's first-axis rows
        together), or None when the graph does not prove it example-major row by row.
        `like`: a tensor with the same first axis whose proof it shares (an output's
        gradient has the output's)."""
        rows = self.rows(tensor if like is None else like)
        if rows is None:
            return None
        known = _examples.dims(tensor) or [None] * tensor.shape.rank
        dims = known[1:]
        if None in dims:
            shape = tf.unstack(tf.shape(tensor)[1:], num=len(dims))
            dims = [d if d is not None else s for d, s in zip(dims, shape)]
        return tf.reshape(tensor, [self.batch, rows, *dims])

    def flat(self, tensor, width, like=None, blocks=1):
        """`tensor` as `[batch, -1, width]` (its last axis `width`), or None when not proved
        example-major row by row (`like` as in `by_example`). `blocks`: the first axis
        holds that many blocks, each with `like`'s first axis (a dilated convolution's
        `SpaceToBatchND`)."""
        if self.rows(tensor if like is None else like) is None:
            return None
        if blocks == 1:
            return tf.reshape(tensor, [self.batch, -1, width])
        split = tf.reshape(tensor, [blocks, self.batch, -1, width])
        return tf.reshape(tf.transpose(split, [1, 0, 2, 3]), [self.batch, -1, width])
