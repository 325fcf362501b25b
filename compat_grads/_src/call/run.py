"""The one call path of the public functions, read top to bottom.

Each public function is its signature, its docstring and one call of `run` with its `Spec`
(`compat_grads._src.call.spec`): what it computes from its target and arguments, how
`distribute=` splits it, and whether the compile cache binds its sources. Everything that is
the same for every function is here, once, as plain functions that call each other:

1. `run` checks the options, in the function's order, into the frozen `Options`
   (`compat_grads._src.call.options`), and `spec.prepare` normalises the arguments
   (`per_example_gradients`' defaults); `distribute=` is checked here too;
2. `_retry` (eager code, `chunk_size="auto"`) runs `_compiled` again with smaller chunks
   when it runs out of memory;
3. `_compiled` runs `evaluate` through the compile cache (`compat_grads._src.call.compile`)
   for a callable target in eager code, keyed on `Options.cache_key`;
4. `evaluate` computes (`spec.compute`: make the problem, ask
   `compat_grads._src.backends.select` for the backend, compose the math) whole or, with
   `distribute=`, in pieces (`compat_grads._src.call.distribute`), and `_finished` adds the
   value, the aux and the flat matrix where asked (`compat_grads._src.call.value`,
   `compat_grads._src.call.flat`).
"""

from __future__ import annotations

import dataclasses
import functools
import weakref

from compat_grads._src import memory as _memory
from compat_grads._src.call import compile as _compile
from compat_grads._src.call import distribute as _distribute
from compat_grads._src.call import fast as _fast
from compat_grads._src.call import options as _options
from compat_grads._src.call import value as _value
from compat_grads._src.call.spec import Spec
from compat_grads._src.core import mode as _mode
from compat_grads._src.core.errors import MemoryWarning, is_ours, last_line, message, warn
from compat_grads._src.core.structure import eager_tensor_error, numbers_in_a_list
from compat_grads._src.core.tf import tf


def run(spec: Spec, target, args: tuple, **given):
    """The result of the public function `spec.name` called with `target`, `args` (the
    sources first) and the options `given` (compile, jit_compile, then its own in the order
    its errors report them, then distribute and gather)."""
    key = _fast.key(spec.name, target, args, given)
    if key is not None:
        shortcut = _fast.call(key, target, args)
        if shortcut is not _fast.MISS:
            return shortcut
    return _whole_path(spec, target, args, key, given)


@tf.autograph.experimental.do_not_convert
def _whole_path(spec: Spec, target, args: tuple, shortcut_key, given: dict):
    """`run` past the shortcut, hidden from AutoGraph: in a user's converted tf.function the
    bodies it hands TensorFlow's loops (`tf.map_fn`, `tf.while_loop`) would be converted too
    (`compat_grads._src.api.docs.public_call`)."""
    try:
        return _run(spec, target, args, shortcut_key, **given)
    except TypeError as err:
        clear = None if is_ours(err) or not _is_callable(target) else (
            numbers_in_a_list(spec.name, args[0], err))
        if clear is None:
            raise
        raise clear from err


def _run(spec: Spec, target, args: tuple, shortcut_key, **given):
    options = _options.check(spec.name, **given)
    if spec.prepare is not None:
        target, args = spec.prepare(spec.name, target, args)
    if options.has_aux and not _is_callable(target):
        _value.no_aux_for_tensor(spec.name, target, spec.argument)
    if options.distribute is not None:
        _check_distributed(spec, target, options)
    retried = _retried(target, options)
    _fast.forget()
    try:
        result = (_retry if retried else _compiled)(spec, target, args, options)
        if shortcut_key is not None and _shortcut_may_serve(spec, target, options):
            _fast.remember(shortcut_key, target, args, retried)
        return result
    finally:
        _fast.forget()  # the note holds the compiled function and the inputs


def _shortcut_may_serve(spec, target, options) -> bool:
    """Whether a later call with the same callable, options and argument shapes may run
    what this one ran (`compat_grads._src.call.fast`): nothing else decided it. No
    `prepare` (it reads the target), `distribute=`, tape or seed, and no chunk remembered
    for this callable after it ran out of memory."""
    if (spec.prepare is not None or options.distribute is not None
            or options.tape is not None or not options.compile or _takes_a_seed(options)):
        return False
    try:
        return target not in _FIT
    except TypeError:  # not weakly keyable: nothing is remembered for it
        return True


def evaluate(spec: Spec, target, args: tuple, options: _options.Options):
    """The public result of `spec.name`: the derivative, computed whole or (`distribute=`)
    in pieces, with the value, the aux and the flat matrix where asked. What the compile
    cache traces and each retry runs."""
    if options.distribute is None:
        return _finished(spec, options, functools.partial(_whole, spec, options), target, args)
    if spec.samples:  # each piece finishes its own samples
        return _in_pieces(spec, options, target, args)
    return _finished(spec, options, functools.partial(_in_pieces, spec, options), target, args)


def _whole(spec, options, target, args):
    return spec.compute(spec.name, target, args, options)


def _in_pieces(spec, options, target, args):
    return _distribute.run(spec.name, options.distribute, options.gather,
                           split(spec, target, args, options), options.jit_compile)


def split(spec: Spec, target, args: tuple, options: _options.Options) -> _distribute.Split:
    """How a call with `distribute=` computes its result in pieces."""
    pieces = spec.pieces or spec
    compute = (functools.partial(_finished_piece, spec, pieces) if spec.samples
               else functools.partial(_whole_of, pieces))
    return spec.split(spec.name, compute, target, args, options)


def _whole_of(spec, target, args, options):
    return _whole(spec, options, target, args)


def _finished_piece(spec, pieces, target, args, options):
    """A piece of a split over the samples: its derivative with its own samples' value,
    aux and flat matrix (joined along the batch axis afterwards)."""
    return _finished(spec, options, functools.partial(_whole, pieces, options), target, args,
                     in_pieces=True)


_JOINED = ("with distribute= each replica computes the aux of its own samples, joined along "
           "the batch axis")


def _batch_of(source):
    shape = getattr(source, "shape", None)
    return tf.compat.dimension_value(shape[0]) if shape is not None and shape.rank else None


def _is_callable(target) -> bool:
    """A callable target (a function, a model), not a tensor. Asked on every eager call:
    `tf.is_tensor` of a Python function runs a typing Protocol's `isinstance` (35 µs under
    cProfile; `stacked_jacobian`'s eager call on a 3-vector went from 63-102 to 32-35 µs
    over its concrete function without it), and no tensor, variable or composite tensor
    is callable."""
    return callable(target) and not isinstance(target, (tf.Tensor, tf.Variable))


def _finished(spec, options, compute, target, args, in_pieces=False):
    """`compute(target, args)`, the derivative, as the public result: with the value and aux
    (`compat_grads._src.call.value`) and as one matrix (`flat`) where asked."""
    if not (options.valued or options.flat) or spec.value == "own":
        return compute(target, args)
    if not _is_callable(target):
        derivative, y, aux = compute(target, args), target, None
    else:
        capture = _value.Capture(spec.name, target, options.has_aux)
        derivative = compute(capture, args)
        y, aux = capture.value(args[0])
        if in_pieces and options.has_aux:
            _value.check_sample_aux(spec.name, aux, _JOINED, _batch_of(args[0]))
    if options.flat:
        derivative = spec.flatten(spec.name, derivative, y, args[0])
    if spec.value == "outputs":
        return (*derivative, aux) if options.has_aux else derivative
    return _value.assemble(options, y, aux, derivative) if options.valued else derivative


def _check_distributed(spec, target, options):
    """The checks of `distribute=`, made once before anything is built: each piece then
    computes with the same options (`max_bytes` bounds each piece); in eager mode through a
    tf.function cached per callable and options, as `compile=True` caches the
    undistributed call."""
    name = spec.name
    if spec.needs_callable:
        _distribute.needs_callable(name, target, spec.needs_callable)
    _distribute.check(name, options.distribute, options.gather, options.compile, options.tape)
    _distribute.needs_independent(name, options.independent)
    if spec.tensor_target and not callable(target) and _mode.runs_eagerly():
        raise eager_tensor_error(name)
    if options.flat and not options.gather:
        raise ValueError(message(
            name, "flat=True needs gather=True: the matrix joins every piece",
            "Drop flat=True to get the pieces, or drop gather=False."))


def _retried(target, options) -> bool:
    """Whether running out of memory is retried in smaller chunks (`_retry`): eager code
    with `chunk_size="auto"` whose computation can run again (a callable target, or a
    persistent tape). A TF1 graph or a tf.function builds the chunk of the estimate."""
    return (options.how.chunk_size == _memory.AUTO and _mode.runs_eagerly()
            and (_is_callable(target) or getattr(options.tape, "_persistent", False)))


_FIT = weakref.WeakKeyDictionary()
"""callable target -> {(function, how, budget type, input shapes): the chunk size that fit
after running out}."""


def _retry(spec, target, args, options):
    """`_compiled(spec, target, args, options)`; when it raises `ResourceExhaustedError`,
    again with half the chunk the estimate chose (down to one row), with one `MemoryWarning`
    naming the chunk that fit, which later calls with this callable, options and input
    shapes start from.
    Only the attempt that succeeds shows its plans (`compat_grads.memory_plans`)."""
    try:  # the common case, nothing remembered for this callable: no key to build per call
        remembered = _FIT.get(target)
    except TypeError:  # not weakly keyable
        remembered = None
    name = spec.name
    known = remembered and remembered.get(_fit_key(name, args, options))
    failed, outcome = _attempted(spec, target, args,
                                 _chunked(options, known) if known else options)
    if failed is None:
        return outcome
    plans = outcome  # what the attempt that ran out chose
    tried = known or min((p.chunk_size or -(-p.rows // p.pieces) for p in plans),
                         default=None)
    chunk = tried
    while chunk is not None and chunk > 1:
        chunk = -(-chunk // 2)
        with _compile.retrying():
            failed, result = _attempted(spec, target, args, _chunked(options, chunk))
        if failed is not None:
            continue
        _remembered(target)[_fit_key(name, args, options)] = chunk
        _fast.clear()  # the calls that ran all at once now start from this chunk
        warn(message(name, f"ran out of memory computing {tried} rows (or columns) at once "
                     f"(chunk_size='auto' chose them from an estimate): computed again with "
                     f"chunk_size={chunk}, which fit", f"Pass chunk_size={chunk} (or a "
                     "smaller memory_budget=) to skip the failed attempt; later calls of "
                     "this callable with these options and input shapes start from it."),
             MemoryWarning)
        return result
    problem = (f"ran out of memory ({last_line(failed)}), and no chunk was chosen for it (its "
               "sizes are known only at run time, or distribute= ran its pieces in replica "
               "threads), so chunk_size='auto' had no smaller chunk to try" if tried is None else
               f"ran out of memory even one row (or column) at a time ({last_line(failed)})")
    raise tf.errors.ResourceExhaustedError(failed.node_def, failed.op, message(
        name, problem, "Pass an int chunk_size= to compute fewer rows at once, compute a part "
        "of the result (fewer sources or target elements), or products instead of the whole "
        "matrix (jvp, vjp, hvp, per_element_gradients).")) from failed


def _attempted(spec, target, args, options):
    """(None, the result) with the attempt's memory plans recorded, or (the
    `ResourceExhaustedError`, the plans it chose) with none recorded."""
    with _memory.recording(isolated=True) as plans:
        try:
            result = _compiled(spec, target, args, options)
        except tf.errors.ResourceExhaustedError as err:
            return err, plans
    _memory.replay(plans)
    return None, result


def _fit_key(name, args, options):
    """What a remembered chunk is for: the function, its options (a budget of 1 byte is not
    the share 1.0) and the static shapes of its tensor arguments."""
    shapes = tuple(tuple(leaf.shape) for leaf in tf.nest.flatten(args)
                   if getattr(leaf, "shape", None) is not None and leaf.shape.rank is not None)
    return name, options.how, type(options.how.memory_budget), shapes


def _chunked(options, chunk):
    return dataclasses.replace(options, how=dataclasses.replace(options.how, chunk_size=chunk))


def _remembered(target) -> dict:
    """The chunks that fit for `target` (a throwaway dict when it cannot be weakly keyed)."""
    try:
        return _FIT.setdefault(target, {})
    except TypeError:
        return {}


def _compiled(spec, target, args, options):
    """`evaluate(spec, target, args, options)`, through the compile cache
    (`compat_grads._src.call.compile`) when the target is a callable in eager code that may
    be compiled."""
    # Cheap tests first: this runs on every eager call (tensors and variables are not callable).
    if (options.compile and callable(target) and options.tape is None
            and _mode.runs_eagerly()):
        passed, body, keyed = _seed_as_input(spec, args, options)
        key = keyed.cache_key(spec.name)
        if run_compiled := _compile.compiled(target, passed, key, body, options.jit_compile,
                                             spec.bind_sources):
            return run_compiled()
    return evaluate(spec, target, args, options)


def _seed_as_input(spec, args, options):
    """(the arguments, the computation the compiled function traces, the options it is
    keyed on). A seed is one more tensor input, not part of the key: a training loop that
    draws new probes or new noise each step with a new seed runs one trace."""
    if not _takes_a_seed(options):
        return args, functools.partial(evaluate, spec, options=options), options
    estimator, clipping = options.estimator, options.clipping
    seed = estimator.seed if estimator.method != "exact" else clipping.seed

    def seeded(target, passed):
        return evaluate(spec, target, passed[:-1], _seeded(options, passed[-1]))
    seed = tf.cast(seed, tf.int64) if isinstance(seed, (tf.Tensor, tf.Variable)) else (
        tf.constant(seed, tf.int64))
    return (*args, seed), seeded, _seeded(options, 0)


def _takes_a_seed(options) -> bool:
    """Whether the call draws random numbers from a seed: an estimate, or noised clipping."""
    return options.estimator.method != "exact" or options.clipping.noised


def _seeded(options, seed):
    """`options` with `seed` as the seed of its estimate or of its noise."""
    if options.estimator.method != "exact":
        return dataclasses.replace(
            options, estimator=dataclasses.replace(options.estimator, seed=seed))
    return dataclasses.replace(options, clipping=dataclasses.replace(options.clipping,
                                                                     seed=seed))
