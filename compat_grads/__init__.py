"""compat_grads: Jacobian-type derivatives with one API in TF1 graphs and TF2 eager code.

The derivative functions load TensorFlow on first use, not at `import compat_grads`: the
`compat-grads scan` tool and the exceptions need no TensorFlow. A program that imported
TensorFlow first loads them at `import compat_grads` (below).
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from compat_grads._src.core.errors import (
    DerivativeError,
    MaterializedWarning,
    MemoryWarning,
    ModeError,
    VectorizationWarning,
    XlaWarning,
)
from compat_grads._src.memory import MemoryPlan, memory_plans

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and IDEs
    from compat_grads._src.call.compile import clear_cache
    from compat_grads.api import (
        batch_divergence,
        batch_hessian,
        batch_hessian_diagonal,
        batch_jacobian,
        batch_laplacian,
        clipped_gradients,
        diagonal_estimate,
        divergence,
        empirical_ntk,
        fisher_operator,
        ggn_operator,
        hessian,
        hessian_diagonal,
        hessian_operator,
        hvp,
        jvp,
        laplacian,
        per_element_gradients,
        per_example_gradient_norms,
        per_example_gradients,
        solve,
        stacked_jacobian,
        top_eigenvalues,
        trace_estimate,
        vjp,
    )
    from compat_grads.dispatch import execution_mode
    from compat_grads.testing.derivative_check import check_derivatives

__version__ = "0.2.0"

_LAZY = {
    **dict.fromkeys(("batch_divergence", "batch_hessian", "batch_hessian_diagonal",
                     "batch_jacobian", "batch_laplacian", "clipped_gradients",
                     "diagonal_estimate", "divergence", "empirical_ntk", "fisher_operator",
                     "ggn_operator",
                     "hessian", "hessian_diagonal", "hessian_operator", "hvp", "jvp",
                     "laplacian", "per_element_gradients", "per_example_gradient_norms",
                     "per_example_gradients", "solve", "stacked_jacobian", "top_eigenvalues",
                     "trace_estimate", "vjp"), "compat_grads.api"),
    "check_derivatives": "compat_grads.testing",  # loads compat_grads.testing on first use
    "clear_cache": "compat_grads._src.call.compile",
    "execution_mode": "compat_grads.dispatch",
}

__all__ = [
    "DerivativeError",
    "MaterializedWarning",
    "MemoryPlan",
    "MemoryWarning",
    "ModeError",
    "VectorizationWarning",
    "XlaWarning",
    "batch_divergence",
    "batch_hessian",
    "batch_hessian_diagonal",
    "batch_jacobian",
    "batch_laplacian",
    "check_derivatives",
    "clipped_gradients",
    "clear_cache",
    "diagonal_estimate",
    "divergence",
    "empirical_ntk",
    "execution_mode",
    "fisher_operator",
    "ggn_operator",
    "hessian",
    "hessian_diagonal",
    "hessian_operator",
    "hvp",
    "jvp",
    "laplacian",
    "memory_plans",
    "per_element_gradients",
    "per_example_gradient_norms",
    "per_example_gradients",
    "solve",
    "stacked_jacobian",
    "top_eigenvalues",
    "trace_estimate",
    "vjp",
]


def __getattr__(name: str):
    if name == "migrate":  # `cg.migrate.gradient_rows`, as `scan --fix` writes it
        return importlib.import_module("compat_grads.migrate")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'compat_grads' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list:
    return sorted({*globals(), *__all__})


# TensorFlow already loaded (a program's `import tensorflow` came first): the derivative
# functions and the helpers `scan --fix` writes load now, at the import, not inside the
# program's first call (whose graph then builds in the time of the others: about 20 ms of
# imports, with cached bytecode, had landed in the first graph's build). Neither changes
# TensorFlow's state.
def _load_functions() -> None:
    """Loads the derivative functions and the `scan --fix` helpers (TensorFlow must be
    loaded already): what `import compat_grads` does after a program's `import tensorflow`."""
    importlib.import_module("compat_grads.api")
    importlib.import_module("compat_grads.migrate.runtime")


if "tensorflow" in sys.modules:
    _load_functions()
