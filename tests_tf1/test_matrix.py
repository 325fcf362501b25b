"""Every matrix item in a TF1 graph (Session), on every TF1 route, against the oracle and, among
the graph routes, bit for bit against tf1.tensor (which the TF2 suite compares bit for bit
with the TF2 graph routes)."""

import pytest

from compat_grads.testing import TF1_ROUTES, checks, items


def test_this_process_is_tf1():
    import tensorflow as tf

    import compat_grads as cg

    assert not tf.executing_eagerly()
    assert not tf.compat.v1.control_flow_v2_enabled()
    assert cg.execution_mode() == "graph"


@pytest.mark.parametrize("item", items(), ids=str)
def test_matrix(item):
    problems, results, _, _ = checks.check_item(item, TF1_ROUTES, "tf1.tensor")
    assert not problems, "\n".join(problems)
    assert set(results) == {r for r in TF1_ROUTES if item.applies(r)}
