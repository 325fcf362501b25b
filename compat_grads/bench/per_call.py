"""The per-call workloads: a small compiled call's cost on a 3-vector, ours against the
concrete function our call runs (TensorFlow's floor), and our own Python alone."""

from __future__ import annotations

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads.bench import workloads
from compat_grads.bench.workloads import OURS

OVERHEAD_FUNCTIONS = ("stacked_jacobian", "per_element_gradients", "jvp", "vjp", "hessian",
                      "batch_jacobian")
"""The functions `call_overhead` times, each its own workload."""


def call_overhead(function, repeats):
    """The per-call cost of the compiled eager route on a tiny input: ours against the
    tf.function our cache built for the call, called directly (the same graph: only the
    call path differs)."""
    x = tf.constant([0.5, -1.0, 2.0])
    v = tf.constant([1.0, 2.0, -1.0])
    f = _OVERHEAD_TARGETS[function]
    args = {"jvp": (x, v), "vjp": (x, v), "batch_jacobian": (x[:, None],)}.get(function, (x,))

    def ours():
        return getattr(cg, function)(f, *args)
    traced, concrete = compiled_for(ours)
    flat, captured = list(args), concrete.captured_inputs
    recipes = {f"{OURS} {function}, eager": ours,
               "the same tf.function, called directly": lambda: traced(*args),
               CONCRETE: lambda: concrete._call_flat(flat, captured)}
    workload = f"per-call overhead: {function}"
    return (workloads.timed(workload, recipes, ours, repeats)
            + _own_python(workload, ours, concrete, flat, captured, repeats))


def compiled_for(call):
    """(the tf.function, its one concrete function) that our compile cache builds for
    `call`, a call of ours made once on an empty cache."""
    from compat_grads._src.call import compile as _compile

    _compile.CACHE.clear()
    call()
    (entry,) = _compile.CACHE._entries.values()
    (concrete,) = entry.compiled._concrete.values()
    return entry.compiled.function, concrete


def _own_python(workload, ours, concrete, flat, captured, repeats):
    """Our call and the call of its concrete function again, with that function's
    `_call_flat` a stub that returns its result: what is left is compat_grads' own Python
    alone. TensorFlow's call takes longer when Python ran just before it
    (`benchmarks/idle_gap.py`), so the difference of the real calls counts our Python more
    than once."""
    result = concrete._call_flat(flat, captured)
    concrete._call_flat = lambda tensor_inputs, captured_inputs: result
    try:
        recipes = {STUBBED: ours, STUB: lambda: concrete._call_flat(flat, captured)}
        return workloads.timed(workload, recipes, ours, repeats)
    finally:
        del concrete._call_flat


CONCRETE = "its concrete function, called directly (TensorFlow's floor)"
"""The per-call workloads' floor: the concrete function our call runs, called as our call
ends (`_call_flat` with the flat inputs and its captured inputs, listed once as ours lists
them): what is left is TensorFlow's own dispatch."""


STUBBED = "our call, its concrete function's call a stub (compat_grads' own Python)"
STUB = "the stub alone"
"""The per-call workloads' measure of our own Python (`_own_python`)."""


_OVERHEAD_TARGETS = {
    "stacked_jacobian": lambda x: tf.sin(x) * x, "per_element_gradients": tf.sin,
    "jvp": lambda x: tf.sin(x) * x, "vjp": lambda x: tf.sin(x) * x,
    "hessian": lambda x: tf.reduce_sum(tf.sin(x) * x),
    "batch_jacobian": lambda x: tf.tanh(x) * x}
