"""The empirical neural tangent kernel `K(x1, x2) = J(x1) J(x2)ᵀ` of `f(params, x)`, J the
Jacobian of the outputs with respect to the parameters, by two methods:

- "jacobian": each side's per-example Jacobians (every example and output its own forward
  and backward pass, vectorized: `_jacobians.per_example_rows`, O(examples · outputs) passes,
  never the O(b²) of one-hot VJPs through a whole batch), contracted over the parameters by
  one matrix product per parameter;
- "products": the rows of J(x2) (as above), each pushed through `f(params, x1)` by a JVP:
  every output pair of a column in one forward pass, J(x1) never held.

Both run in chunks of examples when the Jacobians and the kernel would not fit the memory
budget: a `tf.while_loop` over x1's chunks (and x2's, when its Jacobian does not fit either),
each block written into the kernel in place, so a kernel whose Jacobians would not fit in
memory is computed a block at a time, in one graph (one `Session.run` in a TF1 graph).
"""

from __future__ import annotations

import dataclasses

from compat_grads._src import memory as _memory
from compat_grads._src.backends import select as _select
from compat_grads._src.core import mode as _mode
from compat_grads._src.core import models as _models
from compat_grads._src.core import structure as st
from compat_grads._src.core.errors import describe, message
from compat_grads._src.core.how import How
from compat_grads._src.core.tf import tf
from compat_grads._src.curvature import checks
from compat_grads._src.curvature import flat as _flat
from compat_grads._src.jacobians import jacobians as _jacobians
from compat_grads._src.stacking.stack import stack, written_at

FUNCTION = "empirical_ntk"
METHODS = ("auto", "jacobian", "products")
IN_FLIGHT_COPIES = 2
"""What one example's Jacobian takes while it is computed, in copies of it: the rows
themselves and their passes' intermediates (an estimate, as `_memory` makes for Jacobians)."""


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How the kernel is computed: the method, whether the outputs are traced, the chunk of
    x1's examples and of x2's (None: all at once)."""

    method: str
    trace: bool
    chunk1: int | None
    chunk2: int | None
    dtype: tf.DType


def empirical_ntk(f, params, x1, x2, trace_outputs, method, chunk_size, memory_budget):
    """The kernel, the arguments checked first; built as one graph (`as_graph`)."""
    if not callable(f) or tf.is_tensor(f):
        raise TypeError(message(
            FUNCTION, f"f must be callable as f(params, x) -> outputs [n, ...], but got "
            f"{describe(f)}", "Pass the network as a function of its parameters and inputs: "
            "lambda params, x: model(x) with params=model.trainable_weights."))
    flat = st.flatten_sources(FUNCTION, params, convert=True, argument="params")
    params = tf.nest.pack_sequence_as(params, flat)
    layout = _flat.layout(FUNCTION, "params", flat, st.leaf_paths(params, "params"))
    x1 = _inputs("x1", x1)
    x2 = None if x2 is None else _inputs("x2", x2)
    trace = checks.boolean(FUNCTION, "trace_outputs", trace_outputs)
    method = checks.choice(FUNCTION, "method", method, METHODS)
    how = _how(chunk_size, memory_budget)
    return _mode.as_graph(lambda: _kernel(f, params, layout, (x1, x2), (trace, method, how)))


def _kernel(f, params, layout, inputs, options):
    x1, x2 = inputs
    trace, method, how = options
    out_shape, flops = _output_shape(f, params, x1)
    o = out_shape.num_elements()
    if method == "auto":
        method = _auto_method(trace, o, layout.n, flops)
    side2 = x1 if x2 is None else x2
    plan = _plan(method, trace, how, (_count(x1), _count(side2)), (o, layout))
    if plan.method == "products":
        def block(a, b):
            return _pushed_block(f, params, (a, b), o, trace)
    else:
        def rows(x):
            return _rows(f, params, x, o)
        if plan.chunk1 is None and plan.chunk2 is None and x2 is None:
            held = rows(x1)  # x2 is x1: its Jacobian once
            return _finish(_contracted(held, held, trace), trace, out_shape)
        held = rows(side2) if plan.chunk2 is None else None

        def block(a, b):
            return _contracted(rows(a), held if held is not None else rows(b), trace)
    return _finish(_by_chunks(x1, side2, plan, block, o), trace, out_shape)


def _finish(kernel, trace, out_shape):
    """`[n1, n2]` as it is, or `[n1, n2, o, o]` with each o as the outputs' shape."""
    if trace:
        return kernel
    return tf.reshape(kernel, tf.concat([tf.shape(kernel)[:2], out_shape, out_shape], 0))


# -- the two methods -----------------------------------------------------------------------


def _rows(f, params, x, o):
    """Per parameter, `[c, o, size]`: the Jacobian of each of the c examples' o outputs, each
    row one example's forward and backward pass for one output, vectorized over the c·o."""
    rows = _models.batch_size(FUNCTION, x) * o

    def output(r):
        example = _models.example(x, r // o)
        return lambda ps: tf.gather(tf.reshape(_call(f, ps, example), [-1]), r % o)

    problem = st.make_problem(FUNCTION, output(0), params, argument="params")
    backend = _select.backend_for(problem)
    how = How(strategy="reverse", unconnected="zero", chunk_size=None)
    with _memory.recording(isolated=True):  # the kernel's plan is `_record`'s, not this
        grads, _ = _jacobians.per_example_rows(backend, output, rows, how)
    return [tf.reshape(g, [-1, o, g.shape[1:].num_elements()]) for g in grads]


def _contracted(rows1, rows2, trace):
    """`[c1, c2]` (trace) or `[c1, c2, o, o]`: Σ over the parameters of the rows' products."""
    if trace:
        return tf.add_n([tf.matmul(tf.reshape(a, [tf.shape(a)[0], -1]),
                                   tf.reshape(b, [tf.shape(b)[0], -1]), transpose_b=True)
                         for a, b in zip(rows1, rows2)])
    return tf.add_n([tf.einsum("iap,jbp->ijab", a, b) for a, b in zip(rows1, rows2)])


def _pushed_block(f, params, parts, o, trace):
    """`[c1, c2]` or `[c1, c2, o, o]` by products: J(x2)'s rows, then a JVP of f(params, x1)
    along each, stacked over the rows."""
    x1, x2 = parts
    rows = [tf.reshape(r, [-1, tf.compat.dimension_value(r.shape[-1])])
            for r in _rows(f, params, x2, o)]
    problem = st.make_problem(FUNCTION, lambda ps: tf.reshape(_call(f, ps, x1), [-1, o]),
                              params, argument="params")
    backend = _select.backend_for(problem)
    push, shapes = backend.jvp_fn(), [p.shape for p in problem.flat]

    def column(r):
        (out,) = push([tf.reshape(tf.gather(piece, r), shape)
                       for piece, shape in zip(rows, shapes)])
        return [tf.zeros_like(backend.target) if out is None else out]
    (pushed,) = stack(backend, column, tf.shape(rows[0])[0], [backend.target],
                      How(chunk_size=None))
    pushed = tf.reshape(pushed, [-1, o, tf.shape(pushed)[1], o])  # [c2, b, c1, a]
    if trace:
        return tf.einsum("jbib->ij", pushed)
    return tf.transpose(pushed, [2, 0, 3, 1])


# -- chunks --------------------------------------------------------------------------------


def _by_chunks(x1, x2, plan, block, o):
    """The kernel from `block(x1's chunk, x2's chunk)` (`[c1, c2]`, or `[c1, c2, o, o]`): at
    once, or a `tf.while_loop` over x1's chunks with one over x2's inside (chunks of
    different sizes: the last may be smaller), each block written in place into one
    preallocated buffer of the kernel (as `stack`'s chunks are: TensorFlow's uninitialized
    `Empty`, updated by `TensorStridedSliceUpdate`, which reuses its input's memory when
    nothing else holds it), so the peak is the kernel and one block's Jacobians. (Blocks in
    a TensorArray, concatenated at the end, held the kernel twice: a 10,000 x 10,000 kernel
    under a 600 MiB budget peaked at 865 MiB.) Under XLA, `_equal_blocks` (equal blocks;
    chunks under XLA failed before it: "SetDimensionSize's value has to be S32")."""
    if plan.chunk1 is None and plan.chunk2 is None:
        return block(x1, x2)
    n1, n2 = tf.shape(x1)[0], tf.shape(x2)[0]
    c1, c2 = plan.chunk1 or n1, plan.chunk2 or n2
    tail = [] if plan.trace else [o, o]
    if _mode.compiles_with_xla():
        return _equal_blocks((x1, x2), (plan.chunk1, plan.chunk2), plan, block, tail)
    kernel = tf.raw_ops.Empty(shape=tf.stack([n1, n2, *tail]), dtype=plan.dtype)

    def written(kernel, start1, start2, value):
        return written_at(kernel, [start1, start2, *[0] * len(tail)], value)

    def row_of_blocks(i, kernel):
        start1 = i * c1
        a = x1[start1:tf.minimum(start1 + c1, n1)]
        if plan.chunk2 is None:
            return i + 1, written(kernel, start1, 0, block(a, x2))

        def one(j, kernel):
            start2 = j * c2
            return j + 1, written(kernel, start1, start2,
                                  block(a, x2[start2:tf.minimum(start2 + c2, n2)]))
        _, kernel = tf.while_loop(lambda j, _: j < (n2 + c2 - 1) // c2, one, (0, kernel),
                                  parallel_iterations=1)
        return i + 1, kernel
    _, kernel = tf.while_loop(lambda i, _: i < (n1 + c1 - 1) // c1, row_of_blocks,
                              (0, kernel), parallel_iterations=1)
    return kernel


def _equal_blocks(inputs, chunks, plan, block, tail):
    """`_by_chunks` for a graph XLA compiles, whose shapes must all be known while compiling
    (as `stack`'s `_equal_chunks`): every block is `c1 x c2` (a last chunk repeats the last
    example where it runs past the end), scattered by rows into one buffer of every chunk's
    rows; the rows and columns past the ends are cut off at the end. The numbers of examples
    must be static there."""
    (x1, x2), (c1, c2) = inputs, chunks
    n1, n2 = _count(x1), _count(x2)
    if n1 is None or n2 is None:
        raise ValueError(message(
            FUNCTION, "under XLA (jit_compile=True) the kernel is computed in chunks only "
            "for a static number of examples, but x1 or x2 has an unknown batch size",
            "Give the tf.function an input_signature with the batch sizes, or pass "
            "chunk_size=None to compute the kernel at once."))
    if not n1 or not n2:  # no examples on a side: the empty kernel
        return tf.zeros([n1, n2, *tail], plan.dtype)
    c1, c2 = min(c1 or n1, n1), min(c2 or n2, n2)
    count1, count2 = -(-n1 // c1), -(-n2 // c2)

    def taken(x, start, c, n):
        return tf.gather(x, tf.minimum(start + tf.range(c), n - 1))

    def row_of_blocks(i, kernel):
        a = taken(x1, i * c1, c1, n1)

        def one(j, row):  # row: [count2 * c2, c1, ...], x2's examples first
            value = block(a, taken(x2, j * c2, c2, n2))
            at = (j * c2 + tf.range(c2))[:, None]
            return j + 1, tf.tensor_scatter_nd_update(row, at, _swapped(value, tail))
        row = tf.zeros([count2 * c2, c1, *tail], plan.dtype)
        _, row = tf.while_loop(lambda j, _: j < count2, one, (0, row), parallel_iterations=1)
        at = (i * c1 + tf.range(c1))[:, None]
        return i + 1, tf.tensor_scatter_nd_update(kernel, at, _swapped(row, tail))
    kernel = tf.zeros([count1 * c1, count2 * c2, *tail], plan.dtype)
    _, kernel = tf.while_loop(lambda i, _: i < count1, row_of_blocks, (0, kernel),
                              parallel_iterations=1)
    return kernel[:n1, :n2]


def _swapped(t, tail):
    """t with its first two axes swapped."""
    return tf.transpose(t, [1, 0, *range(2, 2 + len(tail))])


def _plan(method, trace, how, counts, sizes):
    """The method (chosen already: `_auto_method`) and the chunks: all at once when both
    sides' Jacobians and the kernel fit the budget, else x2's Jacobian held whole and x1
    in chunks, else both in chunks."""
    o, layout = sizes
    itemsize = layout.dtype.size
    if how.chunk_size is None or isinstance(how.chunk_size, int):
        return _Plan(method, trace, how.chunk_size, how.chunk_size, layout.dtype)
    n1, n2 = counts
    per = IN_FLIGHT_COPIES * o * layout.n * itemsize  # one example in flight
    budget = _memory.budget_bytes(how)
    static = isinstance(n1, int) and isinstance(n2, int)
    result = n1 * n2 * (1 if trace else o * o) * itemsize if static else 0
    room = budget - result - _memory.runtime_bytes(budget)
    if static and (n1 + n2) * per <= room:
        chunks = (None, None)
    elif isinstance(n2, int) and (n2 + 1) * per <= room:
        chunks = ((room - n2 * per) // per, None)
    else:
        chunk = room // (2 * per)
        if chunk < 1:
            chunk = _too_small(how, per, result, budget)
        chunks = (chunk, chunk)
    _record((n1, n2), chunks, (result, per, budget))
    return _Plan(method, trace, *chunks, layout.dtype)


def _too_small(how, per, result, budget):
    """One example a side at a time under the default budget; a ValueError for one the
    caller set that not even that fits."""
    if how.memory_budget is None:
        return 1
    raise ValueError(message(
        FUNCTION, f"memory_budget={how.memory_budget!r} ({budget} bytes) is too small even "
        f"for one example of each side at a time: the kernel takes {result} bytes and one "
        f"example's Jacobian in flight about {per}",
        "Raise memory_budget= (or drop it: the default is half of the memory free), or "
        "compute the kernel of fewer examples at a time."))


def _record(counts, chunks, sizes):
    """The plan, for `memory_plans()` and the DEBUG log, as the Jacobians' plans are."""
    (n1, n2), (c1, c2), (result, per, budget) = counts, chunks, sizes
    rows = n1 if isinstance(n1, int) else 0
    at_once = (c1 or rows) + (c2 or (n2 if isinstance(n2, int) else 0))
    whole = (rows + (n2 if isinstance(n2, int) else 0)) * per
    _memory.replay([_memory.MemoryPlan(
        FUNCTION, rows, c1, -(-rows // c1) if c1 else 1, result, per,
        result + at_once * per, budget, result + whole)])


# -- arguments -----------------------------------------------------------------------------


def _how(chunk_size, memory_budget):
    if chunk_size is not None and chunk_size != _memory.AUTO:
        checks.count(FUNCTION, "chunk_size", chunk_size, "the examples of each side at once")
    return How(chunk_size=chunk_size,
               memory_budget=_memory.check_budget(FUNCTION, "memory_budget", memory_budget))


def _inputs(name, x):
    """x as a tensor with a batch axis."""
    x = _models.as_tensors(FUNCTION, name, x)
    if not tf.is_tensor(x) or x.shape.rank == 0:
        raise ValueError(message(
            FUNCTION, f"{name} must be one tensor of examples, batch axis first, but got "
            f"{describe(x)}", f"Pass {name} as a tensor [n, ...] (a scalar input per example: "
            f"shape [n, 1] or [n])."))
    return x


def _count(x):
    """The number of examples: an int when static, else None."""
    return tf.compat.dimension_value(x.shape[0])


def _call(f, params, x):
    outputs = f(params, x)
    if not tf.is_tensor(outputs):
        raise TypeError(message(
            FUNCTION, f"f must return one tensor of outputs [n, ...], but it returned "
            f"{describe(outputs)}", "Return one tensor (concatenate several outputs along "
            "their last axis)."))
    return outputs


PRODUCTS_OVER = 5
"""method="auto" takes "products" for every output pair when o·P >= PRODUCTS_OVER · F (o
outputs, P weights, F the multiply-adds of the forward pass of one example,
`_forward_flops`): per pair of examples the contraction costs o²·P and the products o JVPs
of about F each, and a JVP's small passes run slower per operation than one large matrix
product. Measured (2 cores, each `method=` for every output pair, side by side; o·P/F in
brackets): an MLP 8-256-256-100 (99) 21.7 s by the contraction, 3.0 s by products;
784-512-512-10 (10.0) 1.84 against 1.45 s; 32-64-64-10 (9.8) 0.26 against
0.35 s, the one this rule gets wrong; neural-tangents' docstring CNN (2.6) of 100 x
100 images 1.8 against 13.6 s. Summed over the outputs the contraction was the faster in all
four (1.8 to 9 times)."""


def _auto_method(trace, o, weights, flops):
    """"products" for every output pair of a network whose outputs times weights outweigh
    its forward pass (`PRODUCTS_OVER`), else "jacobian"."""
    if trace or o == 1 or flops is None:
        return "jacobian"
    return "products" if o * weights >= PRODUCTS_OVER * flops else "jacobian"


def _forward_flops(operations):
    """The multiply-adds of `operations` (f on one example): a matrix product's output
    elements times the length it contracts, a convolution's times its filter's size per
    output channel, every other op's output elements; None when a shape is unknown."""
    total = 0
    for op in operations:
        if op.type in _HIDDEN:
            return None
        if not op.inputs or op.type in _MOVES:
            continue
        for out in op.outputs[:1]:
            size = _one_example_size(out.shape)
            if size is None:
                return None
            total += size * _contracted_length(op)
    return total or None  # nothing counted: f ran eagerly (run_functions_eagerly)


def _one_example_size(shape):
    """The elements of a tensor of f on one example, its batch axis unknown (a placeholder
    of unknown batch) counted as 1; None when any other axis is unknown."""
    if shape.rank is None:
        return None
    if shape.rank and tf.compat.dimension_value(shape[0]) is None:
        return shape[1:].num_elements()
    return shape.num_elements()


_HIDDEN = frozenset(("PartitionedCall", "StatefulPartitionedCall", "While",
                     "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase",
                     "Einsum", "Conv2DBackpropInput", "Conv3DBackpropInputV2", "XlaEinsum"))
"""Ops whose work is not read from their output shape (a function call, control flow, an
einsum, a transposed convolution): f with one of them is not counted (None)."""
_MOVES = frozenset(("Identity", "Reshape", "ReadVariableOp", "StridedSlice", "Squeeze",
                    "ExpandDims", "Shape", "Pack", "Cast", "NoOp"))
"""Ops that move or reinterpret numbers, counted as no work (as the weights and inputs,
ops without inputs, are not)."""


def _contracted_length(op):
    """How many multiply-adds make one output element of `op` (1 for elementwise ops)."""
    if op.type in ("MatMul", "BatchMatMulV2", "BatchMatMulV3"):
        a = op.inputs[0].shape
        transposed = op.get_attr("transpose_a" if op.type == "MatMul" else "adj_x")
        length = a[-2] if transposed else a[-1]
    elif op.type in ("Conv2D", "Conv3D"):
        kernel = op.inputs[1].shape
        length = kernel[:-1].num_elements()
    elif op.type == "DepthwiseConv2dNative":
        kernel = op.inputs[1].shape
        length = kernel[:2].num_elements()
    else:
        return 1
    return tf.compat.dimension_value(length) or 1


def _output_shape(f, params, x):
    """(The per-example output shape (static), the forward pass's multiply-adds for one
    example or None), from f on the first example (its graph is read; nothing runs it)."""
    graph = tf.compat.v1.get_default_graph()
    before = len(graph.get_operations())
    outputs = _call(f, params, x[:1])
    flops = _forward_flops(graph.get_operations()[before:])
    rank = outputs.shape.rank
    if not rank or tf.compat.dimension_value(outputs.shape[0]) not in (1, None) \
            or not outputs.shape[1:].is_fully_defined():
        raise ValueError(message(
            FUNCTION, f"f must return outputs [n, ...] with one row per example and a static "
            f"shape after the batch axis, but on one example it returned shape "
            f"{outputs.shape}", "Return the network's outputs for the batch it is given, "
            "batch axis first (a scalar output per example: [n] or [n, 1])."))
    return outputs.shape[1:], flops
