"""Unknown rank while building (TensorSpec(None), placeholder(shape=None)): exact values,
and the errors that can only come at run time.

stacked_jacobian, batch_jacobian and batch_hessian of unknown rank are rows of the case
table (compat_grads.testing._suite.bad_inputs); here the kinds that need a test of their own.
"""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite import bad_input_routes as br
from compat_grads.testing._suite.bad_input_routes import TOL, X, call, run


@pytest.mark.parametrize("strategy", ["forward", "reverse"])
@pytest.mark.parametrize("route", br.GRAPHS)
def test_unknown_rank_hessian(route, strategy):
    out = run(route, lambda x: call(route, cg.hessian, br.cube_sum, x, strategy=strategy), X,
              unknown_rank=True)
    np.testing.assert_allclose(out, br.jacobian_of_elementwise(6 * X.astype(np.float64)),
                               rtol=TOL)


@pytest.mark.parametrize("route", br.GRAPHS)
def test_unknown_rank_per_element_gradients(route):
    out = run(route, lambda x: call(route, cg.per_element_gradients, tf.sin, x), X,
              unknown_rank=True)
    np.testing.assert_allclose(out, np.cos(X.astype(np.float64)), rtol=TOL)


UNKNOWN_RANK_PRODUCTS = {  # name: (call, analytic value at X)
    "jvp": (lambda x: cg.jvp(tf.sin, x, tf.ones_like(x))[1], lambda x: np.cos(x)),
    "vjp": (lambda x: cg.vjp(tf.sin, x, tf.ones_like(x))[1], lambda x: np.cos(x)),
    "hvp": (lambda x: cg.hvp(br.cube_sum, x, tf.ones_like(x)), lambda x: 6 * x),
    "stacked_jacobian-chunked": (
        lambda x: cg.stacked_jacobian(tf.sin, x, chunk_size=1),
        lambda x: br.jacobian_of_elementwise(np.cos(x))),
    "hessian-loop": (lambda x: cg.hessian(br.cube_sum, x, strategy="loop"),
                     lambda x: br.jacobian_of_elementwise(6 * x)),
}


@pytest.mark.parametrize("name", UNKNOWN_RANK_PRODUCTS)
@pytest.mark.parametrize("mode", (br.FUNCTION, br.V1_GRAPH))
def test_unknown_rank_products_and_chunks(mode, name):
    compute, analytic = UNKNOWN_RANK_PRODUCTS[name]
    out = run(f"{mode}.callable", compute, X, unknown_rank=True)
    np.testing.assert_allclose(out, analytic(X.astype(np.float64)), rtol=TOL, atol=TOL)


@pytest.mark.parametrize("independent", [True, False], ids=["independent", "exact"])
@pytest.mark.parametrize("mode", (br.FUNCTION, br.V1_GRAPH))
def test_unknown_rank_per_example_gradients(mode, independent):
    def build(x, w):
        return cg.per_example_gradients(lambda t, p: (t - p) ** 2, lambda v: tf.matmul(v, w),
                                        x, x[:, :1], weights=w, independent=independent)
    w = np.array([[1.0], [2.0]], np.float32)
    out = run(f"{mode}.callable", build, X, unknown_rank=True, variables=[w])
    residual = X.astype(np.float64) @ w - X[:, :1]  # d (x·w - y)² / dw = 2 (x·w - y) x
    np.testing.assert_allclose(out, (2 * residual * X)[:, :, None], rtol=TOL)


@pytest.mark.parametrize("route", br.GRAPHS)
def test_unknown_rank_scalar_fed_to_batch_jacobian(route):
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"compat_grads\.batch_jacobian: (target|source) needs a leading "
                             r"batch dimension"):
        run(route, lambda x: call(route, cg.batch_jacobian, tf.sin, x), np.float32(1.0),
            unknown_rank=True)


def test_batch_jacobian_unknown_batch_mismatch_fails_at_run_time_with_our_message():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 2])
        y = tf.compat.v1.placeholder_with_default(tf.zeros([3, 2]), [None, 2]) + x[:1]
        block = cg.batch_jacobian(y, x)
        with tf.compat.v1.Session() as session:
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"compat_grads\.batch_jacobian: target and source must "
                                     r"have the same batch size"):
                session.run(block, {x: np.ones((2, 2), np.float32)})


KINDS = (  # kind, "value" or "error", test
    ("unknown rank: hessian", "value", "test_unknown_rank_hessian"),
    ("unknown rank: per_element_gradients", "value", "test_unknown_rank_per_element_gradients"),
    ("unknown rank: jvp, vjp, hvp, chunks, loops", "value",
     "test_unknown_rank_products_and_chunks"),
    ("unknown rank: per_example_gradients", "value", "test_unknown_rank_per_example_gradients"),
    ("unknown rank: a scalar fed as a batch (run time)", "error",
     "test_unknown_rank_scalar_fed_to_batch_jacobian"),
    ("unknown batch sizes that differ (run time)", "error",
     "test_batch_jacobian_unknown_batch_mismatch_fails_at_run_time_with_our_message",
     None, (br.V1_GRAPH,)),
)
