"""One tensor twice in the primals of jvp, vjp and hvp: every occurrence gets the total
derivative (TensorFlow's convention: tf.gradients(y, [x, x])).

Repeated sources of the Jacobians and the Hessian, callables that read their source by
closure, variables as targets, constant tensors as weights and third order are rows of the
case table (compat_grads.testing._suite.bad_inputs).
"""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite import bad_input_routes as br
from compat_grads.testing._suite.bad_input_routes import TOL, X3, run


def _product_of_copies(s):
    return s[0] * s[1] ** 2  # x³ when both are x


@pytest.mark.parametrize("route", br.CALLABLE)
def test_repeated_primal_in_jvp_vjp_and_hvp(route):
    """jvp along (u, w) is J·(u + w), J the total derivative; vjp gives cᵀJ per occurrence;
    hvp gives H·(u + w) per occurrence."""
    u, w = np.array([1.0, 0.5, -1.0], np.float32), np.array([0.0, 1.0, 2.0], np.float32)

    def build(x, u, w):
        compile = br.compiled(route)
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


KINDS = (  # kind, "value" or "error", test
    ("one tensor twice in the primals: jvp, vjp, hvp", "value",
     "test_repeated_primal_in_jvp_vjp_and_hvp"),
)
