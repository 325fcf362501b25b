"""NaN and Inf: where the derivative involves them they come out; elsewhere they do not.

NaN inputs, infinite derivatives, NaN in the value only and integer-valued ops are rows of
the case table (compat_grads.testing._suite.bad_inputs); here the kinds that need a test of their
own.
"""

import numpy as np
import pytest

import compat_grads as cg
from compat_grads.testing._suite import bad_input_routes as br
from compat_grads.testing._suite.bad_input_routes import call, run


@pytest.mark.parametrize("route", br.ROUTES)
def test_nan_in_an_unconnected_source(route):
    def build(a, b):
        return call(route, cg.per_element_gradients, lambda s: s[0] ** 2, [a, b],
                    unconnected_gradients="zero")
    da, db = run(route, build, np.array([1.0, 2.0], np.float32),
                 np.array([np.nan], np.float32))
    np.testing.assert_array_equal(da, [2.0, 4.0])
    np.testing.assert_array_equal(db, [0.0, 0.0])


KINDS = (  # kind, "value" or "error", test
    ("NaN in an unconnected source", "value", "test_nan_in_an_unconnected_source"),
)
