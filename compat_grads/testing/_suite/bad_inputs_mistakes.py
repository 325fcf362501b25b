"""The bad-input catalogue's mistakes TensorFlow answers with None (a source "not
connected"), told apart from a truly unconnected source: a section of the case table of
`compat_grads.testing._suite.bad_inputs`."""

from __future__ import annotations

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads.testing._suite import bad_input_routes as r
from compat_grads.testing._suite.bad_input_routes import BadInput, Error


def mistakes():
    """Mistakes TensorFlow answers with None (a source "not connected"), told apart from a
    truly unconnected source."""
    graph_tensor = r.GRAPH_TENSOR + r.TF1_BOTH[1:]
    for name in ("stacked_jacobian", "per_element_gradients", "batch_jacobian"):
        yield BadInput("swapped arguments (the source computed from the target)",
                       f"swapped-{name}",
                       lambda route, x, n=name: getattr(cg, n)(x, r.square(x)),
                       Error(ValueError, name, (rf"{r.argument_of(name)} is computed from the "
                                                r"target", r"the arguments look swapped",
                                                rf"{name}\(y, x\)")), graph_tensor)
    yield BadInput("a Python list of numbers as sources (a nest of scalars, not a vector)",
                   "list-of-numbers",
                   lambda route, x: r.call(route, cg.stacked_jacobian, lambda s: s ** 2, x,
                                           sources=[[1.0, 2.0], [3.0, 4.0]]),
                   Error(TypeError, "stacked_jacobian", (
                       r"the sources are a Python list of numbers", r"one scalar tensor per "
                       r"number", r"Pass one tensor: np\.array")),
                   r.CALLABLE + r.TF1_BOTH[:1])
    yield BadInput("tape= in a graph, where a tape records nothing", "tape-in-a-graph",
                   lambda route, x: cg.stacked_jacobian(r.square(x), x,
                                                        tape=tf.GradientTape()),
                   Error(RuntimeError, "stacked_jacobian", (
                       r"the tape has no record", r"In a graph .*, drop tape=")),
                   (r.GRAPH_TENSOR[1], *r.TF1_BOTH[1:]))
