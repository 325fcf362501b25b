"""Bad and unusual input in a TF1 graph (v2 behaviour disabled: RefVariables, v1 control
flow): the TF1 subset of tests_tf2/test_bad_input.py, each kind with the exact right value
or a compat_grads error naming the function, the argument and what to do.

Routes: "tf1.callable" (a callable target) and "tf1.tensor" (the tensor it returns).
"""

import numpy as np
import pytest

import compat_grads as cg
from compat_grads import _jacobians, _stacking
from compat_grads._tf import tf
from compat_grads.testing import modes, tolerances

ROUTES = ("tf1.callable", "tf1.tensor")
X = np.array([[0.5, -1.0], [2.0, 1.5]], np.float32)
TOL = tolerances.TOLERANCE["float32"]
_SAME = object()


def run(build, *arrays, unknown_rank=False, variables=()):
    """`build(*placeholders, *variables)` in a new graph, run in a Session fed `arrays`."""
    arrays = [np.asarray(a) for a in arrays]
    with tf.Graph().as_default():
        feeds = [tf.compat.v1.placeholder(a.dtype, None if unknown_rank else a.shape)
                 for a in arrays]
        made = [tf.Variable(v) for v in variables]
        return modes.session_values(build(*feeds, *made), dict(zip(feeds, arrays)))


def call(route, function, f, x, *args, sources=_SAME, **options):
    """`function` with the callable `f` or with the tensor `f(x)`, w.r.t. `sources` (x)."""
    sources = x if sources is _SAME else sources
    target = f if route == "tf1.callable" else f(x)
    return function(target, sources, *args, **options)


def raises(error, function, *parts):
    """compat_grads.<function>'s error, its message holding `parts` in this order."""
    return pytest.raises(error, match=rf"(?s)compat_grads\.{function}: .*" + ".*".join(parts))


def square(x):
    return x ** 2


def cube_sum(x):
    return tf.reduce_sum(x ** 3)


def row_cube_sum(x):
    return tf.reduce_sum(x ** 3, axis=1)


def per_sample(blocks):
    return np.stack([np.diag(row) for row in np.asarray(blocks, np.float64)])


def diagonal(derivative):
    flat = np.asarray(derivative, np.float64).ravel()
    return np.diag(flat).reshape(derivative.shape * 2)


TARGET_OF = {"hessian": cube_sum, "batch_hessian": row_cube_sum}
MATERIALISING = ("stacked_jacobian", "batch_jacobian", "hessian", "batch_hessian")


BAD_OPTIONS = [  # id, option, value, error, what the message says it got
    ("bool-option-as-string", "independent", "False", TypeError, r"str 'False'"),
    ("compile-as-string", "compile", "False", TypeError, r"str 'False'"),
    ("chunk-size-list", "chunk_size", [2], TypeError, r"list \[2\]"),
    ("strategy-list", "strategy", ["reverse"], TypeError, r"list \['reverse'\]"),
    ("unconnected-list", "unconnected_gradients", ["zero"], TypeError, r"list \['zero'\]"),
    ("max-bytes-string", "max_bytes", "16GB", TypeError, r"str '16GB'"),
    ("chunk-size-zero", "chunk_size", 0, ValueError, r"got 0"),
]


@pytest.mark.parametrize("option, value, error, got", [case[1:] for case in BAD_OPTIONS],
                         ids=[case[0] for case in BAD_OPTIONS])
@pytest.mark.parametrize("name", ["batch_jacobian", "batch_hessian"])
@pytest.mark.parametrize("route", ROUTES)
def test_bad_option(route, name, option, value, error, got):
    with raises(error, name, rf"{option} must be", got, r"(Pass|Use) "):
        run(lambda x: call(route, getattr(cg, name), TARGET_OF.get(name, square), x,
                           **{option: value}), X)


@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients", "hessian",
                                  "batch_hessian", "jvp", "vjp", "hvp"])
def test_callable_returns_none(name):
    extra = (tf.ones_like,) if name in ("jvp", "vjp", "hvp") else ()

    def forgot_return(x):
        x ** 2  # noqa: B018 - the bug under test
    with raises(TypeError, name, r"the callable target returned None", r"return"):
        run(lambda x: getattr(cg, name)(forgot_return, x, *[e(x) for e in extra]), X)


@pytest.mark.parametrize("independent", [True, False], ids=["independent", "exact"])
@pytest.mark.parametrize("strategy", ["forward", "reverse", "loop"])
@pytest.mark.parametrize("route", ROUTES)
def test_unknown_rank_batch_jacobian(route, strategy, independent):
    out = run(lambda x: call(route, cg.batch_jacobian, tf.sin, x, strategy=strategy,
                             independent=independent), X, unknown_rank=True)
    np.testing.assert_allclose(out, per_sample(np.cos(X.astype(np.float64))), rtol=TOL,
                               atol=TOL)


@pytest.mark.parametrize("strategy", ["forward", "reverse", "loop"])
@pytest.mark.parametrize("route", ROUTES)
def test_unknown_rank_stacked_jacobian(route, strategy):
    out = run(lambda x: call(route, cg.stacked_jacobian, tf.sin, x, strategy=strategy), X,
              unknown_rank=True)
    np.testing.assert_allclose(out, diagonal(np.cos(X.astype(np.float64))), rtol=TOL,
                               atol=TOL)


@pytest.mark.parametrize("independent", [True, False], ids=["independent", "exact"])
@pytest.mark.parametrize("route", ROUTES)
def test_unknown_rank_batch_hessian(route, independent):
    out = run(lambda x: call(route, cg.batch_hessian, row_cube_sum, x,
                             independent=independent), X, unknown_rank=True)
    np.testing.assert_allclose(out, per_sample(6 * X.astype(np.float64)), rtol=TOL)


@pytest.mark.parametrize("route", ROUTES)
def test_unknown_rank_batch_hessian_of_more_than_one_scalar_per_sample(route):
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"compat_grads\.batch_hessian: target must hold one scalar per "
                             r"sample"):
        run(lambda x: call(route, cg.batch_hessian, square, x), X, unknown_rank=True)


@pytest.mark.parametrize("kind", ["ragged", "sparse"])
@pytest.mark.parametrize("where", ["target", "source"])
@pytest.mark.parametrize("route", ROUTES)
def test_ragged_or_sparse(route, where, kind):
    def make(x):
        if kind == "sparse":
            return tf.sparse.from_dense(x)
        return tf.RaggedTensor.from_row_lengths(tf.reshape(x, [-1]), [3, 1])

    def build(x):
        if where == "target":
            return call(route, cg.stacked_jacobian, make, x)
        reduce = tf.sparse.reduce_sum if kind == "sparse" else tf.reduce_sum
        return call(route, cg.stacked_jacobian, reduce, make(x))
    fix = r"to_tensor\(\)" if kind == "ragged" else r"tf\.sparse\.to_dense"
    with raises(TypeError, "stacked_jacobian", rf"{where}\w* (is|returned) a "
                r"(Ragged|Sparse)Tensor", r"dense tensors only", fix):
        run(build, X)


@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop"])
@pytest.mark.parametrize("route", ROUTES)
def test_gather_from_a_variable_gives_indexed_slices_densified(route, strategy):
    indices = [2, 0, 2]

    def build(_, v):
        gradient = tf.compat.v1.gradients(tf.gather(v, indices), v)[0]
        assert isinstance(gradient, tf.IndexedSlices)  # what the library must densify
        return call(route, cg.stacked_jacobian, lambda v: tf.gather(v, indices) * v[1], v,
                    strategy=strategy)
    want = np.zeros((3, 3))
    for row, index in enumerate(indices):
        want[row, index] += 2.0
        want[row, 1] += [1.0, 2.0, 3.0][index]
    np.testing.assert_array_equal(run(build, X, variables=[[1.0, 2.0, 3.0]]), want)


@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients", "hessian"])
@pytest.mark.parametrize("which", ["target", "sources"])
def test_two_graphs(which, name):
    with tf.Graph().as_default():
        other = tf.compat.v1.placeholder(tf.float32, [2, 2])
        other_target = cube_sum(other)

    def build(x):
        if which == "target":
            return getattr(cg, name)(other_target, x)
        return getattr(cg, name)(cube_sum(x), other)
    with raises(ValueError, name, rf"{which} is a tensor of another tf\.Graph", r"one graph",
                r"as_default\(\)"):
        run(build, X)


@pytest.fixture
def no_work(monkeypatch):
    """Stacking rows is where the work starts: reaching it fails the test."""
    def started(*args, **kwargs):
        raise AssertionError("the Jacobian was started")
    monkeypatch.setattr(_stacking, "stack", started)
    monkeypatch.setattr(_jacobians, "stack", started)


@pytest.mark.parametrize("name", MATERIALISING)
@pytest.mark.parametrize("route", ROUTES)
def test_jacobian_too_big_for_memory_fails_before_anything_is_built(route, name, no_work):
    huge = 200_000
    shape = [huge] if name in ("stacked_jacobian", "hessian") else [2, huge]
    f = TARGET_OF.get(name, square)

    def build(x):
        graph = tf.compat.v1.get_default_graph()
        before = len(graph.get_operations())
        f(x)
        forward, before = len(graph.get_operations()) - before, len(graph.get_operations())
        with raises(ValueError, name, r"the result would take \d{12,} bytes",
                    r"more than max_bytes=17179869184", r"chunk_size=", r"max_bytes="):
            call(route, getattr(cg, name), f, x)
        assert len(graph.get_operations()) - before <= forward
        return tf.constant(0.0)
    run(build, np.zeros(shape, np.float32))


@pytest.mark.parametrize("route", ROUTES)
def test_a_small_max_bytes_names_the_chunk_size_that_fits(route):
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    with raises(ValueError, "stacked_jacobian", r"192 bytes", r"chunk_size=1 fits"):
        run(lambda x: call(route, cg.stacked_jacobian, square, x, max_bytes=100), x)
    out = run(lambda x: call(route, cg.stacked_jacobian, square, x, max_bytes=100,
                             chunk_size=1), x)
    np.testing.assert_array_equal(out, np.diag(2 * x))


@pytest.mark.parametrize("dtype, fix", [(tf.int32, r"tf\.cast"),
                                        (tf.complex64, r"tf\.math\.real")],
                         ids=["int", "complex"])
@pytest.mark.parametrize("route", ROUTES)
def test_source_dtype_without_derivatives(route, dtype, fix):
    with raises(TypeError, "stacked_jacobian", r"sources must be floating-point", dtype.name,
                fix):
        run(lambda x: call(route, cg.stacked_jacobian, lambda s: x * 2, x,
                           sources=tf.cast(x, dtype)), X)


@pytest.mark.parametrize("route", ROUTES)
def test_integer_target(route):
    with raises(TypeError, "stacked_jacobian", r"target must have a floating-point dtype",
                r"int32", r"differentiate the float"):
        run(lambda x: call(route, cg.stacked_jacobian,
                           lambda x: tf.argmax(x, output_type=tf.int32), x), X)


@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop"])
@pytest.mark.parametrize("route", ROUTES)
def test_size_zero_source_and_target(route, strategy):
    out = run(lambda x: call(route, cg.stacked_jacobian, lambda x: x[:0] * 2, x,
                             strategy=strategy), np.ones([3], np.float32))
    assert out.shape == (0, 3)
    out = run(lambda x: call(route, cg.stacked_jacobian,
                             lambda x: tf.reduce_sum(x) + tf.ones([3]), x, strategy=strategy),
              np.zeros([0], np.float32))
    assert out.shape == (3, 0)


@pytest.mark.parametrize("source", [None, object()], ids=["None", "object"])
@pytest.mark.parametrize("route", ROUTES)
def test_source_that_is_not_a_tensor(route, source):
    with raises(TypeError, "stacked_jacobian", r"sources must be a tf\.Tensor",
                rf"got {type(source).__name__}", r"Pass the tensors"):
        run(lambda x: call(route, cg.stacked_jacobian, square, x, sources=source), X)


@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop"])
@pytest.mark.parametrize("route", ROUTES)
def test_nan_and_inf(route, strategy):
    nan = run(lambda x: call(route, cg.stacked_jacobian, square, x, strategy=strategy),
              np.array([np.nan], np.float32))
    assert np.isnan(nan[0, 0])
    inf = run(lambda x: call(route, cg.stacked_jacobian, tf.sqrt, x, strategy=strategy),
              np.array([0.0], np.float32))
    np.testing.assert_array_equal(inf, [[np.inf]])

    def build(a, b):
        return call(route, cg.stacked_jacobian, lambda s: 3.0 * s[0] + tf.stop_gradient(s[1]),
                    [a, b], strategy=strategy, unconnected_gradients="zero")
    da, db = run(build, np.array([1.0, 2.0], np.float32), np.array([np.nan, np.inf], np.float32))
    np.testing.assert_array_equal(da, 3.0 * np.eye(2))
    np.testing.assert_array_equal(db, np.zeros((2, 2)))


@pytest.mark.parametrize("route", ROUTES)
def test_integer_valued_op(route):
    x = np.array([1.5, -2.25, 3.0], np.float32)
    through = run(lambda x: call(route, cg.stacked_jacobian, lambda x: x * tf.floor(x), x), x)
    np.testing.assert_array_equal(through, np.diag(np.floor(x)))
    assert run(lambda x: call(route, cg.stacked_jacobian, tf.floor, x), x) is None
    zeros = run(lambda x: call(route, cg.stacked_jacobian, tf.floor, x,
                               unconnected_gradients="zero"), x)
    np.testing.assert_array_equal(zeros, np.zeros((3, 3)))


# ----------------------------------------------------------------------------------------
# A TF1 tf.while_loop in the target: TF1 cannot build its gradient inside another loop, but
# it can build the loop and its gradient together inside one. A callable target is run
# again for each row (a VectorizationWarning says so); a tensor target, and the gradient of
# the gradient forward mode needs, are DerivativeErrors.

def _v1_loop(x):
    """x³, elementwise, by a TF1 while_loop."""
    _, y = tf.compat.v1.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * x),
                                   (0, tf.ones_like(x)))
    return y


def _v1_loop_sum(x):
    return tf.reduce_sum(_v1_loop(x))


@pytest.mark.parametrize("strategy", ["auto", "reverse", "loop"])
@pytest.mark.parametrize("name", ["stacked_jacobian", "batch_jacobian"])
def test_v1_while_loop_in_a_callable_target(name, strategy):
    x = X.astype(np.float64)
    want = diagonal(3 * x ** 2) if name == "stacked_jacobian" else per_sample(3 * x ** 2)
    with pytest.warns(cg.VectorizationWarning, match=rf"{name}: the target runs a TF1 "
                      r"tf\.while_loop.*running the target again for each"):
        out = run(lambda x: getattr(cg, name)(_v1_loop, x, strategy=strategy), X)
    np.testing.assert_allclose(out, want, rtol=TOL)


def test_v1_while_loop_vjp():
    out = run(lambda x: cg.vjp(_v1_loop, x, tf.ones_like(x))[1], X)
    np.testing.assert_allclose(out, 3 * X.astype(np.float64) ** 2, rtol=TOL)


@pytest.mark.parametrize("strategy", ["auto", "reverse", "forward", "loop"])
@pytest.mark.parametrize("name", ["stacked_jacobian", "batch_jacobian"])
def test_v1_while_loop_in_a_tensor_target(name, strategy):
    with raises(cg.DerivativeError, name, r"the target runs a TF1 tf\.while_loop",
                r"needs it once per row", r"Pass the target as a callable"):
        run(lambda x: getattr(cg, name)(_v1_loop(x), x, strategy=strategy), X)


FORWARD_MODE_THROUGH_A_V1_LOOP = {  # TF1 has no gradient of a while_loop's gradient
    "stacked_jacobian-forward": lambda x: cg.stacked_jacobian(_v1_loop, x, strategy="forward"),
    "per_element_gradients": lambda x: cg.per_element_gradients(_v1_loop, x),
    "per_element_gradients-tensor": lambda x: cg.per_element_gradients(_v1_loop(x), x),
    "jvp": lambda x: cg.jvp(_v1_loop, x, tf.ones_like(x)),
    "hvp": lambda x: cg.hvp(_v1_loop_sum, x, tf.ones_like(x)),
    "hessian": lambda x: cg.hessian(_v1_loop_sum, x),
    "hessian-loop": lambda x: cg.hessian(_v1_loop_sum, x, strategy="loop"),
}


@pytest.mark.parametrize("case", FORWARD_MODE_THROUGH_A_V1_LOOP)
def test_v1_while_loop_forward_mode_and_second_order(case):
    name = case.split("-")[0]
    with raises(cg.DerivativeError, name, r"tf\.while_loop", r"(no second derivative|"
                r"differentiate the gradient of this target)", r"(reverse mode|differentiate "
                r"once)"):
        run(FORWARD_MODE_THROUGH_A_V1_LOOP[case], X)


# ----------------------------------------------------------------------------------------
# tf.py_function in a TF1 graph: a callable target runs again for each row; a tensor
# target is a DerivativeError; one product works.

def _through_python(x):
    return tf.py_function(lambda t: t ** 2, [x], tf.float32) * x


@pytest.mark.parametrize("strategy", ["auto", "reverse", "forward", "loop"])
def test_py_function_in_a_callable_target(strategy):
    with pytest.warns(cg.VectorizationWarning, match=r"tf\.py_function.*EagerPyFunc"):
        out = run(lambda x: cg.stacked_jacobian(_through_python, x, strategy=strategy), X)
    np.testing.assert_allclose(out, diagonal(3 * X.astype(np.float64) ** 2), rtol=TOL)


def test_py_function_in_a_tensor_target():
    with raises(cg.DerivativeError, "stacked_jacobian", r"tf\.py_function", r"EagerPyFunc",
                r"Pass the target as a callable"):
        run(lambda x: cg.stacked_jacobian(_through_python(x), x), X)


@pytest.mark.parametrize("route", ROUTES)
def test_py_function_with_one_product(route):
    out = run(lambda x: call(route, cg.per_element_gradients, _through_python, x), X)
    np.testing.assert_allclose(out, 3 * X.astype(np.float64) ** 2, rtol=TOL)


_TOTAL = lambda x: tf.reduce_sum(_through_python(x))  # noqa: E731


@pytest.mark.parametrize("route,case,strategy", [  # hvp takes a callable, no strategy
    *((route, case, strategy) for route in ROUTES
      for case in ("hessian", "hessian of a vector", "batch_hessian")
      for strategy in (None, "reverse", "forward", "loop")),
    ("tf1.callable", "hvp", None)])
def test_py_function_second_order(route, case, strategy):
    """Its gradient runs in Python, unrecorded: tf.gradients would give None (a scalar
    target) or leave that part of the Hessian out."""
    options = {} if strategy is None else {"strategy": strategy}
    name = case.split()[0]
    target = {"hessian": _TOTAL, "hessian of a vector": _through_python,
              "batch_hessian": lambda x: tf.reduce_sum(_through_python(x), axis=1),
              "hvp": _TOTAL}[case]
    extra = (tf.ones(X.shape),) if case == "hvp" else ()
    with raises(cg.DerivativeError, name, r"tf\.py_function", r"EagerPyFunc",
                r"no second derivative through it", r"tf\.custom_gradient"):
        run(lambda x: call(route, getattr(cg, name), target, x, *extra, **options), X)


# ----------------------------------------------------------------------------------------
# Repeated sources, a callable reading its source by closure, variables as targets,
# constant tensors as per-example weights, a tape that never watched the source.

@pytest.mark.parametrize("route", ROUTES)
def test_repeated_source_gets_the_total_derivative(route):
    def f(s):
        return s[0] * s[1] ** 2  # x³ when both are x
    x = X.astype(np.float64)
    for block in run(lambda x: call(route, cg.stacked_jacobian, f, [x, x]), X):
        np.testing.assert_allclose(block, diagonal(3 * x ** 2), rtol=TOL)
    for block in tf.nest.flatten(run(lambda x: call(
            route, cg.hessian, lambda s: tf.reduce_sum(f(s)), [x, x]), X)):
        np.testing.assert_allclose(block, diagonal(6 * x), rtol=TOL)


def test_callable_that_reads_its_source_by_closure():
    out = run(lambda x: cg.stacked_jacobian(lambda s: s * x, x), X)
    np.testing.assert_allclose(out, diagonal(2 * X.astype(np.float64)), rtol=TOL)


@pytest.mark.parametrize("route", ROUTES)
def test_variable_target_is_its_own_identity(route):
    out = run(lambda _, v: call(route, cg.stacked_jacobian, lambda v: v, v), X, variables=[X])
    np.testing.assert_array_equal(out, np.eye(4).reshape(2, 2, 2, 2))


def test_per_example_weights_that_are_tensors():
    def build(x):
        w = tf.constant([[1.0], [2.0]])
        return cg.per_example_gradients(lambda t, p: (t - p) ** 2, lambda v: tf.matmul(v, w),
                                        x, x[:, :1], weights=[w])
    (out,) = run(build, X)
    residual = X.astype(np.float64) @ [[1.0], [2.0]] - X[:, :1]
    np.testing.assert_allclose(out, (2 * residual * X)[:, :, None], rtol=TOL)


@pytest.mark.parametrize("unconnected", ["none", "zero"])
def test_tape_never_watched_the_source(unconnected):
    def build(x):
        with tf.GradientTape(persistent=True) as tape:
            y = x ** 3
        return cg.stacked_jacobian(y, x, tape=tape, unconnected_gradients=unconnected)
    with raises(cg.ModeError, "stacked_jacobian", r"sources was not watched by the tape",
                r"tape\.watch\(x\)"):
        run(build, X)


@pytest.mark.parametrize("route", ROUTES)
def test_third_order(route):
    def inner(z):
        return tf.reduce_sum(cg.per_element_gradients(lambda w: w ** 4, z))  # Σ 4z³
    out = run(lambda x: call(route, cg.hessian, inner, x), X)
    np.testing.assert_allclose(out, diagonal(24 * X.astype(np.float64)), rtol=TOL)


# ----------------------------------------------------------------------------------------
# The catalogue (as in tests_tf2/test_bad_input.py): each kind, what it must give, and the
# tests that run it (a regular expression their parameter ids match, when a test runs
# several kinds). Everything here runs in the TF1 mode.

KINDS = (
    *((f"option {option}={value!r}", "error", "test_bad_option", f"-{case}$")
      for case, option, value, *_ in BAD_OPTIONS),
    ("a callable that returns None", "error", "test_callable_returns_none"),
    ("unknown rank: batch_jacobian", "value", "test_unknown_rank_batch_jacobian"),
    ("unknown rank: stacked_jacobian", "value", "test_unknown_rank_stacked_jacobian"),
    ("unknown rank: batch_hessian", "value", "test_unknown_rank_batch_hessian"),
    ("unknown rank: not one scalar per sample (run time)", "error",
     "test_unknown_rank_batch_hessian_of_more_than_one_scalar_per_sample"),
    *((f"a {kind} {where}", "error", "test_ragged_or_sparse", f"-{where}-{kind}$")
      for where in ("target", "source") for kind in ("ragged", "sparse")),
    ("IndexedSlices gradients (gather from a variable)", "value",
     "test_gather_from_a_variable_gives_indexed_slices_densified"),
    ("a target from another graph", "error", "test_two_graphs", "^target-"),
    ("a source from another graph", "error", "test_two_graphs", "^sources-"),
    ("a Jacobian too big for memory", "error",
     "test_jacobian_too_big_for_memory_fails_before_anything_is_built"),
    ("rows in flight above max_bytes", "error",
     "test_a_small_max_bytes_names_the_chunk_size_that_fits"),
    ("a source of dtype int", "error", "test_source_dtype_without_derivatives", "-int$"),
    ("a source of dtype complex", "error", "test_source_dtype_without_derivatives",
     "-complex$"),
    ("a target of dtype int", "error", "test_integer_target"),
    ("a size-0 source", "value", "test_size_zero_source_and_target"),
    ("a size-0 target", "value", "test_size_zero_source_and_target"),
    ("a source that is None", "error", "test_source_that_is_not_a_tensor", "-None$"),
    ("a source that is object", "error", "test_source_that_is_not_a_tensor", "-object$"),
    ("NaN input", "value", "test_nan_and_inf"),
    ("an infinite derivative at a finite input", "value", "test_nan_and_inf"),
    ("NaN in the value but not in the derivative", "value", "test_nan_and_inf"),
    ("integer-valued op: floor", "value", "test_integer_valued_op"),
    ("a TF1 while_loop in a callable target", "value",
     "test_v1_while_loop_in_a_callable_target"),
    ("a TF1 while_loop: vjp", "value", "test_v1_while_loop_vjp"),
    ("a TF1 while_loop in a tensor target", "error", "test_v1_while_loop_in_a_tensor_target"),
    ("a TF1 while_loop: forward mode and second order", "error",
     "test_v1_while_loop_forward_mode_and_second_order"),
    ("tf.py_function in a callable target", "value", "test_py_function_in_a_callable_target"),
    ("tf.py_function in a tensor target", "error", "test_py_function_in_a_tensor_target"),
    ("tf.py_function with one product", "value", "test_py_function_with_one_product"),
    ("tf.py_function, second order", "error", "test_py_function_second_order"),
    ("one tensor twice in the sources", "value",
     "test_repeated_source_gets_the_total_derivative"),
    ("a callable that reads its source by closure", "value",
     "test_callable_that_reads_its_source_by_closure"),
    ("a variable as the target", "value", "test_variable_target_is_its_own_identity"),
    ("constant tensors as per-example weights", "value",
     "test_per_example_weights_that_are_tensors"),
    ("a source the tape never watched", "error", "test_tape_never_watched_the_source"),
    ("third order", "value", "test_third_order"),
)


def test_every_test_is_a_kind_of_the_catalogue():
    tests = {name for name in globals() if name.startswith("test_")}
    named = {kind[2] for kind in KINDS}
    assert tests - named == {"test_every_test_is_a_kind_of_the_catalogue"}
    assert named <= tests
    assert len({kind[0] for kind in KINDS}) == len(KINDS)
