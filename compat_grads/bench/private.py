"""`compat-grads bench --private`: a private training step (clipped, summed per-example
gradients) against the non-private step of the same model (the floor) and the recipes
users write: `vectorized_map` of a `GradientTape` per example then clipping by hand, and
compat_grads' own materialized `per_example_gradients` then clipping. Times side by side in
one process per model; the peak memory of each recipe's step in a process of its own
(`python -m compat_grads.bench.private peak MODEL RECIPE QUICK`, one JSON line).

The models are those of the private training issue: TF Privacy's MNIST tutorial CNN
(b=256), an embedding + LSTM text classifier (b=64, T=100), a transformer block (b=32,
T=64) and two Dense(4096) layers (b=64, whose per-example gradients would take 8.6 GB: the
materializing recipes are not run there). The peak memory of a step is the most its tensors
hold at once (TensorFlow's allocator statistics), as Opacus reads CUDA's, with one op run at
a time (`BFC`)."""

from __future__ import annotations

import json
import sys

import numpy as np

from compat_grads.bench import timing

MODELS = ("mnist_cnn", "transformer", "lstm", "dense4096")
RECIPES = ("non-private step", "vectorized_map + clip", "per_example_gradients + clip",
           "clipped_gradients")
MATERIALIZED = {"dense4096": 64 * 2 * 4096 * 4096 * 4}
"""Models whose per-example gradients the materializing recipes would hold: bytes."""
CLIP = 1.0
GOALS = {"time": 2.6, "memory": 1.6}
"""Opacus's CI thresholds: a private step within these multiples of the non-private one."""


def _model(name, quick=False):
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    layers, rng = keras.layers, np.random.default_rng(0)
    scale = 4 if quick else 1
    if name == "mnist_cnn":
        model = keras.Sequential([
            keras.Input((28, 28, 1)), layers.Conv2D(16, 8, strides=2, padding="same",
                                                    activation="relu"),
            layers.MaxPooling2D(2, 1), layers.Conv2D(32, 4, strides=2, activation="relu"),
            layers.MaxPooling2D(2, 1), layers.Flatten(), layers.Dense(32, activation="relu"),
            layers.Dense(10)])
        x, y, classes = rng.standard_normal((256 // scale, 28, 28, 1)), None, 10
    elif name == "lstm":
        model = keras.Sequential([keras.Input((100 // scale,), dtype="int32"),
                                  layers.Embedding(5000, 32), layers.LSTM(32),
                                  layers.Dense(2)])
        x, y, classes = rng.integers(0, 5000, (64 // scale, 100 // scale)), None, 2
    elif name == "transformer":
        tokens = keras.Input((64 // scale,), dtype="int32")
        h = layers.Embedding(1000, 64)(tokens)
        h = layers.LayerNormalization()(h + layers.MultiHeadAttention(4, 16)(h, h))
        h = layers.LayerNormalization()(h + layers.Dense(64)(layers.Dense(128,
                                                                          "relu")(h)))
        model = keras.Model(tokens, layers.Dense(2)(layers.GlobalAveragePooling1D()(h)))
        x, y, classes = rng.integers(0, 1000, (32 // scale, 64 // scale)), None, 2
    else:
        width = 4096 // scale
        model = keras.Sequential([keras.Input((width,)), layers.Dense(width, "relu"),
                                  layers.Dense(width)])
        x, classes = rng.standard_normal((64 // scale, width)), width
    y = rng.integers(0, classes, x.shape[0])
    x = tf.constant(x if x.dtype.kind == "i" else x.astype(np.float32))
    return model, x, tf.constant(y)


def _loss(y_true, logits):
    import keras

    return keras.losses.sparse_categorical_crossentropy(y_true, logits, from_logits=True)


def _recipes(model, x, y):
    """{recipe: a compiled step returning the gradients it would apply}."""
    import tensorflow as tf

    import compat_grads as cg

    weights = model.trainable_weights

    def clipped(grads):
        batch = tf.shape(grads[0])[0]
        norms = tf.sqrt(sum(tf.reduce_sum(tf.reshape(g, [batch, -1]) ** 2, 1)
                            for g in grads))
        scale = CLIP / tf.maximum(norms, CLIP)
        return [tf.tensordot(scale, g, 1) for g in grads]

    def one_example(pair):
        xi, yi = pair
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_loss(yi[None], model(xi[None])))
        return tape.gradient(loss, weights)

    def non_private():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_loss(y, model(x)))
        return tape.gradient(loss, weights)
    return {
        RECIPES[0]: tf.function(non_private),
        RECIPES[1]: tf.function(lambda: clipped(tf.vectorized_map(one_example, (x, y)))),
        RECIPES[2]: tf.function(lambda: clipped(cg.per_example_gradients(
            _loss, model, x, y))),
        RECIPES[3]: lambda: cg.clipped_gradients(_loss, model, x, y, l2_norm_clip=CLIP),
    }


def times(name, chosen, quick=False, repeats=7) -> dict:
    """{recipe: median ms per step} of model `name`, the `chosen` recipes side by side."""
    import warnings

    model, x, y = _model(name, quick)
    recipes = {k: v for k, v in _recipes(model, x, y).items() if k in chosen}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = timing.interleaved_ms(recipes, repeats)
    import compat_grads as cg

    fallbacks = sorted({str(w.message)[:200] for w in caught
                        if issubclass(w.category, cg.MaterializedWarning)})
    return {"model": name, "ms": found, "fallbacks": fallbacks}


def peak(name, recipe, quick=False) -> dict:
    """The peak of a step of `recipe` after the first, over what was held before
    (`timing.allocator_peak_mb`; the BFC allocator is set by `run`)."""
    model, x, y = _model(name, quick)
    step = _recipes(model, x, y)[recipe]
    return {"model": name, "recipe": recipe, "peak_mb": timing.allocator_peak_mb(step)}


def run(quick=False, log=print) -> dict:
    """Every model: the peak of each recipe in a process of its own (a recipe whose process
    fails is reported so, and not timed), then the times of the others in one process."""
    report = {"models": []}
    for name in MODELS:
        log(f"private training: {name}")
        skipped = name in MATERIALIZED and not quick
        peaks, failed = {}, {}
        for recipe in (RECIPES[0], RECIPES[3]) if skipped else RECIPES:
            code, found = _process(["peak", name, recipe, int(quick)], BFC)
            if code == 0:
                peaks[recipe] = found["peak_mb"]
            else:
                failed[recipe] = found
        code, found = _process(["times", name, int(quick), *peaks])
        if code != 0:
            raise RuntimeError(f"timing {name} failed: {found}")
        found.update(peak_mb=peaks, failed=failed)
        report["models"].append(found)
    return report


BFC = {"TF_CPU_ALLOCATOR_USE_BFC": "true", "TF_NUM_INTEROP_THREADS": "1"}
"""The CPU allocator whose statistics the peaks read, and one op at a time, as a GPU's one
stream runs them: with two threads the order of independent ops varies from run to run,
and the private LSTM step's peak with it (10.8-12.6 MiB over five runs, 9.6-9.8 with one;
the non-private step's 7.2 either way)."""


def _process(args, env=None):
    """(exit code, the JSON of its last line, or why it failed) of a process of this
    module, with `env` added to the environment."""
    import os
    import subprocess

    done = subprocess.run([sys.executable, "-m", "compat_grads.bench.private", *map(str, args)],
                          capture_output=True, text=True, timeout=3600,
                          env=dict(os.environ, **(env or {})))
    if done.returncode == 0:
        return 0, json.loads(done.stdout.strip().splitlines()[-1])
    if done.returncode < 0:
        return done.returncode, f"TensorFlow crashed (signal {-done.returncode})"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return done.returncode, lines[-1] if lines else f"exit code {done.returncode}"


def markdown(report) -> str:
    lines = ["| model | recipe | ms per step | time / non-private | peak MiB | "
             "memory / non-private |", "|---|---|---|---|---|---|"]
    for found in report["models"]:
        floor_ms = found["ms"][RECIPES[0]]
        floor_mb = max(found["peak_mb"][RECIPES[0]], 1.0)
        for recipe in RECIPES:
            if recipe not in found["ms"]:
                lines.append(f"| {found['model']} | {recipe} | {_missing(found, recipe)} "
                             "| | | |")
                continue
            ms, mb = found["ms"][recipe], found["peak_mb"].get(recipe, float("nan"))
            lines.append(f"| {found['model']} | {recipe} | {ms:.1f} | {ms / floor_ms:.2f} | "
                         f"{mb:.0f} | {mb / floor_mb:.2f} |")
    return "\n".join(lines)


def _missing(found, recipe) -> str:
    """Why a recipe has no numbers."""
    if recipe in found.get("failed", {}):
        return f"failed: {found['failed'][recipe]}"
    return f"not run: {MATERIALIZED[found['model']] / 1e9:.1f} GB of per-example gradients"


def rst(report) -> str:
    """The report as the reStructuredText table the Private training page includes."""
    lines = [".. list-table::", "   :header-rows: 1", ""]
    header = ("model", "recipe", "ms per step", "time / non-private", "peak MiB",
              "memory / non-private")
    rows = [header]
    for found in report["models"]:
        floor_ms = found["ms"][RECIPES[0]]
        floor_mb = max(found["peak_mb"][RECIPES[0]], 1.0)
        for recipe in RECIPES:
            if recipe not in found["ms"]:
                rows.append((found["model"], recipe, _missing(found, recipe), "", "", ""))
                continue
            ms, mb = found["ms"][recipe], found["peak_mb"][recipe]
            rows.append((found["model"], recipe, f"{ms:.1f}", f"{ms / floor_ms:.2f}",
                         f"{mb:.0f}", f"{mb / floor_mb:.2f}"))
    for row in rows:
        lines += [f"   * - {row[0]}", *(f"     - {cell}" for cell in row[1:])]
    return "\n".join(lines) + "\n"


def noise_ms(size=4096, repeats=5) -> dict:
    """The time to draw the noise of one `size x size` weight, as `clipped_gradients` does
    (`tf.random.stateless_normal`)."""
    import tensorflow as tf

    draw = tf.function(lambda: tf.random.stateless_normal([size, size], [1, 2]))
    return {"weight": [size, size], "ms": timing.interleaved_ms({"noise": draw}, repeats)[
        "noise"]}


def main(argv) -> int:
    if argv[0] == "noise":
        print(json.dumps(noise_ms()))
    elif argv[0] == "times":
        print(json.dumps(times(argv[1], argv[3:], bool(int(argv[2])))))
    else:
        print(json.dumps(peak(argv[1], argv[2], bool(int(argv[3])))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
