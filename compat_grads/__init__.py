"""compat_grads: Jacobian-type derivatives with one API in TF1 graphs and TF2 eager code."""

from compat_grads._errors import DerivativeError, ModeError, VectorizationWarning
from compat_grads.api import (
    batch_hessian,
    batch_jacobian,
    hessian,
    hvp,
    jvp,
    per_element_gradients,
    per_example_gradients,
    stacked_jacobian,
    vjp,
)
from compat_grads.dispatch import clear_cache, execution_mode

__version__ = "0.1.0"

__all__ = [
    "DerivativeError",
    "ModeError",
    "VectorizationWarning",
    "batch_hessian",
    "batch_jacobian",
    "clear_cache",
    "execution_mode",
    "hessian",
    "hvp",
    "jvp",
    "per_element_gradients",
    "per_example_gradients",
    "stacked_jacobian",
    "vjp",
]
