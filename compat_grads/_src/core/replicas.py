"""Work split over replicas: the pieces of one result computed by the replicas of a
`tf.distribute.Strategy` or on a list of devices (the TF1 way), then gathered or added up.

A caller says how its work splits into `count` pieces and how the gathered pieces become
its result (a `Split`); this module checks what `distribute=` names, runs the pieces (one per
replica, or one per device) and gathers them. Piece `r` of `count` covers the items
`[r * n // count, (r + 1) * n // count)` of the `n` being split (`bounds`): an even split,
the sizes differing by at most one. The public functions' splits are
`compat_grads._src.call.distribute`'s; the curvature operators sum their products here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from compat_grads._src.core import mode as _mode
from compat_grads._src.core.errors import ModeError, describe, message
from compat_grads._src.core.tf import tf

# Strategies whose replicas each run `strategy.run`'s function with a static replica id
# and whose `gather` concatenates pieces of different sizes.
SUPPORTED = ("MirroredStrategy", "MultiWorkerMirroredStrategy", "OneDeviceStrategy",
             "_DefaultDistributionStrategy", "CollectiveAllReduceStrategy")


@dataclasses.dataclass(frozen=True)
class Split:
    """How a function computes its result in pieces.

    Attributes:
      piece: `piece(r, count)` -> the flat list of piece `r`'s blocks (None for a block
        that does not depend on its sources).
      axes: `axes()` -> the axis each block's pieces are gathered along, or None for a
        block whose pieces are added up (asked after the pieces are built).
      finish: the gathered flat blocks -> the function's result.
      pack: one piece's flat blocks -> in the structure of the result (`gather=False`).
    """

    piece: Callable
    axes: Callable
    finish: Callable
    pack: Callable


def bounds(r: int, count: int, n):
    """The half-open range of items piece `r` of `count` covers (ints, or scalar tensors
    when `n` is one)."""
    return r * n // count, (r + 1) * n // count


def check(function: str, distribute) -> None:
    """Refuses a `distribute` that is neither a supported strategy (outside TF1 graphs, in
    a cross-replica context) nor a list of device names."""
    if devices(distribute) is not None:
        return
    if not isinstance(distribute, (tf.distribute.Strategy, tf.compat.v1.distribute.Strategy)):
        raise TypeError(message(
            function, f"distribute must be a tf.distribute.Strategy or a list of device "
            f"names, but got {describe(distribute)}", "Pass e.g. "
            "tf.distribute.MirroredStrategy(), or ['/cpu:0', '/cpu:1'] in a TF1 graph."))
    if _mode.in_tf1_graph():
        raise ModeError(message(
            function, "a tf.distribute.Strategy cannot split the work of a TF1 graph "
            "(or a tf.Graph().as_default() block)", "Pass a list of device names, e.g. "
            "distribute=['/cpu:0', '/cpu:1']: the pieces are placed with tf.device."))
    kind = type(distribute).__name__
    if kind not in SUPPORTED:
        raise TypeError(message(
            function, f"distribute={kind} is not supported: its replicas do not run "
            "strategy.run with a static replica id, or it has no gather",
            f"Use one of {', '.join(SUPPORTED[:3])}, or a list of device names."))
    if tf.distribute.has_strategy() and not tf.distribute.in_cross_replica_context():
        raise ValueError(message(
            function, "distribute= was given inside strategy.run (a replica context): "
            "the call would split work that is already one replica's share",
            "Call it outside strategy.run, or drop distribute= inside it (each replica "
            "then computes the whole result for its own inputs)."))


def run(function: str, distribute, gather: bool, split: Split, jit_compile: bool = False):
    """The result computed in pieces on `distribute` (checked by `check` first)."""
    names = devices(distribute)
    if names is None:
        return _on_replicas(function, distribute, gather, split, jit_compile)

    def placed():
        pieces = []
        for r, device in enumerate(names):
            with tf.device(device):
                pieces.append(split.piece(r, len(names)))
        if not gather:
            return [split.pack(p) for p in pieces]
        return split.finish([_concat(list(blocks), axis)
                             for blocks, axis in zip(zip(*pieces), split.axes())])

    if _mode.runs_eagerly():  # one traced function per call for all the pieces
        return tf.function(placed, jit_compile=jit_compile, autograph=False)()
    return placed()


def _on_replicas(function, strategy, gather, split, jit_compile):
    count, missing = strategy.num_replicas_in_sync, {}

    def replica():
        context = tf.distribute.get_replica_context()
        r = tf.get_static_value(context.replica_id_in_sync_group)
        if r is None:
            raise TypeError(message(
                function, f"{type(strategy).__name__} gives no static replica id",
                "Use a MirroredStrategy or MultiWorkerMirroredStrategy."))
        blocks = split.piece(int(r), count)
        missing.update((i, b is None) for i, b in enumerate(blocks))
        # strategy.run returns tensors only: a missing block travels as an empty one
        return [tf.zeros([0]) if b is None else b for b in blocks]

    if _mode.runs_eagerly():  # one traced function per call, as strategy.run wants
        replica = tf.function(replica, jit_compile=jit_compile, autograph=False)
    per_replica = strategy.run(replica)
    per_replica = [None if missing[i] else b for i, b in enumerate(per_replica)]
    if not gather:
        return split.pack(per_replica)
    return split.finish([None if blocks is None else _gather(strategy, blocks, axis)
                         for blocks, axis in zip(per_replica, split.axes())])


def _gather(strategy, pieces, axis):
    """The pieces concatenated in replica order (added up for `axis` None): locally when
    this worker holds them all (no collective needed), else with the strategy's all-gather
    (all-reduce) across workers."""
    local = strategy.experimental_local_results(pieces)
    if len(local) == strategy.num_replicas_in_sync:
        return _concat(list(local), axis)
    if axis is None:
        return strategy.reduce(tf.distribute.ReduceOp.SUM, pieces, axis=None)
    return strategy.gather(pieces, axis)


def _concat(blocks, axis):
    if any(b is None for b in blocks):
        return None
    return tf.add_n(blocks) if axis is None else tf.concat(blocks, axis)


def devices(distribute):
    """The device names of a list or tuple of strings, else None."""
    ok = isinstance(distribute, (list, tuple)) and distribute and all(
        isinstance(d, str) for d in distribute)
    return list(distribute) if ok else None
