"""Testing: `compare_port` for users' ports, and the shared test matrix (cases, oracle,
routes and checks) for both suites and the CLI."""

from compat_grads.testing.cases import CASES, Case
from compat_grads.testing.matrix import Item, items
from compat_grads.testing.port import DERIVATIVES, PORT_MODES, compare_port
from compat_grads.testing.port_report import PortReport, PortRow
from compat_grads.testing.routes import TF1_ROUTES, TF2_ROUTES, Result, run
from compat_grads.testing.tolerances import PORT_TOLERANCE

__all__ = ["CASES", "DERIVATIVES", "PORT_MODES", "PORT_TOLERANCE", "Case", "Item",
           "PortReport", "PortRow", "Result", "TF1_ROUTES", "TF2_ROUTES", "compare_port",
           "items", "run"]
