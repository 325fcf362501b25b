"""per_example_gradient_norms and clipped_gradients in a TF1 graph (the Keras model cases
run here too: tests_tf1/test_models.py): reference and resource variables read by a plain
function, an unknown batch fed at run time, an embedding looked up twice in one example, a
weight no rule knows, and the noise of a seed, the same numbers TF2 draws."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg

v1 = tf.compat.v1
RNG = np.random.default_rng(0)


def _model(resource):
    W = v1.get_variable("W", [5, 4], use_resource=resource)
    b = v1.get_variable("b", [4], use_resource=resource)
    V = v1.get_variable("V", [4, 2], use_resource=resource)
    E = v1.get_variable("E", [7, 2], use_resource=resource)
    scale = v1.get_variable("scale", [2], use_resource=resource)

    def model(inputs):
        x, ids = inputs
        h = tf.tanh(tf.matmul(x, W) + b)
        looked = tf.reduce_sum(tf.nn.embedding_lookup(E, ids), 1)
        return tf.matmul(h, V) + looked * tf.math.cumsum(scale)
    return model, [W, b, V, E, scale]


def _loss(y_true, y_pred):
    return tf.reduce_sum(tf.square(y_true - y_pred), -1)


@pytest.mark.parametrize("resource", [False, True], ids=["reference", "resource"])
def test_a_tf1_graph_matches_a_loop_of_tf_gradients(resource):
    with tf.Graph().as_default():
        model, weights = _model(resource)
        x = v1.placeholder(tf.float32, [None, 5])
        ids = v1.placeholder(tf.int32, [None, 3])
        y = v1.placeholder(tf.float32, [None, 2])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            norms = cg.per_example_gradient_norms(_loss, model, (x, ids), y, weights=weights)
            clipped, again = cg.clipped_gradients(_loss, model, (x, ids), y, weights=weights,
                                                  l2_norm_clip=1.0, return_norms=True)
        noted = [str(w.message) for w in caught if w.category is cg.MaterializedWarning]
        assert len(noted) == 2 and all("scale" in n and "'Cumsum'" in n for n in noted)
        loop = [[tf.convert_to_tensor(g) for g in v1.gradients(
            tf.reduce_sum(_loss(y[s:s + 1], model((x[s:s + 1], ids[s:s + 1])))), weights)]
            for s in range(5)]
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            ids_value = RNG.integers(0, 7, (5, 3))
            ids_value[:, 1] = ids_value[:, 0]  # a row looked up twice: its gradients add
            feed = {x: RNG.standard_normal((5, 5)), ids: ids_value,
                    y: RNG.standard_normal((5, 2))}
            got, sums, got_again, rows = session.run([norms, clipped, again, loop], feed)
    grads = [np.stack(column) for column in zip(*rows)]
    want = np.sqrt(sum(np.sum(g.reshape(5, -1) ** 2, 1) for g in grads))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(got_again, want, rtol=1e-5)
    scale = 1.0 / np.maximum(want, 1.0)
    for mine, g in zip(sums, grads):
        np.testing.assert_allclose(mine, np.tensordot(scale, g, 1), rtol=1e-5, atol=1e-6)


def test_a_transposed_convolution_over_an_unknown_batch_matches_the_loop():
    with tf.Graph().as_default():
        kernel = v1.get_variable("K", [3, 3, 2, 3])  # [h, w, out channels, in channels]

        def model(x):
            grown = tf.nn.conv2d_transpose(x, kernel, tf.stack([tf.shape(x)[0], 9, 9, 2]),
                                           strides=2, padding="SAME")
            return tf.reduce_mean(tf.tanh(grown), [1, 2])

        x = v1.placeholder(tf.float32, [None, 5, 5, 3])
        y = v1.placeholder(tf.float32, [None, 2])
        with warnings.catch_warnings():
            warnings.simplefilter("error", cg.MaterializedWarning)  # read by its rule
            norms = cg.per_example_gradient_norms(_loss, model, x, y, weights=[kernel])
            (clipped,) = cg.clipped_gradients(_loss, model, x, y, weights=[kernel],
                                              l2_norm_clip=0.05)
        loop = [v1.gradients(tf.reduce_sum(_loss(y[s:s + 1], model(x[s:s + 1]))), kernel)[0]
                for s in range(4)]
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            feed = {x: RNG.standard_normal((4, 5, 5, 3)), y: RNG.standard_normal((4, 2))}
            got, summed, grads = session.run([norms, clipped, loop], feed)
    grads = np.stack(grads)
    want = np.sqrt(np.sum(grads.reshape(4, -1) ** 2, 1))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert (want > 0.05).any()  # the clip shortens some
    np.testing.assert_allclose(summed, np.tensordot(np.minimum(1, 0.05 / want), grads, 1),
                               rtol=1e-5, atol=1e-7)


def test_the_noise_of_a_seed_is_the_stateless_normal_tf2_draws_too():
    with tf.Graph().as_default():
        model, weights = _model(True)
        x = v1.placeholder(tf.float32, [None, 5])
        ids = v1.placeholder(tf.int32, [None, 3])
        y = v1.placeholder(tf.float32, [None, 2])
        noised = cg.clipped_gradients(_loss, model, (x, ids), y, weights=weights,
                                      l2_norm_clip=0.5, noise_multiplier=2.0, seed=21)
        clean = cg.clipped_gradients(_loss, model, (x, ids), y, weights=weights,
                                     l2_norm_clip=0.5)
        want = [tf.random.stateless_normal(w.shape, [21, i]) * 1.0
                for i, w in enumerate(weights)]
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            feed = {x: RNG.standard_normal((3, 5)), ids: RNG.integers(0, 7, (3, 3)),
                    y: RNG.standard_normal((3, 2))}
            a, b, w = session.run([noised, clean, want], feed)
    for noisy, plain, expected in zip(a, b, w):
        np.testing.assert_allclose(noisy - plain, expected, atol=1e-5)


def test_bad_options_are_named_in_a_tf1_graph():
    with tf.Graph().as_default():
        model, weights = _model(True)
        x = v1.placeholder(tf.float32, [None, 5])
        ids = v1.placeholder(tf.int32, [None, 3])
        y = v1.placeholder(tf.float32, [None, 2])
        with pytest.raises(ValueError, match="l2_norm_clip must be a positive number"):
            cg.clipped_gradients(_loss, model, (x, ids), y, weights=weights, l2_norm_clip=0)
        with pytest.raises(ValueError, match="needs seed="):
            cg.clipped_gradients(_loss, model, (x, ids), y, weights=weights,
                                 l2_norm_clip=1.0, noise_multiplier=1.0)


def test_the_tf1_session_example_of_the_guide_trains():
    import pathlib
    import re

    page = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "privacy.rst").read_text()
    section = page[page.index("\nThe same in a TF1 Session\n"):]
    block = re.search(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", section).group(1)
    code = "\n".join(line[3:] for line in block.splitlines())
    code = code.replace("tf.compat.v1.disable_v2_behavior()", "")  # done once per process
    with tf.Graph().as_default():
        scope = {}
        exec(code, scope)  # noqa: S102 - the page's own example
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            before = session.run(scope["w"])
            feed = {scope["x"]: RNG.standard_normal((8, 5)),
                    scope["y"]: RNG.integers(0, 3, 8)}
            first = session.run(scope["grads"], feed)
            session.run(scope["train"], feed)
            second = session.run(scope["grads"], feed)
            after = session.run(scope["w"])
    assert np.abs(after - before).max() > 0
    # the global step is the seed: the noise of step 1 is not that of step 0
    assert np.abs(first[0] - second[0]).max() > 0.01
