"""One-hot tangents and cotangents through the first (forward) or last (reverse) matrix
product.

Column j of a Jacobian is the JVP of the one-hot tangent e_j; row i is the VJP of the
one-hot cotangent e_i. Stacked by pfor, the one-hot basis is an identity matrix, and the
matrix product it meets first costs a full product with that identity: n·n·m
multiplications for n one-hots through an m-wide product, where the answer is the product's
own factor, row by row (n·m). So:

- forward: when every path from the source to the targets starts with a product
  `z = x @ W` (after ops that only reindex x: a read, reshape, expand, squeeze, a slice
  that keeps every element), z's tangent for e_j is row j of W, placed where x's row is,
  and the JVP starts at z;
- reverse: when a target is `φ(z)` with `z = h @ W`, φ made of elementwise ops (tanh,
  relu, a bias, a constant scale...) and reindexing, z's cotangent for e_i is `φ'(z)_i e_i`
  and h's is `φ'(z)_i` times row i of Wᵀ, and the VJP starts at h.

The values are the same bit for bit: a product with a one-hot adds only exact zeros.
Graph backends only (`push_from` / `pull_from` differentiate from an intermediate tensor of
the target's graph); a tape, and anything else, keeps the plain basis.
"""

from __future__ import annotations

from compat_grads._src.core import structure as st
from compat_grads._src.core.tf import tf

# Ops whose output holds their first input's elements in the same (row-major) order.
_REINDEXING = frozenset({"Identity", "ReadVariableOp", "Reshape", "ExpandDims", "Squeeze",
                         "StridedSlice"})
# Ops whose output element i depends on their first input's element i alone (the other
# inputs, if any, must not depend on the sources).
_ELEMENTWISE = frozenset({
    "Tanh", "Sigmoid", "Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign", "LeakyRelu",
    "Exp", "Expm1", "Log", "Log1p", "Sin", "Cos", "Square", "Sqrt", "Rsqrt", "Neg", "Abs",
    "Erf", "BiasAdd", "AddV2", "Add", "Sub", "Mul", "RealDiv"})
_REAL = frozenset({tf.float16, tf.bfloat16, tf.float32, tf.float64})


def columns(backend, k, batched):
    """`column(j) -> [J_t·e_j per target t]` for source k, started after its first matrix
    product; None when it has none (or the backend cannot start a JVP inside the graph)."""
    if not backend.starts_inside or backend.forward_per_row() is not None:
        return None
    found = first_product(backend, k)
    tangent = found and _tangent(*found, batched)
    if not tangent:
        return None
    push = backend.push_from(found[0].outputs[0])
    return lambda j: push(tangent(j))


def rows(backend, t, batched):
    """`row(i) -> [e_i·J_tk per source k]` for target t, started before its last matrix
    product; None when it has none (or the backend cannot start a VJP inside the graph)."""
    if not backend.starts_inside:
        return None
    found = last_product(backend, t)
    cotangent = found and _cotangent(*found, batched)
    if not cotangent:
        return None
    pull = backend.pull_from(found[0].inputs[found[1]])
    return lambda i: pull(cotangent(i))


def first_product(backend, k):
    """(the MatMul op, the index of its input x reaches, the source) when every path from
    source k to the targets goes through that one product, x reaching it only through
    reindexing ops; else None."""
    differentiated = backend.differentiated()[k]
    path = backend.path_ops()
    on_path = {id(op) for op in path}
    targets = {id(t) for t in backend.targets}
    tensor = _as_tensor(differentiated)
    for _ in range(len(path)):  # each step moves one op along the path
        if id(tensor) in targets:
            return None
        (op, *others) = [op for op in tensor.consumers() if id(op) in on_path] or [None]
        if op is None or others:
            return None
        uses = [i for i, t in enumerate(op.inputs) if t is tensor]
        if len(uses) != 1:
            return None
        if op.type == "MatMul":
            return (op, uses[0], differentiated) if _constant_factor(op, uses[0], on_path) \
                else None
        if op.type not in _REINDEXING or uses[0] != 0 or not _keeps_order(op):
            return None
        tensor = op.outputs[0]
    return None


def last_product(backend, t):
    """(the MatMul op, the index of its input the sources reach, the target, whether
    elementwise ops lie between) when target t is elementwise ops and reindexing of that one
    product, whose other factor does not depend on the sources; else None."""
    target = backend.targets[t]
    # What depends on the sources: the ops between them and the targets, and the sources.
    on_path = {id(op) for op in backend.path_ops()} | {
        id(x.op) for x in backend.differentiated()}
    tensor, elementwise = target, False
    while id(tensor.op) in on_path:
        op = tensor.op
        if op.type == "MatMul":
            reached = [i for i, x in enumerate(op.inputs) if id(x.op) in on_path]
            if len(reached) != 1 or not _constant_factor(op, reached[0], on_path):
                return None
            return op, reached[0], target, elementwise
        if any(id(x.op) in on_path for x in op.inputs[1:]):
            return None
        if op.type in _ELEMENTWISE and _same_elements(op):
            elementwise = True
        elif op.type not in _REINDEXING or not _keeps_order(op):
            return None
        tensor = op.inputs[0]
    return None


def _same_elements(op) -> bool:
    """Whether an elementwise op's output has its first input's shape (no broadcasting of
    that input), with at most the batch axis unknown and not broadcast by the others."""
    x, out = op.inputs[0].shape, op.outputs[0].shape
    if x.rank is None or x != out or not x[1:].is_fully_defined():
        return False
    return x[:1].is_fully_defined() or all(
        other.shape.rank is not None and (other.shape.rank < x.rank or other.shape[0] == 1)
        for other in op.inputs[1:])


def _constant_factor(op, used, on_path) -> bool:
    other = op.inputs[1 - used]
    return id(other.op) not in on_path and other.dtype.base_dtype in _REAL and \
        op.inputs[used].shape.rank == 2


def _keeps_order(op) -> bool:
    """Whether the op's first output holds exactly its first input's elements, in order."""
    if op.type in ("ReadVariableOp", "Identity"):
        return True
    before, after = op.inputs[0].shape, op.outputs[0].shape
    if before.num_elements() is None or before.num_elements() != after.num_elements():
        return False
    if op.type != "StridedSlice":
        return True
    strides = tf.get_static_value(op.inputs[3])
    return strides is not None and bool((strides == 1).all()) and \
        op.get_attr("ellipsis_mask") == 0


def _factor(op, operand, along_rows):
    """`row(r)`: row r of the product's other factor as the product uses it (its transpose
    flag applied), or column r when not `along_rows` (gathered where it lies: a transposed
    copy of the factor, made once, would hold a second factor as large as a one-layer
    Jacobian all along a chunked loop)."""
    other = op.inputs[1 - operand]
    flipped = op.get_attr("transpose_b" if operand == 0 else "transpose_a")
    axis = 0 if along_rows != flipped else 1
    return lambda r: tf.gather(other, r, axis=axis)


def _outer(vector, placed_at, width, vector_first, dtype):
    """The matrix with `vector` along one axis at position `placed_at` of the other (of
    size `width`): `vector ⊗ e` when `vector_first`, else `e ⊗ vector`."""
    if width == 1:
        return vector[:, None] if vector_first else vector[None, :]
    placed = tf.one_hot(placed_at, width, dtype=dtype)
    return vector[:, None] * placed[None, :] if vector_first else \
        placed[:, None] * vector[None, :]


def _tangent(op, operand, source, batched):
    """`tangent(j)`: the product's tangent for the source's one-hot e_j (per sample when
    `batched`), or None when the layout rules it out."""
    x = op.inputs[operand]
    flipped = op.get_attr("transpose_a" if operand == 0 else "transpose_b")
    # x's contracted axis: its columns (x times the factor) or rows (the factor times x),
    # swapped by `flipped`; the factor's row (or column) of that index is the tangent.
    on_columns = (operand == 0) != flipped
    factor = _factor(op, operand, along_rows=operand == 0)
    if batched:
        if operand != 0 or flipped or x.shape[1] != source.shape[1:].num_elements():
            return None  # x must hold one sample per row, in the source's order
        return lambda j: [_broadcast_rows(factor(j), tf.shape(x)[0])]
    if not x.shape.is_fully_defined():
        return None
    n_rows, n_cols = x.shape.as_list()

    def tangent(j):
        r, c = _element(j, n_cols)  # x's element j, in x's own layout
        inner, outer, width = (c, r, n_rows) if on_columns else (r, c, n_cols)
        return [_outer(factor(inner), outer, width, operand == 1, x.dtype)]
    return tangent


def _cotangent(op, operand, target, elementwise, batched):
    """`cotangent(i)`: the cotangent of the product's input `operand` for the target's
    one-hot e_i (per sample when `batched`), or None when the layout rules it out."""
    if not _cotangent_fits(op, operand, target, batched):
        return None
    z, h = op.outputs[0], op.inputs[operand]
    # φ'(z) at every element (the target is elementwise in z: a diagonal Jacobian); ones
    # where only reindexing lies between.
    scale = tf.reshape(tf.compat.v1.gradients(target, z, tf.ones_like(target))[0], [-1]) \
        if elementwise else tf.ones_like(tf.reshape(z, [-1]))
    flipped = op.get_attr("transpose_a" if operand == 0 else "transpose_b")
    # e_i at z's (r, c): h's cotangent holds the factor's column c (h times the factor) or
    # row r (the factor times h), at h's row r (column c), transposed by `flipped`.
    factor = _factor(op, operand, along_rows=operand == 1)
    if batched:
        per_sample = target.shape[1:].num_elements()
        scales = tf.reshape(scale, [-1, per_sample])
        # gathers, not slices: pfor vectorizes a gather at the row's index, not a slice
        return lambda i: [tf.gather(scales, i, axis=1)[:, None] * factor(i)[None, :]]
    n_rows, n_cols = z.shape.as_list()

    def cotangent(i):
        r, c = _element(i, n_cols)
        vector, at, width = (factor(c), r, n_rows) if operand == 0 else (factor(r), c, n_cols)
        # h = P: P's cotangent is e_r ⊗ W_eff[:, c] (W_eff[:, c] ⊗ e_r when transposed);
        # h = Q: Q's cotangent is A_eff[r, :] ⊗ e_c (e_c ⊗ A_eff[r, :] when transposed).
        vector_first = (operand == 1) != flipped
        return [tf.gather(scale, i) * _outer(vector, at, width, vector_first, h.dtype)]
    return cotangent


def _cotangent_fits(op, operand, target, batched) -> bool:
    """Whether `_cotangent` can place the one-hot rows (a check that builds nothing)."""
    z = op.outputs[0]
    if z.shape.rank != 2 or not z.shape[1:].is_fully_defined():
        return False
    if batched:  # z must hold one sample per row, in the target's order
        flipped = op.get_attr("transpose_a" if operand == 0 else "transpose_b")
        return operand == 0 and not flipped and z.shape[1] == target.shape[1:].num_elements()
    return z.shape.is_fully_defined()


def rows_are_copies(backend, batched) -> bool:
    """Whether every target is elementwise ops and reindexing of one matrix product whose
    other input is a source, reindexed at most (`φ(x @ W)`, `φ(W @ x)`): each one-hot row
    of the Jacobian is then a scaled row of the product's factor, placed where the source's
    elements are, with no pass through the graph. Reverse mode computes those rows as they
    lie in the Jacobian; forward mode's columns are copies too, but of the factor's
    transpose, and land last (the whole Jacobian transposed twice)."""
    if not backend.starts_inside:
        return False
    sources = {_as_tensor(x).ref() for x in backend.differentiated()}
    for t in range(len(backend.targets)):
        found = last_product(backend, t)
        if not found or not _cotangent_fits(*found[:3], batched):
            return False
        op, operand = found[:2]
        tensor = op.inputs[operand]
        while tensor.ref() not in sources and tensor.op.type in _REINDEXING \
                and _keeps_order(tensor.op):
            tensor = tensor.op.inputs[0]
        if tensor.ref() not in sources:
            return False
    return True


def _as_tensor(differentiated):
    """A source as tf.gradients differentiates it: a tensor, or a TF1 (reference)
    variable's tensor that reads it."""
    return differentiated if isinstance(differentiated, tf.Tensor) else \
        tf.convert_to_tensor(differentiated)


def _element(index, n_cols):
    """(row, column) of element `index` of a matrix with `n_cols` columns: the index itself
    where the matrix is one column (no arithmetic for pfor to vectorize)."""
    if n_cols == 1:
        return index, 0
    return index // n_cols, index % n_cols


def _broadcast_rows(row, count):
    return tf.broadcast_to(row[None, :], [count, st.size(row)])
