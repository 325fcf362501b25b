"""Every rewrite of `compat-grads scan --fix` runs in a TF1 graph and gives the original
program's numbers, or, where the original crashes at run time, the program's oracle."""

import pathlib
import re

import numpy as np
import pytest
import tensorflow as tf

from compat_grads import migrate

pytestmark = pytest.mark.tooling  # CI runs these on the newest release only

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "tests_tf2" / "scan_corpus"
PROGRAMS = sorted(p for p in CORPUS.glob("*.py") if "\n# exec: " in p.read_text("utf-8"))
# The calls a program's rewrite must hold: the shortest the source proves the same, so
# that what runs below is those calls (not a longer equivalent).
CALLS = {
    "hvp_double_gradients": [
        "hv_stopped = cg.hvp(\n    lambda w: tf.reduce_mean(", "    tf.stop_gradient(v))",
        "hv_multiply = [cg.hvp(", "hv_dot = cg.hvp(",
        "cg.hvp(lambda w: tf.reduce_sum(tf.tanh(x * w) ** 2), w, v)"],
    "hvp_private_spellings": ["curved = cg.hvp(\n    lambda kernel: tf.reduce_mean(tf.cos(",
                              "    array_ops.stop_gradient(direction))"],
    "hessian_rows_private_stack": [
        "H = cg.hessian(loss, w)", "H_old = cg.hessian(loss, w)", "H_all = cg.hessian(loss, w)",
        "H_top = cg.hessian(loss, w)[:2]", "J = cg.stacked_jacobian(y[:4], x)"],
    "laplacian_back_prop_false": [
        "tf.stop_gradient(cg.batch_divergence(d_psi, walkers))",
        "jastrow_lap = cg.batch_laplacian(jastrow, walkers)",
        "a_xx = cg.batch_hessian_diagonal(amplitude, walkers)"],
    "hessian_diagonal_stack": ["cg.batch_hessian_diagonal(tf.reduce_sum(u, axis=tf.range(1, "
                               "tf.rank(u))), x)  # expect"],
}


def _run(source: str, path: pathlib.Path) -> dict:
    """Runs a corpus program in a fresh graph (same random seed); returns its namespace."""
    namespace = {"__name__": "__corpus__"}
    with tf.Graph().as_default():
        tf.compat.v1.set_random_seed(0)
        exec(compile(source, str(path), "exec"), namespace)
    return namespace


def test_corpus_has_programs_of_both_kinds():
    kinds = [re.search(r"^# exec: (\w+)$", p.read_text("utf-8"), re.M).group(1)
             for p in PROGRAMS]
    assert set(kinds) == {"same", "crashes"} and len(PROGRAMS) >= 7


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_rewrite_matches_the_original(path, capsys, assert_nested_close):
    original = path.read_text("utf-8")
    fixed = migrate.fix_text(original, str(path))
    assert fixed != original and "import compat_grads as cg" in fixed
    assert [c for c in CALLS.get(path.stem, []) if c not in fixed] == []
    assert not [f for f in migrate.scan_text(fixed) if f.edits]
    if re.search(r"^# exec: crashes$", original, re.M):
        with pytest.raises(tf.errors.OpError):
            _run(original, path)
        rewritten = _run(fixed, path)
        assert_nested_close(rewritten["result"], rewritten["oracle"])
    else:
        assert_nested_close(_run(fixed, path)["result"], _run(original, path)["result"])


def test_the_column_loop_advice_is_exact():
    """CG101/CG102 on `tf.gradients(y[:, i], x)` advise the Jacobian of the row sum."""
    import compat_grads as cg

    with tf.Graph().as_default():
        x = tf.constant(np.random.RandomState(0).randn(4, 3), tf.float32)
        w = tf.constant(np.random.RandomState(1).randn(3, 5), tf.float32)
        logits = tf.tanh(tf.matmul(x, w))
        loop = tf.stack([tf.gradients(logits[:, i], x)[0] for i in range(5)])
        advised = cg.stacked_jacobian(tf.reduce_sum(logits, axis=0), x)
        with tf.compat.v1.Session() as session:
            got, want = session.run([advised, loop])
    assert got.shape == want.shape == (5, 4, 3)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_the_laplacian_loop_rewrite_is_the_loops_values_for_coupled_samples():
    """Why CG111 writes the divergence of the gradient (and strategy="reverse" for the
    diagonal): the loop differentiates the batch sum of u, so for samples that interact
    (here a batch mean, as batch norm in training mode) its terms mix samples. The
    divergence of that gradient (by the Hessian's symmetry, in the forward walk or in the
    products alike) and the products of the batch-summed gradient give exactly those values;
    the forward Laplacian (the default) and independent=False (each sample's own) do not."""
    import compat_grads as cg

    rng = np.random.RandomState(4)
    with tf.Graph().as_default():
        x = tf.constant(rng.randn(5, 3), tf.float64)
        h = tf.tanh(tf.matmul(x ** 2, tf.constant(rng.randn(3, 1), tf.float64)))
        u = (h - tf.reduce_mean(h, axis=0)) * tf.sin(x[:1, 1:2] + x[:, :1])  # [5, 1]
        g = tf.gradients(u, x)[0]
        loop = sum(tf.gradients(g[:, i], x)[0][:, i] for i in range(3))
        calls = [cg.batch_laplacian(u, x, strategy="reverse"), cg.batch_laplacian(u, x),
                 cg.batch_laplacian(u, x, independent=False)]
        divergences = [cg.batch_divergence(tf.gradients(u, x)[0], x, strategy=strategy)
                       for strategy in ("auto", "forward", "reverse")]
        with tf.compat.v1.Session() as session:
            want, (rewrite, default, own), walked = session.run([loop, calls, divergences])
    np.testing.assert_allclose(rewrite, want, rtol=1e-10, atol=1e-12)
    for got in walked:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert not np.allclose(default, want) and not np.allclose(own, want)
