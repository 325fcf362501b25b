"""The eager compiled call's shortcut: a call like one that ran before runs the concrete
function that one ran, without the checks and lookups that chose it.

A small compiled call spends most of its time choosing what to run: checking its options,
keying the compile cache, finding the trace for its input shapes. A training loop asks the
same question every step, so the answer is kept (`remember`) the first time the whole path
(`compat_grads._src.call.run`) gives it, and later calls with the same answer-deciding
facts take it (`call`): the public function, the callable (by identity, held weakly), its
options as plain Python values (by type and value), and each argument an eager tensor of
the same dtype and shape. The shortcut keeps what the whole path does on the way: the
memory plans of the trace are recorded again once it succeeds (`compat_grads.memory_plans`),
and the compile cache's entry is marked as used (its least-recently-used order). Anything
else takes the whole path: nests, variables, numpy arguments, a tape, `distribute=`, a seed,
a callable whose chunk was shrunk after running out of memory. A call that fails raises
its error, but where the whole path would recover from it: running out of memory with
`chunk_size="auto"` (the retry in smaller chunks) and an XLA error (the fallback without
XLA), the whole path runs it again.

What is kept holds the callable and the compiled function weakly: a dropped model, or an
entry the compile cache evicts, is freed as before, and its shortcut misses.
"""

from __future__ import annotations

import threading
import types
import weakref

from compat_grads._src import memory as _memory
from compat_grads._src.core import mode as _mode
from compat_grads._src.core.tf import EagerTensor, tf

MISS = object()
"""What `call` returns when the call must take the whole path."""

LIMIT = 1024
"""Kept answers before all are dropped (options or shapes that change on every call)."""

_PLAIN = frozenset((bool, int, float, str, type(None)))
_KEPT: dict = {}
_LAST = threading.local()  # .served: what the current thread's last compiled call ran


class _Served:
    """A kept answer: what runs, and what must still hold for it to serve."""

    __slots__ = ("owner", "traced", "concrete", "captured", "plans", "retried", "inputs")

    def __init__(self, owner, traced, concrete, captured, plans, retried, inputs):
        self.owner, self.retried = weakref.ref(owner), retried
        self.traced, self.concrete = weakref.ref(traced), weakref.ref(concrete)
        self.captured, self.plans = captured, plans
        self.inputs = None if inputs is None else weakref.ref(inputs)


class Inputs(list):
    """The captured inputs of a concrete function that captured none by reference: the
    same tensors at every call, listed once (its `captured_inputs` lists them again at
    each). Its compiled function holds it; a kept answer holds it weakly (it holds the
    handles of the variables the function read)."""

    __slots__ = ("__weakref__",)


def fixed_inputs(concrete):
    """The `Inputs` of `concrete`, or None when it captured a value by reference (read at
    each call) or keeps its captures otherwise than every release from 2.12 to 2.21 does.
    Its captures must not change after it is traced: TensorFlow's
    `replace_capture_with_deferred_capture` and `set_external_captures` change them, and the
    compile cache's functions never call either."""
    captures = getattr(concrete, "_captured_inputs", None)
    if not isinstance(captures, list) or any(callable(each) for each in captures):
        return None
    return Inputs(concrete.captured_inputs)


def ran(traced, concrete, leaves, captured, plans, inputs) -> None:
    """Notes, for `remember`, what a compiled call ran: the compiled function
    (`compat_grads._src.call.compile._Traced`), its concrete function, the tensors passed to
    it, the ids of those it captured, the memory plans of its trace and its `Inputs` (or
    None)."""
    _LAST.served = (traced, concrete, leaves, captured, plans, inputs)


def forget() -> None:
    """Clears the note (before and after a call takes the whole path: it holds the compiled
    function and the inputs)."""
    _LAST.served = None


def key(name, target, args, given):
    """The facts that decide the answer of the public function `name`, or None when the call
    cannot take a kept one (`call`, `remember`): a method by its object and function (a bound
    method is a new object at each access)."""
    if type(target) is types.MethodType:
        owner, part = target.__self__, target.__func__
    else:
        owner, part = target, None
    values = tuple(given.values())
    kinds = tuple(map(type, values))  # True == 1 == 1.0: the types tell them apart
    if not _PLAIN.issuperset(kinds):
        return None
    key = [name, id(owner), part, values, kinds]
    for arg in args:
        if type(arg) is not EagerTensor:
            return None
        key += (arg._datatype_enum(), arg._shape_tuple())
    return tuple(key)


def call(key, target, args):
    """The result of the call with this `key` (not None) from a kept answer, or `MISS`."""
    served = _KEPT.get(key)
    if served is None or not _mode.runs_eagerly():
        return MISS
    owner = target.__self__ if type(target) is types.MethodType else target
    traced, concrete = served.traced(), served.concrete()
    if served.owner() is not owner or traced is None or concrete is None:
        _KEPT.pop(key, None)
        return MISS
    captured = served.captured
    for arg in args:
        if id(arg) in captured:  # read by closure: the whole path binds it in
            return MISS
    inputs = concrete.captured_inputs if served.inputs is None else served.inputs()
    if inputs is None:
        return MISS
    traced.touch()
    try:
        result = concrete._call_flat(list(args), inputs)
    except tf.errors.ResourceExhaustedError:
        if served.retried:  # the whole path retries in smaller chunks
            return MISS
        raise
    except tf.errors.OpError:
        if traced.jit_compile:  # the whole path runs it again without XLA
            return MISS
        raise
    _memory.replay(served.plans)  # as the whole path does: for the attempt that succeeded
    return result


def remember(key, target, args, retried) -> None:
    """Keeps what the call with this `key` (not None) that just took the whole path ran, so
    that a later call with the same key may take it: the caller has checked that nothing but
    the key decided it. `retried`: whether the whole path retries it in smaller chunks when
    it runs out of memory."""
    served, _LAST.served = getattr(_LAST, "served", None), None
    if served is None:
        return
    owner = target.__self__ if type(target) is types.MethodType else target
    traced, concrete, leaves, captured, plans, inputs = served
    if len(leaves) != len(args) or any(a is not b for a, b in zip(leaves, args)):
        return  # sources bound in, or repeated: the whole path passes other inputs
    try:
        kept = _Served(owner, traced, concrete, captured, plans, retried, inputs)
    except TypeError:  # not weakly referable: no shortcut
        return
    if len(_KEPT) >= LIMIT:
        _KEPT.clear()
    _KEPT[key] = kept


def clear() -> None:
    """Drops every kept answer (the compile cache was cleared, a chunk was shrunk)."""
    _KEPT.clear()
