"""The shared test matrix: cases, oracle, routes and checks, for both suites and the CLI."""

from compat_grads.testing.cases import CASES, Case
from compat_grads.testing.matrix import Item, items
from compat_grads.testing.routes import TF1_ROUTES, TF2_ROUTES, Result, run

__all__ = ["CASES", "Case", "Item", "Result", "TF1_ROUTES", "TF2_ROUTES", "items", "run"]
