"""The one call path of the public functions: options checked once, then distribute, compile
or run.

Each public function is its signature, its docstring and one call of `run` with its `Spec`:
what it computes from its target and arguments, how `distribute=` splits it, and whether the
compile cache binds its sources. Everything that is the same for every function is here, once:

1. the options are checked, in the function's order, into the frozen `_options.Options`;
2. `spec.prepare` normalises the arguments (`per_example_gradients`' defaults);
3. `distribute=`: the `distribute=` checks, then the split (`compat_grads._src.call.distribute`)
runs
   pieces of the undistributed computation;
4. in eager mode, a callable target runs through the compile cache
(`compat_grads._src.call.compile`),
   which traces that same computation;
5. else the computation runs: it makes the problem, asks `dispatch.backend_for` for the
   backend and composes the math (`compat_grads._src.call.specs`).
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

from compat_grads import dispatch
from compat_grads._src import memory as _memory
from compat_grads._src.api import docs as _docs
from compat_grads._src.call import compile as _compile
from compat_grads._src.call import distribute as _distribute
from compat_grads._src.call import options as _options
from compat_grads._src.call import value as _value
from compat_grads._src.core.errors import MemoryWarning, is_ours, last_line, message, warn
from compat_grads._src.core.structure import eager_tensor_error, numbers_in_a_list
from compat_grads._src.core.tf import tf

P = ParamSpec("P")
R = TypeVar("R")


@dataclasses.dataclass(frozen=True)
class Spec:
    """What one public function computes, for the call path.

    Attributes:
      name: the public name (error messages, the compile cache's key and warnings).
      compute: `compute(name, target, args, options)` -> the result, without `distribute=`
        and without the compile cache (it runs inside the compiled function, and in each
        piece of a split).
      split: `split(name, compute, target, args, options)` -> the `_distribute.Split` of a
        call with `distribute=`, where `compute(target, args, options)` is the computation of
        each piece (that of `pieces`); None when the function has no `distribute=`.
      pieces: the spec whose computation the pieces run (None: this one).
      prepare: `prepare(name, target, args)` -> `(target, args)`, run after the options are
        checked (None: the arguments as given).
      needs_callable: why `distribute=` needs a callable target, checked before anything
        else of `distribute=` ("": not checked here).
      tensor_target: whether the target may be a tensor (an eager one needs its tape).
      bind_sources: whether the compiled function captures every source (a model's weights)
        instead of passing it.
      value: how `has_aux` / `return_value` get the value: "capture" (the callable target's
        own output, `compat_grads._src.call.value.Capture`), "outputs" (the result holds the outputs
        already: only `has_aux`, whose aux comes last) or "own" (the computation returns
        `(value, derivative)` itself when `return_value`).
      samples: `distribute=` splits the samples: each piece carries its value and flat
        matrix, joined along the batch axis.
      flatten: `flatten(name, derivative, y, sources)` -> the `flat=True` matrix.
      argument: the public name of the target argument ("f" for jvp, vjp and hvp).
    """

    name: str
    compute: Callable
    split: Callable | None = None
    pieces: Spec | None = None
    prepare: Callable | None = None
    needs_callable: str = ""
    tensor_target: bool = True
    bind_sources: bool = False
    value: str = "capture"
    samples: bool = False
    flatten: Callable | None = None
    argument: str = "target"


def public(function: Callable[P, R]) -> Callable[P, R]:
    """A public function: its docstring's shared paragraphs filled in
    (`compat_grads._src.api.docs`),
    and hidden from AutoGraph. AutoGraph must not rewrite the library when a user's
    tf.function calls it: its Python control flow is on Python values only, and converting it
    would cost time at every trace. Typed so that a type checker sees the signature through
    the decorator."""
    function.__doc__ = _docs.fill(function.__doc__)
    return cast(Callable[P, R], tf.autograph.experimental.do_not_convert(function))


def run(spec: Spec, target, args: tuple, **given):
    """The result of the public function `spec.name` called with `target`, `args` (the
    sources first) and the options `given` (compile, jit_compile, then its own in the order
    its errors report them, then distribute and gather)."""
    try:
        return _run(spec, target, args, **given)
    except TypeError as err:
        clear = None if is_ours(err) or not _is_callable(target) else (
            numbers_in_a_list(spec.name, args[0], err))
        if clear is None:
            raise
        raise clear from err


def _run(spec: Spec, target, args: tuple, **given):
    options = _options.check(spec.name, **given)
    if spec.prepare is not None:
        target, args = spec.prepare(spec.name, target, args)
    if options.has_aux and not _is_callable(target):
        _value.no_aux_for_tensor(spec.name, target, spec.argument)
    if options.distribute is not None:
        return _distributed(spec, target, args, options)
    return _compiled_or_run(spec, target, args, options, lambda checked: _finished(
        spec, checked, functools.partial(_undistributed, spec, checked)))


def split(spec: Spec, target, args: tuple, options: _options.Options) -> _distribute.Split:
    """How a call with `distribute=` computes its result in pieces."""
    pieces = spec.pieces or spec
    compute = functools.partial(pieces.compute, pieces.name)
    if spec.samples:  # each piece carries its samples' value and flat matrix
        compute = functools.partial(_finished_piece, spec, compute)
    return spec.split(spec.name, compute, target, args, options)


def _finished_piece(spec, compute, target, args, options):
    return _finished(spec, options, lambda t, a: compute(t, a, options), True)(target, args)


_JOINED = ("with distribute= each replica computes the aux of its own samples, joined along "
           "the batch axis")


def _batch_of(source):
    shape = getattr(source, "shape", None)
    return tf.compat.dimension_value(shape[0]) if shape is not None and shape.rank else None


def _is_callable(target) -> bool:
    return callable(target) and not tf.is_tensor(target)


def _finished(spec, options, body, in_pieces=False):
    """`body(target, args)` -> the derivative, as the public result: with the value and aux
    (`compat_grads._src.call.value`) and as one matrix (`flat`) where asked."""
    if not (options.valued or options.flat) or spec.value == "own":
        return body

    def finished(target, args):
        if not _is_callable(target):
            derivative, y, aux = body(target, args), target, None
        else:
            capture = _value.Capture(spec.name, target, options.has_aux)
            derivative = body(capture, args)
            y, aux = capture.value(args[0])
            if in_pieces and options.has_aux:
                _value.check_sample_aux(spec.name, aux, _JOINED, _batch_of(args[0]))
        if options.flat:
            derivative = spec.flatten(spec.name, derivative, y, args[0])
        if spec.value == "outputs":
            return (*derivative, aux) if options.has_aux else derivative
        return _value.assemble(options, y, aux, derivative) if options.valued else derivative
    return finished


def _undistributed(spec, options, target, args):
    return spec.compute(spec.name, target, args, options)


def _distributed(spec, target, args, options):
    """`distribute=` after the options were checked: computed in pieces, each piece with the
    same options (`max_bytes` then bounds each piece); in eager mode through a tf.function
    cached per callable and options, as `compile=True` caches the undistributed call."""
    name = spec.name
    if spec.needs_callable:
        _distribute.needs_callable(name, target, spec.needs_callable)
    _distribute.check(name, options.distribute, options.gather, options.compile, options.tape)
    _distribute.needs_independent(name, options.independent)
    if spec.tensor_target and not callable(target) and dispatch.runs_eagerly():
        raise eager_tensor_error(name)

    if options.flat and not options.gather:
        raise ValueError(message(
            name, "flat=True needs gather=True: the matrix joins every piece",
            "Drop flat=True to get the pieces, or drop gather=False."))

    def pieces(target, args):
        return _distribute.run(name, options.distribute, options.gather,
                               split(spec, target, args, options), options.jit_compile)
    body = pieces if spec.samples else _finished(spec, options, pieces)
    return _compiled_or_run(spec, target, args, options, lambda checked: body)


def _compiled_or_run(spec, target, args, options, make_body):
    """`make_body(options)(target, args)`, compiled when the call is a callable target in
    eager mode that may be compiled; in eager mode with `chunk_size="auto"`, computed again
    in smaller chunks when it runs out of memory (`_retry`)."""
    def attempt(checked):
        return _attempt(spec, target, args, checked, make_body)
    if (options.how.chunk_size != _memory.AUTO or not dispatch.runs_eagerly()
            or not (_is_callable(target) or getattr(options.tape, "_persistent", False))):
        return attempt(options)  # a TF1 graph or a tf.function: the chunk of the estimate
    return _retry(spec.name, target, args, options, attempt)


_FIT = weakref.WeakKeyDictionary()
"""callable target -> {(function, how, budget type, input shapes): the chunk size that fit
after running out}."""


def _retry(name, target, args, options, attempt):
    """`attempt(options)`; when it raises `ResourceExhaustedError`, again with half the
    chunk the estimate chose (down to one row), with one `MemoryWarning` naming the chunk
    that fit, which later calls with this callable, options and input shapes start from.
    Only the attempt that succeeds shows its plans (`compat_grads.memory_plans`)."""
    try:  # the common case, nothing remembered for this callable: no key to build per call
        remembered = _FIT.get(target)
    except TypeError:  # not weakly keyable
        remembered = None
    known = remembered and remembered.get(_fit_key(name, args, options))
    failed, outcome = _attempted(attempt, _chunked(options, known) if known else options)
    if failed is None:
        return outcome
    plans = outcome  # what the attempt that ran out chose
    tried = known or min((p.chunk_size or -(-p.rows // p.pieces) for p in plans),
                         default=None)
    chunk = tried
    while chunk is not None and chunk > 1:
        chunk = -(-chunk // 2)
        with _compile.retrying():
            failed, result = _attempted(attempt, _chunked(options, chunk))
        if failed is not None:
            continue
        _remembered(target)[_fit_key(name, args, options)] = chunk
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


def _attempted(attempt, options):
    """(None, the result) with the attempt's memory plans recorded, or (the
    `ResourceExhaustedError`, the plans it chose) with none recorded."""
    with _memory.recording(isolated=True) as plans:
        try:
            result = attempt(options)
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


def _attempt(spec, target, args, options, make_body):
    # Cheap tests first: this runs on every eager call (tensors and variables are not callable).
    if (options.compile and callable(target) and options.tape is None
            and dispatch.runs_eagerly()):
        passed, body, estimator = _seed_as_input(args, options, make_body)
        key = (spec.name, options.how, type(options.how.memory_budget), options.independent,
               options.loss_fn,
               _distribute.hashable(options.distribute), options.gather, options.has_aux,
               options.return_value, options.flat, estimator)
        if run_compiled := _compile.compiled(target, passed, key, body, options.jit_compile,
                                             spec.bind_sources):
            return run_compiled()
    return make_body(options)(target, args)


def _seed_as_input(args, options, make_body):
    """(the arguments, the body, the estimator options the compiled function is keyed on).
    An estimate's seed is one more tensor input, not part of the key: a training loop that
    draws new probes each step with a new seed runs one trace."""
    estimator = options.estimator
    if estimator.method == "exact":
        return args, make_body(options), estimator

    def body(target, passed):
        seeded = dataclasses.replace(estimator, seed=passed[-1])
        return make_body(dataclasses.replace(options, estimator=seeded))(target, passed[:-1])
    return ((*args, tf.constant(estimator.seed, tf.int64)), body,
            dataclasses.replace(estimator, seed=0))
