"""What each public function computes: its `_call.Spec`.

A computation takes the public name, the target, the arguments (the sources first) and the
checked `_options.Options`; it makes the problem, asks the shim for the backend and composes
the math of `compat_grads._src.jacobians.jacobians`. It never sees `distribute=` or the compile
cache: the
call path runs it in each piece of a split and inside the compiled function.
"""

from __future__ import annotations

import dataclasses
import functools

from compat_grads._src.backends import select as _select
from compat_grads._src.call import distribute as _distribute
from compat_grads._src.call import flat as _flat
from compat_grads._src.call import specs_dp as _dp
from compat_grads._src.call import value as _value
from compat_grads._src.call.spec import Spec
from compat_grads._src.core import mode as _mode
from compat_grads._src.core import models as _models
from compat_grads._src.core import structure as st
from compat_grads._src.core.errors import describe, is_ours, message
from compat_grads._src.core.tf import tf
from compat_grads._src.dp import ghost as _ghost
from compat_grads._src.dp import recurrent as _recurrent
from compat_grads._src.dp.context import Context
from compat_grads._src.dp.factors import PerExample
from compat_grads._src.jacobians import jacobians as _jacobians

# -- the computations --------------------------------------------------------------------


def _jacobian(name, target, args, options):
    (sources,) = args
    problem = st.make_problem(name, target, sources, options.tape)
    backend = _select.backend_for(problem)
    (blocks,) = _jacobians.jacobian_blocks(backend, problem.flat, options.how)
    return problem.pack(blocks)


def _per_element(name, target, args, options):
    (sources,) = args
    problem = st.make_problem(name, target, sources, options.tape)
    backend = _select.backend_for(problem)
    return problem.pack(_jacobians.per_element(backend, problem.flat, options.how))


def _hessian(name, target, args, options):
    (sources,) = args
    problem = st.make_problem(name, target, sources)
    backend = _select.backend_for(problem, order=2)
    blocks = _jacobians.hessian_blocks(backend, problem.flat, options.how)
    return problem.pack([problem.pack(row) for row in blocks])


def _batch_jacobian(name, target, args, options):
    independent = options.independent
    compute = _jacobians.batch_jacobian_block if independent else _jacobians.exact_batch_jacobian
    return _batched(name, target, args, options, compute, order=1)


def _batch_hessian(name, target, args, options):
    independent = options.independent
    compute = _jacobians.batch_hessian_block if independent else _jacobians.exact_batch_hessian
    return _batched(name, target, args, options, compute, order=2)


def _batched(name, target, args, options, compute, order):
    """Per-sample derivatives of one batched source: `compute(backend, source, how)`."""
    (source,) = args
    problem = st.make_problem(name, target, source, options.tape, argument="source")
    (flat_source,) = st.single_source(name, problem)
    backend = _select.backend_for(problem, order=order)
    with st.after(st.check_batch(name, backend.target, flat_source,
                                 per_sample_scalar=order == 2)):
        return compute(backend, flat_source, options.how)


def _jvp(name, f, args, options):
    primals, tangents = args
    problem = st.make_problem(name, _callable(name, f), primals, nested_target=True,
                              argument="primals")
    flat_tangents = st.match_sources(name, "tangents", problem, tangents)
    outputs, products = _select.backend_for(problem).linearize(flat_tangents)
    flat_outputs = tf.nest.flatten(outputs)
    return outputs, tf.nest.pack_sequence_as(outputs, st.zeros_for_none(products, flat_outputs))


def _vjp(name, f, args, options):
    primals, cotangents = args
    problem = st.make_problem(name, _callable(name, f), primals, nested_target=True,
                              argument="primals")
    backend = _select.backend_for(problem)
    flat_cotangents = st.match_outputs(name, backend.outputs, cotangents)
    grads = backend.vjp_fn()(flat_cotangents)
    return backend.outputs, problem.pack(st.zeros_for_none(grads, problem.flat))


def _hvp(name, f, args, options):
    primals, vector = args
    problem = st.make_problem(name, _callable(name, f), primals, argument="primals")
    flat_vector = st.match_sources(name, "vector", problem, vector)
    backend = _select.backend_for(problem, order=2)
    gradient = backend.vjp_backend(
        lambda targets: [tf.ones_like(st.check_scalar(name, targets[0]))])
    _, products = gradient.linearize_symmetric(flat_vector)
    return problem.pack(st.zeros_for_none(products, problem.flat))


def _callable(name, f):
    if not callable(f) or tf.is_tensor(f):
        raise TypeError(message(
            name, f"f must be a callable f(primals), but got {describe(f)}",
            "Wrap the computation in a function of the primals (a tensor cannot be run "
            "again at other inputs)."))
    return f


# -- per_example_gradients -----------------------------------------------------------------


def example_inputs(name, model, args):
    """The weights (default: the model's trainable ones) and the batch, as tensors."""
    weights, x, y = args
    weights = _models.default_weights(name, model, weights)
    return model, (weights, _models.as_tensors(name, "x", x), _models.as_tensors(name, "y", y))


def _per_example(name, model, args, options):
    weights, x, y = args
    _models.check_callables(name, options.loss_fn, model)
    _select.check_model_mode(name, model)
    if options.how.strategy == "forward":
        raise ValueError(message(
            name, "strategy must be 'auto', 'reverse' or 'loop', but got 'forward' (each "
            "example has one scalar loss: reverse mode is always cheaper)",
            "Drop strategy=, or pass strategy='loop' for the lowest memory."))
    count = _models.batch_size(name, x)
    capture = _value.Capture(name, model, True) if options.has_aux else None
    model = capture or model
    with st.after(_models.check_batches(name, x, y)):
        if options.independent:
            losses, aux, grads = example_rows(name, model, weights, (x, y, count), options,
                                               capture)
        else:
            losses, grads = coupled_examples(name, model, weights, (x, y, count), options)
            aux = capture and capture.first()[1]
    if not options.valued:
        return grads
    return _value.assemble(options, losses, aux, grads)


def coupled_examples(name, model, weights, batch, options):
    """The rows of the Jacobian of the batch's per-example losses (exact when examples
    interact). `batch` is (inputs, labels, number of examples: an int when static)."""
    x, y, count = batch
    static = count if isinstance(count, int) else None
    how = options.how

    def losses(ws):
        return _models.per_example_losses(name, options.loss_fn, model, x, y, static)

    problem = st.make_problem(name, losses, weights, argument="weights")
    backend = _select.backend_for(problem)
    (blocks,) = _jacobians.jacobian_blocks(backend, problem.flat, how.using(
        "reverse" if how.strategy == "auto" else how.strategy))
    return backend.target, problem.pack(blocks)


def example_rows(name, model, weights, batch, options, capture=None):
    """Each example forward and backward on its own, vectorized over the batch; with
    `return_value` and `has_aux` (the model a `capture`) each example's loss and aux come
    from its own pass. Returns (losses or None, aux or None, gradients)."""
    x, y, count = batch

    def loss_of_example(i):
        return lambda ws: tf.reduce_sum(_models.per_example_losses(
            name, options.loss_fn, model, _models.example(x, i), _models.example(y, i), 1))

    # Example 0's problem picks the backend; the graph backend also walks its forward pass
    # for TF1 control flow before trying pfor (ops that nothing runs).
    problem = st.make_problem(name, loss_of_example(0), weights, argument="weights")
    backend = _select.backend_for(problem)
    extras = _example_extras(name, backend, options, capture)
    grads, stacks = _jacobians.per_example_rows(backend, loss_of_example, count, options.how,
                                                extras)
    losses = stacks.pop(0) if options.return_value else None
    aux = None if capture is None else _with_leaves(capture.first()[1], stacks)
    return losses, aux, problem.pack(grads)


def _example_extras(name, backend, options, capture):
    """What each example's row returns besides its gradient: its loss (`return_value`) and
    its aux leaves without their batch axis of 1 (`has_aux`; None leaves stay None), shaped
    like example 0's (whose forward pass the backend already built)."""
    if not options.valued:
        return None
    target = backend.target  # example 0's pass, at the top: the model's first call
    like = [tf.zeros([], st.dtype_of(target))] if options.return_value else []
    if capture is not None:
        first = capture.first()[1]
        _value.check_sample_aux(name, first, "per_example_gradients runs each example on its "
                                "own and stacks its aux", batch=1)
        like += [tf.zeros_like(leaf[0]) for leaf in _leaves(first)]

    def of_example(served):
        loss = [tf.reshape(served.target, [])] if options.return_value else []
        aux = [] if capture is None else [leaf[0] for leaf in _leaves(capture.last[1])]
        return [*loss, *aux]
    return like, of_example


def _leaves(aux):
    return [leaf for leaf in tf.nest.flatten(aux) if leaf is not None]


def _with_leaves(aux, stacks):
    """`aux`'s structure with its tensor leaves replaced by `stacks`, None leaves kept."""
    stacks = iter(stacks)
    return tf.nest.pack_sequence_as(aux, [None if leaf is None else next(stacks)
                                          for leaf in tf.nest.flatten(aux)])


# -- private training (per_example_gradient_norms, clipped_gradients) ----------------------


def _private(finish, name, model, args, options):
    """The forward pass built once (in a graph: a one-off one with compile=False), each
    weight's per-example gradient parts read by the rules of `compat_grads._src.dp`, the
    weights no rule knows materialized by `example_rows`, then `finish(name, squared
    norms, parts, batch, (weights, flat weights), options)` (`compat_grads._src.call.specs_dp`)."""
    weights, x, y = args
    _models.check_callables(name, options.loss_fn, model)
    _select.check_model_mode(name, model)
    flat = [_models.unwrap_variable(w) for w in tf.nest.flatten(weights)]
    _dp.check_weights(name, flat)
    return _mode.as_graph(lambda: _private_built(name, model, (weights, flat, x, y), options,
                                                 finish))


def _private_built(name, model, args, options, finish):
    weights, flat, x, y = (*args[:2], *(_in_graph(t) for t in args[2:]))
    count = _models.batch_size(name, x)
    capture = _value.Capture(name, model, True) if options.has_aux else None
    model = capture or model
    graph = tf.compat.v1.get_default_graph()
    start = len(graph.get_operations())
    with st.after(_models.check_batches(name, x, y)):
        losses = _private_forward(name, model, (x, y, count), options)
        made = graph.get_operations()[start:]
        sources = tf.nest.flatten(x) + tf.nest.flatten(y)
        if options.independent:
            context = Context(count, sources)
            _dp.check_independent(name, losses, context, made)
            found = _ghost.per_example_parts(
                losses, flat, {op.name: i for i, op in enumerate(made)}, context)
            parts = _private_materialized(name, model, flat, found, (x, y, count), options)
        else:
            _, grads = coupled_examples(name, model, flat, (x, y, count), options)
            parts = [None if g is None else [PerExample(g)] for g in grads]
        shared = {}
        parts = [_dp.prepared(p, count, shared) for p in parts]
        squares = [_dp.squared(p, count, losses.dtype) for p in parts]
        result = finish(name, squares, parts, count, (weights, flat), options)
    if not options.valued:
        return result
    aux = capture.first()[1] if capture is not None else None
    return _value.assemble(options, losses, aux, result)


def _private_forward(name, model, batch, options):
    """The per-example losses, with the model's recurrent layers unrolled while they are
    built (`compat_grads._src.dp.recurrent`); as the model is when it cannot be unrolled
    (a time dimension unknown while building)."""
    x, y, count = batch
    static = count if isinstance(count, int) else None
    layers = _recurrent.recurrent_layers(getattr(model, "__wrapped__", model))
    if layers:
        try:
            with _recurrent.unrolled(layers):
                return _models.per_example_losses(name, options.loss_fn, model, x, y, static)
        except (ValueError, TypeError) as err:
            if is_ours(err):
                raise
    return _models.per_example_losses(name, options.loss_fn, model, x, y, static)


def _in_graph(nest):
    """The batch as tensors of the graph being built (the eager ones a one-off graph of
    compile=False captures become identities): the rules prove from these which tensors
    hold the examples."""
    graph = tf.compat.v1.get_default_graph()
    return tf.nest.map_structure(
        lambda t: t if getattr(t, "graph", None) is graph else tf.identity(t), nest)


def _private_materialized(name, model, flat, found, batch, options):
    """The parts, with each weight no rule knows materialized (one warning naming them)."""
    missing = [i for i, parts in enumerate(found.parts) if parts is None]
    if not missing:
        return found.parts
    _dp.warn_materialized(name, flat, found.why, missing)
    plain = dataclasses.replace(options, return_value=False, has_aux=False)
    _, _, grads = example_rows(name, model, [flat[i] for i in missing], batch, plain)
    parts = list(found.parts)
    for i, grad in zip(missing, grads):
        parts[i] = [] if grad is None else [PerExample(grad)]
    return parts


# -- how distribute= splits them -----------------------------------------------------------


def _with_how(compute, options):
    """`compute` as `jacobian(target, sources, how)`, for `_distribute`'s splits."""
    return lambda target, sources, how: compute(
        target, (sources,), dataclasses.replace(options, how=how))


def _jacobian_split(name, compute, target, args, options):
    (sources,) = args
    return _distribute.jacobian_split(name, _with_how(compute, options), target, sources,
                                      options.how)


def _hessian_split(name, compute, target, args, options):
    (sources,) = args
    return _distribute.hessian_split(name, _with_how(compute, options), target, sources,
                                     options.how)


def _example_split(name, compute, model, args, options):
    """per_example_gradients on a share of the examples."""
    weights, x, y = args
    return _distribute.sample_split(
        name, lambda batch: compute(model, (weights, *batch), options), (x, y),
        _models.batch_size(name, x))


def _clipped_split(name, compute, model, args, options):
    """`clipped_gradients` with `distribute=`: each piece clips and sums its own share of
    the examples (no noise, with their norms); the pieces' sums are added up (an
    all-reduce across replicas), then noised once and divided by the whole batch size.
    The norms, values and aux are joined along the batch axis."""
    weights, x, y = args
    if not options.gather:
        raise ValueError(message(
            name, "distribute= with gather=False would return each replica's share of the "
            "clipped sum, but the noise is added once to their total",
            "Drop gather=False (the total is one tensor per weight), or call "
            "per_example_gradient_norms with gather=False for each replica's norms."))
    flat = [_models.unwrap_variable(w) for w in tf.nest.flatten(weights)]
    count = _models.batch_size(name, x)
    alone = dataclasses.replace(options, clipping=dataclasses.replace(
        options.clipping, noise_multiplier=0.0, reduction="sum", return_norms=True))
    seen = {}

    def piece(r, pieces):
        start, end = _distribute.bounds(r, pieces, count)
        share = tf.nest.map_structure(lambda t: t[start:end], (x, y))
        result = compute(model, (weights, *share), alone)
        sums, norms = _value.derivative_of(options, result)
        seen["rest"] = _value.with_derivative(options, result, None)
        return tf.nest.flatten(sums) + [norms] + tf.nest.flatten(seen["rest"])

    def axes():
        return [None] * len(flat) + [0] * (1 + len(tf.nest.flatten(seen["rest"])))

    def finish(blocks):
        sums, norms, rest = blocks[:len(flat)], blocks[len(flat)], blocks[len(flat) + 1:]
        result = _dp.finished(sums, norms, count, (weights, flat), options)
        rest = tf.nest.pack_sequence_as(seen["rest"], rest)
        return _value.with_derivative(options, rest, result)

    return _distribute.Split(piece, axes, finish, finish)


# -- the specs ---------------------------------------------------------------------------

STACKED_JACOBIAN = Spec("stacked_jacobian", _jacobian, split=_jacobian_split,
                        flatten=_flat.jacobian)
PER_ELEMENT_GRADIENTS = Spec("per_element_gradients", _per_element)
BATCH_JACOBIAN = Spec("batch_jacobian", _batch_jacobian, split=_distribute.split_samples,
                      samples=True, flatten=_flat.batch_jacobian)
PER_EXAMPLE_GRADIENTS = Spec("per_example_gradients", _per_example, split=_example_split,
                             prepare=example_inputs, tensor_target=False, bind_sources=True,
                             value="own", samples=True)
HESSIAN = Spec("hessian", _hessian, split=_hessian_split, pieces=STACKED_JACOBIAN,
               needs_callable="the replicas differentiate it twice", flatten=_flat.hessian)
BATCH_HESSIAN = Spec("batch_hessian", _batch_hessian, split=_distribute.split_samples, samples=True,
                     flatten=_flat.batch_hessian)
JVP = Spec("jvp", _jvp, value="outputs", argument="f")
VJP = Spec("vjp", _vjp, value="outputs", argument="f")
HVP = Spec("hvp", _hvp, argument="f")
PER_EXAMPLE_GRADIENT_NORMS = Spec(
    "per_example_gradient_norms", functools.partial(_private, _dp.norms_of),
    split=_example_split, prepare=example_inputs, tensor_target=False, bind_sources=True,
    value="own", samples=True)
CLIPPED_GRADIENTS = Spec(
    "clipped_gradients", functools.partial(_private, _dp.clipped_of), split=_clipped_split,
    prepare=example_inputs, tensor_target=False, bind_sources=True, value="own",
    samples=True)
