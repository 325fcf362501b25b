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


def test_weights_jacobian_and_per_example_in_the_keras_session():
    # Legacy code builds in the default graph and runs in Keras's own session.
    import numpy as np

    import compat_grads as cg
    from compat_grads._src.core.tf import tf

    case = [c for c in models.CASES if c.name == "mlp"][0]
    x, y = models.inputs(case)
    with tf.Graph().as_default():
        model = models.build_model(case)
        xs = tf.compat.v1.placeholder(tf.float32, [None, 5])
        losses = models.loss_fn(y, model(xs))
        jacobian = cg.stacked_jacobian(losses, model.trainable_weights)
        per_example = cg.per_example_gradients(models.loss_fn, model, xs, y)
        session = tf.compat.v1.keras.backend.get_session()
        got = session.run([jacobian, per_example], {xs: x})
    want = models.oracle(models.ModelItem(case, "per_example_gradients"))
    for block in (*got[0], *got[1]):
        assert block.shape[0] == 4
    for a, b, w in zip(got[0], got[1], want):
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(b, w, rtol=1e-4, atol=1e-5)
