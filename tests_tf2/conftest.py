"""TF2 suite: the runtime is pinned so that routes running the same algorithm agree bit for
bit (see compat_grads.testing.tolerances), and the CPU is split into four logical devices
for the tf.distribute tests (before any op runs; ops go to /cpu:0 unless placed)."""

import importlib

import pytest

from compat_grads._src.core.tf import tf
from compat_grads.testing import tolerances
from compat_grads.testing.devices import logical_cpus

tolerances.pin_runtime_for_bitwise()
CPUS = logical_cpus(4)


@pytest.fixture(scope="session", autouse=True)
def _tensorflow_release(record_testsuite_property):
    """The release under test, in the JUnit file (docs/support_table.py reads it)."""
    record_testsuite_property("tensorflow", tf.__version__)


@pytest.fixture
def pfor_conversions(monkeypatch):
    """A list that gets an entry each time pfor starts converting a traced row (its `PFor`
    is built): empty when rows were refused before pfor converted anything."""
    pfor = importlib.import_module("tensorflow.python.ops.parallel_for.pfor")  # the module
    built, original = [], pfor.PFor.__init__

    def counted(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)
    monkeypatch.setattr(pfor.PFor, "__init__", counted)
    return built
