"""TF2 suite: the runtime is pinned so that routes running the same algorithm agree bit for
bit (see compat_grads.testing.tolerances), and the CPU is split into four logical devices
for the tf.distribute tests (before any op runs; ops go to /cpu:0 unless placed)."""

import pytest

from compat_grads._tf import tf
from compat_grads.testing import tolerances
from compat_grads.testing.devices import logical_cpus

tolerances.pin_runtime_for_bitwise()
CPUS = logical_cpus(4)


@pytest.fixture(scope="session", autouse=True)
def _tensorflow_release(record_testsuite_property):
    """The release under test, in the JUnit file (docs/support_table.py reads it)."""
    record_testsuite_property("tensorflow", tf.__version__)
