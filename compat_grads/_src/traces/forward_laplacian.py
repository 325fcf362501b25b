"""Forward-mode second order over the ops of a graph: the "forward Laplacian".

For every tensor t on a path from the source to the target, one walk in topological order
pushes a jet (J, S): J, `[n] + t.shape`, the derivative of t along each of n tangent
directions, and S its second derivative along them, summed over the directions (`t.shape`:
the Laplacian) or one per direction (`[n] + t.shape`: the Hessian's diagonal). There is no
reverse pass: one forward walk carries all n directions at once.

J and a per-direction S have rank_of(t) + 1 and only need to BROADCAST to `[n] + t.shape` (a
summed S to `t.shape`): the batched start `[n, 1, ...]` stays lazy through elementwise ops
and matmuls, and a rule that depends on the full shape materialises it first. None is zero.
"""

from __future__ import annotations

import functools
import operator

from compat_grads._src.core import graph_walk as _graph_walk
from compat_grads._src.core.tf import tf
from compat_grads._src.traces import chunks as _chunks
from compat_grads._src.traces.elementwise_derivatives import (
    DERIVATIVES,
    GENERIC,
    GRADIENTS,
    activation_gradient,
    explicit,
    generic,
)
from compat_grads._src.traces.linear_jets import (
    Unsupported,
    expand_dims,
    extremum,
    gather,
    gather_nd,
    inert,
    n_then,
    named,
    rank_of,
    read_of,
    reduction,
    shift,
    split_outputs,
    squeeze,
    static,
    strided_slice,
    strided_slice_grad,
    transpose,
    unpack_outputs,
    unsupported,
    value_of,
    with_first,
)
from compat_grads._src.traces.matrix_jets import RULES as MATRIX_RULES
from compat_grads._src.traces.matrix_jets import matmul

__all__ = ["Unsupported", "ops_with_rules", "propagate", "reduced_tangents", "tangents"]

# Ops whose outputs are constants to tf.gradients (no gradient flows through them), and the
# piecewise-constant ones (derivative zero wherever it exists, as tf.gradients gives it).
_CONSTANT = frozenset({"StopGradient", "PreventGradient", "ZerosLike", "OnesLike", "Sign",
                       "Floor", "Ceil", "Round", "Rint"})


@tf.autograph.experimental.do_not_convert
def propagate(target, source, *, batched: bool, summed: bool, chunk: int | None = None):
    """S at `target`.

    batched=False: n = number of elements of `source`; direction j is the one-hot at flat
      element j of source. summed -> target.shape (sum_j d²t/dx_j²); not summed ->
      [n] + target.shape.
    batched=True: source is [b, ...]; n = elements per sample (prod(source.shape[1:]));
      direction j is one-hot at per-sample feature j in EVERY sample at once (correct when
      samples are independent: target[s] depends on source[s] only). summed -> target.shape;
      not summed -> [n] + target.shape.
    chunk: at most this many directions in flight, when n is known statically: one walk in
      a `tf.while_loop` over the chunks (built once, whatever their number), their S summed
      or joined along the directions (None: `chunks.default_chunk`).
    Raises Unsupported when an op on the path has no rule (or shapes/ranks needed are not
    statically known where a rule needs them, or TF1 control flow is on the path).
    """
    chunk, n = _chunks.chunk_and_n(target, source, batched, chunk, looped=True)
    if chunk is None:
        return _walked(target, _Walk(source, batched, summed))
    # before the loop: an op without a rule builds nothing
    _check(_graph_walk.between([target], [value_of(source)]), value_of(source))
    return _looped(target, source, batched, summed, n, chunk)


def _looped(target, source, batched, summed, n, chunk):
    """`propagate` over ceil(n / chunk) chunks of directions in a `tf.while_loop`, one chunk
    at a time (the last padded with zero directions, which add nothing)."""
    steps, connected = -(-n // chunk), []

    def body(i, total):
        # summed, J waits for ΣJ² (`chain`); per direction, J² is a full tangent itself:
        # waiting would free nothing
        S = _walked(target, _Walk(source, batched, summed, directions=(i * chunk, chunk),
                                  ordered=summed))
        connected.append(S is not None)
        if S is None:
            return i + 1, total
        return i + 1, total + S if summed else total.write(i, S)
    start = (tf.zeros_like(target) if summed else tf.TensorArray(
        target.dtype.base_dtype, size=steps,
        element_shape=tf.TensorShape([chunk]).concatenate(target.shape)))
    _, total = tf.while_loop(lambda i, _: i < steps, body, (tf.constant(0), start),
                             parallel_iterations=1)
    return None if not connected[0] else total if summed else total.concat()[:n]


@tf.autograph.experimental.do_not_convert
def reduced_tangents(target, source, *, batched: bool, reduce, chunk: int | None = None):
    """Σ over chunks of directions of `reduce(J, lo, hi)`, J the first-order walk's
    `[hi - lo] + target.shape` along directions lo..hi (hi None: to the end); None where the
    target is not connected. `chunk` as in `propagate`. Raises Unsupported as it does."""
    chunk, n = _chunks.chunk_and_n(target, source, batched, chunk)

    def part(directions, after):
        lo, hi = directions
        J = _walked(target, _Walk(source, batched, summed=True, second=False,
                                  directions=None if hi is None else (lo, hi - lo),
                                  after=after))
        return None if J is None else reduce(J, lo, hi)
    if chunk is None:
        return part((0, None), ())
    parts = _chunks.in_chunks(n, chunk, part)
    return None if parts[0] is None else tf.add_n(parts)


@tf.autograph.experimental.do_not_convert
def tangents(target, source, *, batched: bool):
    """J at `target`, `[n] + target.shape`: the first-order half of `propagate`'s walk (the
    same directions, no second derivatives), or None where the target is not connected.
    Raises Unsupported as `propagate` does."""
    return _walked(target, _Walk(source, batched, summed=True, second=False))


def _walked(target, walk):
    if isinstance(walk.source, tf.Variable) and not hasattr(walk.source, "handle"):
        walk.source = walk.source.op.outputs[0]  # a TF1 reference variable: its ref tensor
    ops = _graph_walk.between([target], [walk.source])
    _check(ops, walk.source, walk.second)
    walk.begin()
    for op in ops:
        walk.visit(op)
    return walk.result(target)


def _check(ops, source, second=True):
    """Raise Unsupported for the first op on the path without a rule, before building any
    (the activations' gradient ops have first-order rules only)."""
    carrying = {source.ref()}
    for op in ops:
        if op.type in _CONSTANT or not any(t.ref() in carrying for t in op.inputs):
            continue
        outputs = [t for t in op.outputs if t.dtype.is_floating]
        # Integer, bool and string outputs are constants to tf.gradients too; a variant, a
        # resource or a complex output carries the derivative on (a TensorList of a
        # tf.map_fn, a While loop): without a rule it must not look unconnected.
        if any(not (t.dtype.is_floating or inert(t.dtype)) for t in op.outputs) or (
                outputs and op.type not in _RULES) or (second and op.type in GRADIENTS):
            raise unsupported(named(op))
        for t in outputs:
            if t.shape.rank is None:
                raise unsupported(f"tensor '{t.name}' of unknown rank")
        carrying.update(t.ref() for t in outputs)


class _Walk:
    """The jets pushed so far (by tensor), and how a jet's pieces combine."""

    def __init__(self, source, batched, summed, second=True, directions=None, after=(),
                 ordered=False):
        self.source, self.batched, self.summed = source, batched, summed
        self.ordered = ordered  # a step of the Laplacian's loop: J waits for ΣJ² (`chain`)
        self.second = second  # False: J only (every S stays None)
        # (first, count) of the n directions (first: an int, or a loop's tensor), or None:
        # all of them; the walk is built after `after`
        self.directions, self.after = directions, after
        self.jets, self.first = {}, None

    def begin(self):
        source, batched = self.source, self.batched
        value = source if source.dtype != tf.resource else read_of(source)
        self.n = (value.shape[1:] if batched else value.shape).num_elements()
        if self.n is None:  # known when the graph runs only
            self.n = tf.reduce_prod(tf.shape(value)[1:]) if batched else tf.size(value)
        self.total = self.n  # the one-hot directions' length; this walk carries n of them
        if self.directions is not None:
            self.n = self.directions[1]
        if source.dtype != tf.resource:
            self.jets[source.ref()] = (self.start(source), None)

    def visit(self, op):
        if op.type == "ReadVariableOp" and op.inputs[0] is self.source:
            self.first = self.first if self.first is not None else self.start(op.outputs[0])
            self.jets[op.outputs[0].ref()] = (self.first, None)
            return
        jets = [self.jets.get(t.ref()) for t in op.inputs]
        if op.type in _CONSTANT or all(jet is None for jet in jets):
            return
        outputs = [t for t in op.outputs if t.dtype.is_floating]
        if not outputs:
            return
        made = _RULES[op.type](self, op, jets)
        for t, jet in zip(op.outputs, made if isinstance(made, list) else [made]):
            if jet is not None and t.dtype.is_floating:
                self.jets[t.ref()] = jet

    def start(self, x):
        """J at the source: one-hot directions, per sample (lazily broadcast) if batched."""
        n, static = self.n, self.static_n()
        rank_of(x)
        if self.batched:
            shape = tf.concat([tf.stack([n, 1]), tf.shape(x)[1:]], 0)
            known = tf.TensorShape([static, 1]).concatenate(x.shape[1:])
        else:
            shape, known = self.with_n(tf.shape(x)), tf.TensorShape([static]).concatenate(x.shape)
        dtype = x.dtype.base_dtype
        with tf.control_dependencies(self.after):  # one chunk after another: a bounded peak
            if self.directions is None:
                J = tf.reshape(tf.eye(self.total, dtype=dtype), shape)
            else:  # past the end (a loop's last chunk, padded): zero directions
                first, count = self.directions
                J = tf.reshape(tf.one_hot(first + tf.range(count), self.total, dtype=dtype),
                               shape)
        J.set_shape(known)
        return J

    def static_n(self):
        return self.n if isinstance(self.n, int) else None

    def result(self, target):
        jet = self.jets.get(target.ref())
        if not self.second:  # connected, J None: zero (a ReLU's gradient, for one)
            return None if jet is None else tf.broadcast_to(
                self.zeros(target, True) if jet[0] is None else jet[0],
                self.with_n(tf.shape(target)))
        if jet is None or jet[1] is None:  # not connected, or linear: as tf.gradients of
            return None                    # the gradient gives None
        shape = tf.shape(target) if self.summed else self.with_n(tf.shape(target))
        return tf.broadcast_to(jet[1], shape)

    def with_n(self, shape):
        return tf.concat([tf.reshape(tf.cast(self.n, shape.dtype), [1]), shape], 0)

    def squared(self, J):
        """The J² term of S: summed over the directions or per direction."""
        return tf.reduce_sum(J * J, 0) if self.summed else J * J

    def cross(self, product):
        return tf.reduce_sum(product, 0) if self.summed else product

    def chain(self, jet, d1, d2, rank):
        """y = g(a) with g' = d1, g'' = d2 (None: zero): J = g' J_a, S = g' S_a + g'' J_a²."""
        J, S = _aligned(jet[0], rank + 1), jet[1]
        if S is not None and not self.summed:
            S = _aligned(S, rank + 1)
        d2 = d2 if self.second else None
        squared = None if d2 is None else self.squared(J)
        # In the Laplacian's loop over chunks the next J waits for J²'s reduction: running
        # ahead, it held one more tangent a direction (`benchmarks/laplacian_chunks.py`: the
        # peak at b=512, d=200 from 17.0 to 9.5 MB). One walk of every direction keeps the
        # overlap (every walk waiting, the traces bench's wavefunction runs took 2-3x longer).
        with tf.control_dependencies([squared] if self.ordered and squared is not None
                                     else []):
            J = d1 * J
        return J, _plus(None if S is None else d1 * S, None if d2 is None else d2 * squared)

    def bilinear(self, product, a, b, jets, rank):
        """y = product(a, b), bilinear: S = S_a b + a S_b + 2 Σ J_a J_b (the cross term)."""
        (Ja, Sa), (Jb, Sb) = (jet or (None, None) for jet in jets)
        Ja, Jb = _aligned(Ja, rank + 1), _aligned(Jb, rank + 1)
        if not self.summed:
            Sa, Sb = _aligned(Sa, rank + 1), _aligned(Sb, rank + 1)
        J = _plus(_times(product, Ja, b), _times(product, a, Jb))
        both = (None if Ja is None or Jb is None or not self.second
                else 2 * self.cross(product(Ja, Jb)))
        return J, _plus(_plus(_times(product, Sa, b), _times(product, a, Sb)), both)

    def linear(self, jet, like, fn):
        """A linear op `fn(x, shifted)` on J and S, materialised to `like`'s shape first;
        `shifted` says whether x has the leading n axis."""
        J, S = jet
        J = fn(self.full(J, like, True), True)
        if S is not None:
            S = fn(self.full(S, like, not self.summed), not self.summed)
        return J, S

    def full(self, x, like, shifted):
        shape = tf.TensorShape([self.static_n()]).concatenate(like.shape) if shifted else like.shape
        if shape.is_fully_defined() and x.shape == shape:
            return x
        return tf.broadcast_to(x, self.with_n(tf.shape(like)) if shifted else tf.shape(like))

    def zeros(self, like, shifted):
        return tf.zeros(self.with_n(tf.shape(like)) if shifted else tf.shape(like), like.dtype)


def _aligned(x, rank, at=1):
    """x with size-one axes inserted at `at` up to `rank`: after its leading n axis (1), so
    that it broadcasts (right-aligned) against a higher-rank output with the n axis kept
    first; in front (0) for a summed S (no n axis), ranked as the output of a broadcasting
    sum for a matmul that follows."""
    if x is None:
        return None
    for _ in range(rank - x.shape.rank):
        x = tf.expand_dims(x, at)
    return x


def _plus(a, b):
    return b if a is None else a if b is None else a + b


def _times(product, a, b):
    return None if a is None or b is None else product(a, b)


def _sum(walk, signs, jets, rank):
    """A signed sum of the inputs (broadcasting): J and S add the same way."""
    def add(parts):
        terms = [p if s == 1 else -p for s, p in parts if p is not None]
        return functools.reduce(operator.add, terms) if terms else None

    J = add([(s, _aligned(j[0], rank + 1)) for s, j in zip(signs, jets) if j is not None])
    S = add([(s, _aligned(j[1], rank, at=0) if walk.summed else _aligned(j[1], rank + 1))
             for s, j in zip(signs, jets) if j is not None])
    return J, S


def _signed(walk, op, jets):
    """Add, AddV2, BiasAdd, AddN and Sub."""
    if op.type == "BiasAdd" and op.get_attr("data_format") not in (b"NHWC", "NHWC"):
        raise unsupported(f"{named(op)} in the NCHW format")
    signs = [1, -1] if op.type == "Sub" else [1] * len(jets)
    return _sum(walk, signs, jets, rank_of(op.outputs[0]))


def _div(walk, op, jets):
    """a / b: linear in a; with b on the path, a times the jet of 1 / b."""
    (a, b), rank = op.inputs, rank_of(op.outputs[0])
    if jets[1] is None:
        return walk.bilinear(tf.divide, a, b, jets, rank)
    r = 1 / b
    inverse = walk.chain(jets[1], -r * r, 2 * r * r * r, rank_of(b))
    return walk.bilinear(tf.multiply, a, r, [jets[0], inverse], rank)


def _pow(walk, op, jets):
    (a, b), y = op.inputs, op.outputs[0]
    if jets[1] is None:
        return walk.chain(jets[0], b * tf.pow(a, b - 1), b * (b - 1) * tf.pow(a, b - 2), rank_of(y))
    if jets[0] is None:
        d = y * tf.math.log(a)
        return walk.chain(jets[1], d, d * tf.math.log(a), rank_of(y))
    raise unsupported(f"{named(op)} with both inputs on the path")


def _squared_difference(walk, op, jets):
    (a, b), rank = op.inputs, rank_of(op.outputs[0])
    return walk.chain(_sum(walk, [1, -1], jets, rank), 2 * (a - b), 2, rank)


def _select(walk, op, jets):
    """tf.where: linear in the two branches, the condition a constant."""
    cond, rank = op.inputs[0], rank_of(op.outputs[0])
    if op.type == "Select" and rank_of(cond) != rank:
        raise unsupported(f"{named(op)} with a condition of lower rank")
    zero = tf.zeros([], op.outputs[0].dtype)

    def pick(x, y, shifted):
        if x is None and y is None:
            return None
        x, y = (zero if v is None else _aligned(v, rank + 1) if shifted else v for v in (x, y))
        return tf.where(cond, x, y)  # SelectV2, which broadcasts (v1 Select does not)
    (Ja, Sa), (Jb, Sb) = (jet or (None, None) for jet in jets[1:])
    return pick(Ja, Jb, True), pick(Sa, Sb, not walk.summed)


def _linear(build):
    """A rule for an op linear in its input 0: build(op) -> fn(x, shifted)."""
    def rule(walk, op, jets):
        return walk.linear(jets[0], op.inputs[0], build(op))
    return rule


def _same(walk, op, jets):
    return jets[:len(op.outputs)]


def _each(fn):
    """A rule for an elementwise linear op: fn(op, x) on J and S as they are (lazy)."""
    def rule(walk, op, jets):
        J, S = jets[0]
        return fn(op, J), None if S is None else fn(op, S)
    return rule


def _joined(join):
    """Concat and Pack: every input's jet materialised, constants as zeros."""
    def rule(walk, op, jets):
        values = op.inputs[:-1] if op.type == "ConcatV2" else op.inputs
        axis = int(static(op, op.inputs[-1]) if op.type == "ConcatV2" else op.get_attr("axis"))
        pairs = list(zip(values, jets))

        def part(k, shifted):
            if all(jet is None or jet[k] is None for _, jet in pairs):
                return None
            return join([walk.zeros(v, shifted) if jet is None or jet[k] is None
                         else walk.full(jet[k], v, shifted) for v, jet in pairs],
                        int(shift(axis, shifted)))
        return part(0, True), part(1, not walk.summed)
    return rule


_RULES = {
    **{name: explicit for name in DERIVATIVES},
    **{name: generic for name in GENERIC},
    **dict.fromkeys(("Add", "AddV2", "BiasAdd", "AddN", "Sub"), _signed),
    "Mul": lambda walk, op, jets: walk.bilinear(tf.multiply, *op.inputs, jets,
                                                rank_of(op.outputs[0])),
    "RealDiv": _div, "Div": _div, "Pow": _pow,
    "SquaredDifference": _squared_difference,
    **dict.fromkeys(("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"), matmul),
    "Select": _select, "SelectV2": _select,
    **dict.fromkeys(GRADIENTS, activation_gradient),
    **dict.fromkeys(("Identity", "IdentityN", "Snapshot", "EnsureShape", "CheckNumerics"),
                    _same),
    "Neg": _each(lambda op, x: -x),
    "Cast": _each(lambda op, x: tf.cast(x, op.outputs[0].dtype)),
    "ReadVariableOp": _same,  # of the source handle: Walk.visit starts the directions there
    "Reshape": _linear(lambda op: lambda x, s: tf.reshape(x, n_then(x, op.inputs[1], s))),
    "BroadcastTo": _linear(lambda op: lambda x, s: tf.broadcast_to(x, n_then(
        x, op.inputs[1], s))),
    "Slice": _linear(lambda op: lambda x, s: tf.slice(
        x, with_first(0, op.inputs[1], s), with_first(-1, op.inputs[2], s))),
    "Tile": _linear(lambda op: lambda x, s: tf.tile(x, with_first(1, op.inputs[1], s))),
    "StridedSlice": _linear(strided_slice),
    "StridedSliceGrad": lambda walk, op, jets: walk.linear(jets[4], op.inputs[4],
                                                           strided_slice_grad(op)),
    "Sum": _linear(reduction(tf.reduce_sum)),
    "Mean": _linear(reduction(tf.reduce_mean)), "ExpandDims": _linear(expand_dims),
    "Squeeze": _linear(squeeze), "Transpose": _linear(transpose),
    "GatherV2": _linear(gather), "GatherNd": _linear(gather_nd),
    **MATRIX_RULES,
    "ConcatV2": _joined(tf.concat), "Pack": _joined(tf.stack), "Unpack": unpack_outputs,
    "Split": split_outputs, "SplitV": split_outputs, "Max": _linear(extremum),
    "Min": _linear(extremum),
}


def ops_with_rules() -> list:
    """The op types the forward Laplacian goes through (the docs list them), sorted: not
    the activations' gradient ops, which only a divergence's first-order walk takes."""
    return sorted({*_RULES, *_CONSTANT} - set(GRADIENTS))
