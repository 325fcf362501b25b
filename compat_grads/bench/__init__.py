"""`compat-grads bench`: compat_grads against the recipes users write and TensorFlow's best,
side by side in one run. Ratios are `their time / our time` (above 1: we are faster)."""

from compat_grads.bench.suite import main, run

__all__ = ["main", "run"]
