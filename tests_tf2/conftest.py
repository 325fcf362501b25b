"""TF2 suite: the runtime is pinned so that routes running the same algorithm agree bit for
bit (see compat_grads.testing.tolerances)."""

from compat_grads.testing import tolerances

tolerances.pin_runtime_for_bitwise()
