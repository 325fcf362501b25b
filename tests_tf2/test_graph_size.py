"""The graph does not grow with the number of target elements (a trap of the Python-loop
recipe): same op count for m = 200 and m = 4000, in a v1 Graph inside TF2."""

import pytest

import compat_grads as cg
from compat_grads.testing.checks import assert_flat_graph


@pytest.mark.parametrize("strategy", ["reverse", "forward", "loop", "auto"])
def test_stacked_jacobian_graph_is_flat_in_m(strategy):
    assert_flat_graph(cg.stacked_jacobian, strategy)


def test_per_element_gradients_graph_is_flat_in_m():
    assert_flat_graph(cg.per_element_gradients)
