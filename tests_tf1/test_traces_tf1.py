"""The diagonals and traces in a TF1 graph: the guide's PINN residual, and Hutchinson's
estimate equal to the documented one (the TF2 suite checks its routes against the same)."""

import pathlib

import numpy as np
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite import estimates, pinn

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "traces.rst"
XY = np.array([[-6.0, -3.0], [1.0, 8.0], [0.5, -1.5], [2.0, 0.25]])


def test_the_pinn_example_in_a_tf1_graph():
    scope = {}
    first, in_tf1, _ = pinn.blocks(PAGE, "A PINN residual in TF1 and TF2")
    with tf.Graph().as_default():
        for block in (first, in_tf1):
            exec(block, scope)  # noqa: S102 - the documentation's own example
    want = pinn.burgers_residual(*(scope[k] for k in ("points", "w1", "w2", "w3", "nu")))
    np.testing.assert_allclose(scope["r_tf1"], want, rtol=1e-10, atol=1e-12)


def test_an_estimate_is_the_documented_one_in_a_tf1_graph():
    with tf.Graph().as_default():
        xy = tf.compat.v1.placeholder(tf.float64, [None, 2])
        u = 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2
        got = cg.batch_laplacian(u, xy, method="hutchinson", num_samples=estimates.PROBES,
                                 seed=estimates.SEED, return_std=True)
        diagonal = cg.batch_hessian_diagonal(u, xy, method="hutchinson",
                                             num_samples=estimates.PROBES,
                                             seed=estimates.SEED, return_std=True)
        probes = estimates.probes_op(XY.shape)
        with tf.compat.v1.Session() as session:
            got, diagonal, probes = session.run([got, diagonal, probes], {xy: XY})
    hessians = estimates.per_sample_3x2y_plus_y2(XY)
    for g, w in zip((*got, *diagonal), (*estimates.batch_laplacian(probes, hessians),
                                        *estimates.batch_diagonal(probes, hessians))):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_a_divergence_in_a_tf1_graph():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float64, [None, 2])
        div = cg.batch_divergence(tf.sin(x) * x[:, ::-1], x)
        with tf.compat.v1.Session() as session:
            got = session.run(div, {x: XY})
    want = np.cos(XY[:, 0]) * XY[:, 1] + np.cos(XY[:, 1]) * XY[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-12)


# Ops that only check or shape the result; every op that computes is the nested graph's.
_BOOKKEEPING = frozenset({"Const", "Shape", "Fill", "Identity", "StridedSlice", "Equal",
                          "All", "Assert", "NoOp", "Range", "Reshape", "Cast", "Rank"})


def _u_of_one_coordinate(x):
    rng = np.random.default_rng(3)
    for shape in [(1, 16), (16, 16)]:
        x = tf.tanh(tf.matmul(x, rng.standard_normal(shape)) + 0.1)
    return tf.matmul(x, rng.standard_normal((16, 1)))


def _built(derivative):
    """(the op types `derivative(u, x)` adds, its values) on a [None, 1] source."""
    from collections import Counter

    with tf.Graph().as_default() as graph:
        x = tf.compat.v1.placeholder(tf.float64, [None, 1])
        u = _u_of_one_coordinate(x)
        before = len(graph.get_operations())
        out = derivative(u, x)
        added = Counter(op.type for op in graph.get_operations()[before:])
        with tf.compat.v1.Session() as session:
            return added, session.run(out, {x: np.linspace(-1, 1, 7)[:, None]})


def test_one_coordinate_is_the_nested_gradients_op_for_op():
    """A 1-D u_xx (a PDE residual) builds what the nested tf.gradients builds: a walk or a
    row around it only added ops (and build time, under an optimizer differentiated again).
    The diagonal is that graph exactly: no cotangent of its own (an Identity each) and no
    run-time batch check, the model provably keeping the placeholder's rows."""
    nested, want = _built(lambda u, x: tf.compat.v1.gradients(
        tf.compat.v1.gradients(u, x)[0], x)[0])
    ours, got = _built(cg.batch_hessian_diagonal)
    assert ours == nested
    np.testing.assert_allclose(got, want, rtol=1e-12)
    ours, got = _built(lambda u, x: cg.batch_laplacian(u, x)[:, None])
    computing = {t: c for t, c in ours.items() if t not in _BOOKKEEPING}
    assert computing == {t: c for t, c in nested.items() if t not in _BOOKKEEPING}
    assert "Assert" not in ours
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_coordinates_as_separate_sources_in_a_tf1_graph():
    """A PINN's x and t held apart as [None, 1] placeholders: u_xx + u_tt in one call."""
    points = np.array([[-6.0, 0.5], [1.0, -1.0], [0.5, 2.0]])
    with tf.Graph().as_default():
        x, t = (tf.compat.v1.placeholder(tf.float64, [None, 1]) for _ in range(2))
        u = 3 * x ** 2 * t + tf.sin(x) * t ** 3
        laplacian = cg.batch_laplacian(u, [x, t])
        u_xx, u_tt = cg.batch_hessian_diagonal(u, [x, t])
        with tf.compat.v1.Session() as session:
            got = session.run([laplacian, u_xx, u_tt],
                              {x: points[:, :1], t: points[:, 1:]})
    px, pt = points.T
    want_xx, want_tt = 6 * pt - np.sin(px) * pt ** 3, 6 * pt * np.sin(px)
    np.testing.assert_allclose(got[0], want_xx + want_tt, rtol=1e-12)
    np.testing.assert_allclose(got[1][:, 0], want_xx, rtol=1e-12)
    np.testing.assert_allclose(got[2][:, 0], want_tt, rtol=1e-12)


def test_a_wavefunctions_laplacian_walks_and_is_the_map_fn_loops():
    """A kinetic energy's Laplacian of log|psi| (slogdet of orbitals times an envelope,
    norms, electron pairs by tf.gather, a mean field): the forward walk has a rule for every
    op (no products, no warning) and gives the tf.map_fn loop's numbers."""
    import warnings

    from compat_grads.bench.programs_process import walkers, wavefunction

    electrons, b = 3, 5
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float64, [None, 3 * electrons])
        f = wavefunction(tf, electrons, np.float64)(x)
        df = tf.gradients(f, x)[0]
        loop = tf.reduce_sum(tf.map_fn(
            lambda i: tf.gradients(tf.expand_dims(df[..., i], -1), x)[0][..., i],
            tf.range(3 * electrons), dtype=tf.float64, back_prop=False), 0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ours = tf.stop_gradient(cg.batch_laplacian(f, x))
            chunked = cg.batch_laplacian(f, x, chunk_size=4)
        with tf.compat.v1.Session() as session:
            got, chunks, want = session.run(
                [ours, chunked, loop], {x: walkers(b, 3 * electrons).astype(np.float64)})
    np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(chunks, want, rtol=1e-10)


def test_a_pde_loss_with_a_1d_u_xx_trains_as_the_nested_gradients_do():
    """A 1-D PDE residual under Adam: cg.batch_hessian_diagonal's u_xx is the nested
    tf.gradients graph, so five training steps give the same losses, to the bit."""
    def losses(u_xx_of):
        with tf.Graph().as_default():
            tf.compat.v1.set_random_seed(0)
            x = tf.compat.v1.placeholder(tf.float64, [None, 1])
            h = x
            for k in range(3):
                h = tf.compat.v1.layers.dense(h, 8, tf.tanh, name=f"layer{k}")
            u = tf.compat.v1.layers.dense(h, 1, name="out")
            loss = tf.reduce_mean((u_xx_of(u, x) + tf.sin(x)) ** 2) + tf.reduce_mean(u ** 2)
            step = tf.compat.v1.train.AdamOptimizer(1e-2).minimize(loss)
            feed = {x: np.linspace(0, 1, 9)[:, None]}
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                return [session.run([loss, step], feed)[0] for _ in range(5)]
    nested = losses(lambda u, x: tf.gradients(tf.gradients(u, x)[0], x)[0])
    assert losses(cg.batch_hessian_diagonal) == nested
    assert nested[-1] < nested[0]
