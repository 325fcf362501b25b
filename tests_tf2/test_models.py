"""tf_keras models on every mode: a v1 Graph, tf.function with an unknown batch, eager
(compiled or uncompiled, by turns: `models.route_plan`, so every model and function meets
both), and, for the quick model check's items, a TF1 graph in its own process. Each route is
checked against the oracle (a loop over examples on a float64 copy of the model, or central
differences), and the routes against each other."""

import numpy as np
import pytest

from compat_grads.testing import models, modes

ITEMS = models.items()
PLAN = models.route_plan(ITEMS)
IN_TF1 = {item.id for item in models.quick(ITEMS)}
"""The TF1 process runs the quick model check's items (every model, function and option):
tests_tf1/test_models.py holds every item's TF1 result to the oracle."""


@pytest.fixture(scope="session")
def tf1_outcomes():
    return models.run_tf1_process(IN_TF1)


@pytest.mark.parametrize("item", ITEMS, ids=str)
def test_model_item_on_every_mode(item, tf1_outcomes):
    problems, outcomes, oracle_error, difference = models.check_item(
        item, tf1_outcomes.get(item.id), PLAN[item.id])
    assert not problems, "\n".join(problems)
    tf1 = {modes.TF1} if item.id in IN_TF1 else set()
    assert set(outcomes) == {*PLAN[item.id], *tf1}
    if not item.case.fails:
        assert oracle_error <= models.TOLERANCE["float32"]
        assert difference <= models.TOLERANCE["float32"]


def test_every_model_and_function_meets_every_route():
    for item in ITEMS:
        assert {route.split(".")[0] for route in PLAN[item.id]} == {
            modes.V1_GRAPH, modes.FUNCTION, modes.EAGER} and len(PLAN[item.id]) == 3
    for key in (lambda i: i.case.name, lambda i: i.function):
        met = {(key(i), route) for i in ITEMS for route in PLAN[i.id]}
        assert met == {(key(i), route) for i in ITEMS for route in models.TF2_ROUTES}
        # and the TF1 process meets every model and function
        assert {key(i) for i in ITEMS if i.id in IN_TF1} == {key(i) for i in ITEMS}


def test_tf1_process_ran_the_quick_items(tf1_outcomes):
    assert set(tf1_outcomes) == IN_TF1
    mlp = tf1_outcomes["mlp-per_example_gradients-strategyloop"]
    assert mlp.error is None
    assert [v.shape for v in mlp.values] == [(4, 5, 6), (4, 6), (4, 6, 3), (4, 3)]


def test_a_wrong_oracle_is_reported(monkeypatch, tf1_outcomes):
    (item,) = models.items("mlp-batch_jacobian")  # a quick item: the TF1 process ran it
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
