"""Hessian diagonals, Laplacians and divergences beyond the matrix: Hutchinson's estimates
(the same number on every route for one seed, unbiased over seeds, an honest standard
error), the exact values where the diagonal differs from the row sums, and the forms PINN
code writes. The TF1 graph's side is tests_tf1/test_traces_tf1.py."""

import pathlib
import warnings

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads._src.traces import traces as _traces
from compat_grads.testing import modes
from compat_grads.testing._suite import estimates, pinn

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "traces.rst"
XY = np.array([[-6.0, -3.0], [1.0, 8.0], [0.5, -1.5], [2.0, 0.25]])


def _f(xy):
    return 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2


def _on(route, function, **options):
    """`function(_f, XY)` on a route: eager (compiled or not), tf.function, a v1 Graph."""
    x = XY.astype(np.float64)
    if route == "v1_graph":
        with tf.Graph().as_default():
            p = tf.compat.v1.placeholder(tf.float64, [None, 2])
            return modes.session_values(function(_f(p), p, **options), {p: x})
    if route == "function":
        return modes.to_numpy(tf.function(lambda t: function(_f, t, **options))(tf.constant(x)))
    return modes.to_numpy(function(_f, tf.constant(x), compile=route == "eager", **options))


ROUTES = ("eager", "uncompiled", "function", "v1_graph")
ESTIMATES = {"batch_laplacian": estimates.batch_laplacian,
             "batch_hessian_diagonal": estimates.batch_diagonal}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ESTIMATES)
def test_an_estimate_is_the_documented_one_on_every_route(name, route):
    """The documented probes, the exact Hessians, numpy: the same estimate and standard
    error on every route (the TF1 graph's test checks the same formula)."""
    got = _on(route, getattr(cg, name), method="hutchinson", num_samples=estimates.PROBES,
              seed=estimates.SEED, return_std=True)
    probes = modes.to_numpy(estimates.probes_op(XY.shape))
    want = ESTIMATES[name](probes, estimates.per_sample_3x2y_plus_y2(XY))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_graph_routes_give_the_estimate_bit_for_bit():
    options = {"method": "hutchinson", "num_samples": 8, "seed": 3}
    a = _on("function", cg.batch_laplacian, **options)
    b = _on("v1_graph", cg.batch_laplacian, **options)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["batch_laplacian", "batch_hessian_diagonal",
                                  "batch_divergence"])
def test_estimates_are_unbiased_and_their_standard_errors_honest(name):
    """Over 40 seeds the estimates average to the exact value within 4 standard errors of
    that mean, and the standard error each call returns matches the spread of its estimate
    across seeds (within a factor of 1.6). Compiled: the seed is an input, so the 40 seeds
    trace once."""
    function = getattr(cg, name)
    target = (lambda x: tf.sin(x) * x[:, ::-1]) if name == "batch_divergence" else _f
    x = tf.constant(XY)
    exact = function(target, x).numpy()
    runs = [function(target, x, method="hutchinson", num_samples=32, seed=seed,
                     return_std=True) for seed in range(40)]
    means = np.stack([m.numpy() for m, _ in runs])
    errors = np.stack([e.numpy() for _, e in runs])
    spread = means.std(0, ddof=1)
    varies = spread > 1e-9  # where every probe gives the exact value (a diagonal Hessian)
    assert np.all(np.abs(means.mean(0) - exact) <= 4 * spread / np.sqrt(40) + 1e-9)
    ratio = errors.mean(0)[varies] / spread[varies]
    assert varies.any() and np.all((ratio > 1 / 1.6) & (ratio < 1.6)), ratio


def test_a_new_seed_runs_the_same_trace():
    """A training loop with new probes each step: the seed is an input of the compiled
    function, so ten seeds trace once (no recompile warning), all ten estimates differ, and
    the first, a middle and the last seed give the uncompiled estimate (each uncompiled
    call traces anew: all ten took most of this file's time)."""
    cg.clear_cache()
    x = tf.constant(XY)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        compiled = [cg.batch_laplacian(_f, x, method="hutchinson", seed=seed).numpy()
                    for seed in range(10)]
    for seed in (0, 5, 9):
        got = compiled[seed]
        eager = cg.batch_laplacian(_f, x, method="hutchinson", seed=seed, compile=False)
        np.testing.assert_allclose(got, eager, rtol=1e-12)
    assert len({tuple(c) for c in compiled}) == 10


def test_seeds_differ_and_one_seed_repeats():
    one = cg.batch_laplacian(_f, tf.constant(XY), method="hutchinson", seed=1).numpy()
    again = cg.batch_laplacian(_f, tf.constant(XY), method="hutchinson", seed=1).numpy()
    other = cg.batch_laplacian(_f, tf.constant(XY), method="hutchinson", seed=2).numpy()
    np.testing.assert_array_equal(one, again)
    assert not np.array_equal(one, other)


def test_the_diagonal_is_not_the_row_sums():
    """`tf.gradients(tf.gradients(y, x), x)` gives the Hessian's row sums; the diagonal is
    what a Laplacian sums."""
    x = tf.constant([0.3, -1.2, 0.7], tf.float64)

    def f(x):
        return x[0] * x[1] + tf.sin(x[0]) * x[1] ** 2 + x[2] ** 3 * x[0]
    h = cg.hessian(f, x).numpy()
    diagonal = cg.hessian_diagonal(f, x).numpy()
    np.testing.assert_allclose(diagonal, np.diag(h), rtol=1e-12)
    assert not np.allclose(diagonal, h.sum(1))
    np.testing.assert_allclose(cg.laplacian(f, x).numpy(), np.trace(h), rtol=1e-12)


def test_a_laplacian_over_a_nest_of_sources():
    """u(x, t) with two sources: the Laplacian sums both traces; the diagonal keeps the
    nest."""
    x, t = tf.constant([0.4, -0.2], tf.float64), tf.constant(0.9, tf.float64)

    def u(s):
        return tf.reduce_sum(tf.sin(s["x"]) * s["t"] ** 3)
    diagonal = cg.hessian_diagonal(u, {"x": x, "t": t})
    assert set(diagonal) == {"x", "t"} and diagonal["t"].shape == ()
    np.testing.assert_allclose(diagonal["x"], -np.sin(x) * 0.9 ** 3, rtol=1e-12)
    np.testing.assert_allclose(diagonal["t"], np.sin(x).sum() * 6 * 0.9, rtol=1e-12)
    np.testing.assert_allclose(cg.laplacian(u, {"x": x, "t": t}),
                               diagonal["x"].numpy().sum() + diagonal["t"].numpy(), rtol=1e-12)


def test_sources_of_two_dtypes_cannot_be_summed():
    with pytest.raises(TypeError, match=r"compat_grads\.laplacian: every source must have "
                       r"one dtype.*float32.*float64.*Cast the sources"):
        cg.laplacian(lambda s: tf.reduce_sum(s[0]) * tf.cast(tf.reduce_sum(s[1]), tf.float32),
                     [tf.ones(2), tf.ones(2, tf.float64)])


def test_independent_false_is_exact_for_coupled_samples():
    """Samples coupled through the batch mean: the per-sample diagonal of the full Hessian,
    not the batch Jacobian of the summed gradient."""
    x = tf.constant(XY)

    def coupled(x):
        return tf.reduce_sum(x ** 2, 1) * tf.reduce_mean(x[:, 0])
    want = np.diagonal(cg.batch_hessian(coupled, x, independent=False).numpy(), 0, 1, 2)
    got = cg.batch_hessian_diagonal(coupled, x, independent=False).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(cg.batch_laplacian(coupled, x, independent=False),
                               want.sum(1), rtol=1e-12)
    assert not np.allclose(cg.batch_hessian_diagonal(coupled, x).numpy(), want)


def test_the_pinn_example_in_tf2():
    """Burgers' residual as the guide writes it, against the network's derivatives written
    out in numpy (tests_tf1 runs the TF1 block against the same)."""
    scope = {}
    first, _, in_tf2, estimate = pinn.blocks(PAGE, "A PINN residual in TF1 and TF2") + \
        pinn.blocks(PAGE, "Estimates")
    for block in (first, in_tf2, estimate):
        exec(block, scope)  # noqa: S102 - the documentation's own example
    want = pinn.burgers_residual(*(scope[k] for k in ("points", "w1", "w2", "w3", "nu")))
    np.testing.assert_allclose(scope["r_tf2"], want, rtol=1e-10, atol=1e-12)
    error = scope["error"].numpy()
    assert np.all(np.abs(scope["estimate"] - scope["exact"]) <= 5 * error + 1e-12)


def test_an_op_without_a_rule_warns_and_gives_the_same_values():
    """Softmax has no forward-Laplacian rule: the products compute it, with a warning that
    names the op; eager code without a graph takes the products silently."""
    x = tf.constant(XY)

    def f(x):
        return tf.reduce_sum(tf.nn.softmax(x) * x, axis=1)
    want = np.diagonal(cg.batch_hessian(f, x).numpy(), 0, 1, 2)
    with pytest.warns(cg.VectorizationWarning, match=r"compat_grads\.batch_hessian_diagonal: "
                      r"the forward Laplacian has no rule for op '.*' \(Softmax\).*same "
                      r"values, slower"):
        got = cg.batch_hessian_diagonal(f, x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(cg.batch_hessian_diagonal(f, x, compile=False), want,
                               rtol=1e-12)


def test_the_forward_laplacian_and_the_products_agree():
    """"auto" takes the forward Laplacian; an explicit strategy and chunk_size the
    products: the same values, to rounding."""
    x = tf.constant(np.random.default_rng(0).normal(size=(6, 3)))
    w = np.random.default_rng(1).normal(size=(3, 4))

    def u(x):
        return tf.reduce_sum(tf.tanh(tf.matmul(x, w)) ** 2, axis=1)
    fast = cg.batch_laplacian(u, x).numpy()
    for options in ({"strategy": "forward"}, {"strategy": "reverse"}, {"strategy": "loop"},
                    {"chunk_size": 2}):
        np.testing.assert_allclose(cg.batch_laplacian(u, x, **options), fast, rtol=1e-12)


def test_python_code_has_no_second_derivative():
    """As hessian: a tf.py_function on the path is a clear DerivativeError, never a silent
    zero."""
    def f(x):
        return tf.reduce_sum(tf.py_function(lambda t: t ** 2, [x], tf.float64) * x, axis=1)
    with pytest.raises(cg.DerivativeError, match=r"compat_grads\.batch_laplacian: .*"
                       r"tf\.py_function"):
        with pytest.warns(cg.VectorizationWarning, match=r"EagerPyFunc"):
            cg.batch_laplacian(f, tf.constant(XY))


def test_a_map_fn_on_the_path_takes_the_products():
    """A tf.map_fn carries the derivative through a TensorList (a variant), which has no
    rule: the products compute it (with a warning), never a silent None."""
    x = tf.constant([1.0, 2.0, 3.0], tf.float64)

    def f(x):
        return tf.reduce_sum(tf.map_fn(lambda r: r ** 3, x))
    with pytest.warns(cg.VectorizationWarning, match=r"TensorListFromTensor"):
        got = cg.hessian_diagonal(f, x)
    np.testing.assert_allclose(got, 6 * x.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name, g", [
    ("softsign", tf.nn.softsign), ("tanh", tf.tanh), ("softplus", tf.nn.softplus),
    ("sigmoid", tf.sigmoid), ("erf", tf.math.erf), ("atan", tf.atan)])
def test_an_elementwise_rule_inside_a_composition(name, g):
    """Each rule's first derivative enters the second through the chain rule: g(x)³ checks
    g' and g'' together, against the products."""
    x = tf.constant([0.5, -1.5, 2.0], tf.float64)

    def f(x):
        return tf.reduce_sum(g(x) ** 3)
    want = cg.hessian_diagonal(f, x, strategy="reverse") if name != "softsign" else \
        _softsign_cubed_second(x.numpy())
    np.testing.assert_allclose(cg.hessian_diagonal(f, x), want, rtol=1e-10)


def _softsign_cubed_second(x):
    """d²/dx² s(x)³, s = x / (1 + |x|): TensorFlow has no second derivative of Softsign."""
    s, d1 = x / (1 + np.abs(x)), 1 / (1 + np.abs(x)) ** 2
    d2 = -2 * np.sign(x) / (1 + np.abs(x)) ** 3
    return 6 * s * d1 ** 2 + 3 * s ** 2 * d2


def test_a_summed_laplacian_through_a_broadcast_then_a_matmul():
    w, c = tf.ones([4, 4], tf.float64), tf.ones([2, 4], tf.float64)

    def f(x):
        return tf.reduce_sum(tf.matmul(tf.square(x) + c, w))
    x = tf.ones([4], tf.float64)
    np.testing.assert_allclose(cg.laplacian(f, x), cg.laplacian(f, x, strategy="reverse"))
    np.testing.assert_allclose(cg.laplacian(f, x), 64.0)


def test_a_linear_target_has_no_second_derivative():
    """As hessian: None (zeros with unconnected_gradients="zero"), on every path."""
    x = tf.constant([1.0, 2.0])

    def f(x):
        return tf.reduce_sum(3 * x)
    assert cg.hessian_diagonal(f, x) is None
    assert cg.hessian_diagonal(f, x, strategy="reverse") is None
    np.testing.assert_array_equal(cg.hessian_diagonal(f, x, unconnected_gradients="zero"),
                                  [0.0, 0.0])
    assert float(cg.laplacian(f, x, unconnected_gradients="zero")) == 0.0


def test_a_target_of_unknown_size_is_checked_to_be_a_scalar():
    @tf.function(input_signature=[tf.TensorSpec([None])])
    def laplacian(x):
        return cg.laplacian(x ** 3, x)
    assert float(laplacian(tf.constant([2.0]))) == 12.0
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"compat_grads\.laplacian: "
                       r"target must be a scalar.*batch_laplacian"):
        laplacian(tf.constant([1.0, 2.0, 3.0]))


def test_max_bytes_bounds_the_forward_laplacian_too():
    """n directions of a 3000-element source do not fit in 100 kB at once: all at once, the
    products' check says so (and how to chunk); chunk_size= and "auto" compute it."""
    def f(x):
        return tf.reduce_sum(x ** 3)
    x = tf.ones([3000])
    with pytest.raises(ValueError, match=r"compat_grads\.hessian_diagonal: .*max_bytes=100000"
                       r".*Pass chunk_size="):
        cg.hessian_diagonal(f, x, max_bytes=100000, chunk_size=None)
    for chunk in (7, "auto"):
        np.testing.assert_allclose(cg.hessian_diagonal(f, x, max_bytes=100000,
                                                       chunk_size=chunk), np.full(3000, 6.0))


DENSE = [np.random.default_rng(4).normal(size=s) / 2 for s in ([3, 16], [16, 3], [3, 16])]


def _fields():
    """Vector fields R³ → R³ whose last op is (a) a dense layer (the trace is taken from
    the product's diagonal), (b) one with transpose_b, (c) an activation (the whole
    tangents, then their diagonal), (d) the source times a matrix (tangents start there)."""
    w1, w2, w2t = (tf.constant(w) for w in DENSE)
    return {
        "dense": lambda x: tf.matmul(tf.tanh(tf.matmul(x, w1)), w2) + 0.5,
        "transpose_b": lambda x: tf.nn.bias_add(tf.matmul(tf.tanh(x @ w1), w2t,
                                                          transpose_b=True), w1[0, :3]),
        "activation": lambda x: tf.sin(tf.matmul(tf.tanh(tf.matmul(x, w1)), w2)),
        "linear": lambda x: tf.matmul(x, w2t[:, :3]),
    }


@pytest.mark.parametrize("name", ["dense", "transpose_b", "activation", "linear"])
def test_batch_divergence_from_the_forward_walk_is_the_jacobian_trace(name):
    f = _fields()[name]
    x = tf.constant(np.random.default_rng(5).normal(size=[6, 3]))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    want = np.trace(tape.batch_jacobian(y, x).numpy(), axis1=1, axis2=2)
    for strategy in ("auto", "forward", "reverse"):
        got = cg.batch_divergence(f, x, strategy=strategy).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=strategy)
    single = tf.function(lambda v: cg.divergence(lambda u: f(u[None])[0], v))(x[0])
    np.testing.assert_allclose(single.numpy(), want[0], rtol=1e-12)


def test_the_trace_of_a_dense_layer_needs_only_the_products_diagonal():
    fields, found = _fields(), {}

    @tf.function
    def probe(x):
        for name, f in fields.items():
            found[name] = _traces._last_product(f(x), x)
        return x
    probe(tf.zeros([2, 3], tf.float64))
    assert {name for name, last in found.items() if last is not None} == {
        "dense", "transpose_b", "linear"}
    assert found["transpose_b"][2] is True and found["dense"][2] is False


def test_a_divergence_through_an_op_without_a_rule_takes_the_products_silently():
    """The products are the divergence's usual way (no slower by much than the walk, unlike
    a Laplacian's): no warning."""
    w = tf.constant(DENSE[0][:, :3])

    def f(x):
        return tf.math.cumsum(tf.tanh(x @ w), axis=1)
    x = tf.constant(np.random.default_rng(6).normal(size=[4, 3]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cg.batch_divergence(f, x)
    want = cg.batch_divergence(f, x, strategy="reverse")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_chunk_size_never_changes_a_divergence():
    """chunk_size bounds memory only: the walk takes the directions in chunks, even where
    samples interact (the per-sample form is for independent samples, and its chunks agree
    with it there too)."""
    x = tf.constant(np.random.default_rng(3).normal(size=(4, 3)))

    def f(x):
        return x * tf.reduce_mean(x, 0)
    whole = cg.batch_divergence(f, x).numpy()
    for chunk in (1, 2):
        np.testing.assert_allclose(cg.batch_divergence(f, x, chunk_size=chunk), whole,
                                   rtol=1e-12)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    # each direction through every sample at once: sum_j sum_r dy[s, j] / dx[r, j]
    np.testing.assert_allclose(whole, np.einsum("sjrj->s", tape.jacobian(y, x).numpy()),
                               rtol=1e-12)


XYT = np.array([[-6.0, -3.0, 0.5], [1.0, 8.0, -1.0], [0.5, -1.5, 2.0], [2.0, 0.25, 1.5]])


def coordinates_u(s):
    """A PINN's u(x, y, t) of coordinates held apart, each [b, 1]."""
    x, y, t = s["x"], s["y"], s["t"]
    return 3 * x ** 2 * y + y ** 2 + tf.sin(x) * t ** 3


def coordinates_oracle():
    x, y, t = XYT.T
    return {"x": 6 * y - np.sin(x) * t ** 3, "y": np.full(len(x), 2.0),
            "t": 6 * t * np.sin(x)}


def _coordinates(mode):
    """(batch_laplacian over x, y and t; batch_hessian_diagonal of {x, t}) in `mode`."""
    feed = {k: XYT[:, i:i + 1] for i, k in enumerate("xyt")}

    def both(s, target):
        return (cg.batch_laplacian(target, s),
                cg.batch_hessian_diagonal(target, {"x": s["x"], "t": s["t"]}))
    if mode == "eager":
        s = {k: tf.constant(v) for k, v in feed.items()}
        return tf.nest.map_structure(np.asarray, (
            cg.batch_laplacian(coordinates_u, s),
            cg.batch_hessian_diagonal(lambda d: coordinates_u({**d, "y": s["y"]}),
                                      {"x": s["x"], "t": s["t"]})))
    if mode == "function":
        run = tf.function(lambda s: both(s, coordinates_u(s)))
        return tf.nest.map_structure(np.asarray, run({k: tf.constant(v) for k, v in feed.items()}))
    with tf.Graph().as_default():
        s = {k: tf.compat.v1.placeholder(tf.float64, [None, 1]) for k in feed}
        out = both(s, coordinates_u(s))
        with tf.compat.v1.Session() as session:
            return session.run(out, {s[k]: v for k, v in feed.items()})


@pytest.mark.parametrize("mode", ["eager", "function", "v1_graph"])
def test_coordinates_as_separate_sources(mode):
    """batch_laplacian of [x, y, t] is u_xx + u_yy + u_tt; batch_hessian_diagonal keeps the
    nest, one [b, 1] diagonal per coordinate (each a nested gradient: one element each)."""
    laplacian, diagonal = _coordinates(mode)
    want = coordinates_oracle()
    np.testing.assert_allclose(laplacian, want["x"] + want["y"] + want["t"], rtol=1e-12)
    assert sorted(diagonal) == ["t", "x"]
    for k in diagonal:
        np.testing.assert_allclose(diagonal[k], want[k][:, None], rtol=1e-12)


def test_coordinates_in_one_walk():
    """Sources of several elements each go through the forward walk, summed over them."""
    def u(s):
        return tf.reduce_sum(tf.tanh(s[0]) * s[1] ** 2, 1) + tf.reduce_sum(s[0] * s[1], 1)
    a, b = (tf.constant(np.random.default_rng(k).normal(size=[4, 3])) for k in (1, 2))
    whole = cg.batch_hessian_diagonal(lambda ab: u([ab[:, :3], ab[:, 3:]]), tf.concat([a, b], 1))
    np.testing.assert_allclose(cg.batch_laplacian(u, [a, b]),
                               tf.reduce_sum(whole, 1), rtol=1e-12)
    parts = cg.batch_hessian_diagonal(u, (a, b))
    assert isinstance(parts, tuple)
    np.testing.assert_allclose(tf.concat(parts, 1), whole, rtol=1e-12)
