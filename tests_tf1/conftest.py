"""TF1 suite: v2 behaviour is disabled here, before anything else imports TensorFlow code
that could run an op. This process stays in TF1 graph mode for its whole life."""

import numpy as np
import pytest
import tensorflow as tf

tf.compat.v1.disable_v2_behavior()

from compat_grads.testing import tolerances  # noqa: E402

tolerances.pin_runtime_for_bitwise()


@pytest.fixture(scope="session", autouse=True)
def _tensorflow_release(record_testsuite_property):
    """The release under test, in the JUnit file (docs/support_table.py reads it)."""
    record_testsuite_property("tensorflow", tf.__version__)


def _assert_nested_close(got, want, rtol=1e-5, atol=1e-5):
    got, want = tf.nest.flatten(got), tf.nest.flatten(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.fixture
def assert_nested_close():
    """Assert two nests of arrays have the same structure, shapes and values."""
    return _assert_nested_close
