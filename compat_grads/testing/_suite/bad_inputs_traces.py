"""The bad-input catalogue's rows for the diagonals and traces (hessian_diagonal, laplacian,
divergence and their per-sample forms): estimator options that do not go together, and the
shapes each function needs. `compat_grads.testing._suite.bad_inputs` joins them into its table."""

from __future__ import annotations

import compat_grads as cg
from compat_grads.testing._suite import bad_input_routes as r
from compat_grads.testing._suite.bad_input_routes import BadInput, Error

ESTIMATOR_RULES = [  # id, options, what the message says, the fix
    ("num-samples-with-exact", {"num_samples": 8}, r"num_samples= needs method='hutchinson'",
     r"Drop num_samples=, or pass method='hutchinson'"),
    ("return-std-with-exact", {"return_std": True}, r"return_std= needs method='hutchinson'",
     r"Drop return_std="),
    ("return-std-one-probe", {"method": "hutchinson", "num_samples": 1, "return_std": True},
     r"needs num_samples of at least 2", r"Pass num_samples=2 or more"),
]


def estimators(in_tf1):
    """Options of the diagonals and traces that do not go together, and the shapes they
    need: a scalar target, one scalar per sample, a square Jacobian. `in_tf1`: the
    functions whose option rows the TF1 suite runs too."""
    for case, options, said, fix in ESTIMATOR_RULES:
        for name in r.TRACES:
            yield BadInput(f"estimator options: {case}", f"{case}-{name}",
                           lambda route, x, name=name, options=options: r.standard(
                               name, route, x, **options),
                           Error(ValueError, name, (said, fix)),
                           (*r.routes_of(name), *(r.TF1_BOTH if name in in_tf1 else ())))
    for name in ("batch_hessian_diagonal", "batch_laplacian"):
        yield BadInput("estimate with independent=False", f"hutchinson-coupled-{name}",
                       lambda route, x, name=name: r.standard(
                           name, route, x, method="hutchinson", independent=False),
                       Error(ValueError, name, (r"independent=False", r"method='hutchinson'",
                                                r"Pass method='exact'")), r.routes_of(name))
    for name, instead in (("laplacian", "batch_laplacian"),
                          ("hessian_diagonal", "batch_hessian_diagonal")):
        yield BadInput("a non-scalar target for a Laplacian", f"non-scalar-{name}",
                       lambda route, x, name=name: r.call(route, getattr(cg, name),
                                                          r.row_cube_sum, x),
                       Error(ValueError, name, (r"target must be a scalar", r"shape \(2,\)",
                                                instead)), r.routes_of(name) + r.TF1_BOTH)
    for name in ("batch_laplacian", "batch_hessian_diagonal"):
        yield BadInput("a target that is not one scalar per sample", f"not-per-sample-{name}",
                       lambda route, x, name=name: r.call(route, getattr(cg, name), r.square,
                                                          x),
                       Error(ValueError, name, (r"one scalar per sample", r"shape \(2, 2\)",
                                                r"Reduce each sample")), r.routes_of(name))
    for name in ("divergence", "batch_divergence"):
        yield BadInput("a Jacobian that is not square", f"not-square-{name}",
                       lambda route, x, name=name: r.call(route, getattr(cg, name),
                                                          r.row_cube_sum, x),
                       Error(ValueError, name, (r"the Jacobian must be square",
                                                r"target has shape \(2,\)",
                                                r"Differentiate a vector field")),
                       r.routes_of(name) + r.TF1_BOTH)
