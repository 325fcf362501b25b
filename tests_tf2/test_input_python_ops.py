"""tf.py_function and tf.numpy_function in the target: TensorFlow can take a py_function's
gradient once per run of the forward pass (the gradient pops the tape the forward run
stashed), and has no second derivative through it. A callable target is run again for each
row, one row after another, with a VectorizationWarning; a tensor target cannot be, and gets
a DerivativeError that says to pass the callable.

A py_function in a callable target, in a tensor target and with one product are rows of
the case table (compat_grads.testing._suite.bad_inputs); here the kinds that need a test of their
own.
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite import bad_input_routes as br
from compat_grads.testing._suite.bad_input_routes import TOL, X, call, raises, run


def test_a_row_that_stops_the_loop_leaves_no_state_behind():
    """tf.map_fn leaves the variable scope's caching device set when its body raises (here
    on the py_function, before the rows run again): in eager code that scope is global, and
    tf.distribute would fail ever after."""
    with pytest.warns(cg.VectorizationWarning):
        cg.stacked_jacobian(br.through_python, tf.constant(X), strategy="loop", compile=False)
    assert tf.compat.v1.get_variable_scope().caching_device is None


@pytest.mark.parametrize("route", br.CALLABLE)
def test_py_function_in_a_model_for_per_example_gradients(route):
    def build(x, w):
        def model(v):
            return tf.py_function(lambda a: a, [tf.matmul(v, w)], tf.float32) * tf.matmul(v, w)
        return cg.per_example_gradients(lambda t, p: (t - p) ** 2, model, x, x[:, :1],
                                        weights=[w], compile=br.compiled(route))
    with pytest.warns(cg.VectorizationWarning, match=r"per_example_gradients: the target runs "
                      r"Python code"):
        (out,) = run(route, build, X, variables=[[[1.0], [2.0]]])
    z = X.astype(np.float64) @ [[1.0], [2.0]]  # loss (z² - y)², d/dw = 2 (z² - y) 2z x
    np.testing.assert_allclose(out, (2 * (z ** 2 - X[:, :1]) * 2 * z * X)[:, :, None],
                               rtol=TOL)


@pytest.mark.parametrize("route", br.CALLABLE + br.GRAPH_TENSOR)
def test_py_function_second_order(route):
    def build(x):
        return call(route, cg.hessian, lambda x: tf.reduce_sum(br.through_python(x)), x)
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


@pytest.mark.parametrize("route", [r for r in br.CALLABLE if br.mode_of(r) != br.V1_GRAPH])
def test_py_function_inside_a_nested_tf_function(route):
    x = X.astype(np.float64)
    for name, want in (("stacked_jacobian", br.jacobian_of_elementwise(3 * x ** 2)),
                       ("batch_jacobian", br.per_sample(3 * x ** 2))):
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


_TOTAL = {f: _summed(f) for f in (br.through_python, _nested_python)}


_PER_ROW = {f: _summed(f, axis=1) for f in (br.through_python, _nested_python)}


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
@pytest.mark.parametrize("route", br.CALLABLE)
def test_py_function_second_order_of_every_kind(route, target, case, strategy):
    """TensorFlow has no second derivative through a tf.py_function: its gradient runs in
    Python, unrecorded. Left alone it gives None (a scalar target) or drops that part of
    the Hessian; compat_grads raises, in every mode, with every strategy, nested or not,
    and says so at once (no fallback to another strategy is tried first)."""
    f = br.through_python if target == "direct" else _nested_python
    options = {} if strategy is None else {"strategy": strategy}
    why = [r"no second derivative through it", r"tf\.custom_gradient"]
    if br.mode_of(route) == br.V1_GRAPH and target == "nested":  # no first derivative either
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


@pytest.mark.parametrize("route", br.CALLABLE)
def test_py_function_with_a_custom_gradient_has_a_hessian(route):
    """The fix the second-order error gives: a gradient made of TensorFlow ops."""
    def build(x):
        with warnings.catch_warnings():  # uncompiled: forward-over-reverse falls back
            warnings.simplefilter("ignore", cg.VectorizationWarning)
            return call(route, cg.hessian,
                        lambda x: tf.reduce_sum(_python_with_a_gradient(x) * x), x)
    x = X.astype(np.float64)
    np.testing.assert_allclose(run(route, build, X), br.jacobian_of_elementwise(6 * x),
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
            return cg.hessian(lambda x: tf.reduce_sum(br.through_python(x)), x)
        return cg.stacked_jacobian(br.square, x, strategy="sideways")
    with pytest.raises(getattr(cg, error, ValueError), match=r"compat_grads\.\w+: "):
        tf.function(step)()  # autograph=True, the default


@pytest.mark.parametrize("route", br.CALLABLE)
def test_numpy_function_in_per_example_gradients(route):
    """tf.numpy_function runs Python code pfor cannot vectorize (pfor runs it in a loop of
    its own): here it computes a scale from the inputs, a constant for the weights."""
    def build(x, w):
        def model(v):
            scale = tf.numpy_function(lambda a: np.float32(2.0) + 0 * a, [v[:, :1]], tf.float32)
            return tf.matmul(v, w) * scale
        return cg.per_example_gradients(lambda t, p: (t - p) ** 2, model, x, x[:, :1],
                                        weights=[w], compile=br.compiled(route))
    (out,) = run(route, build, X, variables=[[[1.0], [2.0]]])
    residual = 2 * X.astype(np.float64) @ [[1.0], [2.0]] - X[:, :1]
    np.testing.assert_allclose(out, (2 * residual * 2 * X)[:, :, None], rtol=TOL)


KINDS = (  # kind, "value" or "error", test
    ("a row that stops the loop it is traced in (state restored)", "value",
     "test_a_row_that_stops_the_loop_leaves_no_state_behind"),
    ("tf.py_function in a model (per-example gradients)", "value",
     "test_py_function_in_a_model_for_per_example_gradients"),
    ("tf.py_function, second order", "error", "test_py_function_second_order"),
    ("tf.py_function inside a nested tf.function", "value",
     "test_py_function_inside_a_nested_tf_function"),
    ("tf.py_function inside a nested tf.function in a v1 Graph", "error",
     "test_py_function_inside_a_nested_tf_function_in_a_v1_graph", None, (br.V1_GRAPH,)),
    ("tf.py_function, second order: every function, strategy and nesting", "error",
     "test_py_function_second_order_of_every_kind"),
    ("tf.py_function with a custom gradient, second order", "value",
     "test_py_function_with_a_custom_gradient_has_a_hessian"),
    ("an error raised inside an AutoGraph tf.function", "error",
     "test_errors_keep_their_type_through_autograph"),
    ("tf.numpy_function in a model", "value", "test_numpy_function_in_per_example_gradients"),
)
