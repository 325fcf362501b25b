"""The public functions, by family: first order (`stacked_jacobian`, `per_element_gradients`,
`batch_jacobian`, `per_example_gradients`, `jvp`, `vjp`), second order (`hessian`,
`batch_hessian`, `hvp`), private training (`per_example_gradient_norms`,
`clipped_gradients`), traces (Laplacians, divergences, Hessian diagonals) and curvature
(`hessian_operator`, `ggn_operator`, `fisher_operator`: `tf.linalg.LinearOperator`s;
`top_eigenvalues`, `trace_estimate`, `diagonal_estimate`, `solve` on any square
`tf.linalg.LinearOperator`; `empirical_ntk`). Each is its
signature, its docstring and one call of the call path (`compat_grads._src.call.run`); they
live in `compat_grads._src.api`, by family, and are this module's names (`help()` and
pickling name them `compat_grads.api.<name>`)."""

from compat_grads._src.api.curvature import (
    diagonal_estimate,
    fisher_operator,
    ggn_operator,
    hessian_operator,
    solve,
    top_eigenvalues,
    trace_estimate,
)
from compat_grads._src.api.dp import clipped_gradients, per_example_gradient_norms
from compat_grads._src.api.first_order import (
    batch_jacobian,
    jvp,
    per_element_gradients,
    per_example_gradients,
    stacked_jacobian,
    vjp,
)
from compat_grads._src.api.kernels import empirical_ntk
from compat_grads._src.api.second_order import batch_hessian, hessian, hvp
from compat_grads._src.api.traces import (
    batch_divergence,
    batch_hessian_diagonal,
    batch_laplacian,
    divergence,
    hessian_diagonal,
    laplacian,
)

__all__ = ["batch_divergence", "batch_hessian", "batch_hessian_diagonal", "batch_jacobian",
           "batch_laplacian", "clipped_gradients", "diagonal_estimate", "divergence",
           "empirical_ntk", "fisher_operator", "ggn_operator", "hessian", "hessian_diagonal",
           "hessian_operator", "hvp", "jvp", "laplacian", "per_element_gradients",
           "per_example_gradient_norms", "per_example_gradients", "solve", "stacked_jacobian",
           "top_eigenvalues", "trace_estimate", "vjp"]
