"""Dtypes and shapes, and arguments that are not tensors: the exact right value, or an
error that names the function, the argument, what it got and the fix.

Sources and targets without derivatives (int, string, complex, bool), size-0 sources and
targets and sources that are not tensors are rows of the case table
(compat_grads.testing._suite.bad_inputs); here the kinds that need a test of their own.
"""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite import bad_input_routes as br
from compat_grads.testing._suite.bad_input_routes import X, call, raises, run

XT = tf.constant([[1.0, 2.0], [3.0, 4.0]])


# ----------------------------------------------------------------------------------------
# Dtypes.


@pytest.mark.parametrize("route", br.ROUTES)
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
@pytest.mark.parametrize("route", br.ROUTES)
def test_float64_sources_stay_float64(route, strategy):
    out = run(route, lambda x: call(route, cg.stacked_jacobian, tf.sin, x, strategy=strategy),
              X.astype(np.float64))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, br.jacobian_of_elementwise(np.cos(X.astype(np.float64))),
                               rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("fn", br.FIRST_ORDER_FUNCTIONS, ids=br.FIRST_ORDER)
@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.bool])
def test_integer_or_bool_sources(fn, dtype):
    x = tf.zeros((2, 2), dtype)
    argument = "source" if fn is cg.batch_jacobian else "sources"
    with pytest.raises(TypeError, match=rf"compat_grads\.{fn.__name__}: {argument} must be "
                                        rf"floating-point .* got .*{dtype.name}.*tf\.cast"):
        fn(lambda x: tf.cast(x, tf.float32), x)


def test_integer_leaf_in_a_nest_is_named():
    with pytest.raises(TypeError, match=r"sources\['b'\] must be floating-point"):
        cg.stacked_jacobian(lambda s: s["a"], {"a": XT, "b": tf.constant([1, 2])})


# ----------------------------------------------------------------------------------------
# Shapes: size-0 batches, batches that do not match, no batch axis.


@pytest.mark.parametrize("name", ["batch_jacobian", "batch_hessian"])
@pytest.mark.parametrize("route", br.CALLABLE + br.GRAPH_TENSOR)
def test_size_zero_batch(route, name):
    f = br.row_cube_sum if name == "batch_hessian" else br.square
    out = run(route, lambda x: call(route, getattr(cg, name), f, x,
                                    unconnected_gradients="zero"), np.zeros([0, 2], np.float32))
    assert out.shape == (0, 2, 2)


@pytest.mark.parametrize("name", ["batch_jacobian", "batch_hessian"])
@pytest.mark.parametrize("route", br.CALLABLE + br.GRAPH_TENSOR)
def test_batch_sizes_differ(route, name):
    def f(x):
        return tf.reduce_sum(tf.tile(x, [2, 1])[:3], axis=1)
    with raises(ValueError, name, r"target and source must have the same batch size",
                r"\(3,\)", r"\(2, 2\)", r"Pass the batched input"):
        run(route, lambda x: call(route, getattr(cg, name), f, x), X)


@pytest.mark.parametrize("route", br.ROUTES)
def test_scalar_source_for_batch_jacobian(route):
    with raises(ValueError, "batch_jacobian", r"source needs a leading batch dimension",
                r"scalar", r"stacked_jacobian"):
        run(route, lambda x: call(route, cg.batch_jacobian, lambda x: tf.stack([x, x]), x[0, 0]),
            X)


def test_batch_jacobian_mismatched_batch_sizes():
    with pytest.raises(ValueError, match=r"compat_grads\.batch_jacobian: target and source "
                                         r"must have the same batch size .*\(3, 2\).*\(2, 2\)"):
        cg.batch_jacobian(lambda x: tf.tile(x, [2, 1])[:3], XT)


@pytest.mark.parametrize("which", ["target", "source"])
def test_batch_jacobian_missing_batch_dimension(which):
    if which == "target":
        call = lambda: cg.batch_jacobian(lambda x: tf.reduce_sum(x), XT)  # noqa: E731
    else:
        call = lambda: cg.batch_jacobian(lambda x: tf.stack([x, x]), tf.constant(1.0))  # noqa: E731
    with pytest.raises(ValueError, match=rf"batch_jacobian: {which} needs a leading batch "
                                         r"dimension, but it is a scalar"):
        call()


# ----------------------------------------------------------------------------------------
# Not tensors: None, Python objects, lists where one tensor is needed.


@pytest.mark.parametrize("target", [None, object(), 3.0], ids=["None", "object", "float"])
@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients",
                                  "batch_jacobian"])
@pytest.mark.parametrize("mode", br.TF2_MODES)
def test_target_that_is_not_a_tensor(mode, name, target):
    with raises(TypeError, name, r"target must be a tf\.Tensor or a callable",
                rf"target is {type(target).__name__}", r"Pass the tensor"):
        run(f"{mode}.tensor", lambda x: getattr(cg, name)(target, x), X)


@pytest.mark.parametrize("fn", br.FIRST_ORDER_FUNCTIONS, ids=br.FIRST_ORDER)
@pytest.mark.parametrize("target", [3.0, np.ones(3), "y", None, [XT]], ids=repr)
def test_target_neither_tensor_nor_callable(fn, target):
    with pytest.raises(TypeError, match=rf"compat_grads\.{fn.__name__}: target must be a "
                                        r"tf\.Tensor or a callable.* but target is"):
        fn(target, XT)


@pytest.mark.parametrize("route", br.TENSOR)
def test_list_of_tensors_as_target(route):
    def build(x):
        return call(route, cg.stacked_jacobian, lambda x: [x[0], x[1]], x)
    with raises(TypeError, "stacked_jacobian", r"target must be a tf\.Tensor", r"list",
                r"tf\.stack"):
        run(route, build, X)


@pytest.mark.parametrize("name", ["batch_jacobian", "batch_hessian"])
@pytest.mark.parametrize("route", br.CALLABLE)
def test_list_of_sources_where_one_tensor_is_needed(route, name):
    with raises(TypeError, name, r"source must be one tensor or variable",
                r"got a list of 2", r"stacked_jacobian"):
        run(route, lambda x: call(route, getattr(cg, name), lambda s: s[0] * s[1], [x, x]), X)


def test_batch_jacobian_takes_one_source():
    with pytest.raises(TypeError, match=r"batch_jacobian: source must be one tensor or "
                                        r"variable, but got a list of 2"):
        cg.batch_jacobian(lambda s: s[0] * s[1], [XT, XT])


@pytest.mark.parametrize("name", ["jvp", "vjp", "hvp", "per_example_gradients"])
@pytest.mark.parametrize("route", br.CALLABLE)
def test_bad_leaf_named_by_its_argument(route, name):
    """jvp, vjp and hvp call their sources primals, per_example_gradients weights."""
    if name == "per_example_gradients":
        def build(x):
            return cg.per_example_gradients(lambda t, p: (t - p) ** 2, br.square, x, x,
                                            weights=["w"],
                                            compile=br.compiled(route))
        problem = r"weights\[0\] must be a tf\.Tensor or tf\.Variable"
    else:
        def build(x):
            return call(route, lambda f, x, **kw: getattr(cg, name)(f, x, x, **kw), br.cube_sum,
                        tf.cast(x, tf.int32))
        problem = r"primals must be floating-point"
    with raises(TypeError, name, problem, r"(tf\.cast|Pass the tensors)"):
        run(route, build, X)


@pytest.mark.parametrize("fn", br.FIRST_ORDER_FUNCTIONS, ids=br.FIRST_ORDER)
@pytest.mark.parametrize("sources", [[], (), {}], ids=repr)
def test_empty_sources(fn, sources):
    argument = "source" if fn is cg.batch_jacobian else "sources"
    with pytest.raises(ValueError, match=rf"compat_grads\.{fn.__name__}: {argument} is empty"):
        fn(lambda s: tf.constant(1.0), sources)


def test_non_tensor_source_for_tensor_target():
    with tf.GradientTape() as tape:
        tape.watch(XT)
        y = br.square(XT)
    with pytest.raises(TypeError, match=r"sources must be a tf\.Tensor or tf\.Variable, but "
                                        r"got ndarray"):
        cg.stacked_jacobian(y, np.ones(2), tape=tape)


def test_numpy_sources_are_fine_for_a_callable():
    out = cg.per_element_gradients(lambda x: x ** 2, np.array([1.0, 2.0]))
    np.testing.assert_allclose(out, [2.0, 4.0])


KINDS = (  # kind, "value" or "error", test, a regular expression its ids match
    ("mixed float dtypes", "value", "test_mixed_float_dtypes_each_block_in_its_sources_dtype"),
    ("float64 sources", "value", "test_float64_sources_stay_float64"),
    ("integer or bool sources of every first-order function", "error",
     "test_integer_or_bool_sources"),
    ("an integer leaf in a nest of sources, named", "error",
     "test_integer_leaf_in_a_nest_is_named"),
    ("a size-0 batch", "value", "test_size_zero_batch"),
    ("batch sizes that differ", "error", "test_batch_sizes_differ"),
    ("a scalar source for batch_jacobian", "error", "test_scalar_source_for_batch_jacobian"),
    ("batch sizes that differ, known while building", "error",
     "test_batch_jacobian_mismatched_batch_sizes"),
    ("no batch dimension in the target or the source", "error",
     "test_batch_jacobian_missing_batch_dimension"),
    *((f"a target that is {kind}", "error", "test_target_that_is_not_a_tensor", f"-{kind}$")
      for kind in ("None", "object", "float")),
    ("a target neither a tensor nor a callable (numpy, str, list)", "error",
     "test_target_neither_tensor_nor_callable"),
    ("a list of tensors as the target", "error", "test_list_of_tensors_as_target"),
    ("a list where one source is needed", "error",
     "test_list_of_sources_where_one_tensor_is_needed"),
    ("a list of sources for batch_jacobian", "error", "test_batch_jacobian_takes_one_source"),
    ("a bad primal or weight, named as its argument", "error",
     "test_bad_leaf_named_by_its_argument"),
    ("empty sources", "error", "test_empty_sources"),
    ("a numpy source for a tensor target", "error", "test_non_tensor_source_for_tensor_target"),
    ("numpy sources for a callable", "value", "test_numpy_sources_are_fine_for_a_callable"),
)
