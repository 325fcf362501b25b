"""tf_keras models in a TF1 graph (v2 behaviour disabled, variables initialized in a
Session): every model item against the oracle, a loop of per-example tf.gradients in the
same mode."""

import pytest

from compat_grads.testing import models

ITEMS = models.items()


@pytest.mark.parametrize("item", ITEMS, ids=str)
def test_model_item_in_tf1(item):
    outcome = models.run(item, "tf1")
    problems = models.problems(item, "tf1", outcome, models.oracle(item))
    assert not problems, "\n".join(problems)


def test_rnn_falls_back_with_a_warning_naming_tf1_control_flow():
    (item,) = [i for i in ITEMS if i.id == "lstm-per_example_gradients"]
    outcome = models.run(item, "tf1")
    assert outcome.error is None
    assert any("TF1 control flow" in w for w in outcome.warnings), outcome.warnings
