"""per_example_gradient_norms and clipped_gradients beyond the Keras 2 model cases (which
run every layer kind on every route and in TF1: tests_tf2/test_models.py): Keras 3 layers,
attention and tied embeddings, a weight used twice, the fallback for a layer no rule knows,
the noise, the options and bad input. The oracle is a Python loop of one-example
gradients."""

import json
import pathlib
import re
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads._src.core.tf import keras2

KERAS_IS_3 = keras.__version__.startswith("3")
"""`import keras` is Keras 3 from TensorFlow 2.16 on, Keras 2 before (the tests of
`keras` then test Keras 2 twice)."""

RNG = np.random.default_rng(0)


def _loop(loss_fn, model, x, y, weights):
    """Per-example gradients, one example at a time (numpy, zeros for unused weights)."""
    rows = []
    for s in range(x.shape[0]):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(loss_fn(y[s:s + 1], model(x[s:s + 1])))
        rows.append([np.zeros(w.shape) if g is None else tf.convert_to_tensor(g).numpy()
                     for g, w in zip(tape.gradient(loss, weights), weights)])
    return [np.stack(column) for column in zip(*rows)]


def _expected(grads, clip):
    batch = grads[0].shape[0]
    norms = np.sqrt(sum(np.sum(np.reshape(g, (batch, -1)) ** 2, 1) for g in grads))
    scale = clip / np.maximum(norms, clip)
    return norms, [np.tensordot(scale, g, 1) for g in grads]


def _check(loss_fn, model, x, y, weights=None, tolerance=1e-5, route="eager", **options):
    """Norms and clipped sums against the loop, with a clip that shortens half the
    examples' gradients, computed on `route` ("eager", "uncompiled" or "function": in a
    tf.function of an unknown batch); returns the MaterializedWarnings."""
    weights = weights if weights is not None else model.trainable_weights
    grads = _loop(loss_fn, model, x, y, weights)
    clip = float(np.median(_expected(grads, 1.0)[0]))
    norms, clipped = _expected(grads, clip)

    def both(x, y):
        return (cg.per_example_gradient_norms(loss_fn, model, x, y, weights=weights,
                                              **options),
                cg.clipped_gradients(loss_fn, model, x, y, weights=weights,
                                     l2_norm_clip=clip, **options))
    if route == "uncompiled":
        options = {**options, "compile": False}
    if route == "function":
        both = tf.function(both, input_signature=[
            tf.TensorSpec([None, *x.shape[1:]], x.dtype),
            tf.TensorSpec([None, *y.shape[1:]], y.dtype)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, sums = both(x, y)
    np.testing.assert_allclose(got, norms, rtol=tolerance)
    scale = max(np.abs(c).max() for c in clipped)
    for mine, want in zip(sums, clipped):
        np.testing.assert_allclose(np.asarray(mine) / scale, want / scale, atol=tolerance)
    return [w for w in caught if issubclass(w.category, cg.MaterializedWarning)]


def _sparse(y_true, logits):
    return keras.losses.sparse_categorical_crossentropy(y_true, logits, from_logits=True)


class AttentionBlock(keras.Model):
    """Embedding, self-attention, a residual layer normalization and a dense head."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(11, 8)
        self.attend = keras.layers.MultiHeadAttention(2, 4)
        self.norm = keras.layers.LayerNormalization()
        self.head = keras.layers.Dense(3)

    def call(self, x):
        h = self.embed(x)
        return self.head(tf.reduce_mean(self.norm(h + self.attend(h, h)), 1))


class TiedEmbeddings(keras.Model):
    """Logits from the embedding table itself: one weight, two uses."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(11, 6)
        self.mix = keras.layers.Dense(6, activation="tanh")

    def call(self, x):
        return tf.matmul(self.mix(self.embed(x)), self.embed.embeddings, transpose_b=True)


def _per_token(y_true, logits):
    return tf.reduce_sum(_sparse(y_true, logits), -1)


L = keras.layers
KERAS3 = {
    "dense on sequences": (lambda: keras.Sequential([L.Dense(5, activation="tanh"), L.Dense(3),
                                                     L.Flatten()]), (6, 7, 4), None),
    "strided and dilated convolutions": (lambda: keras.Sequential([
        L.Conv2D(4, 3, strides=2, padding="same", activation="relu"), L.MaxPooling2D(),
        L.Conv2D(3, 2, dilation_rate=2), L.Flatten(), L.Dense(3)]), (5, 12, 12, 2), None),
    "conv1d and pooling": (lambda: keras.Sequential([
        L.Conv1D(4, 3, activation="relu"), L.GlobalAveragePooling1D(), L.Dense(3)]),
        (5, 9, 2), None),
    "transposed convolutions": (lambda: keras.Sequential([
        L.Conv2DTranspose(3, 3, strides=2, output_padding=1, activation="tanh"),
        L.Conv2DTranspose(2, (2, 3), padding="same"), L.Flatten(), L.Dense(3)]),
        (4, 5, 5, 2), None),
    "transposed 1-d and 3-d convolutions": (lambda: keras.Sequential([
        L.Conv3DTranspose(2, 2, strides=2), L.Reshape((-1, 2)),
        L.Conv1DTranspose(2, 3, strides=2, padding="same"), L.Flatten(), L.Dense(3)]),
        (3, 2, 3, 2, 2), None),
    "depthwise and separable": (lambda: keras.Sequential([
        L.DepthwiseConv2D(3, depth_multiplier=2), L.SeparableConv2D(3, 2), L.Flatten(),
        L.Dense(3)]), (4, 8, 8, 2), None),
    "embedding": (lambda: keras.Sequential([L.Embedding(11, 4), L.GlobalAveragePooling1D(),
                                            L.Dense(3)]), (5, 7), 11),
    "normalizations in inference": (lambda: keras.Sequential([
        L.Dense(6), L.LayerNormalization(), L.BatchNormalization(), L.Dense(3)]), (5, 4), None),
    "attention block": (AttentionBlock, (3, 6), 11),
    "lstm, unrolled while built": (lambda: keras.Sequential([
        L.Embedding(11, 4), L.LSTM(5), L.Dense(3)]), (4, 6), 11),
    "bidirectional simple rnn": (lambda: keras.Sequential([
        L.Embedding(11, 4), L.Bidirectional(L.SimpleRNN(5, return_sequences=True)),
        L.GlobalAveragePooling1D(), L.Dense(3)]), (4, 6), 11),
    "tied embeddings": (TiedEmbeddings, (3, 5), 11),
}


def _batch(shape, vocabulary, per_token=False):
    x = (RNG.integers(0, vocabulary, shape) if vocabulary else
         RNG.standard_normal(shape).astype("float32"))
    labels = RNG.integers(0, vocabulary if per_token else 3, shape if per_token else shape[0])
    return tf.constant(x), tf.constant(labels)


@pytest.mark.parametrize("route", ["eager", "uncompiled", "function"])
@pytest.mark.parametrize("case", sorted(KERAS3))
def test_keras3_layers_need_no_fallback_and_match_the_loop(case, route):
    make, shape, vocabulary = KERAS3[case]
    keras.utils.set_random_seed(1)
    model = make()
    tied = case == "tied embeddings"
    x, y = _batch(shape, vocabulary, per_token=tied)
    model(x)
    assert not _check(_per_token if tied else _sparse, model, x, y, route=route)


def test_a_keras3_gru_reads_all_but_its_recurrent_bias_and_restores_the_layer():
    keras.utils.set_random_seed(6)
    gru = L.GRU(5)
    model = keras.Sequential([L.Embedding(11, 4), gru, L.Dense(3)])
    x, y = _batch((4, 6), 11)
    model(x)
    caught = _check(_sparse, lambda v: model(v, training=False), x, y,
                    weights=model.trainable_weights)
    # Keras 3 adds its recurrent bias to a zero state before slicing it: that one weight
    # is materialized, the others are read (Keras 2 reads them all)
    assert len(caught) == (2 if KERAS_IS_3 else 0)
    assert all("1 weight(s)" in str(w.message) and "gru_cell/bias" in str(w.message)
               for w in caught)
    assert gru.unroll is False


def test_a_weight_used_twice_is_one_weight():
    w = tf.Variable(RNG.standard_normal((4, 4)) * 0.5, dtype=tf.float32)

    def model(x, first=w, second=w):
        return tf.matmul(tf.tanh(tf.matmul(x, first)), second)

    def mse(y_true, y_pred):
        return tf.reduce_sum(tf.square(y_true - y_pred), -1)

    x, y = (tf.constant(RNG.standard_normal((6, 4)), tf.float32) for _ in range(2))
    assert not _check(mse, model, x, y, weights=[w])
    # the norm of the summed gradient: the two uses' gradients are not orthogonal
    norms = cg.per_example_gradient_norms(mse, model, x, y, weights=[w]).numpy()
    uses = [_loop(mse, lambda v: model(v, second=tf.stop_gradient(w)), x, y, [w])[0],
            _loop(mse, lambda v: model(v, first=tf.stop_gradient(w)), x, y, [w])[0]]
    apart = np.sqrt(sum(np.sum(u.reshape(6, -1) ** 2, 1) for u in uses))
    assert np.abs(norms - apart).max() > 1e-2 * norms.max()


@pytest.mark.parametrize("legacy", [False, True], ids=["keras", "keras2"])
def test_a_layer_no_rule_knows_falls_back_with_one_warning_naming_it(legacy):
    k = keras2() if legacy else keras
    base = k.layers.Layer

    class Cumulative(base):
        def build(self, shape):
            self.w = self.add_weight(name="cumulative", shape=(shape[-1],),
                                     initializer="ones")

        def call(self, x):
            return x * tf.math.cumsum(self.w)

    k.utils.set_random_seed(2)
    model = k.Sequential([k.layers.Dense(4, activation="tanh"), Cumulative(), k.layers.Dense(3)])
    x, y = _batch((5, 3), None)
    model(x)
    caught = _check(_sparse, model, x, y)
    assert len(caught) == 2  # one per call: norms, then clipped sums
    for warning in caught:
        text = str(warning.message)
        assert "1 weight(s)" in text and "cumulative" in text and "'Cumsum'" in text


def _dense(units=3, inputs=4, legacy=True):
    k = keras2() if legacy else keras
    k.utils.set_random_seed(3)
    model = k.Sequential([k.layers.Dense(5, activation="tanh"), k.layers.Dense(units)])
    x, y = _batch((6, inputs), None)
    model(x)
    return model, x, y


def test_tf_keras_attention_and_tied_embeddings_match_the_loop():
    tf_keras = keras2()

    tf_keras.utils.set_random_seed(4)
    inputs = tf_keras.Input((6,), dtype="int32")
    table = tf_keras.layers.Embedding(11, 8)
    h = table(inputs)
    h = tf_keras.layers.LayerNormalization()(h + tf_keras.layers.MultiHeadAttention(2, 4)(h, h))
    logits = tf.matmul(tf_keras.layers.Dense(8, activation="tanh")(h), table.embeddings,
                       transpose_b=True)
    model = tf_keras.Model(inputs, logits)
    x, y = _batch((3, 6), 11, per_token=True)
    assert not _check(_per_token, model, x, y)


def test_float64_matches_to_1e_10():
    tf_keras = keras2()

    tf_keras.backend.set_floatx("float64")
    try:
        tf_keras.utils.set_random_seed(5)
        model = tf_keras.Sequential([tf_keras.layers.Conv2D(3, 2, activation="tanh"),
                                     tf_keras.layers.Flatten(), tf_keras.layers.Dense(3)])
        x = tf.constant(RNG.standard_normal((4, 5, 5, 2)))
        y = tf.constant(RNG.integers(0, 3, 4))
        model(x)
        assert not _check(_sparse, model, x, y, tolerance=1e-10)
    finally:
        tf_keras.backend.set_floatx("float32")


@pytest.mark.parametrize("route", ["eager", "uncompiled", "function", "xla"])
def test_every_route_gives_the_loop_values(route):
    model, x, y = _dense()
    if route in ("eager", "uncompiled"):
        assert not _check(_sparse, model, x, y, compile=route == "eager")
        return
    grads = _loop(_sparse, model, x, y, model.trainable_weights)
    norms, clipped = _expected(grads, 0.3)

    @tf.function(jit_compile=route == "xla")
    def both(x, y):
        return (cg.per_example_gradient_norms(_sparse, model, x, y),
                cg.clipped_gradients(_sparse, model, x, y, l2_norm_clip=0.3))
    got, sums = both(x, y)
    np.testing.assert_allclose(got, norms, rtol=1e-5)
    for mine, want in zip(sums, clipped):
        np.testing.assert_allclose(mine, want, atol=1e-6)


def _noise(model, x, y, seed, compile=True, multiplier=1.5, clip=0.3):
    noised = cg.clipped_gradients(_sparse, model, x, y, l2_norm_clip=clip, compile=compile,
                                  noise_multiplier=multiplier, seed=seed)
    clean = cg.clipped_gradients(_sparse, model, x, y, l2_norm_clip=clip, compile=compile)
    return [np.asarray(a) - np.asarray(b) for a, b in zip(noised, clean)]


def test_the_noise_has_the_stated_deviation_and_one_seed_gives_it_on_every_route():
    model, x, y = _dense(units=300, inputs=40)
    drawn = _noise(model, x, y, seed=11)
    # every weight's noise is the stateless normal of [seed, its index], times sigma * C
    for index, (noise, weight) in enumerate(zip(drawn, model.trainable_weights)):
        want = tf.random.stateless_normal(weight.shape, [11, index]) * 1.5 * 0.3
        np.testing.assert_allclose(noise, want, atol=1e-5)
    kernel = drawn[2]  # 5 x 300
    assert abs(kernel.std() / 0.45 - 1) < 0.05 and abs(kernel.mean()) < 0.02
    np.testing.assert_allclose(_noise(model, x, y, seed=11, compile=False)[2], kernel,
                               atol=1e-5)
    traced = tf.function(lambda x, y: cg.clipped_gradients(
        _sparse, model, x, y, l2_norm_clip=0.3, noise_multiplier=1.5, seed=11))(x, y)
    clean = cg.clipped_gradients(_sparse, model, x, y, l2_norm_clip=0.3)
    np.testing.assert_allclose(np.asarray(traced[2]) - clean[2], kernel, atol=1e-5)
    assert np.abs(_noise(model, x, y, seed=12)[2] - kernel).max() > 0.1


def test_a_new_seed_does_not_trace_again():
    model, x, y = _dense()
    cg.clear_cache()
    traces = []

    def counted(y_true, logits):
        traces.append(1)
        return _sparse(y_true, logits)

    def step(seed):
        return cg.clipped_gradients(counted, model, x, y, l2_norm_clip=0.3,
                                    noise_multiplier=1.0, seed=seed)
    loss = step(1)
    count = len(traces)
    step(2)
    step(3)
    assert count >= 1 and len(traces) == count and loss is not None


def test_the_options_shape_the_result():
    model, x, y = _dense()
    weights = model.trainable_weights
    named = {"kernel": weights[0], "bias": weights[1]}
    total = cg.clipped_gradients(_sparse, model, x, y, l2_norm_clip=0.3)
    mean, norms = cg.clipped_gradients(_sparse, model, x, y, l2_norm_clip=0.3,
                                       reduction="mean", return_norms=True)
    for a, b in zip(mean, total):
        np.testing.assert_allclose(a, np.asarray(b) / 6, rtol=1e-6)
    np.testing.assert_allclose(norms, cg.per_example_gradient_norms(_sparse, model, x, y),
                               rtol=1e-6)
    per = cg.per_example_gradient_norms(_sparse, model, x, y, weights=named, per_weight=True)
    assert set(per) == {"kernel", "bias"} and per["kernel"].shape == [6]
    just = cg.per_example_gradient_norms(_sparse, model, x, y, weights=[weights[0]])
    np.testing.assert_allclose(per["kernel"], just, rtol=1e-6)
    losses, _ = cg.per_example_gradient_norms(_sparse, model, x, y, return_value=True)
    np.testing.assert_allclose(losses, _sparse(y, model(x)), rtol=1e-6)
    (found, aux) = cg.clipped_gradients(_sparse, lambda v: (model(v), v * 2), x, y,
                                        l2_norm_clip=0.3, weights=weights, has_aux=True)
    np.testing.assert_allclose(aux, np.asarray(x) * 2)


def test_a_weight_the_loss_does_not_use():
    model, x, y = _dense()
    spare = tf.Variable(tf.ones([2]))
    weights = [*model.trainable_weights, spare]
    none = cg.clipped_gradients(_sparse, model, x, y, l2_norm_clip=0.3, weights=weights)
    zero = cg.clipped_gradients(_sparse, model, x, y, l2_norm_clip=0.3, weights=weights,
                                unconnected_gradients="zero")
    assert none[-1] is None and np.all(np.asarray(zero[-1]) == 0)
    per = cg.per_example_gradient_norms(_sparse, model, x, y, weights=weights, per_weight=True)
    assert np.all(np.asarray(per[-1]) == 0)


BAD = {
    "l2_norm_clip=0": (dict(l2_norm_clip=0.0), ValueError, "l2_norm_clip must be a positive"),
    "l2_norm_clip=-1": (dict(l2_norm_clip=-1), ValueError, "l2_norm_clip must be a positive"),
    "l2_norm_clip='1'": (dict(l2_norm_clip="1"), TypeError, "l2_norm_clip must be a positive"),
    "l2_norm_clip=True": (dict(l2_norm_clip=True), TypeError, "l2_norm_clip must be"),
    "noise_multiplier<0": (dict(l2_norm_clip=1.0, noise_multiplier=-0.5), ValueError,
                           "noise_multiplier must be a number >= 0"),
    "noise without seed": (dict(l2_norm_clip=1.0, noise_multiplier=1.0), ValueError,
                           "noise_multiplier=1.0 needs seed="),
    "seed=1.5": (dict(l2_norm_clip=1.0, noise_multiplier=1.0, seed=1.5), TypeError,
                 "seed must be a Python int"),
    "reduction='avg'": (dict(l2_norm_clip=1.0, reduction="avg"), ValueError,
                        "reduction must be one of 'sum', 'mean'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_options_are_named(case):
    model, x, y = _dense()
    options, error, words = BAD[case]
    with pytest.raises(error, match="compat_grads.clipped_gradients: " + words):
        cg.clipped_gradients(_sparse, model, x, y, **options)


@pytest.mark.parametrize("route", ["eager", "function"])
def test_a_loss_for_the_whole_batch_is_named(route):
    model, x, y = _dense()

    def batch_loss(y_true, logits):
        return tf.reduce_mean(_sparse(y_true, logits))

    def call(x, y):
        return cg.per_example_gradient_norms(batch_loss, model, x, y)
    with pytest.raises(ValueError, match="loss_fn must return one loss per example"):
        (call if route == "eager" else tf.function(call))(x, y)


@pytest.mark.parametrize("legacy", [False, True], ids=["keras", "keras2"])
def test_batch_statistics_with_independent_examples_are_named(legacy):
    k = keras2() if legacy else keras
    model = k.Sequential([k.layers.Dense(4), k.layers.BatchNormalization(), k.layers.Dense(3)])
    x, y = _batch((6, 4), None)
    model(x)
    with pytest.raises(ValueError, match="independent=True needs examples that do not "
                                         "interact, but the op"):
        cg.clipped_gradients(_sparse, lambda v: model(v, training=True), x, y,
                             l2_norm_clip=1.0, weights=model.trainable_weights)


PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "privacy.rst"


def page_block(title):
    """The python code block of the Private training page's section `title`."""
    text = PAGE.read_text()
    section = text[text.index(f"\n{title}\n"):]
    block = re.search(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", section).group(1)
    return "\n".join(line[3:] for line in block.splitlines())


def test_the_keras_training_step_of_the_guide_trains_with_new_noise_each_step():
    scope = {}
    exec(page_block("A Keras training step"), scope)  # noqa: S102 - the page's own example
    model = scope["model"]
    assert int(model.optimizer.iterations) == 2  # 64 examples in batches of 32
    before = [w.numpy() for w in model.trainable_weights]
    x, y = tf.random.normal([32, 28, 28, 1]), tf.zeros([32], tf.int32)
    first = model.train_on_batch(x, y, return_dict=True)
    after = [w.numpy() for w in model.trainable_weights]
    assert any(np.abs(a - b).max() > 0 for a, b in zip(after, before))
    assert np.isfinite(first["median_norm"])
    # one step's noise is not the next one's: the seed is the optimizer's step counter
    step = model.optimizer.iterations
    noises = [cg.clipped_gradients(keras.losses.sparse_categorical_crossentropy, model, x, y,
                                   l2_norm_clip=1.0, noise_multiplier=1.0, seed=step + k)
              for k in (0, 1)]
    assert np.abs(np.asarray(noises[0][0]) - np.asarray(noises[1][0])).max() > 0.1


def test_the_layer_table_of_the_guide_is_the_rules_registry():
    from compat_grads._src.dp.rules import LAYERS

    text = PAGE.read_text()
    table = text[text.index("\nWhich layers have rules\n"):text.index("\nA recurrent layer")]
    cells = re.findall(r"\n   [* ] - (.+)", table)
    assert list(zip(cells[2::2], cells[3::2])) == list(LAYERS)


def test_the_guide_shows_the_committed_bench_run():
    from compat_grads.bench import private

    report = json.loads((PAGE.parent / "_static" / "bench" / "private.json").read_text())
    assert (PAGE.parent / "_static" / "bench" / "private.rst").read_text() == private.rst(
        report)
    assert [found["model"] for found in report["models"]] == list(private.MODELS)
    from compat_grads.bench import private_tfp

    against = json.loads((PAGE.parent / "_static" / "bench" / "private_tfp.json").read_text())
    assert (PAGE.parent / "_static" / "bench" / "private_tfp.rst").read_text() == (
        private_tfp.rst(against))
    assert [found["model"] for found in against["models"]] == list(private_tfp.MODELS)


def test_the_private_bench_runs_every_recipe_and_reads_every_layer():
    from compat_grads.bench import private

    found = private.times("mnist_cnn", private.RECIPES, quick=True, repeats=1)
    assert set(found["ms"]) == set(private.RECIPES) and not found["fallbacks"]
    assert all(ms > 0 for ms in found["ms"].values())
