"""The forms of CG112 and CG113 that ported public programs write (issue 46): a Hessian-vector
product in TensorFlow's private spellings inside a helper that takes the loss, and loops of
one-example session runs over a random draw or through a feed dict held in a name."""

import numpy as np
import pytest
from scan_support import CORPUS, expected

from compat_grads import migrate

_HVP = """\
import tensorflow.compat.v1 as tf
{imports}
x = tf.placeholder(tf.float32, [None, 3])
w = tf.Variable(tf.ones([3]))
v = tf.placeholder(tf.float32, [3])
loss = tf.reduce_sum(tf.tanh(tf.reduce_sum(x * w, 1)) ** 2)
g = {gradients}(loss, w)[0]
hv = {gradients}(tf.reduce_sum({multiply}(g, {stop}(v))), w)[0]
"""
_PUBLIC = {"imports": "", "gradients": "tf.gradients", "multiply": "tf.multiply",
           "stop": "tf.stop_gradient"}


@pytest.mark.parametrize("imports, names", [
    ("from tensorflow.compat.v1 import gradients\n", {"gradients": "gradients"}),
    ("from tensorflow.python.ops import gradients_impl\n",
     {"gradients": "gradients_impl.gradients"}),
    ("from tensorflow.python.ops import array_ops, math_ops\n",
     {"multiply": "math_ops.multiply", "stop": "array_ops.stop_gradient"}),
], ids=["compat-v1-import", "gradients_impl", "math_ops-array_ops"])
def test_private_spellings_of_an_hvp_are_found_as_the_public_ones(imports, names):
    """Each private spelling gives the public form's CG112 and rewrite (the vector written
    as the source writes it); the gradients_impl import is CG107 as before."""
    public = migrate.scan_text(_HVP.format(**_PUBLIC))
    private = [f for f in migrate.scan_text(_HVP.format(**{**_PUBLIC, "imports": imports,
                                                           **names})) if f.code != "CG107"]
    assert [f.code for f in public] == [f.code for f in private] == ["CG112"]
    stop = names.get("stop", "tf.stop_gradient")
    assert [e.text for e in private[0].edits] == [e.text.replace("tf.stop_gradient", stop)
                                                  for e in public[0].edits]


def test_an_hvp_helper_taking_the_loss_says_to_write_it_at_the_callers():
    found = {f.line: f for f in migrate.scan_text(
        (CORPUS / "hvp_private_spellings.py").read_text("utf-8")) if f.code == "CG112"}
    assert sorted(found) == sorted(line for _, line, code in expected(
        CORPUS / "hvp_private_spellings.py") if code == "CG112")
    rewritten, listed, single, summed = (found[k] for k in sorted(found))
    assert rewritten.edits and not (listed.edits or single.edits or summed.edits)
    assert "use cg.hvp(f, weights, directions) (not rewritten: objective is a parameter of " \
        "curvature_times, so the loss is built where curvature_times is called: there, write " \
        "it as a function of the weights, def loss_fn(weights): ... return loss" in listed.message
    assert "call cg.hvp(loss_fn, weights, directions) in place of curvature_times(objective, " \
        "weights, directions))" in listed.message
    assert "in place of curvature_along(objective, weight, vector)" in single.message
    assert "pair is a list of variables: cg.hvp(f, pair, [direction, shift])" in summed.message


@pytest.mark.parametrize("second", [
    "tf.gradients(tf.reduce_sum(g * tf.stop_gradient(v)), x)[0]",
    "tf.gradients(tf.add_n([tf.reduce_sum(a * tf.stop_gradient(b)) for a, b in zip(gs, [v])]), x)",
    "tf.gradients([a * tf.stop_gradient(b) for a, b in zip(gs, [v])], x)",
], ids=["one", "add_n", "list"])
def test_the_gradient_of_g_dot_v_with_respect_to_the_input_is_no_hvp(second):
    """Influence functions' gradient of the influence with respect to the input: a mixed
    second derivative, which cg.hvp does not compute; no finding."""
    text = _HVP.format(**_PUBLIC).replace("hv = ", "gs = tf.gradients(loss, [w])\nhv = ")
    assert [f.code for f in migrate.scan_text(text)] == ["CG112"]
    mixed = text.rpartition("hv = ")[0] + f"mixed = {second}\n"
    assert migrate.scan_text(mixed) == []


def test_one_example_runs_over_a_random_draw_and_a_named_feed_are_found():
    text = (CORPUS / "per_example_runs_drawn.py").read_text("utf-8")
    found = migrate.scan_text(text)
    assert [(f.line, f.code) for f in found] == sorted(
        (line, code) for _, line, code in expected(CORPUS / "per_example_runs_drawn.py"))
    drawn, named, reshaped = found
    assert drawn.message.startswith(
        "per-example gradients by one session.run per example (scores fed self.images one "
        "example of pool at a time); use cg.per_example_gradients(loss_fn, model, "
        "self.images, y, weights=self.weights)")
    assert "the loop squares the gradients, as a Fisher diagonal does: that is the mean of " \
        "the squared per-example gradients, np.mean(np.square(G[k]), axis=0)" in drawn.message
    for finding in (named, reshaped):
        assert "(cost_grads fed features one example of pool at a time)" in finding.message
        assert "weights=[kernel])" in finding.message and "Fisher" not in finding.message
    assert migrate.fix_text(text) == text


@pytest.mark.parametrize("weights, advice", [
    ("w", "weights=[w])"), ("[w, b]", "weights=[w, b])"), ("params", "weights=params)")])
def test_the_weights_are_written_as_a_list_once(weights, advice):
    text = ("import tensorflow.compat.v1 as tf\nx = tf.placeholder(tf.float32, [None, 3])\n"
            "w = tf.Variable(tf.ones([3]))\nb = tf.Variable(0.0)\nparams = [w, b]\n"
            "loss = tf.reduce_sum(tf.reduce_sum(x * w, 1) + b)\n"
            f"g = tf.gradients(loss, {weights})\n"
            "rows = [sess.run(g, {x: data[i, :].reshape(1, -1)}) for i in range(4)]\n")
    (found,) = migrate.scan_text(text)
    assert found.code == "CG113" and advice in found.message


def test_the_fisher_advice_gives_the_loops_fisher_diagonal():
    """CG113's Fisher advice, run: the mean of the squared per-example gradients of one
    cg.per_example_gradients run is what the loop of one-example runs sums and divides
    (labels given, so both take the same log-likelihood)."""
    import tensorflow as tf

    import compat_grads as cg

    rng = np.random.RandomState(3)
    data, labels = rng.rand(6, 4).astype(np.float32), rng.randint(3, size=6)
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4])
        y = tf.compat.v1.placeholder(tf.int32, [None])
        weights = [tf.Variable(rng.randn(4, 3).astype(np.float32)), tf.Variable(tf.zeros([3]))]

        def model(inputs):
            return tf.matmul(inputs, weights[0]) + weights[1]

        def log_likelihood(y_true, y_pred):  # one per example
            return -tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_true, logits=y_pred)

        scores = tf.gradients(log_likelihood(y, model(x))[0], weights)
        rows = cg.per_example_gradients(log_likelihood, model, x, y, weights=weights)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            loop = [np.zeros(w.shape) for w in weights]
            for i in range(len(data)):
                for k, row in enumerate(sess.run(scores, {x: data[i:i + 1], y: labels[i:i + 1]})):
                    loop[k] += np.square(row) / len(data)
            advised = [np.mean(np.square(G), axis=0) for G in sess.run(rows, {x: data, y: labels})]
    for got, want in zip(advised, loop):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
