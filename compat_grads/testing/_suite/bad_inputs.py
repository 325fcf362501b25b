"""The bad-input catalogue as a case table.

Each `BadInput` is one kind of bad or unusual input on the routes where it can occur
(`compat_grads.testing._suite.bad_input_routes`): the arrays fed in, the call that builds the
result from their tensors, and what it must give (`Value`: the exact right value; `Error`: a
compat_grads error whose message names the function, the argument, what it got and the
fix). `tests_tf2/test_input_table.py` runs the table on the TF2 routes and
`tests_tf1/test_bad_input_tf1.py` on the TF1 graph, one parametrized runner each; kinds that
need a test body of their own are plain tests in the `tests_tf2/test_input_*.py` files, which
declare them in their own `KINDS`. `python tests_tf2/bad_input_totals.py` counts kinds per
mode.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads.testing._suite import bad_input_routes as r
from compat_grads.testing._suite.bad_input_routes import BadInput, Error, Value, mode_of
from compat_grads.testing._suite.bad_inputs_mistakes import mistakes
from compat_grads.testing._suite.bad_inputs_traces import estimators

TOL = r.TOL
_X64 = r.X.astype(np.float64)


# ------------------------------------------------------------------------------ the table
# Each builder below gives the entries of one section of the catalogue.

BAD_OPTIONS = [  # id, option, value, error, what the message says it got, the fix, in TF1
    ("bool-option-as-string", "independent", "False", TypeError, r"str 'False'",
     r"Pass independent=True or independent=False", True),
    ("compile-as-string", "compile", "False", TypeError, r"str 'False'",
     r"Pass compile=True or compile=False", True),
    ("jit-compile-as-int", "jit_compile", 1, TypeError, r"int 1",
     r"Pass jit_compile=True or jit_compile=False", False),
    ("chunk-size-list", "chunk_size", [2], TypeError, r"list \[2\]", r"chunk_size='auto'",
     True),
    ("chunk-size-float", "chunk_size", 2.0, TypeError, r"float 2\.0", r"Python int", False),
    ("chunk-size-zero", "chunk_size", 0, ValueError, r"got 0", r"Python int", True),
    ("chunk-size-misspelt", "chunk_size", "Auto", ValueError, r"'Auto'", r"chunk_size='auto'",
     True),
    ("memory-budget-string", "memory_budget", "2GB", TypeError, r"str '2GB'",
     r"Pass memory_budget= as bytes", True),
    ("memory-budget-zero", "memory_budget", 0, ValueError, r"got 0", r"as bytes", False),
    ("memory-budget-share-above-1", "memory_budget", 1.5, ValueError, r"share in \(0, 1\]",
     r"as the share", False),
    ("memory-budget-above-machine", "memory_budget", 2**62, ValueError, r"machine's memory",
     r"as bytes", True),
    ("strategy-list", "strategy", ["reverse"], TypeError, r"list \['reverse'\]",
     r"Use 'auto'.*not a list", True),
    ("strategy-misspelt", "strategy", "Reverse", ValueError, r"'Reverse'", r"Use 'auto'",
     False),
    ("unconnected-list", "unconnected_gradients", ["zero"], TypeError, r"list \['zero'\]",
     r"Use 'none'.*'zero'", True),
    ("unconnected-none", "unconnected_gradients", None, TypeError, r"NoneType",
     r"Use 'none'", False),
    ("max-bytes-string", "max_bytes", "16GB", TypeError, r"str '16GB'",
     r"Pass the most memory", True),
    ("max-bytes-negative", "max_bytes", -1, ValueError, r"got -1", r"at least 1", False),
    ("has-aux-as-string", "has_aux", "True", TypeError, r"str 'True'",
     r"Pass has_aux=True or has_aux=False", False),
    ("return-value-as-int", "return_value", 1, TypeError, r"int 1",
     r"Pass return_value=True or return_value=False", False),
    ("flat-as-string", "flat", "yes", TypeError, r"str 'yes'",
     r"Pass flat=True or flat=False", True),
    ("method-misspelt", "method", "Hutchinson", ValueError, r"'Hutchinson'",
     r"Use 'exact'.*or 'hutchinson'", False),
    ("method-list", "method", ["exact"], TypeError, r"list \['exact'\]", r"Use 'exact'", False),
    ("num-samples-zero", "num_samples", 0, ValueError, r"got 0", r"at least 1", False),
    ("num-samples-float", "num_samples", 8.0, TypeError, r"float 8\.0", r"Python int", False),
    ("seed-float", "seed", 1.5, TypeError, r"float 1\.5", r"Pass an int such as seed=0", True),
    ("seed-none", "seed", None, TypeError, r"NoneType", r"stateless generator", False),
    ("return-std-as-string", "return_std", "yes", TypeError, r"str 'yes'",
     r"Pass return_std=True or return_std=False", False),
]
_IN_TF1 = ("batch_jacobian", "batch_hessian", "batch_laplacian")
"""The functions the TF1 suite runs the bad options of."""


def _options():
    """Each bad option on each function that takes it, on each route of the function (but
    compile= on the route that sets it): strictly typed, checked before anything else."""
    for case, option, value, error, got, fix, in_tf1 in BAD_OPTIONS:
        for name in r.TAKES[option]:
            routes = [route for route in r.routes_of(name)
                      if not (option == "compile" and not r.compiled(route))]
            yield BadInput(
                f"option {option}={value!r}", f"{case}-{name}",
                lambda route, x, w, name=name, options={option: value}: r.standard(
                    name, route, x, w, **options),
                Error(error, name, (rf"{option} must be", got, fix)),
                (*routes, *(r.TF1_BOTH if in_tf1 and name in _IN_TF1 else ())),
                variables=([[1.0], [2.0]],))


def _returns_none():
    for name in r.FUNCTIONS:
        if name != "per_example_gradients":
            tf1 = () if name == "batch_jacobian" else r.TF1_BOTH[:1]
            yield BadInput("a callable that returns None", f"returns-none-{name}",
                           lambda route, x, name=name: r.call(route, r.product(name),
                                                              r.forgot_return, x),
                           Error(TypeError, name, (r"the callable target returned None",
                                                   r"return")), r.CALLABLE + tf1)


def _value_options():
    """has_aux= needs a callable that returns a pair; flat= one dtype for all sources."""
    for name in r.TAKES["has_aux"]:
        tf1 = r.TF1_BOTH if name == "batch_jacobian" else ()
        tensor_routes = [route for route in (*r.routes_of(name), *tf1) if r.takes_tensor(route)]
        if tensor_routes:
            yield BadInput("has_aux=True with a tensor target", f"has-aux-tensor-{name}",
                           lambda route, x, name=name: r.standard(name, route, x, has_aux=True),
                           Error(TypeError, name, (r"has_aux=True needs a callable target",
                                                   r"but target is", r"Pass the callable")),
                           tuple(tensor_routes))
        yield BadInput("has_aux=True with a callable that returns no pair",
                       f"has-aux-no-pair-{name}",
                       lambda route, x, name=name: r.standard(name, route, x, has_aux=True),
                       Error(TypeError, name, (r"with has_aux=True the callable must return "
                                               r"a pair \(y, aux\)", r"but it returned",
                                               r"Return `y, aux`")),
                       (*r.CALLABLE, *(r.TF1_BOTH[:1] if tf1 else ())))
    for name in ("stacked_jacobian", "hessian"):  # the batch functions take one source
        yield BadInput("flat=True with sources of two dtypes", f"flat-mixed-dtypes-{name}",
                       lambda route, x, name=name: r.call(
                           route, getattr(cg, name),
                           lambda s: r.target_of(name)(s[0] * tf.cast(s[1], tf.float32)), x,
                           sources=[x, tf.cast(x, tf.float64)], flat=True),
                       Error(TypeError, name, (r"flat=True joins every block into one matrix",
                                               r"float32, float64", r"Cast the sources")),
                       r.CALLABLE)


def _unknown_rank():
    both = r.GRAPHS + r.TF1_BOTH
    for strategy in r.STRATEGIES:
        yield BadInput("unknown rank: stacked_jacobian", f"unknown-rank-stacked-{strategy}",
                       lambda route, x, s=strategy: r.call(route, cg.stacked_jacobian, tf.sin,
                                                           x, strategy=s),
                       Value(r.jacobian_of_elementwise(np.cos(_X64)), TOL, TOL), both,
                       unknown_rank=True)
        for independent in (True, False):
            yield BadInput(
                "unknown rank: batch_jacobian",
                f"unknown-rank-batch-{strategy}-{'independent' if independent else 'exact'}",
                lambda route, x, s=strategy, i=independent: r.call(
                    route, cg.batch_jacobian, tf.sin, x, strategy=s, independent=i),
                Value(r.per_sample(np.cos(_X64)), TOL, TOL),
                both if strategy != "loop" else r.TF1_BOTH, unknown_rank=True)
    for independent in (True, False):
        yield BadInput("unknown rank: batch_hessian",
                       f"unknown-rank-batch-hessian-{'independent' if independent else 'exact'}",
                       lambda route, x, i=independent: r.call(
                           route, cg.batch_hessian, r.row_cube_sum, x, independent=i),
                       Value(r.per_sample(6 * _X64), TOL), both, unknown_rank=True)
    yield BadInput("unknown rank: not one scalar per sample (run time)",
                   "unknown-rank-batch-hessian-of-a-vector",
                   lambda route, x: r.call(route, cg.batch_hessian, r.square, x),
                   Error(tf.errors.InvalidArgumentError, "batch_hessian",
                         (r"target must hold one scalar per sample, shape \(b,\) or \(b, 1\)",)),
                   both, unknown_rank=True)


def _composites():
    """Ragged and sparse targets and sources: dense tensors only, with the conversion."""
    for kind, make, reduce, fixes in (
            ("ragged", r.ragged, tf.reduce_sum,
             (r"to_tensor\(\).*flat_values", r"x\.to_tensor\(\).*with_flat_values")),
            ("sparse", tf.sparse.from_dense, tf.sparse.reduce_sum,
             (r"tf\.sparse\.to_dense.*values", r"tf\.sparse\.to_dense\(x\).*SparseTensor"))):
        for name in r.FIRST_ORDER:
            yield BadInput(f"a {kind} target", f"{kind}-target-{name}",
                           lambda route, x, n=name, m=make: r.call(route, getattr(cg, n), m, x),
                           Error(TypeError, name, (r"target (is|returned) a (Ragged|Sparse)"
                                                   r"Tensor", r"dense tensors only", fixes[0])),
                           r.ROUTES + (r.TF1_BOTH if name == "stacked_jacobian" else ()))
        for name in ("stacked_jacobian", "per_element_gradients", "hessian"):
            yield BadInput(f"a {kind} source", f"{kind}-source-{name}",
                           lambda route, x, n=name, m=make, f=reduce: r.call(
                               route, getattr(cg, n), f, m(x)),
                           Error(TypeError, name, (r"sources is a (Ragged|Sparse)Tensor",
                                                   r"dense tensors only", fixes[1])),
                           r.CALLABLE + r.GRAPH_TENSOR
                           + (r.TF1_BOTH if name == "stacked_jacobian" else ()))
    indices = [2, 0, 2]
    want = np.zeros((3, 3))
    for row, index in enumerate(indices):
        want[row, index] += 2.0  # d(v[i] * v[1]) / dv[i] = v[1]
        want[row, 1] += [1.0, 2.0, 3.0][index]  # and / dv[1] = v[i]
    for strategy in r.STRATEGIES:  # tf.gather on a variable: an IndexedSlices gradient
        yield BadInput("IndexedSlices gradients (gather from a variable)", f"gather-{strategy}",
                       lambda route, _, v, s=strategy: r.call(
                           route, cg.stacked_jacobian, lambda v: tf.gather(v, indices) * v[1],
                           v, strategy=s),
                       Value(want), r.ROUTES + r.TF1_BOTH, variables=([1.0, 2.0, 3.0],))


def _foreign_graphs():
    tensor = r.TF1_BOTH[1:]
    for name in (*r.FIRST_ORDER, "hessian"):
        f = r.cube_sum if name == "hessian" else r.square
        yield BadInput("a source from another graph", f"foreign-source-{name}",
                       lambda route, x, n=name, f=f: r.call(
                           route, getattr(cg, n), f, x, sources=r.foreign_placeholder()[0]),
                       Error(ValueError, name, (rf"{r.argument_of(name)} is a tensor of "
                                                r"another tf\.Graph", r"one graph",
                                                r"as_default\(\)")),
                       (() if name == "hessian" else r.GRAPHS)
                       + (() if name == "batch_jacobian" else tensor))
    for name in ("stacked_jacobian", "per_element_gradients", "hessian"):
        yield BadInput("a target from another graph", f"foreign-target-{name}",
                       lambda route, x, n=name: getattr(cg, n)(r.foreign_placeholder()[1], x),
                       Error(ValueError, name, (r"target is a tensor of another tf\.Graph",
                                                r"one graph", r"as_default\(\)")),
                       r.GRAPH_TENSOR[1:] + tensor)


def _memory():
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)  # result 64 bytes, 4 rows of 32 at once
    yield BadInput("rows in flight above max_bytes", "max-bytes-100",
                   lambda route, x: r.call(route, cg.stacked_jacobian, r.square, x,
                                           max_bytes=100, chunk_size=None),
                   Error(ValueError, "stacked_jacobian", (
                       r"result would take 64 bytes", r"192 bytes", r"max_bytes=100",
                       r"chunk_size=1 fits")), r.ROUTES + r.TF1_BOTH, inputs=(x,))
    yield BadInput("a memory_budget too small for one row", "memory-budget-one-row",
                   lambda route, x: r.call(route, cg.stacked_jacobian, r.square, x,
                                           memory_budget=70),
                   Error(ValueError, "stacked_jacobian", (
                       r"memory_budget=70", r"too small even for one row",
                       r"result takes 64 bytes", r"a peak of", r"Raise memory_budget=")),
                   r.ROUTES + r.TF1_BOTH, inputs=(x,))
    for fits, options, tf1 in (("chunk-size-1", {"max_bytes": 100, "chunk_size": 1}, True),
                               ("budget-chunks", {"memory_budget": 400}, True),
                               ("auto-chunks", {"max_bytes": 100}, True),
                               ("no-bound", {"max_bytes": None}, False)):
        yield BadInput("a chunk_size, memory_budget or max_bytes=None that fits",
                       f"max-bytes-{fits}",
                       lambda route, x, o=options: r.call(route, cg.stacked_jacobian,
                                                          r.square, x, **o),
                       Value(np.diag(2 * x)), r.ROUTES + (r.TF1_BOTH if tf1 else ()),
                       inputs=(x,))


def _dtypes():
    for dtype, fix, tf1 in ((tf.int32, r"tf\.cast\(x, tf\.float32\)", True),
                            (tf.string, r"A string tensor", False),
                            (tf.complex64, r"tf\.math\.real, tf\.math\.imag", True),
                            (tf.bool, r"tf\.cast", False)):
        kind = {"int32": "int", "complex64": "complex"}.get(dtype.name, dtype.name)
        yield BadInput(f"a source of dtype {kind}", f"source-dtype-{kind}",
                       lambda route, x, d=dtype: r.call(
                           route, cg.stacked_jacobian, lambda s: x * 2,
                           tf.strings.as_string(x) if d == tf.string else tf.cast(x, d)),
                       Error(TypeError, "stacked_jacobian", (
                           r"sources must be floating-point", dtype.name, fix)),
                       r.ROUTES + (r.TF1_BOTH if tf1 else ()))
    for kind, make, dtype, fix, tf1 in (
            ("int", lambda x: tf.argmax(x, output_type=tf.int32), "int32",
             r"differentiate the float", True),
            ("complex", lambda x: tf.complex(x, x), "complex64", r"tf\.math\.real", False)):
        yield BadInput(f"a target of dtype {kind}", f"target-dtype-{kind}",
                       lambda route, x, m=make: r.call(route, cg.stacked_jacobian, m, x),
                       Error(TypeError, "stacked_jacobian", (
                           r"target must have a floating-point dtype", dtype, fix)),
                       r.ROUTES + (r.TF1_BOTH if tf1 else ()))


def _shapes():
    for strategy in r.STRATEGIES:
        yield BadInput("a size-0 source", f"size-zero-source-{strategy}",
                       lambda route, x, s=strategy: r.call(
                           route, cg.stacked_jacobian, lambda x: tf.reduce_sum(x) + tf.ones([3]),
                           x, strategy=s),
                       Value(np.zeros((3, 0), np.float32), dtypes=True), r.ROUTES + r.TF1_BOTH,
                       inputs=(np.zeros([0], np.float32),))
        yield BadInput("a size-0 target", f"size-zero-target-{strategy}",
                       lambda route, x, s=strategy: r.call(
                           route, cg.stacked_jacobian, lambda x: x[:0] * 2, x, strategy=s),
                       Value(np.zeros((0, 3))), r.ROUTES + r.TF1_BOTH,
                       inputs=(np.ones([3], np.float32),))
    for source, tf1 in ((None, True), (object(), True), ("x", False)):
        kind = type(source).__name__.replace("NoneType", "None")
        for name in ("stacked_jacobian", "per_element_gradients", "hessian"):
            yield BadInput(f"a source that is {kind}", f"source-is-{kind}-{name}",
                           lambda route, x, n=name, s=source: r.call(
                               route, getattr(cg, n), r.cube_sum, x, sources=s),
                           Error(TypeError, name, (r"sources must be a tf\.Tensor or "
                                                   r"tf\.Variable", rf"got {kind}",
                                                   r"Pass the tensors")),
                           r.CALLABLE + r.GRAPH_TENSOR
                           + (r.TF1_BOTH if tf1 and name == "stacked_jacobian" else ()))


def _nan_and_inf():
    """Where the derivative involves NaN or Inf they come out; elsewhere they do not."""
    def nan_in_the_value(route, a, b, s):
        return r.call(route, cg.stacked_jacobian, lambda s: 3.0 * s[0] + tf.stop_gradient(s[1]),
                      [a, b], strategy=s, unconnected_gradients="zero")
    for strategy in (None, *r.STRATEGIES):
        options = {} if strategy is None else {"strategy": strategy}
        yield BadInput("an infinite derivative at a finite input", f"inf-{strategy}",
                       lambda route, x, o=options: r.call(route, cg.stacked_jacobian, tf.sqrt,
                                                          x, **o),
                       Value(np.array([[np.inf]])), r.ROUTES if strategy is None else r.TF1_BOTH,
                       inputs=(np.array([0.0], np.float32),))
        if strategy is None:
            continue
        yield BadInput("NaN input", f"nan-{strategy}",
                       lambda route, x, s=strategy: r.call(route, cg.stacked_jacobian, r.square,
                                                           x, strategy=s),
                       Value(np.array([[np.nan]])), r.ROUTES + r.TF1_BOTH,
                       inputs=(np.array([np.nan], np.float32),))
        yield BadInput("NaN in the value but not in the derivative", f"nan-in-value-{strategy}",
                       lambda route, a, b, s=strategy: nan_in_the_value(route, a, b, s),
                       Value([3.0 * np.eye(2), np.zeros((2, 2))]), r.ROUTES + r.TF1_BOTH,
                       inputs=(np.array([1.0, 2.0], np.float32),
                               np.array([np.nan, np.inf], np.float32)))


def _integer_valued_ops():
    """Floor, round and a cast through int have no gradient in TensorFlow (None unless
    unconnected_gradients="zero"); sign has a registered zero gradient."""
    x = np.array([1.5, -2.25, 3.0], np.float32)
    for kind, op, same, connected, tf1 in (
            ("floor", tf.floor, np.floor, False, True),
            ("round", tf.round, np.round, False, False), ("sign", tf.sign, np.sign, True, False),
            ("int-cast", lambda x: tf.cast(tf.cast(x, tf.int32), tf.float32), np.trunc, False,
             False)):
        routes = r.ROUTES + (r.TF1_BOTH if tf1 else ())
        yield BadInput(f"integer-valued op: {kind}", f"{kind}-times-x",
                       lambda route, x, op=op: r.call(route, cg.stacked_jacobian,
                                                      lambda x: x * op(x), x),
                       Value(np.diag(same(x))), routes, inputs=(x,))  # op(x) acts as a constant
        for unconnected, want in (("none", np.zeros((3, 3)) if connected else None),
                                  ("zero", np.zeros((3, 3)))):
            yield BadInput(f"integer-valued op: {kind}", f"{kind}-alone-{unconnected}",
                           lambda route, x, op=op, u=unconnected: r.call(
                               route, cg.stacked_jacobian, op, x, unconnected_gradients=u),
                           Value(want), routes, inputs=(x,))


def _python_ops():
    """tf.py_function in the target: its gradient can be taken once per run of the forward
    pass, so a callable target is run again for each row (with a VectorizationWarning) and
    a tensor target is a DerivativeError; one product needs no row twice."""
    x3 = 3 * _X64 ** 2
    for strategy in ("auto", *r.STRATEGIES):
        for name, want in (("stacked_jacobian", r.jacobian_of_elementwise(x3)),
                           ("batch_jacobian", r.per_sample(x3))):
            yield BadInput("tf.py_function in a callable target", f"py-function-{name}-{strategy}",
                           lambda route, x, n=name, s=strategy: r.call(
                               route, getattr(cg, n), r.through_python, x, strategy=s),
                           Value(want, TOL),
                           r.CALLABLE + (r.TF1_BOTH[:1] if name == "stacked_jacobian" else ()),
                           warns=rf"{name}: the target runs Python code through "
                                 r"tf\.py_function.*EagerPyFunc.*running the target again for each")
    for name in ("stacked_jacobian", "batch_jacobian"):
        yield BadInput("tf.py_function in a tensor target", f"py-function-tensor-{name}",
                       lambda route, x, n=name: r.call(route, getattr(cg, n), r.through_python,
                                                       x),
                       Error(cg.DerivativeError, name, (
                           r"tf\.py_function", r"EagerPyFunc", r"needs it once per row",
                           r"Pass the target as a callable")),
                       r.TENSOR + (r.TF1_BOTH[1:] if name == "stacked_jacobian" else ()))
    yield BadInput("tf.py_function with one product", "py-function-one-product",
                   lambda route, x: r.call(route, cg.per_element_gradients, r.through_python, x),
                   Value(x3, TOL), r.ROUTES + r.TF1_BOTH)


def _copies(s):
    return s[0] * s[1] ** 2  # x³ when both are x


def _repeated():
    """One tensor twice in the sources: every occurrence gets the total derivative
    (TensorFlow's convention: tf.gradients(y, [x, x]))."""
    x = r.X3.astype(np.float64)
    yield BadInput("one tensor twice in the sources", "repeated-stacked_jacobian",
                   lambda route, x: r.call(route, cg.stacked_jacobian, _copies, [x, x]),
                   Value([np.diag(3 * x ** 2)] * 2, TOL), r.ROUTES + r.TF1_BOTH, inputs=(r.X3,))
    yield BadInput("one tensor twice in the sources", "repeated-per_element_gradients",
                   lambda route, x: r.call(route, cg.per_element_gradients, _copies, [x, x]),
                   Value([3 * x ** 2] * 2, TOL), r.ROUTES, inputs=(r.X3,))
    yield BadInput("one tensor twice in the sources: Hessian", "repeated-hessian",
                   lambda route, x: r.call(route, cg.hessian,
                                           lambda s: tf.reduce_sum(_copies(s)), [x, x]),
                   Value([[np.diag(6 * x)] * 2] * 2, TOL),
                   r.CALLABLE + r.GRAPH_TENSOR + r.TF1_BOTH, inputs=(r.X3,))


def _closures_and_variables():
    """A callable that reads its source by closure (`lambda s: s * x` with respect to x:
    d(x²)/dx; or one that ignores its argument), a variable as the target (its own
    identity), constant tensors as per-example weights (bound in like variables)."""
    wants = {"stacked_jacobian": r.jacobian_of_elementwise(2 * _X64),
             "batch_jacobian": r.per_sample(2 * _X64),
             "hessian": r.jacobian_of_elementwise(6 * _X64)}
    for name, want in wants.items():
        scalar = name == "hessian"
        for how, h in (("times", (lambda s, x: tf.reduce_sum(s * x ** 2)) if scalar
                        else (lambda s, x: s * x)),
                       ("ignored", (lambda s, x: tf.reduce_sum(x ** 3)) if scalar
                        else (lambda s, x: x ** 2))):
            yield BadInput("a callable that reads its source by closure",
                           f"closure-{how}-{name}",
                           lambda route, x, n=name, h=h: r.call(
                               route, getattr(cg, n), lambda s: h(s, x), x),
                           Value(want, TOL),
                           r.CALLABLE + (r.TF1_BOTH[:1] if how == "times" and not scalar
                                         and name == "stacked_jacobian" else ()))
    for name, want in (("stacked_jacobian", np.eye(4).reshape(2, 2, 2, 2)),
                       ("per_element_gradients", np.ones((2, 2))),
                       ("batch_jacobian", np.stack([np.eye(2)] * 2))):
        yield BadInput("a variable as the target", f"variable-target-{name}",
                       lambda route, _, v, n=name: r.call(route, getattr(cg, n), lambda v: v, v),
                       Value(want), r.ROUTES + (r.TF1_BOTH if name == "stacked_jacobian" else ()),
                       variables=(r.X,))
    residual = _X64 @ [[1.0], [2.0]] - r.X[:, :1]
    yield BadInput("constant tensors as per-example weights", "tensor-weights",
                   lambda route, x: _tensor_weights(route, x),
                   Value([(2 * residual * r.X)[:, :, None]], TOL), r.CALLABLE + r.TF1_BOTH[:1])


def _tensor_weights(route, x):
    w = tf.constant([[1.0], [2.0]])
    return cg.per_example_gradients(lambda t, p: (t - p) ** 2, lambda v: tf.matmul(v, w), x,
                                    x[:, :1], weights=[w], compile=r.compiled(route))


def _unwatched(name, x, unconnected):
    with tf.GradientTape(persistent=True) as tape:
        y = x ** 3
    return getattr(cg, name)(y, x, tape=tape, unconnected_gradients=unconnected)


def _tapes_and_third_order():
    for unconnected in ("none", "zero"):
        for name in r.FIRST_ORDER:
            yield BadInput("a source the tape never watched", f"unwatched-{name}-{unconnected}",
                           lambda route, x, n=name, u=unconnected: _unwatched(n, x, u),
                           Error(cg.ModeError, name, (rf"{r.argument_of(name)} was not watched "
                                                      r"by the tape", r"tape\.watch\(x\)",
                                                      r"callable")),
                           r.TAPES + (r.TF1_TAPE if name == "stacked_jacobian" else ()))

    def inner(z):
        return tf.reduce_sum(cg.per_element_gradients(lambda w: w ** 4, z))  # Σ 4z³
    yield BadInput("third order", "third-order",
                   lambda route, x: r.call(route, cg.hessian, inner, x),
                   Value(r.jacobian_of_elementwise(24 * _X64), TOL),
                   r.CALLABLE + r.GRAPH_TENSOR + r.TF1_BOTH)


TABLE = (*_options(), *_returns_none(), *_value_options(), *estimators(_IN_TF1), *_unknown_rank(),
         *_composites(), *_foreign_graphs(), *mistakes(), *_memory(), *_dtypes(), *_shapes(),
         *_nan_and_inf(), *_integer_valued_ops(), *_python_ops(), *_repeated(),
         *_closures_and_variables(), *_tapes_and_third_order())
"""Every kind of bad or unusual input the two suites share, on the routes it runs on."""


def params(suite_modes):
    """`(case, route)` pytest params of every table entry on the routes of `suite_modes`."""
    return [pytest.param(case, route, id=f"{case.id}-{route}") for case in TABLE
            for route in case.routes if mode_of(route) in suite_modes]


def kinds(suite_modes, test="test_bad_input"):
    """The catalogue rows of the table's kinds that run in `suite_modes`: (kind, "value" or
    "error", the runner test, a regular expression its ids match, the modes)."""
    rows = {}
    for case in TABLE:
        where = [mode_of(route) for route in case.routes if mode_of(route) in suite_modes]
        if where:
            outcome = "error" if isinstance(case.gives, Error) else "value"
            ids, found = rows.setdefault(case.kind, (outcome, [], {}))[1:]
            ids.append(re.escape(case.id))
            found.update(dict.fromkeys(where))
    return tuple((kind, outcome, test, rf"^({'|'.join(ids)})-", tuple(found))
                 for kind, (outcome, ids, found) in rows.items())
