"""The rules run over a forward pass: for each weight, its uses, one backward pass to all
their outputs, and each use's part of the per-example gradient."""

from __future__ import annotations

import dataclasses

from compat_grads._src.core.tf import tf
from compat_grads._src.dp import uses as _uses
from compat_grads._src.dp.context import Context
from compat_grads._src.dp.factors import PerExample, per_example_total
from compat_grads._src.dp.rules import rule_for


@dataclasses.dataclass
class Found:
    """Per weight (in `weights` order): its parts (a list of `Outer` / `PerExample`; an
    empty list for a weight the losses do not use), or None with the reason in `why` for a
    weight some use of which no rule knows."""

    parts: list
    why: list


def per_example_parts(losses, weights, created, context: Context) -> Found:
    """The parts of each weight's per-example gradient of `losses` (`[b]`, made by the ops
    `created` names: `{name: position}` in the order they were made), from one backward
    pass to every use's output."""
    graph = losses.graph
    uses = [_uses.uses_of(w, graph, created, context.fixed) for w in weights]
    outputs, index = [], {}
    for use in (u for found in uses for u in found):
        if rule_for(use) is not None and id(use.output) not in index:
            index[id(use.output)] = len(outputs)
            outputs.append(use.output)
    grads = tf.gradients(tf.reduce_sum(losses), outputs) if outputs else []
    parts, why = [], []
    for weight, found in zip(weights, uses):
        mine, reason, pieces = [], None, {}
        if not found and _reads(losses, weight):
            reason = "its reads are not ops the forward pass made (a nested function?)"
        for use in found:
            rule = rule_for(use)
            if rule is None:
                reason = f"no rule for the op {use.op.type!r} (op {use.op.name!r})"
                break
            grad = grads[index[id(use.output)]]
            if grad is None:  # this use does not reach the losses
                continue
            part = rule(use, grad, context)
            if isinstance(part, str):
                reason = f"{part} (op {use.op.name!r})"
                break
            part = pulled_back(part, use.chain, context.batch)
            if use.piece is None:
                mine.append(part)
            else:
                pieces.setdefault(use.piece.op, {}).setdefault(use.piece, []).append(part)
        mine += [_joined(op, found, weight.shape, context.batch)
                 for op, found in pieces.items()]
        parts.append(None if reason else mine)
        why.append(reason)
    return Found(parts, why)


def _joined(op, pieces, shape, batch):
    """The per-example gradient of a weight cut into pieces by `op`, from the parts of each
    piece's uses (`{Piece: parts}`), zeros for the rows no piece's use reads."""
    shape, blocks, at = shape.as_list(), [], 0
    dtype = next(iter(pieces)).op.outputs[0].dtype
    for piece in sorted(pieces, key=lambda p: p.start):
        if piece.start > at:
            blocks.append(tf.zeros(tf.stack([batch, piece.start - at, *shape[1:]]), dtype))
        total = per_example_total(pieces[piece], batch)
        blocks.append(tf.reshape(tf.cast(total, dtype), [batch, piece.rows, *shape[1:]]))
        at = piece.start + piece.rows
    if at < shape[0]:
        blocks.append(tf.zeros(tf.stack([batch, shape[0] - at, *shape[1:]]), dtype))
    return PerExample(tf.reshape(tf.concat(blocks, 1), [batch, *shape]))


def pulled_back(part, chain, batch):
    """A use's part for a tensor derived from the weight by `chain`, as the weight's own:
    materialized, then multiplied by each step's derivative and summed over the axes the
    step broadcast its input along."""
    if not chain:
        return part
    grads = per_example_total([part], batch)
    for step in reversed(chain):
        op, out, source = step.op, step.op.outputs[0], step.op.inputs[step.index]
        grads = tf.reshape(grads, [batch, *out.shape.as_list()])
        grads = grads * _derivative(op, step.index, grads.dtype)
        grads = _reduced(grads, source.shape)
    return PerExample(grads)


def _derivative(op, index, dtype):
    """d output / d input `index` of a `uses.DERIVED` op (a tensor or a number)."""
    if op.type == "Mul":
        return tf.cast(op.inputs[1 - index], dtype)
    if op.type == "RealDiv":
        return 1 / tf.cast(op.inputs[1], dtype)
    return -1.0 if op.type == "Neg" or (op.type == "Sub" and index == 1) else 1.0


def _reduced(grads, shape):
    """`grads` (`[b] + a broadcast shape`) summed to `[b] + shape`."""
    rank, shape = grads.shape.rank - 1, shape.as_list()
    padded = [1] * (rank - len(shape)) + shape
    axes = [i + 1 for i, d in enumerate(padded) if d == 1 and grads.shape.as_list()[i + 1] != 1]
    axes += list(range(1, rank - len(shape) + 1))
    summed = tf.reduce_sum(grads, axis=sorted(set(axes)), keepdims=True) if axes else grads
    return tf.reshape(summed, [-1, *shape])


def _reads(losses, weight) -> bool:
    """Whether the losses depend on `weight` at all (a weight none of whose reads were
    found must not count as unused)."""
    return tf.gradients(losses, [weight])[0] is not None
