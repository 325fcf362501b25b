"""The eager compile cache: a callable target run in eager mode is traced once into a
`tf.function` per callable, options and input shapes, and the traced function is reused.

The call path (`compat_grads._src.call.run`) decides that a call is compiled (eager mode, a callable
target, no tape, `compile=True`) and hands this module the computation to trace: the call
without `distribute=`'s checks or the cache, as a function of the target and its arguments.
"""

import collections
import contextlib
import functools
import inspect
import re
import threading
import types
import weakref

from compat_grads._src import memory as _memory
from compat_grads._src.call import arguments as _arguments
from compat_grads._src.call import fast as _fast
from compat_grads._src.core.errors import XlaWarning, message, warn
from compat_grads._src.core.structure import graph_of
from compat_grads._src.core.tf import tf

CACHE_SIZE = 64
"""How many compiled (callable, function, options) entries the eager cache keeps."""
RETRACE_WARNING_AFTER = 8
"""Recompiles of one target (or of new callables from one code location) before
compat_grads warns."""


class _CompiledCache:
    """A bounded LRU of tf.functions for callable targets in eager mode, safe to use from
    several threads at once.

    Keyed on the callable (a method by its object and function), the public function, its
    options and the sources bound into the function; tf.function keys on the input signature
    inside each entry. Entries hold the callable and the bound sources weakly, and an entry
    is evicted as soon as one of them dies: its function holds the handles of the variables
    it captured, and with them their memory, so a dropped model is freed with its weights.
    """

    def __init__(self, size):
        self.size = size
        self._entries = collections.OrderedDict()
        self._recompiles = _Recompiles()
        self._lock = threading.Lock()
        self._dead = []  # (key, reference) of entries whose callable or sources died
        self._last = None  # the key `touch` marked last: marking it again changes nothing

    def get(self, target, key, build, bound=()):
        """The compiled function for `target` and `key` (`build(full_key)` makes it, the
        key its `touch` marks as used), for the sources `bound` into it."""
        owner, part = ((target.__self__, target.__func__) if inspect.ismethod(target)
                       else (target, None))
        full_key = (id(owner), part, key)
        objects = (owner, *bound)
        try:
            with self._lock:
                self._last = None  # another entry moves to the end
                entry = self._entries.get(full_key)
                if entry is not None and entry.serves(objects):
                    self._entries.move_to_end(full_key)
                    return entry.compiled
                entry = _Entry(build(full_key), objects, self._evicter(full_key))
                known = any(k[:2] == full_key[:2] for k in self._entries)
                self._recompiles.note(owner, part, key[0], new_owner=not known)
                self._entries[full_key] = entry
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
                return entry.compiled
        finally:
            self._evict_dead()

    def touch(self, full_key):
        """Marks the entry as just used (a call that found its function another way); not
        when another thread holds the lock (it may be iterating over the entries), nor when
        it was the last one marked and no entry was got since (a loop calling one function:
        the lock at every call was a twentieth of a small call). `_last` is read without
        the lock: a thread that races another's `get` may miss one mark (the eviction order
        only, never a result). A function outside the cache (`cache_key` None) has none."""
        if full_key is None or full_key is self._last:
            return
        if self._lock.acquire(blocking=False):
            try:
                if full_key in self._entries:
                    self._entries.move_to_end(full_key)
                    self._last = full_key
            finally:
                self._lock.release()

    def _evicter(self, key):
        """The weak-reference callback of an entry's objects: evict the entry. It may run in
        any thread, in the middle of `get` too (garbage collection), so it only queues the
        key when another call holds the lock; that call evicts it as it leaves."""
        def died(reference):
            self._dead.append((key, reference))
            self._evict_dead()
        return died

    def _evict_dead(self):
        while self._dead and self._lock.acquire(blocking=False):
            try:
                while self._dead:
                    key, reference = self._dead.pop()
                    entry = self._entries.get(key)
                    if entry is not None and any(r is reference for r in entry.refs):
                        del self._entries[key]
                        if key == self._last:  # it holds the options (a loss_fn) alive
                            self._last = None
            finally:
                self._lock.release()

    def clear(self):
        with self._lock:
            self._entries.clear()
            self._last = None
            self._recompiles = _Recompiles()
        _fast.clear()

    def __len__(self):
        self._evict_dead()
        return len(self._entries)


class _Entry:
    """A compiled function and weak references to the objects it was compiled for."""

    __slots__ = ("compiled", "refs")

    def __init__(self, compiled, objects, on_death):
        self.compiled = compiled
        self.refs = [_reference(o, on_death) for o in objects]

    def serves(self, objects) -> bool:
        return all(ref() is o for ref, o in zip(self.refs, objects))


class _Recompiles:
    """Warns, once each, about the two ways a caller makes us compile on every call:
    a new callable from the same code (a lambda in a loop), or the same target with new
    options (a new loss object per call, a changing chunk_size). TensorFlow's own retracing
    warning is off for our functions: it would name our wrapper, not the caller's code."""

    def __init__(self):
        self._new_callables = collections.Counter()  # code -> callables compiled
        self._builds = collections.Counter()  # (target, public name) -> entries built

    def note(self, owner, part, name, new_owner):
        if getattr(_RETRYING, "on", False):  # each smaller chunk is one more entry, by design
            return
        code = getattr(owner, "__code__", None)
        if code is not None and new_owner:
            self._new_callables[code] += 1
            if self._new_callables[code] == RETRACE_WARNING_AFTER:
                warn(message(
                    name, f"the callable target {code.co_name} (defined at "
                    f"{code.co_filename}:{code.co_firstlineno}) is a new object on each "
                    f"call, so it was compiled {RETRACE_WARNING_AFTER} times",
                    "Define it once outside the loop (or pass compile=False)."),
                    RuntimeWarning)
        if len(self._builds) > 16 * CACHE_SIZE:  # counts of long-gone targets
            self._builds.clear()
        self._builds[(id(owner), part, name)] += 1
        if self._builds[(id(owner), part, name)] == RETRACE_WARNING_AFTER:
            warn(message(
                name, f"the same target was compiled {RETRACE_WARNING_AFTER} times with "
                "different options (a new loss_fn object, weights list or option value "
                "on each call?)", "Create such objects once outside the loop, or pass "
                "compile=False."), RuntimeWarning)


_RETRYING = threading.local()


@contextlib.contextmanager
def retrying():
    """Compiles inside the block are the out-of-memory retry's (a smaller chunk each): not
    counted as options that change on every call."""
    _RETRYING.on = True
    try:
        yield
    finally:
        _RETRYING.on = False


def _reference(owner, callback=None):
    """A weak reference when the object allows one, else a strong one (builtins)."""
    try:
        return weakref.ref(owner, callback)
    except TypeError:
        return lambda: owner


CACHE = _CompiledCache(CACHE_SIZE)


def compiled(target, args, key, body, jit_compile, bind_sources=False):
    """The cached, compiled form of `body(target, args)`, as a thunk; None when the arguments
    cannot be compiled. The caller has checked that `target` is a callable run in eager mode
    and that compiling is allowed.

    Args:
      target: the callable target (a model for `per_example_gradients`).
      args: `(sources, *rest)`: the sources nest, then the other tensor arguments.
      key: `(public name, *options)`: what, besides the callable and the inputs, tells the
        compiled functions apart (the name is the one the recompile warnings give).
      body: `body(target, args)`, the computation to trace (it runs in "function" mode).
      jit_compile: compile the tf.function with XLA.
      bind_sources: capture every source in the function instead of passing it (a model's
        weights).

    Inside the compiled function the call runs in "function" mode (the graph backend), so
    its results are those of the tf.function route, bit for bit: each distinct source is one
    input however often it occurs (so every occurrence gets the total derivative), and a
    source the callable also reads by closure is bound in, as `bind_sources` binds them all.
    Arguments other than the sources must be tensors or variables to be compiled (numpy and
    Python values would retrace per value or change dtype); otherwise the call runs eagerly.
    """
    sources, *rest = args
    if not _arguments.plain(sources):  # the common cases skip the nest
        sources = tf.nest.map_structure(_arguments.as_tensor, sources)
    if rest and not all(isinstance(leaf, (tf.Tensor, tf.Variable))
                        for leaf in tf.nest.flatten(rest)):
        return None
    if any(graph_of(leaf) is not None for leaf in tf.nest.flatten((sources, rest))):
        return None  # graph tensors in eager code: the uncompiled route explains
    key = (key[0], *map(_hashable, key[1:]), jit_compile)

    def run():
        inputs = _Inputs(sources, bind_sources)
        while True:  # each round binds more sources: at most one round per source
            build = functools.partial(_compile, body, target, jit_compile, inputs, key[0])
            traced = CACHE.get(target, (*key, inputs.key), build, inputs.bound)
            try:
                return traced(inputs, *rest)
            except _CapturedSources as found:
                inputs = inputs.binding(found.positions)
    return run


class _Inputs:
    """How the sources of one call enter the compiled function.

    Each distinct tensor is passed once, however often it occurs in the nest: inside, every
    occurrence is then the same tensor, with the total derivative, as in the tf.function
    route. Bound sources are not passed at all but captured by the function, which is then
    cached per bound object (held weakly): every source when they are all variables (a
    tf.function call spends more binding variables than running a small model) or when the
    caller asks (a model's weights: the model reads them by closure), and any tensor the
    callable itself reads by closure (passed in, it would be another tensor inside the
    function than the one the callable reads, and its derivative would go missing).
    """

    def __init__(self, sources, bind_all=False, bound=()):
        self.sources = sources
        self.flat = flat = tf.nest.flatten(sources)
        first = {}
        self.same = tuple(first.setdefault(id(leaf), p) for p, leaf in enumerate(flat))
        distinct = [p for p, q in enumerate(self.same) if p == q]
        kinds = (tf.Tensor, tf.Variable) if bind_all else tf.Variable
        if all(isinstance(flat[p], kinds) for p in distinct):  # else the call explains
            bound = distinct
        self.positions = tuple(sorted(set(bound)))
        self.bound = [flat[p] for p in self.positions]
        repeated = len(distinct) < len(flat)
        # tf.function tells nests apart by the arguments' structure; with nothing passed,
        # the structure is part of our key (a flat list or tuple: its type and length).
        structure = None if not self.passes_nothing else (
            (type(sources), len(flat)) if _arguments.flat_sequence(sources, flat)
            else repr(self._skeleton()))
        self.key = (structure, self.same if repeated else None,
                    tuple(id(leaf) for leaf in self.bound))

    @property
    def passes_nothing(self) -> bool:
        return len(self.positions) == len(set(self.same))

    def binding(self, positions):
        """These inputs with the sources at `positions` bound in too."""
        if not positions:
            return self
        return _Inputs(self.sources, bound=(*self.positions, *positions))

    def passed(self):
        """The sources nest as passed to the function: None where bound or repeated."""
        if self.passes_nothing:
            return ()
        if isinstance(self.sources, (tf.Tensor, tf.Variable)):
            return (self.sources,)
        passed = set(self.passed_positions())
        return (tf.nest.pack_sequence_as(self.sources, [
            leaf if p in passed else None for p, leaf in enumerate(self.flat)]),)

    def passed_positions(self):
        """The positions of the sources passed to the function (once each)."""
        kept = set(self.positions)
        return [p for p, q in enumerate(self.same) if p == q and p not in kept]

    def plan(self):
        return _Plan(self.same, self.positions, self._skeleton(), self.bound)

    def _skeleton(self):
        return tf.nest.map_structure(lambda _: None, self.sources)


class _Plan:
    """Inside the compiled function: the sources nest rebuilt from what was passed and what
    is bound in. Holds the bound sources weakly (the cache entry is evicted when they die)."""

    def __init__(self, same, positions, skeleton, bound):
        self.same, self.positions, self.skeleton = same, positions, skeleton
        self.passes_nothing = len(positions) == len(set(same))
        self._bound = [weakref.ref(leaf) for leaf in bound]

    def sources(self, passed):
        """The sources nest, from the passed arguments and the bound sources."""
        flat = (tf.nest.flatten(passed[0]) if passed else [None] * len(self.same))
        for p, reference in zip(self.positions, self._bound):
            flat[p] = reference()
        flat = [flat[q] for q in self.same]
        return tf.nest.pack_sequence_as(self.skeleton, flat)

    def split(self, args):
        return (args, ()) if self.passes_nothing else (args[1:], args[:1])


class _CapturedSources(Exception):
    """The compiled function captured these sources (positions) by closure."""

    def __init__(self, positions):
        super().__init__(positions)
        self.positions = positions


def _hashable(value):
    """An option as part of the cache key. Options are checked before they get here (a list
    where a string belongs is a clear error, not an unhashable key), so only a callable
    option can be unhashable (a loss object with __eq__ and no __hash__): it counts by
    identity. The cached function holds it, so its id is not reused while the entry lives."""
    try:
        hash(value)
    except TypeError:
        return "id", id(value)
    return value


def _weak_callable(target):
    """`() -> target` without keeping it alive (a bound method is rebuilt from its object)."""
    if inspect.ismethod(target):
        owner, function = _reference(target.__self__), target.__func__
        return lambda: types.MethodType(function, owner())
    return _reference(target)


def _compile(body, target, jit_compile, inputs, name, cache_key):
    live, plan = _weak_callable(target), inputs.plan()

    def call(*args):
        rest, passed = plan.split(args)
        return body(live(), (plan.sources(passed), *rest))
    return _Traced(_function(call, jit_compile), name, jit_compile, cache_key)


def _function(call, jit_compile):
    # One trace per input shape: its static sizes decide chunk_size="auto" and the row plan
    # (relaxed shapes would leave both to run time, where nothing can be chosen).
    compiled = tf.function(call, autograph=False, jit_compile=jit_compile)
    compiled._omit_frequent_tracing_warning = True  # ours names the caller's code instead
    return compiled


@functools.cache
def _runs_flat(kind) -> bool:
    """Whether a concrete function of this class runs from its flat inputs as every release
    from 2.12 to 2.21 does: `_call_flat(tensor_inputs, captured_inputs)`, what its `__call__`
    ends in after binding the arguments to the signature again (a third of a small compiled
    call). A class that changed it gets the public call instead."""
    try:
        names = list(inspect.signature(kind._call_flat).parameters)[1:3]
    except (AttributeError, TypeError, ValueError):
        return False
    return names[1:] == ["captured_inputs"] and names[0] in ("args", "tensor_inputs")


class _Traced:
    """A tf.function and its concrete functions by input shapes and dtypes. Calling the
    concrete function directly skips tf.function's dispatch, tens of microseconds per call:
    as much as a small Jacobian takes to compute. Arguments that are not eager tensors in
    lists, tuples and dicts (`_arguments.signature`: variables, None, composite tensors)
    go through the tf.function itself.

    A call raises `_CapturedSources` instead when the function captured one of the tensors
    passed to it as a source: the callable reads it by closure, where passing it would make
    it a second tensor, and it must be bound in instead."""

    def __init__(self, function, name="", jit_compile=False, cache_key=None):
        self.function, self.name, self.jit_compile = function, name, jit_compile
        self._concrete = {}  # the arguments' signature -> concrete function
        self._captures = {}  # id(concrete function) -> ids of the eager tensors it captured
        self._plans = {}  # id(concrete function) -> the memory plans its trace chose
        self._inputs = {}  # id(concrete function) -> its `_fast.Inputs`, or None
        self.cache_key = cache_key  # its compile cache entry's key (`touch`)

    def __call__(self, inputs, *rest):
        if not self.jit_compile:
            return self._call(inputs, *rest)
        try:
            return self._call(inputs, *rest)
        except tf.errors.ResourceExhaustedError:
            raise  # the out-of-memory retry's, not XLA's
        except tf.errors.OpError as err:
            return self._without_xla(err, inputs, *rest)

    def _without_xla(self, err, inputs, *rest):
        """The call compiled without XLA after XLA failed with `err`: if that runs, XLA was
        the cause, and from now on this function runs without it (one warning); if it
        fails too, its error is the real one."""
        plain = _Traced(_function(self.function.python_function, False), self.name)
        result = plain._call(inputs, *rest)
        warn(message(self.name, f"XLA could not compile this call ({_xla_reason(err)})",
                     "Ran it compiled without XLA instead (same values); later calls with "
                     "this callable and options do too. Drop jit_compile=True to skip the "
                     "attempt."), XlaWarning)
        self.function, self._concrete, self._captures, self._plans, self._inputs = (
            plain.function, plain._concrete, plain._captures, plain._plans, plain._inputs)
        self.jit_compile = False
        return result

    def _call(self, inputs, *rest):
        args = (*inputs.passed(), *rest)
        signature = _arguments.signature(args)
        flat = signature is not None
        concrete = self._concrete_for(signature[0], args) if flat else self._traced(args)
        captured = self._captures.get(id(concrete))
        if captured is None:  # the listed inputs first: a thread that finds the ids finds them
            self._inputs[id(concrete)] = _fast.fixed_inputs(concrete)
            captured = self._captures[id(concrete)] = frozenset(
                id(t) for t in concrete.captured_inputs)
        found = tuple(p for p in inputs.passed_positions() if id(inputs.flat[p]) in captured)
        if found:
            raise _CapturedSources(found)
        # The plans of the trace this call runs, at every call (`compat_grads.memory_plans`),
        # once the trace is known to serve it.
        plans = self._plans.get(id(concrete), ())
        _memory.replay(plans)
        if not flat:  # variables among the inputs: the trace found above binds them
            return concrete(*args)
        if _runs_flat(type(concrete)):  # the inputs match the trace: its key is their shapes
            inputs = self._inputs.get(id(concrete))
            _fast.ran(self, concrete, signature[1], captured, plans, inputs)
            return concrete._call_flat(
                signature[1], concrete.captured_inputs if inputs is None else inputs)
        return concrete(*args)

    def touch(self):
        """Marks this function's compile cache entry as just used."""
        CACHE.touch(self.cache_key)

    def _concrete_for(self, signature, args):
        concrete = self._concrete.get(signature)
        if concrete is None:
            concrete = self._concrete[signature] = self._traced(args)
        return concrete

    def _traced(self, args):
        """The concrete function for these inputs, its memory plans kept when this call
        traced it (a trace another thread made first keeps that thread's)."""
        try:
            with _memory.recording(isolated=True) as plans:
                concrete = self.function.get_concrete_function(*args)
        except Exception:  # the out-of-memory retry reads what the failed trace chose
            _memory.replay(plans)
            raise
        if plans or id(concrete) not in self._plans:
            self._plans[id(concrete)] = tuple(plans)
        return concrete


def _xla_reason(err) -> str:
    """XLA's reason, the first line of its error (the rest is TensorFlow's stack), without
    the attributes of the function it names (`__inference_call_7[_XlaMustCompile=true,...]`)."""
    text = getattr(err, "message", str(err))
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return re.sub(r"\[_XlaMustCompile=[^\]]*\]", "", line)[:200]


def clear_cache() -> None:
    """Drops every compiled function compat_grads keeps for callable targets in eager mode.

    Example:
      >>> import compat_grads as cg
      >>> cg.clear_cache()
    """
    CACHE.clear()
