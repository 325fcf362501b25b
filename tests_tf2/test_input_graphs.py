"""Composite tensors and tensors of other graphs: graph tensors used eagerly after their
`as_default()` block.

Ragged and sparse targets and sources, IndexedSlices gradients and tensors of another graph
are rows of the case table (compat_grads.testing._suite.bad_inputs); here the kinds that need a
test of their own.
"""

import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite import bad_input_routes as br
from compat_grads.testing._suite.bad_input_routes import raises


@pytest.mark.parametrize("name", ["stacked_jacobian", "per_element_gradients",
                                  "batch_jacobian", "hessian"])
@pytest.mark.parametrize("route", [f"{br.EAGER}.{t}" for t in ("callable", "uncompiled", "tensor")])
def test_graph_tensors_used_eagerly_after_their_block(route, name):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2])
        y = tf.reduce_sum(x ** 3)
    what = "target" if route == f"{br.EAGER}.tensor" else br.argument_of(name)
    with raises(cg.ModeError, name, rf"{what} is a graph tensor", r"runs eagerly",
                r"not the default one", r"inside `with graph\.as_default\(\):`"):
        if route == f"{br.EAGER}.tensor":
            getattr(cg, name)(y, x)
        else:
            getattr(cg, name)(br.cube_sum, x, compile=route == f"{br.EAGER}.callable")


KINDS = (  # kind, "value" or "error", test
    ("graph tensors used eagerly after their block", "error",
     "test_graph_tensors_used_eagerly_after_their_block"),
)
