"""How a matrix item is run in each execution mode ("route") and what comes back.

A route is `<mode>.<target kind>`: the mode (spelled in `compat_grads.testing.modes`) is "tf1"
(a TF1 graph, v2 behaviour disabled in this process), "v1_graph" (a `tf.Graph` inside TF2),
"function" (`tf.function`) or "eager";
the target kind is "tensor", "callable" or "tape" (a tensor with the tape that recorded it).
"function.captured" is a tensor target in a `tf.function` that closes over its sources
(eager tensors, or variables) instead of taking them as arguments: the graph then holds a
captured copy of each, which every loop body inside it must share.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings

import numpy as np

from compat_grads._src.core.tf import tf
from compat_grads.testing.matrix import CALLABLE_KINDS
from compat_grads.testing.modes import EAGER, FUNCTION, TF1, V1_GRAPH, XLA, canonical
from compat_grads.testing.modes import route as route_id

TF1_ROUTES = tuple(route_id(TF1, kind) for kind in ("tensor", "callable", "tape"))
TF2_ROUTES = (*(route_id(V1_GRAPH, kind) for kind in ("tensor", "callable", "tape")),
              *(route_id(FUNCTION, kind) for kind in ("tensor", "callable", "tape", "captured")),
              *(route_id(EAGER, kind) for kind in ("callable", "uncompiled", "tape")))
XLA_ROUTES = (route_id(XLA, "callable"),)
"""An eager call with `jit_compile=True`: XLA compiles the graph the compiled eager route
traces (where XLA cannot, the call warns and runs that route without XLA)."""


def backend_of(route: str) -> str:
    """Which backend serves the route; routes on the same backend run the same algorithm.

    "eager.callable" is compiled (the default): a cached tf.function, so the graph backend;
    "eager.uncompiled" passes compile=False and runs the callable under tapes/accumulators.
    """
    if route.startswith(f"{XLA}."):
        return "xla"  # XLA's kernels: close to the graph routes, not bit for bit
    return "tape" if route.endswith((".tape", ".uncompiled")) else "graph"


@dataclasses.dataclass
class Result:
    """What one route returned: flat values (None where the API returned None), the static
    shapes the graph knew while building, and whether the result mirrored the sources."""

    values: list = dataclasses.field(default_factory=list)
    static_shapes: list = dataclasses.field(default_factory=list)
    structure_error: str | None = None
    error: str | None = None
    error_type: type | None = None
    warnings: list = dataclasses.field(default_factory=list)

    def __getstate__(self):
        # Results cross processes; TensorFlow before 2.13 has its own bfloat16 numpy type,
        # which does not pickle: such arrays travel as float64 (exact) and their dtype name.
        state = dict(self.__dict__)
        state["values"] = [_portable(v) for v in self.values]
        return state

    def __setstate__(self, state):
        state["values"] = [_restored(v) for v in state["values"]]
        self.__dict__.update(state)


def _portable(value):
    if isinstance(value, np.ndarray) and value.dtype.type.__module__ == "builtins":
        return ("dtype", tf.as_dtype(value.dtype).name, value.astype(np.float64))
    return value


def _restored(value):
    if isinstance(value, tuple) and len(value) == 3 and value[0] == "dtype":
        return value[2].astype(tf.as_dtype(value[1]).as_numpy_dtype)
    return value


def run(item, route: str) -> Result:
    """Runs `item` on `route` in this process; exceptions are captured in `Result.error`.
    An older spelling of the mode (`modes.ALIASES`) names the same route."""
    mode, kind = canonical(route).split(".")
    runner = {TF1: _run_graph, V1_GRAPH: _run_graph, FUNCTION: _run_function,
              EAGER: _run_eager, XLA: functools.partial(_run_eager, jit_compile=True)}[mode]
    return captured(lambda: runner(item, kind))


def captured(compute) -> Result:
    """`compute()` (a Result) with the warnings compat_grads gave meanwhile; an exception
    it raised becomes `Result.error`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = compute()
        except Exception as err:  # noqa: BLE001 - a failing route is a result to report
            result = Result(error=f"{type(err).__name__}: {err}", error_type=type(err))
    result.warnings = [str(w.message) for w in caught
                       if w.category.__module__.startswith("compat_grads")]
    return result


def _invoke(item, kind, sources, consts, jit_compile=False):
    def build(s):
        return item.case.build(s, consts)

    if kind in ("tensor", "captured"):
        return item.call(build(sources), sources)
    if kind == "callable":
        return item.call(build, sources, jit_compile=jit_compile)
    if kind == "uncompiled":
        return item.call(build, sources, compile=False)
    with tf.GradientTape() as tape:
        tape.watch(tf.nest.flatten(sources))
        target = build(sources)
    return item.call(target, sources, tape=tape)


def _numpy(values, dtype):
    return tf.nest.map_structure(lambda v: np.asarray(v, dtype.as_numpy_dtype), values)


def _shape(case, value):
    shape = list(np.shape(value))
    if case.dynamic_batch and shape:
        shape[0] = None
    return shape


def _structure_error(item, kind, out, sources):
    try:
        tf.nest.assert_same_structure(out, item.structure(sources, kind in CALLABLE_KINDS))
    except (TypeError, ValueError) as err:
        return str(err)
    return None


def _static(out):
    return [None if t is None else t.shape.as_list() if t.shape.rank is not None else None
            for t in tf.nest.flatten(out)]


def _result(item, kind, out, sources, values, static_shapes):
    return Result(values, static_shapes, _structure_error(item, kind, out, sources))


def _run_graph(item, kind):
    case = item.case
    sources, consts = case.inputs()
    dtype = tf.as_dtype(case.dtype)
    graph = tf.Graph()
    with graph.as_default():
        if case.variables:
            # GradientTape cannot watch TF1's default reference variables.
            xs = case.repeated(tf.nest.map_structure(
                lambda v: tf.compat.v1.Variable(v, dtype=dtype, use_resource=kind == "tape"),
                _numpy(sources, dtype)))
            feeds = {}
        else:
            xs = case.repeated(tf.nest.map_structure(
                lambda v: tf.compat.v1.placeholder(dtype, _shape(case, v)), sources))
            feeds = dict(zip(tf.nest.flatten(xs), tf.nest.flatten(_numpy(sources, dtype))))
        cs = {k: tf.compat.v1.placeholder(dtype, np.shape(v)) for k, v in consts.items()}
        feeds.update({cs[k]: np.asarray(v, dtype.as_numpy_dtype) for k, v in consts.items()})
        out = _invoke(item, kind, xs, cs)
        flat = tf.nest.flatten(out)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            values = session.run([t for t in flat if t is not None], feeds)
    values = iter(values)
    return _result(item, kind, out, xs, [None if t is None else next(values) for t in flat],
                   _static(out))


def _run_function(item, kind):
    case = item.case
    sources, consts = case.inputs()
    dtype = tf.as_dtype(case.dtype)
    const_specs = {k: tf.TensorSpec(np.shape(v), dtype) for k, v in consts.items()}
    const_args = {k: tf.constant(v, dtype) for k, v in consts.items()}
    traced = {}

    def body(xs, cs):
        xs = case.repeated(xs)
        out = _invoke(item, kind, xs, cs)
        traced.update(static=_static(out), structure=_structure_error(item, kind, out, xs))
        return out

    if case.variables or kind == "captured":
        make = tf.Variable if case.variables else tf.constant
        xs = tf.nest.map_structure(lambda v: make(v, dtype=dtype), sources)
        fn = tf.function(lambda cs: body(xs, cs), input_signature=[const_specs], autograph=False)
        out = fn(const_args)
    else:
        specs = tf.nest.map_structure(lambda v: tf.TensorSpec(_shape(case, v), dtype), sources)
        fn = tf.function(body, input_signature=[specs, const_specs], autograph=False)
        out = fn(tf.nest.map_structure(lambda v: tf.constant(v, dtype), sources), const_args)
    values = [None if t is None else t.numpy() for t in tf.nest.flatten(out)]
    return Result(values, traced["static"], traced["structure"])


def _run_eager(item, kind, jit_compile=False):
    case = item.case
    sources, consts = case.inputs()
    dtype = tf.as_dtype(case.dtype)
    make = tf.Variable if case.variables else tf.constant
    xs = case.repeated(tf.nest.map_structure(lambda v: make(v, dtype=dtype), sources))
    cs = {k: tf.constant(v, dtype) for k, v in consts.items()}
    out = _invoke(item, kind, xs, cs, jit_compile)
    flat = tf.nest.flatten(out)
    return _result(item, kind, out, xs, [None if t is None else t.numpy() for t in flat],
                   _static(out))
