"""Keras specifics in TF2: Keras 3 models and variables, tf.function with an input
signature (no retracing) and SavedModel, Dropout in training mode, and bad input."""

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import KERAS2_BUILT_IN, tf
from compat_grads.testing import models

MLP = [c for c in models.CASES if c.name == "mlp"][0]
needs_keras3 = pytest.mark.skipif(
    KERAS2_BUILT_IN, reason="TensorFlow up to 2.15 has no Keras 3: tf.keras is Keras 2")


def _keras3_mlp():
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((5,)), keras.layers.Dense(6, activation="tanh"),
                             keras.layers.Dense(3)])


def _loop_per_example(model, weights, x, y):
    rows = []
    for s in range(x.shape[0]):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(models.loss_fn(y[s:s + 1], model(x[s:s + 1])))
        rows.append(tape.gradient(loss, weights))
    return [tf.stack(column).numpy() for column in zip(*rows)]


@needs_keras3
@pytest.mark.parametrize("compile", [True, False])
def test_keras3_model_per_example_gradients_and_batch_jacobian(compile):
    model = _keras3_mlp()
    x, y = models.inputs(MLP)
    x = tf.constant(x, tf.float32)
    weights = [w.value for w in model.trainable_weights]
    expected = _loop_per_example(model, weights, x, tf.constant(y))
    grads = cg.per_example_gradients(models.loss_fn, model, x, y, compile=compile)
    assert [g.shape for g in grads] == [(4, 5, 6), (4, 6), (4, 6, 3), (4, 3)]
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        out = model(x)
    for strategy in ("forward", "reverse"):
        np.testing.assert_allclose(
            cg.batch_jacobian(model, x, strategy=strategy, compile=compile).numpy(),
            tape.batch_jacobian(out, x).numpy(), rtol=1e-5, atol=1e-6)


@needs_keras3
@pytest.mark.parametrize("route", ["compiled", "uncompiled", "tf.function"])
def test_keras3_weights_give_a_flat_gauss_newton_jacobian_and_hessian(route):
    """flat=True over a Keras 3 model's variables, as Gauss-Newton code calls it."""
    model = _keras3_mlp()
    x = tf.constant(models.inputs(MLP)[0], tf.float32)
    weights = model.trainable_weights

    def both():
        options = {"compile": route != "uncompiled", "flat": True}
        return (cg.stacked_jacobian(lambda ws: model(x), weights, **options),
                cg.hessian(lambda ws: tf.reduce_sum(model(x) ** 2), weights, **options))

    jacobian, hessian = tf.function(both)() if route == "tf.function" else both()
    n = sum(int(np.prod(w.shape)) for w in weights)  # 5*6 + 6 + 6*3 + 3 = 57
    assert jacobian.shape == (4 * 3, n) and hessian.shape == (n, n)
    blocks = cg.stacked_jacobian(lambda ws: model(x), weights)
    np.testing.assert_allclose(jacobian.numpy()[:, :30], blocks[0].numpy().reshape(12, 30),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(hessian.numpy(), hessian.numpy().T, rtol=1e-4, atol=1e-5)


@needs_keras3
def test_keras3_weights_are_sources_in_forward_mode():
    model = _keras3_mlp()
    x = tf.constant(models.inputs(MLP)[0], tf.float32)
    forward = cg.stacked_jacobian(lambda ws: tf.reduce_sum(model(x), 1),
                                  model.trainable_weights, strategy="forward", compile=False)
    reverse = cg.stacked_jacobian(lambda ws: tf.reduce_sum(model(x), 1),
                                  model.trainable_weights, strategy="reverse", compile=False)
    assert [f.shape for f in forward] == [(4, 5, 6), (4, 6), (4, 6, 3), (4, 3)]
    for f, r in zip(forward, reverse):
        np.testing.assert_allclose(f.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)


@needs_keras3
def test_keras3_model_in_a_v1_graph_is_a_clear_mode_error():
    model = _keras3_mlp()
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 5])
        with pytest.raises(cg.ModeError, match=r"compat_grads.batch_jacobian: Sequential is "
                           r"a Keras 3 object.*tf_keras"):
            cg.batch_jacobian(model, x)
        with pytest.raises(cg.ModeError, match="per_example_gradients.*Keras 3"):
            cg.per_example_gradients(models.loss_fn, model, x, tf.zeros([4], tf.int64))


class _Saliency(tf.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.traces = 0

    @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.float32),
                                  tf.TensorSpec([None], tf.int64)])
    def __call__(self, x, y):
        self.traces += 1
        return (cg.batch_jacobian(self.model, x),
                cg.per_example_gradients(models.loss_fn, self.model, x, y))


def test_tf_function_with_signature_does_not_retrace_and_survives_saved_model(tmp_path):
    module = _Saliency(models.build_model(MLP))
    x, y = models.inputs(MLP)
    first = module(tf.constant(x, tf.float32), tf.constant(y))
    module(tf.constant(np.concatenate([x, x]), tf.float32), tf.constant(np.concatenate([y, y])))
    assert module.traces == 1
    tf.saved_model.save(module, str(tmp_path / "saliency"))
    loaded = tf.saved_model.load(str(tmp_path / "saliency"))
    again = loaded(tf.constant(x, tf.float32), tf.constant(y))
    for a, b in zip(tf.nest.flatten(first), tf.nest.flatten(again)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert again[0].shape == (4, 3, 5)


def test_dropout_in_training_mode_draws_one_mask_per_example():
    # Dense(6) -> Dropout(0.5) -> Dense(3): the gradient for the last kernel is
    # dropped(h_s) ⊗ dL/dlogits_s, where each unit of h_s is either 0 or h_s / (1 - 0.5).
    model = models.build_model([c for c in models.CASES if c.name == "dropout_inference"][0])
    x, y = models.inputs(MLP)
    x = tf.constant(np.tile(x, (8, 1)), tf.float32)
    y = np.tile(y, 8)
    grads = cg.per_example_gradients(models.loss_fn, lambda v: model(v, training=True), x, y,
                                     weights=model.trainable_weights)
    hidden = model.layers[0](x).numpy()
    logits_grad = grads[3].numpy()  # the last bias: dL/dlogits per example
    ratio = grads[2].numpy() / (2 * hidden[:, :, None] * logits_grad[:, None, :])
    assert np.all(np.isclose(ratio, 0, atol=1e-4) | np.isclose(ratio, 1, atol=1e-4))
    kept = np.isclose(ratio[:, :, 0], 1, atol=1e-4)
    assert 0.2 < kept.mean() < 0.8  # about half the units survive
    assert len({tuple(row) for row in kept}) > 1  # masks differ between examples


def test_bad_input_gets_clear_errors():
    model = models.build_model(MLP)
    x, y = models.inputs(MLP)
    x = tf.constant(x, tf.float32)
    mean_loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with pytest.raises(ValueError, match=r"per_example_gradients: loss_fn must return one "
                       r"loss per example.*reduction='none'"):
        cg.per_example_gradients(mean_loss, model, x, y)
    with pytest.raises(ValueError, match="strategy must be 'auto', 'reverse' or 'loop'"):
        cg.per_example_gradients(models.loss_fn, model, x, y, strategy="forward")
    with pytest.raises(TypeError, match="model must be callable"):
        cg.per_example_gradients(models.loss_fn, "model", x, y, weights=model.weights)
    with pytest.raises(TypeError, match="weights=None needs a Keras model"):
        cg.per_example_gradients(models.loss_fn, lambda v: model(v), x, y)
    with pytest.raises(ValueError, match="x must be batched"):
        cg.per_example_gradients(models.loss_fn, model, tf.constant(1.0), y)


def test_per_example_gradients_in_graphs_need_no_static_batch():
    model = models.build_model(MLP)
    x, y = models.inputs(MLP)
    compute = tf.function(
        lambda x, y: cg.per_example_gradients(models.loss_fn, model, x, y, chunk_size=3),
        input_signature=[tf.TensorSpec([None, 5]), tf.TensorSpec([None], tf.int64)])
    concrete = compute.get_concrete_function()
    assert [o.shape.as_list() for o in concrete.outputs] == [
        [None, 5, 6], [None, 6], [None, 6, 3], [None, 3]]
    got = compute(tf.constant(x, tf.float32), tf.constant(y))
    want = cg.per_example_gradients(models.loss_fn, model, tf.constant(x, tf.float32), y)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


def test_inputs_and_labels_must_have_the_same_number_of_examples():
    model = models.build_model(MLP)
    x, y = models.inputs(MLP)
    x = tf.constant(x, tf.float32)
    for compile in (True, False):
        with pytest.raises(ValueError, match=r"per_example_gradients: x and y must have the "
                           r"same number of examples.*x has 4 and y has 3"):
            cg.per_example_gradients(models.loss_fn, model, x, y[:3], compile=compile)
    compute = tf.function(
        lambda x, y: cg.per_example_gradients(models.loss_fn, model, x, y),
        input_signature=[tf.TensorSpec([None, 5]), tf.TensorSpec([None], tf.int64)])
    with pytest.raises(tf.errors.InvalidArgumentError, match="x and y must have the same "
                       "number of examples"):
        compute(x, tf.constant(y[:3]))


@needs_keras3
def test_a_subclassed_keras3_model_is_recognised():
    import keras

    from compat_grads._src.core.models import is_keras3

    class Mine(keras.Model):
        def call(self, x):
            return x

    assert is_keras3(Mine())


def test_keras2_models_are_never_taken_for_keras3():
    from compat_grads._src.core.models import is_keras3

    model = models.build_model(MLP)
    assert not is_keras3(model)
    # Up to TensorFlow 2.15 Keras 2 itself is the package `keras`; later it is tf_keras.
    assert type(model).__module__.startswith("keras.") == KERAS2_BUILT_IN


def test_a_dropped_model_is_freed_from_the_compile_cache():
    import gc
    import weakref

    cg.clear_cache()

    def use_a_model():
        model = models.build_model(MLP)
        x, y = models.inputs(MLP)
        cg.per_example_gradients(models.loss_fn, model, tf.constant(x, tf.float32), y)
        return weakref.ref(model)

    gone = use_a_model()
    gc.collect()
    assert gone() is None


def test_a_new_loss_object_on_every_call_warns_once():
    model = models.build_model(MLP)
    x, y = models.inputs(MLP)
    x = tf.constant(x, tf.float32)
    cg.clear_cache()
    with pytest.warns(RuntimeWarning, match="compiled 8 times with different options"):
        for _ in range(8):
            loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                 reduction="none")
            cg.per_example_gradients(loss, model, x, y)
