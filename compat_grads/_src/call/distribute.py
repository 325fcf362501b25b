"""`distribute=` of the public functions: how each splits its work into pieces (a
`Split`), given the computation each piece runs (the call path, `compat_grads._src.call.run`,
builds it from the function's spec: this module never calls a public function), and what
`distribute=` cannot serve for them (a tape, compile=False, coupled samples). Running the
pieces on replicas or devices and gathering them is `compat_grads._src.core.replicas`'s,
shared with the curvature operators."""

from __future__ import annotations

import dataclasses

from compat_grads._src.core import mode as _mode
from compat_grads._src.core import replicas as _replicas
from compat_grads._src.core.errors import describe, message
from compat_grads._src.core.models import batch_size
from compat_grads._src.core.replicas import SUPPORTED, Split, bounds, run  # noqa: F401
from compat_grads._src.core.tf import tf
from compat_grads._src.jacobians import jacobians as _jacobians


def check(function: str, distribute, gather, compile, tape=None) -> None:
    """Refuses what `distribute=` cannot serve, before anything is built."""
    if type(gather) is not bool:
        raise TypeError(message(function, f"gather must be True or False, but got "
                                f"{gather!r}", "Pass gather=True (one tensor per block) or "
                                "gather=False (the pieces as the strategy's per-replica "
                                "values)."))
    if tape is not None:
        raise ValueError(message(
            function, "distribute= cannot use a tape: a tape records one replica's "
            "computation, and every replica must compute its own share",
            "Pass the target as a callable f(sources) instead of a tensor and its tape."))
    if compile is not True and _mode.runs_eagerly():
        raise ValueError(message(
            function, "distribute= needs compile=True in eager mode (the replicas run one "
            "traced tf.function), but got compile=False", "Drop compile=False."))
    _replicas.check(function, distribute)


def hashable(distribute):
    """`distribute` as a cache key: a list of devices becomes a tuple."""
    devices = _replicas.devices(distribute)
    return tuple(devices) if devices is not None else distribute


def needs_callable(function, target, why) -> None:
    """Refuses a tensor target where the pieces must run the computation (`why`)."""
    if not callable(target):
        raise TypeError(message(
            function, f"distribute= needs the target as a callable ({why}), but got "
            f"{describe(target)}", "Pass f itself (e.g. lambda x: model(x)) instead of "
            "its output."))


def needs_independent(function, independent) -> None:
    """Refuses coupled examples: the split gives each piece its own examples."""
    if independent is not True:
        raise ValueError(message(
            function, f"distribute= splits the examples between the pieces, which needs "
            f"independent=True, but got independent={independent!r} (coupled examples "
            "need the whole batch in one piece)", "Drop distribute=, or pass "
            "independent=True when examples do not interact."))


# -- how each function splits its work -------------------------------------------------------


def _static_shape(function, what, tensor):
    if not tensor.shape.is_fully_defined():
        raise ValueError(message(
            function, f"distribute= needs the {what}'s shape to be known when the graph is "
            f"built, but it is {tensor.shape}", "Give it a static shape (tf.ensure_shape, "
            "or a placeholder / input_signature with every dimension), or drop "
            "distribute=."))
    return tensor.shape.as_list()


def _flat_rows(function, y, r, count):
    """Piece r of the flattened target, and its shape."""
    shape = _static_shape(function, "target", y)
    start, end = bounds(r, count, y.shape.num_elements())
    return tf.reshape(y, [-1])[start:end], shape


def jacobian_split(function, jacobian, target, sources, how) -> Split:
    """stacked_jacobian: for a callable, the direction "auto" would take for the whole
    Jacobian decides: columns (elements of each source) per piece in forward mode, rows of
    the flattened target per piece in reverse mode. A tensor target is split by rows.

    Args:
      jacobian: `jacobian(target, sources, how)` -> the undistributed Jacobian blocks, in
        the structure of `sources`.
      how: the `compat_grads._src.call.options.How` of the call.
    """
    flat_sources, seen = tf.nest.flatten(sources), {}
    if callable(target):
        direction = _jacobians.choose_strategy(
            how.strategy, _target_size(target, sources), sum(_size(x) for x in flat_sources))
        how = dataclasses.replace(how, strategy=direction)
        if direction == "forward":
            return _column_split(function, jacobian, target, sources, how)

    def piece(r, count):
        def rows(src):
            part, seen["y"] = _flat_rows(function, target(src), r, count)
            return part

        if callable(target):
            blocks = jacobian(rows, sources, how)
        else:
            part, seen["y"] = _flat_rows(function, target, r, count)
            blocks = jacobian(part, sources, how)
        return tf.nest.flatten(blocks)

    def finish(blocks):
        return tf.nest.pack_sequence_as(sources, [
            None if b is None else tf.reshape(b, seen["y"] + x.shape.as_list())
            for b, x in zip(blocks, flat_sources)])

    return Split(piece, lambda: [0] * len(flat_sources), finish,
                 lambda blocks: tf.nest.pack_sequence_as(sources, blocks))


def _size(x):
    shape = tf.convert_to_tensor(x).shape if not hasattr(x, "shape") else x.shape
    return shape.num_elements() or 0


def _target_size(target, sources):
    """The number of elements of `target(sources)`, from a trace (None when not static)."""
    specs = tf.nest.map_structure(lambda x: tf.TensorSpec(x.shape, x.dtype), sources)
    traced = tf.function(target, autograph=False).get_concrete_function(specs)
    outputs = tf.nest.flatten(traced.structured_outputs)
    sizes = [getattr(o, "shape", tf.TensorShape(None)).num_elements() for o in outputs]
    return None if not sizes or None in sizes else sum(sizes)


def _column_split(function, jacobian, target, sources, how) -> Split:
    flat_sources, seen = tf.nest.flatten(sources), {}
    shapes = [_static_shape(function, "source", tf.convert_to_tensor(x))
              for x in flat_sources]

    def piece(r, count):
        whole = [tf.reshape(x, [-1]) for x in flat_sources]
        spans = [bounds(r, count, v.shape.num_elements()) for v in whole]
        parts = [v[s:e] for v, (s, e) in zip(whole, spans)]

        def columns(ps):
            rebuilt = [tf.reshape(tf.concat([v[:s], p, v[e:]], 0), shape)
                       for v, p, (s, e), shape in zip(whole, ps, spans, shapes)]
            y = target(tf.nest.pack_sequence_as(sources, rebuilt))
            seen["y"] = _static_shape(function, "target", y)
            return y

        return list(jacobian(columns, parts, how))

    def finish(blocks):
        return tf.nest.pack_sequence_as(sources, [
            None if b is None else tf.reshape(b, seen["y"] + shape)
            for b, shape in zip(blocks, shapes)])

    return Split(piece, lambda: [len(seen["y"])] * len(flat_sources), finish,
                 lambda blocks: tf.nest.pack_sequence_as(sources, blocks))


def hessian_split(function, jacobian, target, sources, how) -> Split:
    """hessian: rows of each row-source's first Jacobian (flattened) per piece.

    Args:
      jacobian: `jacobian(target, sources, how)`, as for `jacobian_split`: the pieces are
        Jacobians of rows of the first Jacobian.
      how: the `compat_grads._src.call.options.How` of the call.
    """
    flat_sources, seen = tf.nest.flatten(sources), {}
    first_how = dataclasses.replace(how, unconnected="zero", chunk_size=None)

    def piece(r, count):
        blocks = []
        for k in range(len(flat_sources)):
            def rows(src, k=k):
                first = tf.nest.flatten(jacobian(target, src, first_how))[k]
                part, seen["y", k] = _flat_rows(function, first, r, count)
                return part

            blocks += tf.nest.flatten(jacobian(rows, sources, how))
        return blocks

    def finish(blocks):
        n = len(flat_sources)
        rows = [[None if b is None else tf.reshape(b, seen["y", k] + x.shape.as_list())
                 for b, x in zip(blocks[k * n:(k + 1) * n], flat_sources)] for k in range(n)]
        return tf.nest.pack_sequence_as(sources, [tf.nest.pack_sequence_as(sources, row)
                                                  for row in rows])

    def pack(blocks):
        n = len(flat_sources)
        return tf.nest.pack_sequence_as(sources, [
            tf.nest.pack_sequence_as(sources, blocks[k * n:(k + 1) * n]) for k in range(n)])

    return Split(piece, lambda: [0] * len(flat_sources) ** 2, finish, pack)


def sample_split(function, compute, batched, count) -> Split:
    """batch_jacobian, batch_hessian, per_example_gradients: examples per piece.

    Args:
      compute: `compute(batch)` -> the result for those examples (a nest).
      batched: the nest of batched tensors whose examples are split (axis 0).
      count: the number of examples (an int, or a scalar tensor).
    """
    structure = {}

    def piece(r, count_pieces):
        start, end = bounds(r, count_pieces, count)
        result = compute(tf.nest.map_structure(lambda t: t[start:end], batched))
        structure["result"] = result
        return tf.nest.flatten(result)

    def pack(blocks):
        return tf.nest.pack_sequence_as(structure["result"], blocks)

    return Split(piece, lambda: [0] * len(tf.nest.flatten(structure["result"])), pack, pack)


def split_samples(name, compute, target, args, options):
    """A `Spec.split` of the functions of one batched source (batch_jacobian, batch_hessian,
    the batch traces): each piece computes on a share of the samples."""
    needs_callable(name, target,
                               "each replica computes the outputs of its own samples")
    (source,) = args
    source = tf.nest.map_structure(
        lambda s: s if tf.is_tensor(s) else tf.convert_to_tensor(s), source)
    return sample_split(name, lambda share: compute(target, (share,), options),
                        source, batch_size(name, tf.nest.flatten(source)[0]))
