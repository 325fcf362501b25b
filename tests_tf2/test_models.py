"""tf_keras models on every route: a v1 Graph, tf.function with an unknown batch, eager
(compiled and uncompiled), and a TF1 graph in its own process. Each route is checked
against the oracle (a loop over examples on a float64 copy of the model, or central
differences), and the routes against each other."""

import numpy as np
import pytest

from compat_grads.testing import models

ITEMS = models.items()


@pytest.fixture(scope="session")
def tf1_outcomes():
    return models.run_tf1_process()


@pytest.mark.parametrize("item", ITEMS, ids=str)
def test_model_item_on_every_route(item, tf1_outcomes):
    problems, outcomes, oracle_error, difference = models.check_item(item, tf1_outcomes[item.id])
    assert not problems, "\n".join(problems)
    assert set(outcomes) == set(models.ROUTES)
    if not item.case.fails:
        assert oracle_error <= models.TOLERANCE["float32"]
        assert difference <= models.TOLERANCE["float32"]


def test_tf1_process_ran_every_item(tf1_outcomes):
    assert set(tf1_outcomes) == {item.id for item in ITEMS}
    mlp = tf1_outcomes["mlp-per_example_gradients"]
    assert mlp.error is None
    assert [v.shape for v in mlp.values] == [(4, 5, 6), (4, 6), (4, 6, 3), (4, 3)]


def test_a_wrong_oracle_is_reported(monkeypatch, tf1_outcomes):
    (item,) = models.items("mlp-weights_jacobian")
    monkeypatch.setattr(models, "oracle", lambda item: [
        v * 1.01 for v in tf1_outcomes[item.id].values])
    problems, *_ = models.check_item(item, tf1_outcomes[item.id])
    assert any("is off by" in p for p in problems)


def test_the_difference_quotient_shared_by_both_oracles_is_exact_to_rounding():
    # the matrix's oracle and the Keras models' one take every difference with it
    from compat_grads.testing.oracle import central_difference, unit

    x = np.array([[0.3, -0.7], [1.1, 0.2]])
    for index in ((0, 1), 3, (slice(None), 0)):
        direction = unit(x.shape, index)
        got = central_difference(lambda v: np.sin(v) * v.sum(), x, direction, 1e-6)
        want = np.cos(x) * direction * x.sum() + np.sin(x) * direction.sum()
        np.testing.assert_allclose(got, want, atol=1e-8)
    assert unit((2, 2), 3)[1, 1] == 1 and unit((2, 2), 3).sum() == 1
