"""The route helpers of the bad-input tests (`compat_grads.testing._suite.bad_inputs` and the
`tests_tf2/test_input_*.py`, `tests_tf1/test_bad_input_tf1.py` files): the routes, running a
build in a route's mode, calling a public function with a callable or a tensor target, the
error a message must match, and the entry of the case table (`BadInput`, what it gives:
`Value` or `Error`) with `check`, which runs one entry on one route.

A route is `<mode>.<target>`: the modes are those of `compat_grads.testing.routes`; the
target is a callable ("callable", compiled and cached in eager mode; "uncompiled" with
compile=False), a tensor ("tensor") or an eager tensor with the tape that recorded it
("tape").
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads._src.jacobians import jacobians as _jacobians
from compat_grads._src.stacking import stack as _stacking
from compat_grads.testing import modes, tolerances
from compat_grads.testing.routes import TF1_ROUTES, TF2_ROUTES


def mode_of(route: str) -> str:
    """The mode of `route` ("<mode>.<target>")."""
    return route.split(".")[0]


def _target_of(route: str) -> str:
    return route.split(".")[1]


(TF1,) = dict.fromkeys(map(mode_of, TF1_ROUTES))
V1_GRAPH, FUNCTION, EAGER = dict.fromkeys(map(mode_of, TF2_ROUTES))
TF2_MODES = (EAGER, FUNCTION, V1_GRAPH)
GRAPH_MODES = (TF1, V1_GRAPH)
"""The modes that build a graph and run it in a Session."""


def _on(mode, *targets):
    return tuple(f"{mode}.{target}" for target in targets)


CALLABLE = (*_on(EAGER, "callable", "uncompiled"), *_on(FUNCTION, "callable"),
            *_on(V1_GRAPH, "callable"))
TENSOR = (*_on(EAGER, "tape"), *_on(FUNCTION, "tensor"), *_on(V1_GRAPH, "tensor"))
ROUTES = CALLABLE + TENSOR
GRAPH_TENSOR = (*_on(FUNCTION, "tensor"), *_on(V1_GRAPH, "tensor"))
"""The tensor routes without a tape (second order cannot use one)."""
GRAPHS = (*_on(FUNCTION, "callable", "tensor"), *_on(V1_GRAPH, "callable", "tensor"))
"""The routes where a rank or a batch size can be unknown while building."""
TAPES = tuple(f"{mode}.tape" for mode in TF2_MODES)
"""Tapes in eager code, in a tf.function and in a v1 Graph."""
TF1_BOTH = _on(TF1, "callable", "tensor")
TF1_TAPE = _on(TF1, "tape")

X = np.array([[0.5, -1.0], [2.0, 1.5]], np.float32)
X3 = np.array([0.5, -1.0, 2.0], np.float32)
TOL = tolerances.TOLERANCE["float32"]
STRATEGIES = ("reverse", "forward", "loop")
_SAME = object()

SECOND_ORDER_TRACES = ("hessian_diagonal", "laplacian", "batch_hessian_diagonal",
                       "batch_laplacian")
TRACES = (*SECOND_ORDER_TRACES, "divergence", "batch_divergence")
FUNCTIONS = ("stacked_jacobian", "per_element_gradients", "batch_jacobian",
             "per_example_gradients", "hessian", "batch_hessian", "jvp", "vjp", "hvp", *TRACES)
MATERIALISING = ("stacked_jacobian", "batch_jacobian", "per_example_gradients", "hessian",
                 "batch_hessian")
FIRST_ORDER = ("stacked_jacobian", "per_element_gradients", "batch_jacobian")
FIRST_ORDER_FUNCTIONS = tuple(getattr(cg, name) for name in FIRST_ORDER)
TAKES = {
    "compile": FUNCTIONS,
    "jit_compile": FUNCTIONS,
    "independent": ("batch_jacobian", "per_example_gradients", "batch_hessian",
                    "batch_hessian_diagonal", "batch_laplacian"),
    "method": TRACES,
    "num_samples": TRACES,
    "seed": TRACES,
    "return_std": TRACES,
    "strategy": MATERIALISING,
    "chunk_size": MATERIALISING,
    "max_bytes": MATERIALISING,
    "memory_budget": MATERIALISING,
    "unconnected_gradients": MATERIALISING + ("per_element_gradients",),
    "has_aux": FUNCTIONS,
    "return_value": ("stacked_jacobian", "per_element_gradients", "batch_jacobian",
                     "per_example_gradients", "hessian", "batch_hessian", "hvp", *TRACES),
    "flat": ("stacked_jacobian", "batch_jacobian", "hessian", "batch_hessian"),
}


# ------------------------------------------------------------------------ route helpers

def routes_of(name):
    """The routes `name` can be called on: tensor targets need tape= in eager mode, which
    second order cannot use; the model, jvp, vjp and hvp functions take callables only."""
    if name in ("per_example_gradients", "jvp", "vjp", "hvp"):
        return CALLABLE
    if name in ("hessian", "batch_hessian", *SECOND_ORDER_TRACES):
        return CALLABLE + GRAPH_TENSOR
    return ROUTES


def argument_of(name):
    """The public name of the sources argument of the function `name`."""
    one = dict.fromkeys(("batch_jacobian", "batch_hessian", "batch_hessian_diagonal",
                         "batch_laplacian", "divergence", "batch_divergence"), "source")
    return {**one, "jvp": "primals",
            "vjp": "primals", "hvp": "primals", "per_example_gradients": "weights"}.get(
                name, "sources")


def compiled(route):
    """The compile= option of the route: False on "eager.uncompiled", else the default."""
    return not route.endswith(".uncompiled")


def run(route, build, *arrays, unknown_rank=False, variables=()):
    """`build(*tensors, *variables)` in the route's mode, one input tensor per array and one
    variable per initial value in `variables`; numpy values out. With `unknown_rank` the
    inputs' rank is unknown while building (graph modes)."""
    arrays = [np.asarray(a) for a in arrays]
    mode = mode_of(route)
    if mode in GRAPH_MODES:
        with tf.Graph().as_default():
            feeds = [tf.compat.v1.placeholder(a.dtype, None if unknown_rank else a.shape)
                     for a in arrays]
            made = [tf.Variable(v) for v in variables]
            return modes.session_values(build(*feeds, *made), dict(zip(feeds, arrays)))
    tensors = [tf.constant(a) for a in arrays]
    made = [tf.Variable(v) for v in variables]  # a tf.function cannot create them twice
    if mode == FUNCTION:
        specs = [tf.TensorSpec(None if unknown_rank else a.shape, a.dtype) for a in arrays]
        return modes.to_numpy(tf.function(lambda *t: build(*t, *made), input_signature=specs,
                                          autograph=False)(*tensors))
    return modes.to_numpy(build(*tensors, *made))


def call(route, function, f, x, *args, sources=_SAME, **options):
    """`function` on the route: given the callable `f`, or the tensor `f(x)` (with the tape
    that recorded it on a "tape" route), with respect to `sources` (default: x)."""
    sources = x if sources is _SAME else sources
    target = _target_of(route)
    if target == "uncompiled":
        options["compile"] = False
    if target in ("callable", "uncompiled"):
        return function(f, sources, *args, **options)
    if target == "tape":
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            recorded = f(x)
        return function(recorded, sources, *args, tape=tape, **options)
    return function(f(x), sources, *args, **options)


def raises(error, function, *parts):
    """`pytest.raises` for compat_grads.<function>'s error whose message holds `parts`
    (regular expressions) in this order: the argument, what it got, what to do."""
    return pytest.raises(error, match=rf"(?s)compat_grads\.{function}: .*" + ".*".join(parts))


def square(x):
    return x ** 2


def cube_sum(x):
    return tf.reduce_sum(x ** 3)


def row_cube_sum(x):
    return tf.reduce_sum(x ** 3, axis=1)


def forgot_return(x):
    x ** 2  # noqa: B018 - the bug under test


def through_python(x):
    """x³, half of it computed in Python by a tf.py_function."""
    return tf.py_function(lambda t: t ** 2, [x], tf.float32) * x


def product(name):
    """The public function `name` as `(f, x, **options)`: jvp, vjp and hvp along ones."""
    function = getattr(cg, name)
    if name in ("jvp", "vjp", "hvp"):
        return lambda f, x, **kw: function(f, x, tf.ones_like(x), **kw)
    return function


def target_of(name):
    """The target `standard` differentiates with the public function `name`."""
    return {"hessian": cube_sum, "batch_hessian": row_cube_sum, "hvp": cube_sum,
            "hessian_diagonal": cube_sum, "laplacian": cube_sum,
            "batch_hessian_diagonal": row_cube_sum, "batch_laplacian": row_cube_sum}.get(
                name, square)


def takes_tensor(route) -> bool:
    return _target_of(route) in ("tensor", "tape")


def standard(name, route, x, variable=None, **options):
    """A valid call of the public function `name` on the route, with `options` added."""
    if name == "per_example_gradients":
        w = tf.Variable([[1.0], [2.0]]) if variable is None else variable
        if not compiled(route):
            options["compile"] = False
        return cg.per_example_gradients(lambda y_true, y_pred: (y_true - y_pred) ** 2,
                                        lambda v: tf.matmul(v, w), x, x[:, :1], weights=[w],
                                        **options)
    return call(route, product(name), target_of(name), x, **options)


def jacobian_of_elementwise(derivative):
    """The analytic Jacobian `x.shape + x.shape` of an elementwise function."""
    flat = np.asarray(derivative, np.float64).ravel()
    return np.diag(flat).reshape(derivative.shape * 2)


def per_sample(blocks):
    """`[b] + d + d` per-sample blocks of a `[b, d]` elementwise derivative."""
    return np.stack([np.diag(row) for row in np.asarray(blocks, np.float64)])


def stop_stacking(monkeypatch):
    """Stacking rows is where the work (and the memory) starts: here it fails the test, so a
    missing check never allocates anything."""
    def started(*args, **kwargs):
        raise AssertionError("the Jacobian was started")
    monkeypatch.setattr(_stacking, "stack", started)
    monkeypatch.setattr(_jacobians, "stack", started)


def refused_before_building(name, route, target, x, w, digits=11):
    """Asserts that `name` on the route refuses the huge `target(x)` at once: the error names
    the bytes (a number of at least `digits` digits) and the options that fit, and at most
    the forward pass was built."""
    graph = None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()

    def ops():
        return len(graph.get_operations()) if graph else 0
    before = ops()
    target(x)
    forward, before = ops() - before, ops()  # the ops of one forward pass
    with raises(ValueError, name, rf"the result would take \d{{{digits},}} bytes", r"in all, more "
                r"than max_bytes=17179869184 \(16\.0 GiB\)", r"chunk_size=", r"max_bytes="):
        if name == "per_example_gradients":
            cg.per_example_gradients(lambda t, p: (t - p) ** 2, target, x, x, weights=[w],
                                     compile=compiled(route))
        else:
            call(route, getattr(cg, name), target, x)
    assert ops() - before <= forward
    return tf.constant(0.0)


def ragged(x):
    return tf.RaggedTensor.from_row_lengths(tf.reshape(x, [-1]), [3, 1])


def foreign_placeholder():
    """A placeholder of another graph, and a scalar target computed from it there."""
    with tf.Graph().as_default():
        other = tf.compat.v1.placeholder(tf.float32, [2, 2])
        return other, cube_sum(other)


# ------------------------------------------------------------------ the entries of the table

@dataclasses.dataclass(frozen=True)
class Value:
    """The exact right value: a nest of arrays (None where the API gives None), equal to the
    letter unless `rtol`/`atol` are given; with `dtypes` the dtypes must match too."""

    want: object
    rtol: float = 0.0
    atol: float = 0.0
    dtypes: bool = False


@dataclasses.dataclass(frozen=True)
class Error:
    """compat_grads.<function> raises `type`, its message holding `parts` in this order."""

    type: type
    function: str
    parts: tuple


@dataclasses.dataclass(frozen=True)
class BadInput:
    """One kind of bad or unusual input on some routes.

    Attributes:
      kind: the catalogue's name of the kind (several entries may share one).
      id: unique id of the entry (test ids are `<id>-<route>`).
      call: `(route, *tensors, *variables) -> result nest`, built in the route's mode.
      gives: `Value` or `Error`.
      routes: where it runs (TF2 routes and TF1 routes; each suite runs its own).
      inputs: the arrays fed as tensors (placeholders in graph modes).
      variables: initial values of the variables passed after the tensors.
      unknown_rank: the inputs' rank is unknown while building.
      warns: a VectorizationWarning whose message matches this must be given.
    """

    kind: str
    id: str
    call: Callable
    gives: Value | Error
    routes: tuple
    inputs: tuple = (X,)
    variables: tuple = ()
    unknown_rank: bool = False
    warns: str | None = None


def check(case: BadInput, route: str):
    """Runs `case` on `route` and asserts it gives what it must."""
    def build(*tensors):
        return case.call(route, *tensors)

    def result():
        return run(route, build, *case.inputs, unknown_rank=case.unknown_rank,
                   variables=case.variables)
    gives = case.gives
    if isinstance(gives, Error):
        with raises(gives.type, gives.function, *gives.parts):
            result()
        return
    warned = (pytest.warns(cg.VectorizationWarning, match=case.warns) if case.warns
              else contextlib.nullcontext())
    with warned:
        got = result()
    _assert_same(got, gives)


def _assert_same(got, value: Value):
    got, want = tf.nest.flatten(got), tf.nest.flatten(value.want)
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        if w is None:
            assert g is None, g
            continue
        assert g is not None and np.shape(g) == np.shape(w), (np.shape(g), np.shape(w))
        if value.dtypes:
            assert np.asarray(g).dtype == np.asarray(w).dtype
        if value.rtol or value.atol:
            np.testing.assert_allclose(g, w, rtol=value.rtol, atol=value.atol)
        else:
            np.testing.assert_array_equal(g, w)


HUGE = 200_000
"""A 200000 x 200000 float32 Jacobian takes 160 GB."""


def huge_target(name, w):
    """The target of the huge case of `name`; `w` holds the per-example model's weights."""
    if name == "per_example_gradients":
        return lambda v: v * tf.reduce_sum(w)
    return {"hessian": cube_sum, "batch_hessian": row_cube_sum}.get(name, square)


def huge_shape(name):
    """The input shape of the huge case of `name` (per-example: 100000 examples x 200000
    weights, 80 GB)."""
    return {"stacked_jacobian": [HUGE], "hessian": [HUGE],
            "per_example_gradients": [HUGE // 2, 1]}.get(name, [2, HUGE])
