"""tf_keras models on every route: a v1 Graph, tf.function with an unknown batch, eager
(compiled and uncompiled), and a TF1 graph in its own process. Each route is checked
against the oracle (a loop over examples on a float64 copy of the model, or central
differences), and the routes against each other."""

import itertools

import pytest

from compat_grads.testing import models
from compat_grads.testing.tolerances import scaled_error

ITEMS = models.items()


@pytest.fixture(scope="session")
def tf1_outcomes(tmp_path_factory):
    import pickle
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("tf1") / "models.pickle"
    done = subprocess.run([sys.executable, "-m", "compat_grads.testing.models", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    with open(out, "rb") as handle:
        return pickle.load(handle)


@pytest.mark.parametrize("item", ITEMS, ids=str)
def test_model_item_on_every_route(item, tf1_outcomes):
    expected = models.oracle(item)
    outcomes = {route: models.run(item, route) for route in models.TF2_ROUTES}
    outcomes["tf1"] = tf1_outcomes[item.id]
    problems = [p for route, outcome in outcomes.items()
                for p in models.problems(item, route, outcome, expected)]
    assert not problems, "\n".join(problems)
    working = {r: o.values for r, o in outcomes.items() if o.error is None}
    for (a, first), (b, second) in itertools.combinations(working.items(), 2):
        for k, (x, y) in enumerate(zip(first, second)):
            assert scaled_error(x, y) <= models.TOLERANCE["float32"], (a, b, k)


def test_tf1_process_ran_every_item(tf1_outcomes):
    assert set(tf1_outcomes) == {item.id for item in ITEMS}
    mlp = tf1_outcomes["mlp-per_example_gradients"]
    assert mlp.error is None
    assert [v.shape for v in mlp.values] == [(4, 5, 6), (4, 6), (4, 6, 3), (4, 3)]
