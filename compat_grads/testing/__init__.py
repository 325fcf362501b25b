"""Testing: `compare_port` for users' ports, `check_derivatives` for their own functions,
and the shared test matrix (cases, oracle, routes and checks) for both suites and the CLI.

The names below load on first use, so `compat_grads.testing.modes` (the mode spellings the
pytest plugin reads at start-up) imports without TensorFlow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and IDEs
    from compat_grads.testing.cases import CASES, Case
    from compat_grads.testing.derivative_check import check_derivatives
    from compat_grads.testing.derivative_report import DerivativeReport, DerivativeRow
    from compat_grads.testing.matrix import Item, items
    from compat_grads.testing.port import DERIVATIVES, PORT_MODES, compare_port
    from compat_grads.testing.port_report import PortReport, PortRow
    from compat_grads.testing.routes import TF1_ROUTES, TF2_ROUTES, XLA_ROUTES, Result, run
    from compat_grads.testing.tolerances import PORT_TOLERANCE

_LAZY = {
    **dict.fromkeys(("CASES", "Case"), "compat_grads.testing.cases"),
    **dict.fromkeys(("Item", "items"), "compat_grads.testing.matrix"),
    "check_derivatives": "compat_grads.testing.derivative_check",
    **dict.fromkeys(("DerivativeReport", "DerivativeRow"),
                    "compat_grads.testing.derivative_report"),
    **dict.fromkeys(("DERIVATIVES", "PORT_MODES", "compare_port"), "compat_grads.testing.port"),
    **dict.fromkeys(("PortReport", "PortRow"), "compat_grads.testing.port_report"),
    **dict.fromkeys(("TF1_ROUTES", "TF2_ROUTES", "XLA_ROUTES", "Result", "run"),
                    "compat_grads.testing.routes"),
    "PORT_TOLERANCE": "compat_grads.testing.tolerances",
}

__all__ = ["CASES", "DERIVATIVES", "PORT_MODES", "PORT_TOLERANCE", "Case", "DerivativeReport",
           "DerivativeRow", "Item", "PortReport", "PortRow", "Result", "TF1_ROUTES",
           "TF2_ROUTES", "XLA_ROUTES", "check_derivatives", "compare_port", "items", "run"]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'compat_grads.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
