"""The shim: the one place that decides which backend serves a call.

| mode       | tensor target      | tensor + tape | callable target |
|------------|--------------------|---------------|-----------------|
| "graph"    | graph              | tape          | graph           |
| "function" | graph              | tape          | graph           |
| "eager"    | error (needs tape) | tape          | tape            |

"graph" is a TF1 graph, a `tf.Graph().as_default()` block inside TF2, or a `tf.function`
traced inside such a graph; "function" is a `tf.function` traced from eager code.
"""

import collections
import functools
import inspect
import threading
import weakref

import numpy as np

from compat_grads._errors import ModeError, message
from compat_grads._structure import Problem, eager_tensor_error
from compat_grads._tf import tf
from compat_grads._types import Mode
from compat_grads.backends.graph import GraphBackend
from compat_grads.backends.tape import TapeBackend

GRAPH: Mode = "graph"
FUNCTION: Mode = "function"
EAGER: Mode = "eager"


def execution_mode() -> Mode:
    """The execution mode of the calling code: "graph", "function" or "eager".

    Returns:
      "eager" when TensorFlow executes eagerly; "function" while tracing a `tf.function`
      that was called from eager code; "graph" in a TF1 graph (v2 behaviour disabled) or
      inside a `tf.Graph().as_default()` block in TF2.

    Example:
      >>> import compat_grads as cg
      >>> cg.execution_mode()
      'eager'
    """
    if tf.executing_eagerly():
        return EAGER
    # While tracing, init_scope lifts to the outermost context: eager for a tf.function
    # called from eager code, the graph itself for v1 graphs.
    if tf.compat.v1.executing_eagerly_outside_functions():
        return FUNCTION
    return GRAPH


def backend_for(problem: Problem, order: int = 1):
    """The backend that serves `problem` in the current mode (see the table above).

    Second order (`order=2`) differentiates the first derivative again, so the target must
    be recomputable: a callable in every mode, or a graph tensor without a tape.
    """
    if order > 1:
        _check_second_order(problem)
    if problem.tape is not None:
        return TapeBackend(problem)
    if execution_mode() == EAGER:
        if problem.fn is None:
            raise eager_tensor_error(problem.function)
        return TapeBackend(problem)
    return GraphBackend(problem)


def _check_second_order(problem: Problem):
    if problem.tape is not None:
        raise ModeError(message(
            problem.function, "a second-order derivative cannot reuse a tape: the first "
            "derivative must itself be recorded, and the tape only holds the target",
            "Pass a callable f(sources) (every mode); in a graph or tf.function the tensor "
            "without tape= works too."))
    if problem.fn is None and execution_mode() == EAGER:
        raise ModeError(message(
            problem.function, "target is an eager tensor, but a second-order derivative "
            "needs to run the computation again",
            "Pass a callable f(sources) that computes the target."))


def as_graph(build):
    """Runs `build()` so the loops it creates become graph ops.

    Graph and function modes already build graphs; in eager mode the loops are traced once
    in a `tf.function` so that they run as one program (and a non-persistent tape is
    differentiated once, at trace time).
    """
    if execution_mode() != EAGER:
        return build()
    compiled = tf.function(build, autograph=False)
    # Each call traces a new one-off function on purpose (the loop closes over this call's
    # tensors), so TensorFlow's "frequent retracing" warning would only point at us.
    compiled._omit_frequent_tracing_warning = True
    return compiled()


CACHE_SIZE = 64
"""How many compiled (callable, function, options) entries the eager cache keeps."""


class _CompiledCache:
    """A bounded LRU of tf.functions for callable targets in eager mode.

    Keyed on the callable (weakly: a method by its object and function), the public
    function and its options; tf.function keys on the input signature inside each entry.
    """

    def __init__(self, size):
        self.size = size
        self._entries = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, target, key, build):
        owner, part = ((target.__self__, target.__func__) if inspect.ismethod(target)
                       else (target, None))
        full_key = (id(owner), part, key)
        with self._lock:
            entry = self._entries.get(full_key)
            if entry is not None and entry[0]() is owner:
                self._entries.move_to_end(full_key)
                return entry[1]
            compiled = build()
            self._entries[full_key] = (_reference(owner), compiled)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
            return compiled

    def clear(self):
        with self._lock:
            self._entries.clear()

    def __len__(self):
        return len(self._entries)


def _reference(owner):
    """A weak reference when the object allows one, else a strong one (builtins)."""
    try:
        return weakref.ref(owner)
    except TypeError:
        return lambda: owner


CACHE = _CompiledCache(CACHE_SIZE)


def compiled(public_function, target, args, options, compile, jit_compile):
    """The cached, compiled form of `public_function(target, *args, **options)`, as a thunk,
    when `target` is a callable run in eager mode and compiling is allowed; else None.

    Inside the compiled function the call runs in "function" mode (the graph backend), so
    its results are those of the tf.function route, bit for bit. Arguments other than the
    sources must be tensors or variables to be compiled (numpy and Python values would
    retrace per value or change dtype); otherwise the call runs eagerly.
    """
    # Cheap tests first: this runs on every eager call (tensors and variables are not callable).
    if not compile or not callable(target) or options.get("tape") is not None or (
            execution_mode() != EAGER):
        return None
    sources, *rest = args
    sources = tf.nest.map_structure(_as_tensor, sources)
    if not all(isinstance(leaf, (tf.Tensor, tf.Variable)) for leaf in tf.nest.flatten(rest)):
        return None
    key = (public_function.__name__, tuple(sorted(options.items())), jit_compile)
    run = CACHE.get(target, key, lambda: _compile(public_function, target, options, jit_compile))
    return lambda: run(sources, *rest)


def _compile(public_function, target, options, jit_compile):
    call = functools.partial(public_function, target, compile=False, **options)
    return tf.function(lambda *args: call(*args), autograph=False, jit_compile=jit_compile)


def _as_tensor(leaf):
    """numpy and Python floats become tensors (tf.function would retrace per Python value)."""
    if isinstance(leaf, (np.ndarray, np.generic, float)):
        return tf.convert_to_tensor(leaf)
    return leaf


def clear_cache() -> None:
    """Drops every compiled function compat_grads keeps for callable targets in eager mode.

    Example:
      >>> import compat_grads as cg
      >>> cg.clear_cache()
    """
    CACHE.clear()
