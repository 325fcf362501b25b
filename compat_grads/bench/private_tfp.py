"""TF Privacy 0.9.0 against `clipped_gradients`, in TF Privacy's own environment (it pins
TensorFlow 2.14 and NumPy 1.x: `tox -e bench-privacy`, never CI): one Keras training step
(`train_on_batch`, noise and SGD included) of the non-private model, of TF Privacy's
`DPKerasSGDOptimizer` with one microbatch per example, of its fast gradient clipping
(`DPSequential` with the default layer registry: Dense and Embedding only, so the two-Dense
model), and of a `train_step` with `compat_grads.clipped_gradients`, side by side in one
process per model. Prints one JSON line: `python -m compat_grads.bench.private_tfp`."""

from __future__ import annotations

import json
import sys

import numpy as np

from compat_grads.bench import timing

CLIP, NOISE, RATE = 1.0, 1.1, 0.05
MODELS = {"mnist_cnn": 256, "lstm": 64, "dense1024": 64}
"""The models and their batch sizes (two Dense(1024) layers stand in for Dense(4096): TF
Privacy's fast clipping holds `[b, d]` per layer, its microbatches `b` times the weights)."""


def _layers(name):
    import tensorflow as tf

    layers = tf.keras.layers
    if name == "mnist_cnn":
        return [layers.Conv2D(16, 8, strides=2, padding="same", activation="relu",
                              input_shape=(28, 28, 1)),
                layers.MaxPooling2D(2, 1), layers.Conv2D(32, 4, strides=2, activation="relu"),
                layers.MaxPooling2D(2, 1), layers.Flatten(), layers.Dense(32, "relu"),
                layers.Dense(10)]
    if name == "lstm":
        return [layers.Embedding(5000, 32, input_length=100), layers.LSTM(32), layers.Dense(2)]
    return [layers.Dense(1024, "relu", input_shape=(1024,)), layers.Dense(1024)]


def _batch(name):
    import tensorflow as tf

    rng, b = np.random.default_rng(0), MODELS[name]
    if name == "mnist_cnn":
        x, classes = rng.standard_normal((b, 28, 28, 1)).astype(np.float32), 10
    elif name == "lstm":
        x, classes = rng.integers(0, 5000, (b, 100)), 2
    else:
        x, classes = rng.standard_normal((b, 1024)).astype(np.float32), 1024
    return tf.constant(x), tf.constant(rng.integers(0, classes, b))


def _models(name):
    """{recipe: a compiled Keras model}, every one with the same initial weights."""
    import tensorflow as tf
    import tensorflow_privacy as tfp
    from tensorflow_privacy.privacy.fast_gradient_clipping import layer_registry

    import compat_grads as cg

    per_example = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE)
    mean = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    class Private(tf.keras.Sequential):
        def train_step(self, data):
            x, y = data[:2]
            grads = cg.clipped_gradients(per_example, self, x, y, l2_norm_clip=CLIP,
                                         noise_multiplier=NOISE, reduction="mean",
                                         seed=self.optimizer.iterations)
            self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
            return {}

    built = {}
    tf.keras.utils.set_random_seed(0)
    floor = tf.keras.Sequential(_layers(name))
    floor.compile(tf.keras.optimizers.SGD(RATE), mean)
    built["non-private step"] = floor
    ours = Private(_layers(name))
    ours.compile(tf.keras.optimizers.SGD(RATE))
    built["clipped_gradients"] = ours
    if name != "dense1024":
        micro = tf.keras.Sequential(_layers(name))
        micro.compile(tfp.DPKerasSGDOptimizer(l2_norm_clip=CLIP, noise_multiplier=NOISE,
                                              num_microbatches=MODELS[name],
                                              learning_rate=RATE), per_example)
        built["TF Privacy DPKerasSGDOptimizer, a microbatch per example"] = micro
    else:
        fast = tfp.DPSequential(l2_norm_clip=CLIP, noise_multiplier=NOISE,
                                layer_registry=layer_registry.make_default_layer_registry(),
                                layers=_layers(name))
        fast.compile(tf.keras.optimizers.SGD(RATE), mean)
        built["TF Privacy fast gradient clipping"] = fast
    x, _ = _batch(name)
    weights = floor.get_weights()
    for model in built.values():
        model(x[:1])
        model.set_weights(weights)
    return built


def rst(report) -> str:
    """The report as the table the Private training page includes: each recipe's step and
    its time over `clipped_gradients`' (above 1: ours is faster)."""
    lines = [".. list-table::", "   :header-rows: 1", "",
             "   * - model (batch)", "     - recipe", "     - ms per step",
             "     - its time / clipped_gradients'"]
    for found in report["models"]:
        ours = found["ms"]["clipped_gradients"]
        for recipe, ms in found["ms"].items():
            lines += [f"   * - {found['model']} ({found['batch']})", f"     - {recipe}",
                      f"     - {ms:.1f}", f"     - {ms / ours:.2f}"]
    return "\n".join(lines) + "\n"


def run(repeats=5) -> dict:
    import tensorflow as tf

    report = {"tensorflow": tf.__version__, "models": []}
    for name in MODELS:
        x, y = _batch(name)
        models = _models(name)
        steps = {recipe: (lambda m=model, x=x, y=y: m.train_on_batch(x, y)) for recipe, model
                 in models.items()}
        report["models"].append({"model": name, "batch": MODELS[name],
                                 "ms": timing.interleaved_ms(steps, repeats)})
        print(json.dumps(report["models"][-1]), file=sys.stderr)
    return report


if __name__ == "__main__":
    print(json.dumps(run()))
