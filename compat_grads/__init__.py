"""compat_grads: Jacobian-type derivatives with one API in TF1 graphs and TF2 eager code."""

from compat_grads._errors import ModeError, VectorizationWarning
from compat_grads.api import batch_jacobian, per_element_gradients, stacked_jacobian
from compat_grads.dispatch import execution_mode

__version__ = "0.1.0"

__all__ = [
    "ModeError",
    "VectorizationWarning",
    "batch_jacobian",
    "execution_mode",
    "per_element_gradients",
    "stacked_jacobian",
]
