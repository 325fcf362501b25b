"""TF1 suite: v2 behaviour is disabled here, before anything else imports TensorFlow code
that could run an op. This process stays in TF1 graph mode for its whole life."""

import pytest
import tensorflow as tf

tf.compat.v1.disable_v2_behavior()

from compat_grads.testing import tolerances  # noqa: E402

tolerances.pin_runtime_for_bitwise()


@pytest.fixture(scope="session", autouse=True)
def _tensorflow_release(record_testsuite_property):
    """The release under test, in the JUnit file (docs/support_table.py reads it)."""
    record_testsuite_property("tensorflow", tf.__version__)
