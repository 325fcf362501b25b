"""What private training (`per_example_gradient_norms`, `clipped_gradients`) makes of the
per-example gradients' parts (`compat_grads._src.dp`): the squared norms, the norms, the
clipped and noised sums, and its checks. The call path reaches it through the specs in
`compat_grads._src.call.specs`, which build the forward pass and materialize the weights no
rule knows."""

from __future__ import annotations

from compat_grads._src.core import structure as st
from compat_grads._src.core.errors import MaterializedWarning, message, warn
from compat_grads._src.core.tf import tf
from compat_grads._src.dp import factors as _factors


def prepared(parts, count, shared):
    """One weight's parts as its norm and clipped sum read them (`factors.prepared`;
    `shared`: one dict for the weights of one call)."""
    return _factors.prepared(parts, count, shared) if parts else parts


def squared(parts, count, dtype):
    """One weight's squared per-example norms (None for a weight the losses do not use)."""
    if not parts:
        return None
    return tf.cast(_factors.squared_norms(parts, count), dtype)


def warn_materialized(name, flat, why, missing):
    """The one `MaterializedWarning` of a call: the weights no rule knows, and why."""
    names = "; ".join(f"{_weight_name(flat[i])}: {why[i]}" for i in missing)
    warn(message(name, f"no rule reads the per-example gradients of {len(missing)} "
                 f"weight(s) from their layer's inputs and output gradients ({names}), so "
                 "theirs are materialized ([b] + the weight's shape, as "
                 "per_example_gradients computes them)", "Nothing to fix for the values; "
                 "for the speed and memory of the rules, see the layers they cover in the "
                 "Private training guide."), MaterializedWarning)


def _weight_name(weight) -> str:
    return str(getattr(weight, "name", None) or getattr(weight, "op", weight))


# -- the two results -----------------------------------------------------------------------


def norms_of(name, squares, parts, count, weights, options):
    """Each example's gradient norm: over every weight, or (`per_weight`) one per weight."""
    structure, flat = weights
    zero = _zeros(squares, count)
    if options.clipping.per_weight:
        return tf.nest.pack_sequence_as(
            structure, [zero if s is None else tf.sqrt(s) for s in squares])
    return tf.sqrt(_total(squares, zero))


def clipped_of(name, squares, parts, count, weights, options):
    """The sum (or mean) of the per-example gradients each scaled to a norm of at most
    `l2_norm_clip`, noised; with `return_norms`, and the norms."""
    structure, flat = weights
    norms = tf.sqrt(_total(squares, _zeros(squares, count)))
    clip = tf.constant(options.clipping.l2_norm_clip, norms.dtype)
    scale = clip / tf.maximum(norms, clip)
    sums = [tf.cast(_factors.clipped_sum(mine, count, scale, weight.shape),
                    st.dtype_of(weight)) if mine else None
            for weight, mine in zip(flat, parts)]
    return finished(sums, norms, count, weights, options)


def finished(sums, norms, count, weights, options):
    """The clipped sums (None for a weight the losses do not use) as `clipped_gradients`
    returns them: noised, divided by the batch size `count` for "mean", in the structure
    of the weights; with `return_norms`, and the `[b]` norms."""
    (structure, flat), clipping = weights, options.clipping
    done = []
    for i, (weight, total) in enumerate(zip(flat, sums)):
        dtype, shape = st.dtype_of(weight), weight.shape
        if total is None:
            if options.how.unconnected != "zero" and not clipping.noised:
                done.append(None)
                continue
            total = tf.zeros(shape, dtype)
        if clipping.noised:
            total += _noise(clipping, i, shape, dtype)
        if clipping.reduction == "mean":
            total /= tf.cast(count, dtype)
        done.append(total)
    result = tf.nest.pack_sequence_as(structure, done)
    return (result, norms) if clipping.return_norms else result


def _noise(clipping, index, shape, dtype):
    """Gaussian noise of standard deviation `noise_multiplier * l2_norm_clip`, from the
    stateless seed (one stream per weight: `[seed, index]`)."""
    seed = tf.stack([tf.cast(clipping.seed, tf.int64), tf.constant(index, tf.int64)])
    stddev = clipping.noise_multiplier * clipping.l2_norm_clip
    draw_dtype = tf.float64 if dtype == tf.float64 else tf.float32
    return tf.cast(tf.random.stateless_normal(shape, seed, stddev=stddev, dtype=draw_dtype),
                   dtype)


def _zeros(squares, count):
    dtype = next((s.dtype for s in squares if s is not None), tf.float32)
    return tf.zeros(tf.reshape(count, [1]), dtype)


def _total(squares, zero):
    total = zero
    for s in squares:
        if s is not None:
            total = total + s
    return total


# -- checks --------------------------------------------------------------------------------


def check_weights(name, flat):
    for weight in flat:
        dtype = getattr(weight, "dtype", None)
        if dtype is None or not tf.as_dtype(dtype).is_floating:
            raise TypeError(message(
                name, f"every weight must be a float variable or tensor, but got "
                f"{weight!r}", "Pass the model's trainable float weights (the default), or "
                "weights=[...] of float variables."))


_BATCH_STATISTICS = frozenset({"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3",
                               "Mean", "Sum", "Max", "Min", "Prod"})


def check_independent(name, losses, context, ops):
    """With independent=True: a ValueError when the forward pass is seen to mix the
    examples (batch statistics: a batch normalization in training mode, a reduction over
    the batch axis of a tensor that holds the examples there)."""
    if isinstance(context.elements(losses), int):
        return
    for op in ops:
        if op.type in _BATCH_STATISTICS and op.inputs and _mixes(op) and (
                context.rows(op.inputs[0]) not in (None, -1)):
            raise ValueError(message(
                name, f"independent=True needs examples that do not interact, but the op "
                f"{op.name!r} ({op.type}) mixes them (batch statistics: BatchNormalization "
                "in training mode, or a reduction over the batch axis)",
                "Call the model in inference mode (training=False), or pass "
                "independent=False for the exact per-example gradients of the coupled batch "
                "(materialized)."))


def _mixes(op) -> bool:
    """Whether a reduction or a batch normalization computes over the first axis."""
    if op.type.startswith("FusedBatchNorm"):
        return bool(op.get_attr("is_training")) and (
            op.get_attr("data_format").decode() in ("NHWC", "NDHWC"))
    axes = tf.get_static_value(op.inputs[1])
    rank = op.inputs[0].shape.rank
    return axes is not None and rank is not None and any(
        int(a) % rank == 0 for a in (axes.ravel() if hasattr(axes, "ravel") else [axes]))



