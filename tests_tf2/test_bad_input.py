"""Bad and unusual input: each kind gets the exact right value or a compat_grads error that
names the function and the argument and says what to do, on every route where it can occur.

A route is `<mode>.<target>`: the mode is "eager", "function" (inside a tf.function) or
"v1graph" (a tf.Graph inside TF2, run in a Session); the target is a callable ("callable",
compiled and cached in eager mode, "uncompiled" with compile=False), a tensor ("tensor") or
an eager tensor with the tape that recorded it ("tape"). tests_tf1/test_bad_input_tf1.py
runs the TF1 subset in a TF1 process.
"""

import warnings

import numpy as np
import pytest

import compat_grads as cg
from compat_grads import _jacobians, _stacking
from compat_grads._tf import tf
from compat_grads.testing import modes, tolerances

CALLABLE = ("eager.callable", "eager.uncompiled", "function.callable", "v1graph.callable")
TENSOR = ("eager.tape", "function.tensor", "v1graph.tensor")
ROUTES = CALLABLE + TENSOR
GRAPHS = ("function.callable", "function.tensor", "v1graph.callable", "v1graph.tensor")
"""The routes where a rank or a batch size can be unknown while building."""
X = np.array([[0.5, -1.0], [2.0, 1.5]], np.float32)
TOL = tolerances.TOLERANCE["float32"]
_SAME = object()

FUNCTIONS = ("stacked_jacobian", "per_element_gradients", "batch_jacobian",
             "per_example_gradients", "hessian", "batch_hessian", "jvp", "vjp", "hvp")
MATERIALISING = ("stacked_jacobian", "batch_jacobian", "per_example_gradients", "hessian",
                 "batch_hessian")
TAKES = {
    "compile": FUNCTIONS,
    "jit_compile": FUNCTIONS,
    "independent": ("batch_jacobian", "per_example_gradients", "batch_hessian"),
    "strategy": MATERIALISING,
    "chunk_size": MATERIALISING,
    "max_bytes": MATERIALISING,
    "unconnected_gradients": MATERIALISING + ("per_element_gradients",),
}


def routes_of(name):
    """The routes `name` can be called on: tensor targets need tape= in eager mode, which
    second order cannot use; the model, jvp, vjp and hvp functions take callables only."""
    if name in ("per_example_gradients", "jvp", "vjp", "hvp"):
        return CALLABLE
    if name in ("hessian", "batch_hessian"):
        return CALLABLE + ("function.tensor", "v1graph.tensor")
    return ROUTES


def argument_of(name):
    """The public name of the sources argument of the function `name`."""
    return {"batch_jacobian": "source", "batch_hessian": "source", "jvp": "primals",
            "vjp": "primals", "hvp": "primals", "per_example_gradients": "weights"}.get(
                name, "sources")


def run(route, build, *arrays, unknown_rank=False, variables=()):
    """`build(*tensors, *variables)` in the route's mode, one input tensor per array and one
    variable per initial value in `variables`; numpy values out. With `unknown_rank` the
    inputs' rank is unknown while building (graph modes)."""
    arrays = [np.asarray(a) for a in arrays]
    mode = route.split(".")[0]
    if mode == "v1graph":
        with tf.Graph().as_default():
            feeds = [tf.compat.v1.placeholder(a.dtype, None if unknown_rank else a.shape)
                     for a in arrays]
            made = [tf.Variable(v) for v in variables]
            return modes.session_values(build(*feeds, *made), dict(zip(feeds, arrays)))
    tensors = [tf.constant(a) for a in arrays]
    made = [tf.Variable(v) for v in variables]  # a tf.function cannot create them twice
    if mode == "function":
        specs = [tf.TensorSpec(None if unknown_rank else a.shape, a.dtype) for a in arrays]
        return modes.to_numpy(tf.function(lambda *t: build(*t, *made), input_signature=specs,
                                          autograph=False)(*tensors))
    return modes.to_numpy(build(*tensors, *made))


def call(route, function, f, x, *args, sources=_SAME, **options):
    """`function` on the route: given the callable `f`, or the tensor `f(x)` (with the tape
    that recorded it on "eager.tape"), with respect to `sources` (default: x)."""
    sources = x if sources is _SAME else sources
    kind = route.split(".")[1]
    if kind == "uncompiled":
        options["compile"] = False
    if kind in ("callable", "uncompiled"):
        return function(f, sources, *args, **options)
    if kind == "tape":
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            target = f(x)
        return function(target, sources, *args, tape=tape, **options)
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


def standard(name, route, x, variable=None, **options):
    """A valid call of the public function `name` on the route, with `options` added."""
    function = getattr(cg, name)
    if name == "per_example_gradients":
        w = tf.Variable([[1.0], [2.0]]) if variable is None else variable
        if route.endswith("uncompiled"):
            options["compile"] = False
        return function(lambda y_true, y_pred: (y_true - y_pred) ** 2,
                        lambda v: tf.matmul(v, w), x, x[:, :1], weights=[w], **options)
    if name in ("jvp", "vjp", "hvp"):
        f = cube_sum if name == "hvp" else square
        return call(route, lambda f, x, **kw: function(f, x, tf.ones_like(x), **kw), f, x,
                    **options)
    f = {"hessian": cube_sum, "batch_hessian": row_cube_sum}.get(name, square)
    return call(route, function, f, x, **options)


def jacobian_of_elementwise(derivative):
    """The analytic Jacobian `x.shape + x.shape` of an elementwise function."""
    flat = np.asarray(derivative, np.float64).ravel()
    return np.diag(flat).reshape(derivative.shape * 2)


def per_sample(blocks):
    """`[b] + d + d` per-sample blocks of a `[b, d]` elementwise derivative."""
    return np.stack([np.diag(row) for row in np.asarray(blocks, np.float64)])


# ----------------------------------------------------------------------------------------
# Options: strictly typed, checked before anything else (the eager cache key included).

BAD_OPTIONS = [  # id, option, value, error, what the message says it got, the fix
    ("bool-option-as-string", "independent", "False", TypeError, r"str 'False'",
     r"Pass independent=True or independent=False"),
    ("compile-as-string", "compile", "False", TypeError, r"str 'False'",
     r"Pass compile=True or compile=False"),
    ("jit-compile-as-int", "jit_compile", 1, TypeError, r"int 1",
     r"Pass jit_compile=True or jit_compile=False"),
    ("chunk-size-list", "chunk_size", [2], TypeError, r"list \[2\]", r"Pass how many rows"),
    ("chunk-size-float", "chunk_size", 2.0, TypeError, r"float 2\.0", r"Python int"),
    ("chunk-size-zero", "chunk_size", 0, ValueError, r"got 0", r"at least 1"),
    ("strategy-list", "strategy", ["reverse"], TypeError, r"list \['reverse'\]",
     r"Use 'auto'.*not a list"),
    ("strategy-misspelt", "strategy", "Reverse", ValueError, r"'Reverse'", r"Use 'auto'"),
    ("unconnected-list", "unconnected_gradients", ["zero"], TypeError, r"list \['zero'\]",
     r"Use 'none'.*'zero'"),
    ("unconnected-none", "unconnected_gradients", None, TypeError, r"NoneType",
     r"Use 'none'"),
    ("max-bytes-string", "max_bytes", "16GB", TypeError, r"str '16GB'",
     r"Pass the most memory"),
    ("max-bytes-negative", "max_bytes", -1, ValueError, r"got -1", r"at least 1"),
]


def _option_params():
    """Each bad option on each function that takes it, on each route of the function (but
    compile= on the route that sets it)."""
    return [pytest.param(name, route, option, value, error, got, fix,
                         id=f"{case}-{name}-{route}")
            for case, option, value, error, got, fix in BAD_OPTIONS
            for name in TAKES[option] for route in routes_of(name)
            if not (option == "compile" and route == "eager.uncompiled")]


@pytest.mark.parametrize("name, route, option, value, error, got, fix", _option_params())
def test_bad_option(name, route, option, value, error, got, fix):
    with raises(error, name, rf"{option} must be", got, fix):
        run(route, lambda x, w: standard(name, route, x, w, **{option: value}), X,
            variables=[[[1.0], [2.0]]])


@pytest.mark.parametrize("route", CALLABLE)
def test_numpy_bool_option_counts_as_a_bool(route):
    out = run(route, lambda x: standard("batch_jacobian", route, x, independent=np.False_), X)
    np.testing.assert_allclose(out, per_sample(2 * X), rtol=TOL)


@pytest.mark.parametrize("route", CALLABLE)
def test_loss_fn_not_callable(route):
    with raises(TypeError, "per_example_gradients", r"loss_fn must be callable", r"dict",
                r"Pass a loss function"):
        run(route, lambda x, w: cg.per_example_gradients(
            {"loss": "mse"}, lambda v: v * w, x, x, weights=[w],
            compile=not route.endswith("uncompiled")), X, variables=[1.0])


@pytest.mark.parametrize("name", ("stacked_jacobian", "per_element_gradients",
                                  "batch_jacobian"))
@pytest.mark.parametrize("route", TENSOR)
def test_tape_of_the_wrong_type(name, route):
    with raises(TypeError, name, r"tape must be a tf\.GradientTape", r"got str",
                r"Pass the GradientTape"):
        run(route, lambda x: getattr(cg, name)(square(x), x, tape="tape"), X)


# ----------------------------------------------------------------------------------------
# Callables that return None (a forgotten `return`).

def forgot_return(x):
    x ** 2  # noqa: B018 - the bug under test


@pytest.mark.parametrize("name, route", [pytest.param(n, r, id=f"{n}-{r}") for n in FUNCTIONS
                                         if n != "per_example_gradients" for r in CALLABLE])
def test_callable_returns_none(name, route):
    function = getattr(cg, name)
    extra = (tf.ones_like,) if name in ("jvp", "vjp", "hvp") else ()

    def build(x):
        return call(route, lambda f, x, **kw: function(f, x, *[e(x) for e in extra], **kw),
                    forgot_return, x)
    with raises(TypeError, name, r"the callable target returned None", r"return"):
        run(route, build, X)


@pytest.mark.parametrize("route", CALLABLE)
def test_callable_returns_none_inside_a_nest(route):
    with raises(TypeError, "jvp", r"the callable target returned None", r"return"):
        run(route, lambda x: call(route, lambda f, x, **kw: cg.jvp(f, x, x, **kw),
                                  lambda x: [x, None], x), X)


@pytest.mark.parametrize("which", ["model", "loss_fn"])
@pytest.mark.parametrize("route", CALLABLE)
def test_model_or_loss_returns_none(route, which):
    def build(x, w):
        model = (lambda v: None) if which == "model" else (lambda v: tf.matmul(v, w))
        loss = (lambda t, p: None) if which == "loss_fn" else (lambda t, p: (t - p) ** 2)
        return cg.per_example_gradients(loss, model, x, x[:, :1], weights=[w],
                                        compile=not route.endswith("uncompiled"))
    with raises(TypeError, "per_example_gradients", rf"{which} returned None", r"return"):
        run(route, build, X, variables=[[[1.0], [2.0]]])


# ----------------------------------------------------------------------------------------
# Unknown rank while building (TensorSpec(None), placeholder(shape=None)): exact values.

@pytest.mark.parametrize("strategy", ["forward", "reverse", "loop"])
@pytest.mark.parametrize("route", GRAPHS)
def test_unknown_rank_stacked_jacobian(route, strategy):
    out = run(route, lambda x: call(route, cg.stacked_jacobian, tf.sin, x, strategy=strategy),
              X, unknown_rank=True)
    np.testing.assert_allclose(out, jacobian_of_elementwise(np.cos(X.astype(np.float64))),
                               rtol=TOL, atol=TOL)


@pytest.mark.parametrize("independent", [True, False], ids=["independent", "exact"])
@pytest.mark.parametrize("strategy", ["forward", "reverse"])
@pytest.mark.parametrize("route", GRAPHS)
def test_unknown_rank_batch_jacobian(route, strategy, independent):
    out = run(route, lambda x: call(route, cg.batch_jacobian, tf.sin, x, strategy=strategy,
                                    independent=independent), X, unknown_rank=True)
    np.testing.assert_allclose(out, per_sample(np.cos(X.astype(np.float64))), rtol=TOL,
                               atol=TOL)


@pytest.mark.parametrize("independent", [True, False], ids=["independent", "exact"])
@pytest.mark.parametrize("route", GRAPHS)
def test_unknown_rank_batch_hessian(route, independent):
    out = run(route, lambda x: call(route, cg.batch_hessian, row_cube_sum, x,
                                    independent=independent), X, unknown_rank=True)
    np.testing.assert_allclose(out, per_sample(6 * X.astype(np.float64)), rtol=TOL)


@pytest.mark.parametrize("strategy", ["forward", "reverse"])
@pytest.mark.parametrize("route", GRAPHS)
def test_unknown_rank_hessian(route, strategy):
    out = run(route, lambda x: call(route, cg.hessian, cube_sum, x, strategy=strategy), X,
              unknown_rank=True)
    np.testing.assert_allclose(out, jacobian_of_elementwise(6 * X.astype(np.float64)),
                               rtol=TOL)


@pytest.mark.parametrize("route", GRAPHS)
def test_unknown_rank_per_element_gradients(route):
    out = run(route, lambda x: call(route, cg.per_element_gradients, tf.sin, x), X,
              unknown_rank=True)
    np.testing.assert_allclose(out, np.cos(X.astype(np.float64)), rtol=TOL)


UNKNOWN_RANK_PRODUCTS = {  # name: (call, analytic value at X)
    "jvp": (lambda x: cg.jvp(tf.sin, x, tf.ones_like(x))[1], lambda x: np.cos(x)),
    "vjp": (lambda x: cg.vjp(tf.sin, x, tf.ones_like(x))[1], lambda x: np.cos(x)),
    "hvp": (lambda x: cg.hvp(cube_sum, x, tf.ones_like(x)), lambda x: 6 * x),
    "stacked_jacobian-chunked": (
        lambda x: cg.stacked_jacobian(tf.sin, x, chunk_size=1),
        lambda x: jacobian_of_elementwise(np.cos(x))),
    "hessian-loop": (lambda x: cg.hessian(cube_sum, x, strategy="loop"),
                     lambda x: jacobian_of_elementwise(6 * x)),
}


@pytest.mark.parametrize("name", UNKNOWN_RANK_PRODUCTS)
@pytest.mark.parametrize("mode", ["function", "v1graph"])
def test_unknown_rank_products_and_chunks(mode, name):
    compute, analytic = UNKNOWN_RANK_PRODUCTS[name]
    out = run(f"{mode}.callable", compute, X, unknown_rank=True)
    np.testing.assert_allclose(out, analytic(X.astype(np.float64)), rtol=TOL, atol=TOL)


@pytest.mark.parametrize("independent", [True, False], ids=["independent", "exact"])
@pytest.mark.parametrize("mode", ["function", "v1graph"])
def test_unknown_rank_per_example_gradients(mode, independent):
    def build(x, w):
        return cg.per_example_gradients(lambda t, p: (t - p) ** 2, lambda v: tf.matmul(v, w),
                                        x, x[:, :1], weights=w, independent=independent)
    w = np.array([[1.0], [2.0]], np.float32)
    out = run(f"{mode}.callable", build, X, unknown_rank=True, variables=[w])
    residual = X.astype(np.float64) @ w - X[:, :1]  # d (x·w - y)² / dw = 2 (x·w - y) x
    np.testing.assert_allclose(out, (2 * residual * X)[:, :, None], rtol=TOL)


@pytest.mark.parametrize("route", GRAPHS)
def test_unknown_rank_batch_hessian_of_more_than_one_scalar_per_sample(route):
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"compat_grads\.batch_hessian: target must hold one scalar per "
                             r"sample, shape \(b,\) or \(b, 1\)"):
        run(route, lambda x: call(route, cg.batch_hessian, square, x), X, unknown_rank=True)


@pytest.mark.parametrize("route", GRAPHS)
def test_unknown_rank_scalar_fed_to_batch_jacobian(route):
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"compat_grads\.batch_jacobian: (target|source) needs a leading "
                             r"batch dimension"):
        run(route, lambda x: call(route, cg.batch_jacobian, tf.sin, x), np.float32(1.0),
            unknown_rank=True)


# ----------------------------------------------------------------------------------------
# Ragged, sparse and IndexedSlices: dense tensors only, with the conversion to use.

def _ragged(x):
    return tf.RaggedTensor.from_row_lengths(tf.reshape(x, [-1]), [3, 1])


def _sparse(x):
    return tf.sparse.from_dense(x)


@pytest.mark.parametrize("make, fix", [(_ragged, r"to_tensor\(\).*flat_values"),
                                       (_sparse, r"tf\.sparse\.to_dense.*values")],
                         ids=["ragged", "sparse"])
@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients",
                                  "batch_jacobian"])
@pytest.mark.parametrize("route", ROUTES)
def test_ragged_or_sparse_target(route, name, make, fix):
    with raises(TypeError, name, r"target (is|returned) a (Ragged|Sparse)Tensor",
                r"dense tensors only", fix):
        run(route, lambda x: call(route, getattr(cg, name), make, x), X)


@pytest.mark.parametrize("make, fix", [(_ragged, r"x\.to_tensor\(\).*with_flat_values"),
                                       (_sparse, r"tf\.sparse\.to_dense\(x\).*SparseTensor")],
                         ids=["ragged", "sparse"])
@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients", "hessian"])
@pytest.mark.parametrize("route", CALLABLE + ("function.tensor", "v1graph.tensor"))
def test_ragged_or_sparse_source(route, name, make, fix):
    def build(x):
        composite = make(x)
        f = tf.sparse.reduce_sum if make is _sparse else tf.reduce_sum
        return call(route, getattr(cg, name), f, composite)
    with raises(TypeError, name, r"sources is a (Ragged|Sparse)Tensor", r"dense tensors only",
                fix):
        run(route, build, X)


@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop"])
@pytest.mark.parametrize("route", ROUTES)
def test_gather_from_a_variable_gives_indexed_slices_densified(route, strategy):
    """tf.gather on a variable has an IndexedSlices gradient; repeated indices add up."""
    indices = [2, 0, 2]

    def build(_, v):
        return call(route, cg.stacked_jacobian, lambda v: tf.gather(v, indices) * v[1], v,
                    strategy=strategy)
    want = np.zeros((3, 3))
    for row, index in enumerate(indices):
        want[row, index] += 2.0  # d(v[i] * v[1]) / dv[i] = v[1]
        want[row, 1] += [1.0, 2.0, 3.0][index]  # and / dv[1] = v[i]
    np.testing.assert_array_equal(run(route, build, X, variables=[[1.0, 2.0, 3.0]]), want)


# ----------------------------------------------------------------------------------------
# Tensors of another graph, and graph tensors used eagerly after their as_default() block.

def _foreign_placeholder():
    """A placeholder of another graph, and a scalar target computed from it there."""
    with tf.Graph().as_default():
        other = tf.compat.v1.placeholder(tf.float32, [2, 2])
        return other, cube_sum(other)


@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients",
                                  "batch_jacobian"])
@pytest.mark.parametrize("route", GRAPHS)
def test_source_from_another_graph(route, name):
    other, _ = _foreign_placeholder()
    if route.endswith("tensor"):
        def build(x):
            return getattr(cg, name)(square(x), other)
    else:
        def build(x):
            return getattr(cg, name)(square, other)
    with raises(ValueError, name, rf"{argument_of(name)} is a tensor of another tf\.Graph",
                r"one graph", r"as_default\(\)"):
        run(route, build, X)


@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients", "hessian"])
def test_target_from_another_graph(name):
    _, target = _foreign_placeholder()
    with raises(ValueError, name, r"target is a tensor of another tf\.Graph", r"one graph"):
        run("v1graph.tensor", lambda x: getattr(cg, name)(target, x), X)


@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients",
                                  "batch_jacobian", "hessian"])
@pytest.mark.parametrize("route", ["eager.callable", "eager.uncompiled", "eager.tensor"])
def test_graph_tensors_used_eagerly_after_their_block(route, name):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2])
        y = tf.reduce_sum(x ** 3)
    what = "target" if route == "eager.tensor" else argument_of(name)
    with raises(cg.ModeError, name, rf"{what} is a graph tensor", r"runs eagerly",
                r"not the default one", r"inside `with graph\.as_default\(\):`"):
        if route == "eager.tensor":
            getattr(cg, name)(y, x)
        else:
            getattr(cg, name)(cube_sum, x, compile=route == "eager.callable")


# ----------------------------------------------------------------------------------------
# A Jacobian that cannot fit: refused at once, before anything is built or run.

@pytest.fixture
def no_work(monkeypatch):
    """Stacking rows is where the work (and the memory) starts: here it fails the test, so a
    missing check never allocates anything."""
    def started(*args, **kwargs):
        raise AssertionError("the Jacobian was started")
    monkeypatch.setattr(_stacking, "stack", started)
    monkeypatch.setattr(_jacobians, "stack", started)


HUGE = 200_000  # a 200000 x 200000 float32 Jacobian: 160 GB


def _huge_target(name, w):
    """The target of the huge case of `name`; `w` holds the per-example model's weights."""
    if name == "per_example_gradients":
        return lambda v: v * tf.reduce_sum(w)
    return {"hessian": cube_sum, "batch_hessian": row_cube_sum}.get(name, square)


def _huge_call(name, route, x, w):
    f = _huge_target(name, w)
    if name == "per_example_gradients":  # 100000 examples x 200000 weights: 80 GB
        return cg.per_example_gradients(lambda t, p: (t - p) ** 2, f, x, x, weights=[w],
                                        compile=not route.endswith("uncompiled"))
    return call(route, getattr(cg, name), f, x)


@pytest.mark.parametrize("name, route", [pytest.param(n, r, id=f"{n}-{r}") for n in MATERIALISING
                                         for r in routes_of(n)])
def test_jacobian_too_big_for_memory_fails_before_anything_is_built(name, route, no_work):
    shape = {"stacked_jacobian": [HUGE], "hessian": [HUGE],
             "per_example_gradients": [HUGE // 2, 1]}.get(name, [2, HUGE])

    def build(x, w):
        graph = None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()

        def ops():
            return len(graph.get_operations()) if graph else 0
        before = ops()
        _huge_target(name, w)(x)
        forward, before = ops() - before, ops()  # the ops of one forward pass
        with raises(ValueError, name, r"the result would take \d{11,} bytes", r"in all, more "
                    r"than max_bytes=17179869184 \(16\.0 GiB\)", r"chunk_size=", r"max_bytes="):
            _huge_call(name, route, x, w)
        assert ops() - before <= forward  # at most the forward pass was built
        return tf.constant(0.0)
    run(route, build, np.zeros(shape, np.float32), variables=[np.zeros(HUGE, np.float32)])


@pytest.mark.parametrize("route", ROUTES)
def test_a_small_max_bytes_names_the_chunk_size_that_fits(route):
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)  # result 64 bytes, 4 rows of 32 at once
    with raises(ValueError, "stacked_jacobian", r"result would take 64 bytes", r"192 bytes",
                r"max_bytes=100",
                r"chunk_size=1 fits"):
        run(route, lambda x: call(route, cg.stacked_jacobian, square, x, max_bytes=100), x)
    for options in ({"max_bytes": 100, "chunk_size": 1}, {"max_bytes": None}):
        out = run(route, lambda x, options=options: call(route, cg.stacked_jacobian, square,
                                                         x, **options), x)
        np.testing.assert_array_equal(out, np.diag(2 * x))


# ----------------------------------------------------------------------------------------
# Dtypes.

@pytest.mark.parametrize("dtype, fix", [
    (tf.int32, r"tf\.cast\(x, tf\.float32\)"), (tf.string, r"A string tensor"),
    (tf.complex64, r"tf\.math\.real, tf\.math\.imag"), (tf.bool, r"tf\.cast")],
    ids=["int", "string", "complex", "bool"])
@pytest.mark.parametrize("route", ROUTES)
def test_source_dtype_without_derivatives(route, dtype, fix):
    def build(x):
        source = tf.strings.as_string(x) if dtype == tf.string else tf.cast(x, dtype)
        return call(route, cg.stacked_jacobian, lambda s: x * 2, source)
    with raises(TypeError, "stacked_jacobian", r"sources must be floating-point",
                rf"{dtype.name}", fix):
        run(route, build, X)


@pytest.mark.parametrize("make, dtype, fix", [
    (lambda x: tf.argmax(x, output_type=tf.int32), "int32", r"differentiate the float"),
    (lambda x: tf.complex(x, x), "complex64", r"tf\.math\.real")], ids=["int", "complex"])
@pytest.mark.parametrize("route", ROUTES)
def test_target_dtype_without_derivatives(route, make, dtype, fix):
    with raises(TypeError, "stacked_jacobian", r"target must have a floating-point dtype",
                dtype, fix):
        run(route, lambda x: call(route, cg.stacked_jacobian, make, x), X)


@pytest.mark.parametrize("route", ROUTES)
def test_mixed_float_dtypes_each_block_in_its_sources_dtype(route):
    def build(x):
        a, b = tf.cast(x[0], tf.float16), tf.cast(x[1], tf.float64)
        f = lambda s: tf.cast(s[0], tf.float64) * s[1]  # noqa: E731
        return call(route, cg.stacked_jacobian, f, [a, b])
    out = run(route, build, X)
    assert [o.dtype for o in out] == [np.float16, np.float64]
    x = X.astype(np.float64)
    np.testing.assert_array_equal(out[0], np.diag(x[1]).astype(np.float16))
    np.testing.assert_array_equal(out[1], np.diag(x[0].astype(np.float16).astype(np.float64)))


@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop"])
@pytest.mark.parametrize("route", ROUTES)
def test_float64_sources_stay_float64(route, strategy):
    out = run(route, lambda x: call(route, cg.stacked_jacobian, tf.sin, x, strategy=strategy),
              X.astype(np.float64))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, jacobian_of_elementwise(np.cos(X.astype(np.float64))),
                               rtol=1e-15, atol=1e-15)


# ----------------------------------------------------------------------------------------
# Shapes: size-0 dimensions, batches that do not match, no batch axis.

@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop"])
@pytest.mark.parametrize("route", ROUTES)
def test_size_zero_source(route, strategy):
    out = run(route, lambda x: call(route, cg.stacked_jacobian,
                                    lambda x: tf.reduce_sum(x) + tf.ones([3]), x,
                                    strategy=strategy), np.zeros([0], np.float32))
    assert out.shape == (3, 0) and out.dtype == np.float32


@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop"])
@pytest.mark.parametrize("route", ROUTES)
def test_size_zero_target(route, strategy):
    out = run(route, lambda x: call(route, cg.stacked_jacobian, lambda x: x[:0] * 2, x,
                                    strategy=strategy), np.ones([3], np.float32))
    assert out.shape == (0, 3)


@pytest.mark.parametrize("name", ["batch_jacobian", "batch_hessian"])
@pytest.mark.parametrize("route", CALLABLE + ("function.tensor", "v1graph.tensor"))
def test_size_zero_batch(route, name):
    f = row_cube_sum if name == "batch_hessian" else square
    out = run(route, lambda x: call(route, getattr(cg, name), f, x,
                                    unconnected_gradients="zero"), np.zeros([0, 2], np.float32))
    assert out.shape == (0, 2, 2)


@pytest.mark.parametrize("name", ["batch_jacobian", "batch_hessian"])
@pytest.mark.parametrize("route", CALLABLE + ("function.tensor", "v1graph.tensor"))
def test_batch_sizes_differ(route, name):
    def f(x):
        return tf.reduce_sum(tf.tile(x, [2, 1])[:3], axis=1)
    with raises(ValueError, name, r"target and source must have the same batch size",
                r"\(3,\)", r"\(2, 2\)", r"Pass the batched input"):
        run(route, lambda x: call(route, getattr(cg, name), f, x), X)


@pytest.mark.parametrize("route", ROUTES)
def test_scalar_source_for_batch_jacobian(route):
    with raises(ValueError, "batch_jacobian", r"source needs a leading batch dimension",
                r"scalar", r"stacked_jacobian"):
        run(route, lambda x: call(route, cg.batch_jacobian, lambda x: tf.stack([x, x]), x[0, 0]),
            X)


# ----------------------------------------------------------------------------------------
# Not tensors: None, Python objects, lists where one tensor is needed.

@pytest.mark.parametrize("source", [None, object(), "x"], ids=["None", "object", "str"])
@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients", "hessian"])
@pytest.mark.parametrize("route", CALLABLE + ("function.tensor", "v1graph.tensor"))
def test_source_that_is_not_a_tensor(route, name, source):
    with raises(TypeError, name, r"sources must be a tf\.Tensor or tf\.Variable",
                rf"got {type(source).__name__}", r"Pass the tensors"):
        run(route, lambda x: call(route, getattr(cg, name), cube_sum, x, sources=source), X)


@pytest.mark.parametrize("target", [None, object(), 3.0], ids=["None", "object", "float"])
@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients",
                                  "batch_jacobian"])
@pytest.mark.parametrize("mode", ["eager", "function", "v1graph"])
def test_target_that_is_not_a_tensor(mode, name, target):
    with raises(TypeError, name, r"target must be a tf\.Tensor or a callable",
                rf"target is {type(target).__name__}", r"Pass the tensor"):
        run(f"{mode}.tensor", lambda x: getattr(cg, name)(target, x), X)


@pytest.mark.parametrize("route", TENSOR)
def test_list_of_tensors_as_target(route):
    def build(x):
        return call(route, cg.stacked_jacobian, lambda x: [x[0], x[1]], x)
    with raises(TypeError, "stacked_jacobian", r"target must be a tf\.Tensor", r"list",
                r"tf\.stack"):
        run(route, build, X)


@pytest.mark.parametrize("name", ["batch_jacobian", "batch_hessian"])
@pytest.mark.parametrize("route", CALLABLE)
def test_list_of_sources_where_one_tensor_is_needed(route, name):
    with raises(TypeError, name, r"source must be one tensor or variable",
                r"got a list of 2", r"stacked_jacobian"):
        run(route, lambda x: call(route, getattr(cg, name), lambda s: s[0] * s[1], [x, x]), X)


@pytest.mark.parametrize("name", ["jvp", "vjp", "hvp", "per_example_gradients"])
@pytest.mark.parametrize("route", CALLABLE)
def test_bad_leaf_named_by_its_argument(route, name):
    """jvp, vjp and hvp call their sources primals, per_example_gradients weights."""
    if name == "per_example_gradients":
        def build(x):
            return cg.per_example_gradients(lambda t, p: (t - p) ** 2, square, x, x,
                                            weights=["w"],
                                            compile=not route.endswith("uncompiled"))
        problem = r"weights\[0\] must be a tf\.Tensor or tf\.Variable"
    else:
        def build(x):
            return call(route, lambda f, x, **kw: getattr(cg, name)(f, x, x, **kw), cube_sum,
                        tf.cast(x, tf.int32))
        problem = r"primals must be floating-point"
    with raises(TypeError, name, problem, r"(tf\.cast|Pass the tensors)"):
        run(route, build, X)


# ----------------------------------------------------------------------------------------
# NaN and Inf: where the derivative involves them they come out; elsewhere they do not.

@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop"])
@pytest.mark.parametrize("route", ROUTES)
def test_nan_input_gives_nan_derivative(route, strategy):
    out = run(route, lambda x: call(route, cg.stacked_jacobian, square, x, strategy=strategy),
              np.array([np.nan], np.float32))
    assert out.shape == (1, 1) and np.isnan(out[0, 0])


@pytest.mark.parametrize("route", ROUTES)
def test_inf_derivative_from_a_finite_input(route):
    out = run(route, lambda x: call(route, cg.stacked_jacobian, tf.sqrt, x),
              np.array([0.0], np.float32))
    np.testing.assert_array_equal(out, [[np.inf]])


@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop"])
@pytest.mark.parametrize("route", ROUTES)
def test_nan_in_the_value_but_not_in_the_derivative(route, strategy):
    """y = 3a + stop_gradient(b) with NaN in b: dy/da is exactly 3 I, dy/db zeros."""
    def build(a, b):
        return call(route, cg.stacked_jacobian, lambda s: 3.0 * s[0] + tf.stop_gradient(s[1]),
                    [a, b], strategy=strategy, unconnected_gradients="zero")
    da, db = run(route, build, np.array([1.0, 2.0], np.float32),
                 np.array([np.nan, np.inf], np.float32))
    np.testing.assert_array_equal(da, 3.0 * np.eye(2))
    np.testing.assert_array_equal(db, np.zeros((2, 2)))


@pytest.mark.parametrize("route", ROUTES)
def test_nan_in_an_unconnected_source(route):
    def build(a, b):
        return call(route, cg.per_element_gradients, lambda s: s[0] ** 2, [a, b],
                    unconnected_gradients="zero")
    da, db = run(route, build, np.array([1.0, 2.0], np.float32),
                 np.array([np.nan], np.float32))
    np.testing.assert_array_equal(da, [2.0, 4.0])
    np.testing.assert_array_equal(db, [0.0, 0.0])


# ----------------------------------------------------------------------------------------
# Integer-valued ops: piecewise constant, so derivative zero (TensorFlow: not connected).

@pytest.mark.parametrize("op, connected", [
    (tf.floor, False), (tf.round, False), (tf.sign, True),
    (lambda x: tf.cast(tf.cast(x, tf.int32), tf.float32), False)],
    ids=["floor", "round", "sign", "int-cast"])
@pytest.mark.parametrize("route", ROUTES)
def test_integer_valued_op(route, op, connected):
    """Floor, round and a cast through int have no gradient in TensorFlow (None unless
    unconnected_gradients="zero"); sign has a registered zero gradient."""
    x = np.array([1.5, -2.25, 3.0], np.float32)
    through = run(route, lambda x: call(route, cg.stacked_jacobian, lambda x: x * op(x), x), x)
    np.testing.assert_array_equal(through, np.diag(op(x).numpy()))  # op(x) acts as a constant
    alone = [run(route, lambda x, u=u: call(route, cg.stacked_jacobian, op, x,
                                            unconnected_gradients=u), x)
             for u in ("none", "zero")]
    if connected:
        np.testing.assert_array_equal(alone[0], np.zeros((3, 3)))
    else:
        assert alone[0] is None
    np.testing.assert_array_equal(alone[1], np.zeros((3, 3)))


# ----------------------------------------------------------------------------------------
# Tape misuse in eager mode.

@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients",
                                  "batch_jacobian"])
def test_eager_tensor_without_its_tape(name):
    x = tf.constant(X)
    with raises(cg.ModeError, name, r"target is an eager tensor, but no tape was given",
                r"tape=", r"callable"):
        getattr(cg, name)(square(x), x)


@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients",
                                  "batch_jacobian"])
def test_spent_non_persistent_tape(name):
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = square(x)
    tape.gradient(y, x)
    with raises(RuntimeError, name, r"the tape has no record", r"persistent=True"):
        getattr(cg, name)(y, x, tape=tape)


# ----------------------------------------------------------------------------------------
# Tape misuse: a source the tape never watched, a target another tape recorded. TensorFlow
# gives None (or zeros) for both, the same as for a source the target does not depend on;
# compat_grads raises, and unconnected_gradients="zero" does not hide it. Tapes in eager
# code, in a tf.function and in a v1 Graph.

TAPE_MODES = ("eager", "function", "v1graph")


def _spacer(x):
    """A target computed from x, recorded or not, as each test arranges."""
    return x ** 3


@pytest.mark.parametrize("unconnected", ["none", "zero"])
@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients",
                                  "batch_jacobian"])
@pytest.mark.parametrize("mode", TAPE_MODES)
def test_tape_never_watched_the_source(mode, name, unconnected):
    def build(x):
        with tf.GradientTape(persistent=True) as tape:
            y = _spacer(x)
        return getattr(cg, name)(y, x, tape=tape, unconnected_gradients=unconnected)
    with raises(cg.ModeError, name, rf"{argument_of(name)} was not watched by the tape",
                r"tape\.watch\(x\)", r"callable"):
        run(f"{mode}.tape", build, X)


@pytest.mark.parametrize("mode", TAPE_MODES)
def test_slice_taken_after_recording(mode):
    """The known trap: `tape.gradient(f, xy[:, 0])` is None; here a clear error."""
    def build(xy):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(xy)
            f = 3 * xy[:, 0] ** 2 * xy[:, 1]
        return cg.batch_jacobian(f, xy[:, 0], tape=tape, unconnected_gradients="zero")
    with raises(cg.ModeError, "batch_jacobian", r"source was not watched by the tape",
                r"a slice such as x\[:, 0\] taken after recording is a new tensor"):
        run(f"{mode}.tape", build, X)


@pytest.mark.parametrize("mode", TAPE_MODES)
def test_variable_the_tape_does_not_watch(mode):
    def build(x, w):
        with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
            tape.watch(x)
            y = x * w
        return cg.stacked_jacobian(y, [x, w], tape=tape, unconnected_gradients="zero")
    with raises(cg.ModeError, "stacked_jacobian", r"sources\[1\] is a variable the tape does "
                r"not watch", r"watch_accessed_variables=False", r"tape\.watch\(v\)"):
        run(f"{mode}.tape", build, X, variables=[2.0])


@pytest.mark.parametrize("mode", TAPE_MODES)
def test_target_recorded_by_another_tape_still_recording(mode):
    """Nested tapes: the inner tape's gradient is recorded by the outer one only."""
    def build(x):
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(x)
            with tf.GradientTape(persistent=True) as inner:
                inner.watch(x)
                y = tf.reduce_sum(_spacer(x))
            gradient = inner.gradient(y, x)
            with raises(cg.ModeError, "stacked_jacobian", r"target was not recorded by the "
                        r"tape given, but by another GradientTape that is still recording",
                        r"Pass the tape that recorded the target"):
                cg.stacked_jacobian(gradient, x, tape=inner, unconnected_gradients="zero")
            right = cg.stacked_jacobian(gradient, x, tape=outer)
        return right
    np.testing.assert_allclose(run(f"{mode}.tape", build, X),
                               jacobian_of_elementwise(6 * X.astype(np.float64)), rtol=TOL)


@pytest.mark.parametrize("unconnected", ["none", "zero"])
@pytest.mark.parametrize("mode", TAPE_MODES)
def test_target_recorded_by_another_tape_that_stopped(mode, unconnected):
    """The target was computed under a second tape, after the first one's block ended."""
    def build(x):
        with tf.GradientTape(persistent=True) as first:
            first.watch(x)
        with tf.GradientTape(persistent=True) as second:
            second.watch(x)
            y = _spacer(x)
        with raises(cg.ModeError, "stacked_jacobian", r"target was not recorded by the tape "
                    r"given, but by another GradientTape that has stopped recording",
                    r"Pass the tape whose `with` block computed the target"):
            cg.stacked_jacobian(y, x, tape=first, unconnected_gradients=unconnected)
        return cg.stacked_jacobian(y, x, tape=second)
    np.testing.assert_allclose(run(f"{mode}.tape", build, X),
                               jacobian_of_elementwise(3 * X.astype(np.float64) ** 2), rtol=TOL)


@pytest.mark.parametrize("mode", TAPE_MODES)
def test_constant_target_is_unconnected_not_misrecorded(mode):
    """A target made through tf.stop_gradient is recorded by no tape: its derivatives are
    rightly zeros, even with another tape alive that recorded other things."""
    def build(x):
        with tf.GradientTape(persistent=True) as other:
            other.watch(x)
            _spacer(x)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = tf.stop_gradient(x) * 2.0
        return cg.stacked_jacobian(y, x, tape=tape, unconnected_gradients="zero")
    np.testing.assert_array_equal(run(f"{mode}.tape", build, X), np.zeros(X.shape * 2))


@pytest.mark.parametrize("mode", TAPE_MODES)
def test_watched_source_the_target_does_not_depend_on(mode):
    """Not a mistake: a watched source the target does not use gives None, or zeros."""
    def build(a, b):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([a, b])
            y = a ** 2
        return [cg.stacked_jacobian(y, [a, b], tape=tape, unconnected_gradients=u)
                for u in ("none", "zero")]
    a = np.array([1.0, -2.0], np.float32)
    (da, db), (da_zero, db_zero) = run(f"{mode}.tape", build, a, np.ones(3, np.float32))
    assert db is None
    np.testing.assert_array_equal(da, np.diag(2 * a))
    np.testing.assert_array_equal(da_zero, np.diag(2 * a))
    np.testing.assert_array_equal(db_zero, np.zeros((2, 3)))


@pytest.mark.parametrize("mode", TAPE_MODES)
def test_variable_the_target_never_read(mode):
    """A tape watches the variables it sees read: one it never saw is truly unconnected."""
    def build(x, v, w):
        with tf.GradientTape(persistent=True) as tape:
            y = v * x[0]
        return cg.stacked_jacobian(y, [v, w], tape=tape, unconnected_gradients="zero")
    dv, dw = run(f"{mode}.tape", build, X, variables=[[1.0, 2.0], [3.0]])
    np.testing.assert_array_equal(dv, np.diag(X[0]))
    np.testing.assert_array_equal(dw, np.zeros((2, 1)))


# ----------------------------------------------------------------------------------------
# A variable as the target: read on its tape, so its Jacobian is the identity everywhere
# (TensorFlow's tape.jacobian(v, v) too).

@pytest.mark.parametrize("name, want", [
    ("stacked_jacobian", np.eye(4).reshape(2, 2, 2, 2)),
    ("per_element_gradients", np.ones((2, 2))),
    ("batch_jacobian", np.stack([np.eye(2)] * 2))])
@pytest.mark.parametrize("route", ROUTES)
def test_variable_target_is_its_own_identity(route, name, want):
    out = run(route, lambda _, v: call(route, getattr(cg, name), lambda v: v, v), X,
              variables=[X])
    np.testing.assert_array_equal(out, want)


# ----------------------------------------------------------------------------------------
# One tensor twice in the sources, and a callable that reads its source by closure: every
# occurrence gets the total derivative (TensorFlow's convention: tf.gradients(y, [x, x])),
# on every route. The compiled eager route passes the tensor in once, and binds in what
# the callable reads by closure, so it equals the tf.function route bit for bit (the
# repeated_* cases of the shared matrix check that too).

X3 = np.array([0.5, -1.0, 2.0], np.float32)


def _product_of_copies(s):
    return s[0] * s[1] ** 2  # x³ when both are x


@pytest.mark.parametrize("route", ROUTES)
def test_repeated_source_gets_the_total_derivative(route):
    blocks = run(route, lambda x: call(route, cg.stacked_jacobian, _product_of_copies, [x, x]),
                 X3)
    for block in blocks:
        np.testing.assert_allclose(block, np.diag(3 * X3.astype(np.float64) ** 2), rtol=TOL)
    sums = run(route, lambda x: call(route, cg.per_element_gradients, _product_of_copies,
                                     [x, x]), X3)
    for total in sums:
        np.testing.assert_allclose(total, 3 * X3.astype(np.float64) ** 2, rtol=TOL)


@pytest.mark.parametrize("route", CALLABLE + ("function.tensor", "v1graph.tensor"))
def test_repeated_source_hessian(route):
    blocks = run(route, lambda x: call(route, cg.hessian, lambda s: tf.reduce_sum(
        _product_of_copies(s)), [x, x]), X3)
    for block in tf.nest.flatten(blocks):
        np.testing.assert_allclose(block, np.diag(6 * X3.astype(np.float64)), rtol=TOL)


@pytest.mark.parametrize("route", CALLABLE)
def test_repeated_primal_in_jvp_vjp_and_hvp(route):
    """jvp along (u, w) is J·(u + w), J the total derivative; vjp gives cᵀJ per occurrence;
    hvp gives H·(u + w) per occurrence."""
    u, w = np.array([1.0, 0.5, -1.0], np.float32), np.array([0.0, 1.0, 2.0], np.float32)

    def build(x, u, w):
        compile = not route.endswith("uncompiled")
        scalar = lambda s: tf.reduce_sum(_product_of_copies(s))  # noqa: E731
        return (cg.jvp(_product_of_copies, [x, x], [u, w], compile=compile)[1],
                cg.vjp(_product_of_copies, [x, x], u, compile=compile)[1],
                cg.hvp(scalar, [x, x], [u, w], compile=compile))
    jvp, vjp, hvp = run(route, build, X3, u, w)
    x = X3.astype(np.float64)
    np.testing.assert_allclose(jvp, 3 * x ** 2 * (u + w), rtol=TOL)
    for part in vjp:
        np.testing.assert_allclose(part, 3 * x ** 2 * u, rtol=TOL)
    for part in hvp:
        np.testing.assert_allclose(part, 6 * x * (u + w), rtol=TOL)


@pytest.mark.parametrize("name", ["stacked_jacobian", "batch_jacobian", "hessian"])
@pytest.mark.parametrize("route", CALLABLE)
def test_callable_that_reads_its_source_by_closure(route, name):
    """`lambda s: s * x` with respect to x itself: d(x²)/dx, on every route; and a callable
    that ignores its argument and reads x alone."""
    f = {"hessian": lambda s, x: tf.reduce_sum(s * x ** 2)}.get(name, lambda s, x: s * x)
    g = {"hessian": lambda s, x: tf.reduce_sum(x ** 3)}.get(name, lambda s, x: x ** 2)
    compile = {"compile": False} if route.endswith("uncompiled") else {}

    def build(x):
        return [getattr(cg, name)(lambda s, h=h: h(s, x), x, **compile) for h in (f, g)]
    x = X.astype(np.float64)
    want = {"stacked_jacobian": jacobian_of_elementwise(2 * x),
            "batch_jacobian": per_sample(2 * x),
            "hessian": jacobian_of_elementwise(6 * x)}[name]
    for out in run(route, build, X):
        np.testing.assert_allclose(out, want, rtol=TOL)


@pytest.mark.parametrize("route", CALLABLE)
def test_per_example_weights_that_are_tensors(route):
    """The model reads its weights by closure: a constant tensor as a weight works like a
    variable (the compiled route binds the weights in)."""
    def build(x):
        w = tf.constant([[1.0], [2.0]])
        return cg.per_example_gradients(lambda t, p: (t - p) ** 2, lambda v: tf.matmul(v, w),
                                        x, x[:, :1], weights=[w],
                                        compile=not route.endswith("uncompiled"))
    (out,) = run(route, build, X)
    residual = X.astype(np.float64) @ [[1.0], [2.0]] - X[:, :1]
    np.testing.assert_allclose(out, (2 * residual * X)[:, :, None], rtol=TOL)


# ----------------------------------------------------------------------------------------
# tf.py_function in the target: TensorFlow can take its gradient once per run of the
# forward pass (the gradient pops the tape the forward run stashed). A callable target is
# run again for each row, one row after another, with a VectorizationWarning; a tensor
# target cannot be, and gets a DerivativeError that says to pass the callable.

def _through_python(x):
    return tf.py_function(lambda t: t ** 2, [x], tf.float32) * x  # x³


@pytest.mark.parametrize("strategy", ["auto", "reverse", "forward", "loop"])
@pytest.mark.parametrize("route", CALLABLE)
def test_py_function_in_a_callable_target(route, strategy):
    x = X.astype(np.float64)
    for name, want in (("stacked_jacobian", jacobian_of_elementwise(3 * x ** 2)),
                       ("batch_jacobian", per_sample(3 * x ** 2))):
        with pytest.warns(cg.VectorizationWarning, match=rf"{name}: the target runs Python "
                          r"code through tf\.py_function.*EagerPyFunc.*running the target "
                          r"again for each"):
            out = run(route, lambda x, name=name: call(route, getattr(cg, name),
                                                       _through_python, x, strategy=strategy),
                      X)
        np.testing.assert_allclose(out, want, rtol=TOL)


def test_a_row_that_stops_the_loop_leaves_no_state_behind():
    """tf.map_fn leaves the variable scope's caching device set when its body raises (here
    on the py_function, before the rows run again): in eager code that scope is global, and
    tf.distribute would fail ever after."""
    with pytest.warns(cg.VectorizationWarning):
        cg.stacked_jacobian(_through_python, tf.constant(X), strategy="loop", compile=False)
    assert tf.compat.v1.get_variable_scope().caching_device is None


@pytest.mark.parametrize("route", CALLABLE)
def test_py_function_in_a_model_for_per_example_gradients(route):
    def build(x, w):
        def model(v):
            return tf.py_function(lambda a: a, [tf.matmul(v, w)], tf.float32) * tf.matmul(v, w)
        return cg.per_example_gradients(lambda t, p: (t - p) ** 2, model, x, x[:, :1],
                                        weights=[w], compile=not route.endswith("uncompiled"))
    with pytest.warns(cg.VectorizationWarning, match=r"per_example_gradients: the target runs "
                      r"Python code"):
        (out,) = run(route, build, X, variables=[[[1.0], [2.0]]])
    z = X.astype(np.float64) @ [[1.0], [2.0]]  # loss (z² - y)², d/dw = 2 (z² - y) 2z x
    np.testing.assert_allclose(out, (2 * (z ** 2 - X[:, :1]) * 2 * z * X)[:, :, None],
                               rtol=TOL)


@pytest.mark.parametrize("route", ROUTES)
def test_py_function_with_one_product(route):
    """per_element_gradients is one product: no row needs the forward pass twice."""
    out = run(route, lambda x: call(route, cg.per_element_gradients, _through_python, x), X)
    np.testing.assert_allclose(out, 3 * X.astype(np.float64) ** 2, rtol=TOL)


@pytest.mark.parametrize("name", ["stacked_jacobian", "batch_jacobian"])
@pytest.mark.parametrize("route", TENSOR)
def test_py_function_in_a_tensor_target(route, name):
    with raises(cg.DerivativeError, name, r"tf\.py_function", r"EagerPyFunc",
                r"needs it once per row", r"Pass the target as a callable"):
        run(route, lambda x: call(route, getattr(cg, name), _through_python, x), X)


@pytest.mark.parametrize("route", CALLABLE + ("function.tensor", "v1graph.tensor"))
def test_py_function_second_order(route):
    def build(x):
        return call(route, cg.hessian, lambda x: tf.reduce_sum(_through_python(x)), x)
    with warnings.catch_warnings():  # eager: forward-over-reverse fails first, then says why
        warnings.simplefilter("ignore", cg.VectorizationWarning)
        with raises(cg.DerivativeError, "hessian", r"tf\.py_function",
                    r"no second derivative through it"):
            run(route, build, X)


@tf.function
def _nested_python(x):
    """A tf.py_function inside a tf.function of the caller's: the op that calls it shows only
    the function's name."""
    y = tf.py_function(lambda t: t ** 2, [x], tf.float32)
    y.set_shape(x.shape)
    return y * x  # x³


@pytest.mark.parametrize("route", [r for r in CALLABLE if not r.startswith("v1graph")])
def test_py_function_inside_a_nested_tf_function(route):
    x = X.astype(np.float64)
    for name, want in (("stacked_jacobian", jacobian_of_elementwise(3 * x ** 2)),
                       ("batch_jacobian", per_sample(3 * x ** 2))):
        with pytest.warns(cg.VectorizationWarning, match=rf"{name}: the target runs Python "
                          r"code through tf\.py_function \(the EagerPyFunc op '[^']+' inside "
                          r"the function '[^']+' that the \w+ op '[^']+' calls\).*running the "
                          r"target again for each"):
            out = run(route, lambda x, name=name: call(route, getattr(cg, name),
                                                       _nested_python, x), X)
        np.testing.assert_allclose(out, want, rtol=TOL)


@pytest.mark.parametrize("kind", ["callable", "tensor"])
def test_py_function_inside_a_nested_tf_function_in_a_v1_graph(kind):
    """TensorFlow cannot differentiate it there: tf.gradients alone fails too."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, X.shape)
        with pytest.raises(ValueError, match="is not an element of this graph"):
            tf.compat.v1.gradients(_nested_python(x), x)
        with raises(cg.DerivativeError, "stacked_jacobian", r"tf\.py_function",
                    r"EagerPyFunc op '[^']+' inside the function", r"v1 Graph",
                    r"Call tf\.py_function outside the tf\.function"):
            cg.stacked_jacobian(_nested_python if kind == "callable" else _nested_python(x),
                                x)


def _summed(f, axis=None):
    return lambda x: tf.reduce_sum(f(x), axis=axis)


# One target object per callable, so that the eager compile cache is hit, not refilled.
_TOTAL = {f: _summed(f) for f in (_through_python, _nested_python)}
_PER_ROW = {f: _summed(f, axis=1) for f in (_through_python, _nested_python)}
_SECOND_ORDER_OF_PYTHON = {  # every second-order function, scalar and vector targets
    "hessian": lambda f, x, **o: cg.hessian(_TOTAL[f], x, **o),
    "hessian of a vector": lambda f, x, **o: cg.hessian(f, x, **o),
    "batch_hessian": lambda f, x, **o: cg.batch_hessian(_PER_ROW[f], x, **o),
    "hvp": lambda f, x, **o: cg.hvp(_TOTAL[f], x, tf.ones_like(x), **o),
}


@pytest.mark.parametrize("case,strategy", [  # hvp takes no strategy
    (case, strategy) for case in _SECOND_ORDER_OF_PYTHON
    for strategy in ([None] if case == "hvp" else [None, "reverse", "forward", "loop"])])
@pytest.mark.parametrize("target", ["direct", "nested"])
@pytest.mark.parametrize("route", CALLABLE)
def test_py_function_second_order_of_every_kind(route, target, case, strategy):
    """TensorFlow has no second derivative through a tf.py_function: its gradient runs in
    Python, unrecorded. Left alone it gives None (a scalar target) or drops that part of
    the Hessian; compat_grads raises, in every mode, with every strategy, nested or not,
    and says so at once (no fallback to another strategy is tried first)."""
    f = _through_python if target == "direct" else _nested_python
    options = {} if strategy is None else {"strategy": strategy}
    why = [r"no second derivative through it", r"tf\.custom_gradient"]
    if route.startswith("v1graph") and target == "nested":  # no first derivative either
        why = [r"(no second derivative through it|v1 Graph)"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", cg.VectorizationWarning)
        with raises(cg.DerivativeError, case.split()[0], r"tf\.py_function",
                    r"EagerPyFunc", *why):
            run(route, lambda x: _SECOND_ORDER_OF_PYTHON[case](f, x, **options), X)


@tf.custom_gradient
def _python_with_a_gradient(x):
    """x² computed in Python, with a gradient made of TensorFlow ops."""
    y = tf.py_function(lambda t: t ** 2, [x], tf.float32)
    y.set_shape(x.shape)
    return y, lambda dy: dy * 2.0 * x


@pytest.mark.parametrize("route", CALLABLE)
def test_py_function_with_a_custom_gradient_has_a_hessian(route):
    """The fix the second-order error gives: a gradient made of TensorFlow ops."""
    def build(x):
        with warnings.catch_warnings():  # uncompiled: forward-over-reverse falls back
            warnings.simplefilter("ignore", cg.VectorizationWarning)
            return call(route, cg.hessian,
                        lambda x: tf.reduce_sum(_python_with_a_gradient(x) * x), x)
    x = X.astype(np.float64)
    np.testing.assert_allclose(run(route, build, X), jacobian_of_elementwise(6 * x),
                               rtol=TOL)


@pytest.mark.parametrize("error", ["ModeError", "DerivativeError", "ValueError"])
def test_errors_keep_their_type_through_autograph(error):
    """A tf.function of the caller's converts its Python with AutoGraph, which re-raises an
    error as its own type only when it can rebuild it from the message: otherwise as an
    AutoGraph StagingError, which `except cg.ModeError:` would miss."""
    x = tf.constant(X)

    def step():
        if error == "ModeError":
            with tf.GradientTape() as tape:  # x not watched
                y = x * 2.0
            return cg.stacked_jacobian(y, x, tape=tape)
        if error == "DerivativeError":
            return cg.hessian(lambda x: tf.reduce_sum(_through_python(x)), x)
        return cg.stacked_jacobian(square, x, strategy="sideways")
    with pytest.raises(getattr(cg, error, ValueError), match=r"compat_grads\.\w+: "):
        tf.function(step)()  # autograph=True, the default


@pytest.mark.parametrize("route", CALLABLE)
def test_numpy_function_in_per_example_gradients(route):
    """tf.numpy_function runs Python code pfor cannot vectorize (pfor runs it in a loop of
    its own): here it computes a scale from the inputs, a constant for the weights."""
    def build(x, w):
        def model(v):
            scale = tf.numpy_function(lambda a: np.float32(2.0) + 0 * a, [v[:, :1]], tf.float32)
            return tf.matmul(v, w) * scale
        return cg.per_example_gradients(lambda t, p: (t - p) ** 2, model, x, x[:, :1],
                                        weights=[w], compile=not route.endswith("uncompiled"))
    (out,) = run(route, build, X, variables=[[[1.0], [2.0]]])
    residual = 2 * X.astype(np.float64) @ [[1.0], [2.0]] - X[:, :1]
    np.testing.assert_allclose(out, (2 * residual * 2 * X)[:, :, None], rtol=TOL)


# ----------------------------------------------------------------------------------------
# The eager compile cache: a dropped model is freed with its weights at once; threads.

def test_a_dropped_model_and_its_weights_are_freed_at_once():
    import gc
    import weakref

    from compat_grads import dispatch
    from compat_grads.testing import models

    def use_a_model():
        model = models.build_model(models.CASES[0])
        x, y = models.inputs(models.CASES[0])
        x = tf.constant(x, tf.float32)
        cg.per_example_gradients(models.loss_fn, model, x, y)
        cg.stacked_jacobian(model, x[:2])
        cg.stacked_jacobian(lambda ws: model(x[:2]), model.trainable_weights)
        return [weakref.ref(model), *map(weakref.ref, model.trainable_weights)]

    cg.clear_cache()
    gone = use_a_model()
    gc.collect()
    assert [ref() for ref in gone] == [None] * len(gone)
    assert len(dispatch.CACHE) == 0  # the entries went with them, and their captured handles


def _sine_times_sum(x):  # one module-level callable: one cache entry for every thread
    return tf.sin(x) * tf.reduce_sum(x)


def _sine_times_sum_jacobian(x):
    x = np.asarray(x, np.float64)
    return np.diag(np.cos(x) * x.sum()) + np.sin(x)[:, None]


def _in_threads(work, count=8, timeout=240):
    """`work(k)` in `count` threads at once; the exceptions they raised."""
    import threading

    failures = []

    def guarded(k):
        try:
            work(k)
        except Exception as err:  # noqa: BLE001 - reported by the test
            failures.append(f"thread {k}: {type(err).__name__}: {err}")
    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    return failures


def _inputs_of_size(n):
    return np.linspace(-1.0, 1.0, n).astype(np.float32)


def test_threads_share_one_cached_function_with_different_shapes():
    from compat_grads import dispatch

    cg.clear_cache()
    alone = {n: cg.stacked_jacobian(_sine_times_sum, tf.constant(_inputs_of_size(n))).numpy()
             for n in range(1, 9)}

    def work(k):
        for repeat in range(4):
            n = 1 + (k + repeat) % 8
            got = cg.stacked_jacobian(_sine_times_sum, tf.constant(_inputs_of_size(n)))
            np.testing.assert_array_equal(got, alone[n])  # the single-threaded result
            np.testing.assert_allclose(got, _sine_times_sum_jacobian(_inputs_of_size(n)),
                                       rtol=TOL, atol=TOL)
            assert len(dispatch.CACHE) <= dispatch.CACHE_SIZE
    assert _in_threads(work) == []
    assert len(dispatch.CACHE) == 1


def test_threads_with_many_callables_keep_the_cache_bounded(monkeypatch):
    from compat_grads import dispatch

    cg.clear_cache()
    monkeypatch.setattr(dispatch.CACHE, "size", 4)
    callables = [lambda x, k=k: x * float(k + 1) for k in range(12)]  # one each, reused

    def work(k):
        for f in callables[k:] + callables[:k]:
            scale = float(callables.index(f) + 1)
            np.testing.assert_array_equal(cg.per_element_gradients(f, tf.constant(X)),
                                          np.full(X.shape, scale))
            assert len(dispatch.CACHE) <= 4
    with warnings.catch_warnings():  # evicted and compiled again: the recompile warning
        warnings.simplefilter("ignore", RuntimeWarning)
        assert _in_threads(work) == []
    assert len(dispatch.CACHE) <= 4
    cg.clear_cache()


def test_clear_cache_while_other_threads_compute():
    import threading

    stop = threading.Event()

    def clear():
        while not stop.wait(0.0005):
            cg.clear_cache()
    clearer = threading.Thread(target=clear)
    clearer.start()

    def work(k):
        for repeat in range(4):
            n = 1 + (k + repeat) % 8
            got = cg.stacked_jacobian(_sine_times_sum, tf.constant(_inputs_of_size(n)))
            np.testing.assert_allclose(got, _sine_times_sum_jacobian(_inputs_of_size(n)),
                                       rtol=TOL, atol=TOL)
    try:
        failures = _in_threads(work)
    finally:
        stop.set()
        clearer.join(60)
    assert failures == []
    assert not clearer.is_alive()


# ----------------------------------------------------------------------------------------
# Third order: a Hessian of a function that itself takes a derivative with compat_grads.

@pytest.mark.parametrize("route", CALLABLE + ("function.tensor", "v1graph.tensor"))
def test_third_order(route):
    def inner(z):
        return tf.reduce_sum(cg.per_element_gradients(lambda w: w ** 4, z))  # Σ 4z³
    out = run(route, lambda x: call(route, cg.hessian, inner, x), X)
    np.testing.assert_allclose(out, jacobian_of_elementwise(24 * X.astype(np.float64)),
                               rtol=TOL)


# ----------------------------------------------------------------------------------------
# The catalogue: each kind of bad or unusual input, what it must give ("value": the exact
# right value; "error": a compat_grads error naming the function and the argument and saying
# what to do), and the tests that run it: a test name and, when the test runs several kinds,
# a regular expression its parameter ids match. The modes a kind runs in are read from the
# route or mode in those ids (tests without one run in eager mode).
# `python tests_tf2/bad_input_totals.py` counts kinds per mode, here and in tests_tf1.

KINDS = (
    *((f"option {option}={value!r}", "error", "test_bad_option", f"^{case}-")
      for case, option, value, *_ in BAD_OPTIONS),
    ("a numpy bool for a bool option", "value", "test_numpy_bool_option_counts_as_a_bool"),
    ("loss_fn that is not callable", "error", "test_loss_fn_not_callable"),
    ("tape= that is not a GradientTape", "error", "test_tape_of_the_wrong_type"),
    ("a callable that returns None", "error", "test_callable_returns_none"),
    ("a callable that returns None inside a nest", "error",
     "test_callable_returns_none_inside_a_nest"),
    ("a model that returns None", "error", "test_model_or_loss_returns_none", "-model$"),
    ("a loss_fn that returns None", "error", "test_model_or_loss_returns_none", "-loss_fn$"),
    ("unknown rank: stacked_jacobian", "value", "test_unknown_rank_stacked_jacobian"),
    ("unknown rank: batch_jacobian", "value", "test_unknown_rank_batch_jacobian"),
    ("unknown rank: batch_hessian", "value", "test_unknown_rank_batch_hessian"),
    ("unknown rank: hessian", "value", "test_unknown_rank_hessian"),
    ("unknown rank: per_element_gradients", "value", "test_unknown_rank_per_element_gradients"),
    ("unknown rank: jvp, vjp, hvp, chunks, loops", "value",
     "test_unknown_rank_products_and_chunks"),
    ("unknown rank: per_example_gradients", "value", "test_unknown_rank_per_example_gradients"),
    ("unknown rank: not one scalar per sample (run time)", "error",
     "test_unknown_rank_batch_hessian_of_more_than_one_scalar_per_sample"),
    ("unknown rank: a scalar fed as a batch (run time)", "error",
     "test_unknown_rank_scalar_fed_to_batch_jacobian"),
    ("a ragged target", "error", "test_ragged_or_sparse_target", "-ragged$"),
    ("a sparse target", "error", "test_ragged_or_sparse_target", "-sparse$"),
    ("a ragged source", "error", "test_ragged_or_sparse_source", "-ragged$"),
    ("a sparse source", "error", "test_ragged_or_sparse_source", "-sparse$"),
    ("IndexedSlices gradients (gather from a variable)", "value",
     "test_gather_from_a_variable_gives_indexed_slices_densified"),
    ("a source from another graph", "error", "test_source_from_another_graph"),
    ("a target from another graph", "error", "test_target_from_another_graph", None,
     ("v1graph",)),
    ("graph tensors used eagerly after their block", "error",
     "test_graph_tensors_used_eagerly_after_their_block"),
    ("a Jacobian too big for memory", "error",
     "test_jacobian_too_big_for_memory_fails_before_anything_is_built"),
    ("rows in flight above max_bytes", "error",
     "test_a_small_max_bytes_names_the_chunk_size_that_fits"),
    *((f"a source of dtype {kind}", "error", "test_source_dtype_without_derivatives",
       f"-{kind}$") for kind in ("int", "string", "complex", "bool")),
    *((f"a target of dtype {kind}", "error", "test_target_dtype_without_derivatives",
       f"-{kind}$") for kind in ("int", "complex")),
    ("mixed float dtypes", "value", "test_mixed_float_dtypes_each_block_in_its_sources_dtype"),
    ("float64 sources", "value", "test_float64_sources_stay_float64"),
    ("a size-0 source", "value", "test_size_zero_source"),
    ("a size-0 target", "value", "test_size_zero_target"),
    ("a size-0 batch", "value", "test_size_zero_batch"),
    ("batch sizes that differ", "error", "test_batch_sizes_differ"),
    ("a scalar source for batch_jacobian", "error", "test_scalar_source_for_batch_jacobian"),
    *((f"a source that is {kind}", "error", "test_source_that_is_not_a_tensor", f"-{kind}$")
      for kind in ("None", "object", "str")),
    *((f"a target that is {kind}", "error", "test_target_that_is_not_a_tensor", f"-{kind}$")
      for kind in ("None", "object", "float")),
    ("a list of tensors as the target", "error", "test_list_of_tensors_as_target"),
    ("a list where one source is needed", "error",
     "test_list_of_sources_where_one_tensor_is_needed"),
    ("a bad primal or weight, named as its argument", "error",
     "test_bad_leaf_named_by_its_argument"),
    ("NaN input", "value", "test_nan_input_gives_nan_derivative"),
    ("an infinite derivative at a finite input", "value",
     "test_inf_derivative_from_a_finite_input"),
    ("NaN in the value but not in the derivative", "value",
     "test_nan_in_the_value_but_not_in_the_derivative"),
    ("NaN in an unconnected source", "value", "test_nan_in_an_unconnected_source"),
    *((f"integer-valued op: {kind}", "value", "test_integer_valued_op", f"-{kind}$")
      for kind in ("floor", "round", "sign", "int-cast")),
    ("an eager tensor target without its tape", "error", "test_eager_tensor_without_its_tape"),
    ("a spent non-persistent tape", "error", "test_spent_non_persistent_tape"),
    ("a source the tape never watched", "error", "test_tape_never_watched_the_source"),
    ("a slice taken after recording", "error", "test_slice_taken_after_recording"),
    ("a variable the tape does not watch", "error", "test_variable_the_tape_does_not_watch"),
    ("a target another, recording tape recorded", "error",
     "test_target_recorded_by_another_tape_still_recording"),
    ("a target another tape recorded, which has stopped", "error",
     "test_target_recorded_by_another_tape_that_stopped"),
    ("a target made through tf.stop_gradient, on a tape", "value",
     "test_constant_target_is_unconnected_not_misrecorded"),
    ("a watched source the target does not use", "value",
     "test_watched_source_the_target_does_not_depend_on"),
    ("a variable the target never read", "value", "test_variable_the_target_never_read"),
    ("a variable as the target", "value", "test_variable_target_is_its_own_identity"),
    ("one tensor twice in the sources", "value",
     "test_repeated_source_gets_the_total_derivative"),
    ("one tensor twice in the sources: Hessian", "value", "test_repeated_source_hessian"),
    ("one tensor twice in the primals: jvp, vjp, hvp", "value",
     "test_repeated_primal_in_jvp_vjp_and_hvp"),
    ("a callable that reads its source by closure", "value",
     "test_callable_that_reads_its_source_by_closure"),
    ("constant tensors as per-example weights", "value",
     "test_per_example_weights_that_are_tensors"),
    ("tf.py_function in a callable target", "value", "test_py_function_in_a_callable_target"),
    ("a row that stops the loop it is traced in (state restored)", "value",
     "test_a_row_that_stops_the_loop_leaves_no_state_behind"),
    ("tf.py_function in a model (per-example gradients)", "value",
     "test_py_function_in_a_model_for_per_example_gradients"),
    ("tf.py_function with one product", "value", "test_py_function_with_one_product"),
    ("tf.py_function in a tensor target", "error", "test_py_function_in_a_tensor_target"),
    ("tf.py_function, second order", "error", "test_py_function_second_order"),
    ("tf.py_function inside a nested tf.function", "value",
     "test_py_function_inside_a_nested_tf_function"),
    ("tf.py_function inside a nested tf.function in a v1 Graph", "error",
     "test_py_function_inside_a_nested_tf_function_in_a_v1_graph"),
    ("tf.py_function, second order: every function, strategy and nesting", "error",
     "test_py_function_second_order_of_every_kind"),
    ("tf.py_function with a custom gradient, second order", "value",
     "test_py_function_with_a_custom_gradient_has_a_hessian"),
    ("an error raised inside an AutoGraph tf.function", "error",
     "test_errors_keep_their_type_through_autograph"),
    ("tf.numpy_function in a model", "value", "test_numpy_function_in_per_example_gradients"),
    ("a dropped model (its weights freed)", "value",
     "test_a_dropped_model_and_its_weights_are_freed_at_once"),
    ("8 threads on one cached function, several shapes", "value",
     "test_threads_share_one_cached_function_with_different_shapes"),
    ("threads with more callables than the cache holds", "value",
     "test_threads_with_many_callables_keep_the_cache_bounded"),
    ("clear_cache() while other threads compute", "value",
     "test_clear_cache_while_other_threads_compute"),
    ("third order", "value", "test_third_order"),
)


def test_every_test_is_a_kind_of_the_catalogue():
    tests = {name for name in globals() if name.startswith("test_")}
    named = {kind[2] for kind in KINDS}
    assert tests - named == {"test_every_test_is_a_kind_of_the_catalogue"}
    assert named <= tests
    assert len({kind[0] for kind in KINDS}) == len(KINDS) >= 60
    assert {kind[1] for kind in KINDS} == {"value", "error"}
