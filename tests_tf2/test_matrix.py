"""Every matrix item on every TF2 route (v1 Graph, tf.function, eager), against the oracle,
against each other, and bit for bit against the TF1 graph route run in its own process.

The TF1 process runs the tensor route only: the TF1 suite (tests_tf1/test_matrix.py) holds
every TF1 route to the oracle and to tf1.tensor bit for bit, so each TF1 route equals the TF2
graph routes bit for bit through tf1.tensor, and running tf1.callable here again would only
repeat that work."""

import pytest

from compat_grads.testing import TF2_ROUTES, checks, items

ITEMS = items()


@pytest.fixture(scope="session")
def tf1_results():
    return checks.run_tf1_process(ITEMS, ["tf1.tensor"], bitwise=True)


@pytest.mark.parametrize("item", ITEMS, ids=str)
def test_matrix(item, tf1_results):
    extra = tf1_results[item.id]
    problems, results, _, _ = checks.check_item(item, TF2_ROUTES, "tf1.tensor", extra)
    assert not problems, "\n".join(problems)
    expected = {r for r in (*TF2_ROUTES, "tf1.tensor") if item.applies(r)}
    assert set(results) == expected


def test_tf1_process_really_ran_tf1(tf1_results):
    assert set(tf1_results) == {item.id for item in ITEMS}
    matmul = tf1_results["matmul_column-stacked_jacobian-auto"]["tf1.tensor"]
    assert matmul.error is None
    assert matmul.values[1].shape == (100, 1, 50, 1)  # after the value (return_value)
