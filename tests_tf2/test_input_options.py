"""Bad options and callables that return None: options are strictly typed and checked
before anything else (the eager cache key included); a forgotten `return` is named.

The bad options of each function on each route are rows of the case table
(compat_grads.testing._suite.bad_inputs, run by test_input_table.py); here the kinds that need a
test of their own.
"""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite import bad_input_routes as br
from compat_grads.testing._suite.bad_input_routes import TOL, X, call, raises, run

XT = tf.constant([[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("route", br.CALLABLE)
def test_numpy_bool_option_counts_as_a_bool(route):
    out = run(route, lambda x: br.standard("batch_jacobian", route, x, independent=np.False_), X)
    np.testing.assert_allclose(out, br.per_sample(2 * X), rtol=TOL)


@pytest.mark.parametrize("route", br.CALLABLE)
def test_loss_fn_not_callable(route):
    with raises(TypeError, "per_example_gradients", r"loss_fn must be callable", r"dict",
                r"Pass a loss function"):
        run(route, lambda x, w: cg.per_example_gradients(
            {"loss": "mse"}, lambda v: v * w, x, x, weights=[w],
            compile=br.compiled(route)), X, variables=[1.0])


@pytest.mark.parametrize("name", ("stacked_jacobian", "per_element_gradients",
                                  "batch_jacobian"))
@pytest.mark.parametrize("route", br.TENSOR)
def test_tape_of_the_wrong_type(name, route):
    with raises(TypeError, name, r"tape must be a tf\.GradientTape, but got str",
                r"Pass the GradientTape"):
        run(route, lambda x: getattr(cg, name)(br.square(x), x, tape="tape"), X)


@pytest.mark.parametrize("fn", [cg.stacked_jacobian, cg.batch_jacobian])
def test_unknown_strategy_lists_valid_ones(fn):
    with pytest.raises(ValueError, match=r"strategy must be one of 'auto', 'reverse', "
                                         r"'forward', 'loop', but got 'fastest'"):
        fn(br.square, XT, strategy="fastest")


@pytest.mark.parametrize("value, error", [("zeros", ValueError), (0, TypeError),
                                          (None, TypeError)])
def test_unknown_unconnected_gradients(value, error):
    with pytest.raises(error, match=r"unconnected_gradients must be 'none', 'zero'"):
        cg.stacked_jacobian(br.square, XT, unconnected_gradients=value)


# ----------------------------------------------------------------------------------------
# Callables that return None (a forgotten `return`) or a nest.


@pytest.mark.parametrize("route", br.CALLABLE)
def test_callable_returns_none_inside_a_nest(route):
    with raises(TypeError, "jvp", r"the callable target returned None", r"return"):
        run(route, lambda x: call(route, lambda f, x, **kw: cg.jvp(f, x, x, **kw),
                                  lambda x: [x, None], x), X)


@pytest.mark.parametrize("which", ["model", "loss_fn"])
@pytest.mark.parametrize("route", br.CALLABLE)
def test_model_or_loss_returns_none(route, which):
    def build(x, w):
        model = (lambda v: None) if which == "model" else (lambda v: tf.matmul(v, w))
        loss = (lambda t, p: None) if which == "loss_fn" else (lambda t, p: (t - p) ** 2)
        return cg.per_example_gradients(loss, model, x, x[:, :1], weights=[w],
                                        compile=br.compiled(route))
    with raises(TypeError, "per_example_gradients", rf"{which} returned None", r"return"):
        run(route, build, X, variables=[[[1.0], [2.0]]])


def test_callable_returning_a_nest():
    with pytest.raises(TypeError, match=r"the callable target returned list.*tf\.stack"):
        cg.stacked_jacobian(lambda x: [x, x], XT)


KINDS = (  # kind, "value" or "error", test, a regular expression its ids match
    ("a numpy bool for a bool option", "value", "test_numpy_bool_option_counts_as_a_bool"),
    ("loss_fn that is not callable", "error", "test_loss_fn_not_callable"),
    ("tape= that is not a GradientTape", "error", "test_tape_of_the_wrong_type"),
    ("an unknown strategy (the valid ones listed)", "error",
     "test_unknown_strategy_lists_valid_ones"),
    ("an unknown unconnected_gradients", "error", "test_unknown_unconnected_gradients"),
    ("a callable that returns None inside a nest", "error",
     "test_callable_returns_none_inside_a_nest"),
    ("a model that returns None", "error", "test_model_or_loss_returns_none", "-model$"),
    ("a loss_fn that returns None", "error", "test_model_or_loss_returns_none", "-loss_fn$"),
    ("a callable that returns a nest", "error", "test_callable_returning_a_nest"),
)
