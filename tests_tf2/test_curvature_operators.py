"""The curvature operators (hessian_operator, ggn_operator, fisher_operator) against float64
oracles that never multiply by an operator: the flat Hessian of `cg.hessian`, the GGN from
`cg.stacked_jacobian` of the outputs and the analytic loss Hessians, the empirical Fisher
from `cg.per_example_gradients`. In eager code, a tf.function and a v1 Graph in TF2 (an
unknown batch fed at run time); a Dataset of uneven batches equals the whole batch; tf_keras
and Keras 3 models; each closed-form loss equals the product path of the same loss written
by hand; the true Fisher reproducible for a seed, its expectation the GGN (exactly, by the
sum over every label, and by its draws over many examples); the estimators on the operators
against eigh and solve; bad input. The TF1 graph's side is
tests_tf1/test_curvature_operators_tf1.py."""

import functools
import importlib

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import KERAS2_BUILT_IN, keras2, tf
from compat_grads._src.curvature import losses as _losses
from compat_grads.testing import modes
from compat_grads.testing._suite.operators import CLASSES, LABELS, TARGETS, WEIGHTS, N, X, mlp

TOLERANCE = 1e-10
RNG = np.random.default_rng(1)  # the vectors (the model's data: _suite.operators)
FLAVOURS = ("tf_keras",) if KERAS2_BUILT_IN else ("tf_keras", "keras3")
"""Keras 3 exists from TensorFlow 2.16 on (before, `keras` is Keras 2: tf_keras's cases)."""


def _keras(flavour):
    return keras2() if flavour == "tf_keras" else importlib.import_module("keras")


def _model(flavour="tf_keras"):
    """Dense(3, tanh) -> Dense(3) on 2 inputs, float64, with the weights WEIGHTS (constant
    initializers: the same model in eager code and in a graph's Session)."""
    keras = _keras(flavour)
    init = iter(WEIGHTS)
    dense = [keras.layers.Dense(units, activation=activation, dtype="float64",
                                kernel_initializer=keras.initializers.Constant(next(init)),
                                bias_initializer=keras.initializers.Constant(next(init)))
             for units, activation in ((3, "tanh"), (CLASSES, None))]
    model = keras.Sequential([keras.Input((2,), dtype="float64"), *dense])
    if flavour == "keras3":  # Keras 3's Constant takes a scalar: set the arrays
        model.set_weights(WEIGHTS)
    return model


def _closed_form(kind, flavour):
    """A loss each closed form recognizes, a different spelling per Keras."""
    losses = _keras(flavour).losses
    return {
        ("mse", "tf_keras"): lambda: losses.mean_squared_error,
        ("mse", "keras3"): lambda: losses.MeanSquaredError(reduction="none"),
        ("sparse", "tf_keras"): lambda: functools.partial(
            losses.sparse_categorical_crossentropy, from_logits=True),
        ("sparse", "keras3"): lambda: losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=None),
        ("categorical", "tf_keras"): lambda: losses.CategoricalCrossentropy(
            from_logits=True, reduction="none"),
        ("categorical", "keras3"): lambda: tf.nn.softmax_cross_entropy_with_logits,
    }[kind, flavour]()


HAND_WRITTEN = {
    "mse": lambda y, p: tf.reduce_mean((y - p) ** 2, axis=-1),
    "sparse": lambda y, p: -tf.reduce_sum(tf.one_hot(y, CLASSES, dtype=p.dtype)
                                          * tf.nn.log_softmax(p), axis=-1),
    "categorical": lambda y, p: -tf.reduce_sum(y * tf.nn.log_softmax(p), axis=-1),
}
"""The same losses as plain functions: no closed form, the product path."""
LABELS_OF = {"mse": TARGETS, "sparse": LABELS, "categorical": np.eye(CLASSES)[LABELS] * 0.5}
"""Labels per loss (categorical: half a one-hot, so the labels' sum scales the Hessian)."""


def _output_hessians(kind, logits, labels):
    """`[b, k, k]`: each example's loss Hessian in its outputs."""
    if kind == "mse":
        return np.broadcast_to(2 / CLASSES * np.eye(CLASSES), (len(logits), CLASSES, CLASSES))
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    softmax = np.einsum("bk,kl->bkl", p, np.eye(CLASSES)) - np.einsum("bk,bl->bkl", p, p)
    mass = labels.sum(1) if kind == "categorical" else np.ones(len(logits))
    return mass[:, None, None] * softmax


def _ggn_oracle(model, x, kind, labels):
    """Σ_s J_sᵀ H_s J_s with J from `cg.stacked_jacobian` (flat)."""
    x = tf.constant(x)
    jacobian = cg.stacked_jacobian(lambda ws: model(x), model.trainable_weights, flat=True,
                                   compile=False)
    jacobian = jacobian.numpy().reshape(len(x), CLASSES, -1)
    hessians = _output_hessians(kind, model(x).numpy(), labels)
    return np.einsum("bkn,bkl,blm->nm", jacobian, hessians, jacobian)


def _fisher_oracle(loss_fn, model, x, labels):
    """Σ_s g_s g_sᵀ from `cg.per_example_gradients`."""
    grads = cg.per_example_gradients(loss_fn, model, tf.constant(x), tf.constant(labels),
                                     compile=False)
    rows = np.concatenate([g.numpy().reshape(len(x), -1) for g in grads], axis=1)
    return rows.T @ rows


def _close(got, want, tolerance=TOLERANCE):
    got = np.asarray(got)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= tolerance * max(1.0, np.max(np.abs(want)))


def _in_mode(mode, build, arrays, unknown_batch=()):
    """`build(*tensors)` as numpy: eager, in a tf.function, or in a v1 Graph with a
    Session, the arrays fed to placeholders (those in `unknown_batch` of shape [None, ...])."""
    if mode == modes.V1_GRAPH:
        with tf.Graph().as_default():
            held = [tf.compat.v1.placeholder(a.dtype, (None, *a.shape[1:]) if i in unknown_batch
                                             else a.shape) for i, a in enumerate(arrays)]
            return modes.session_values(build(*held), dict(zip(held, arrays)))
    tensors = [tf.constant(a) for a in arrays]
    return modes.to_numpy(tf.function(build)(*tensors) if mode == modes.FUNCTION
                          else build(*tensors))


def _loss(params, x, y):
    """A two-parameter loss with cross terms, summed over examples."""
    w, b = params
    return tf.reduce_sum((tf.tanh(x @ w + b) - y) ** 2) + 0.1 * tf.reduce_sum(w ** 4)


def _hessian_oracle():
    params = [tf.constant(WEIGHTS[0]), tf.constant(WEIGHTS[1])]
    return cg.hessian(lambda p: _loss(p, X, TARGETS), params, flat=True).numpy()


MODES = (modes.EAGER, modes.FUNCTION, modes.V1_GRAPH)


# -- hessian_operator ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_hessian_operator_is_the_flat_hessian(mode):
    """Over placeholders in a v1 Graph (the batch unknown until fed) too."""
    v = RNG.normal(size=9)

    def build(w, b, x, y, v):
        op = cg.hessian_operator(_loss, [w, b], data=(x, y))
        assert op.shape == (9, 9) and op.is_self_adjoint and op.is_square
        assert op.dtype == tf.float64
        return op.to_dense(), op.matvec(v)

    dense, product = _in_mode(mode, build, [*WEIGHTS[:2], X, TARGETS, v], unknown_batch=(2, 3))
    oracle = _hessian_oracle()
    _close(dense, oracle)
    _close(product, oracle @ v)


@pytest.mark.parametrize("mode", MODES)
def test_a_dataset_of_uneven_batches_is_the_whole_batch(mode):
    """Batches of 4 and 2: the Hessian of the sum over them."""
    def build(w, b):
        data = tf.data.Dataset.from_tensor_slices((X, TARGETS)).batch(4)
        return cg.hessian_operator(_loss, [w, b], data=data).to_dense()

    # the regularizer counts once per batch: twice, over two batches
    regularizer = cg.hessian(lambda w: 0.1 * tf.reduce_sum(w ** 4), tf.constant(WEIGHTS[0]),
                             flat=True).numpy()
    oracle = _hessian_oracle()
    oracle[:6, :6] += regularizer
    _close(_in_mode(mode, build, WEIGHTS[:2]), oracle)


def test_variables_in_a_dict_and_a_batch_of_matrices():
    """A dict is flattened in sorted-key order; `matmul` of `[2, n, m]` is each matrix's."""
    params = {"w": tf.Variable(WEIGHTS[0]), "b": tf.Variable(WEIGHTS[1])}

    def f(p):
        return _loss([p["w"], p["b"]], X, TARGETS)

    op = cg.hessian_operator(f, params)
    oracle = cg.hessian(f, params, flat=True).numpy()
    vectors = RNG.normal(size=(2, 9, 2))
    _close(op.matmul(tf.constant(vectors)), oracle @ vectors)
    _close(op.matvec(tf.constant(vectors[0, :, 0])), oracle @ vectors[0, :, 0])
    _close(op.matmul(tf.constant(vectors[0].T), adjoint=True, adjoint_arg=True),
           oracle @ vectors[0])


# -- ggn_operator ----------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("kind", ("mse", "sparse", "categorical"))
def test_the_ggn_in_closed_form_and_by_products_is_the_jacobians(kind, flavour):
    model, labels = _model(flavour), LABELS_OF[kind]
    known = _closed_form(kind, flavour)
    assert _losses.recognized(known) is not None
    assert _losses.recognized(HAND_WRITTEN[kind]) is None
    oracle = _ggn_oracle(model, X, kind, labels)
    v = RNG.normal(size=N)
    for loss_fn in (known, HAND_WRITTEN[kind]):
        op = cg.ggn_operator(loss_fn, model, tf.constant(X), tf.constant(labels))
        assert op.shape == (N, N) and op.dtype == tf.float64
        _close(op.matvec(tf.constant(v)), oracle @ v)  # eager: forward-mode JVP
    if flavour == FLAVOURS[-1]:  # tf_keras's graph route: test_ggn_and_fisher_in_every_mode
        _close(op.to_dense(), oracle)  # the one-off graph: a loop of double-VJP JVPs


@pytest.mark.parametrize("mode", MODES)
def test_ggn_and_fisher_in_every_mode(mode):
    """tf_keras built in the mode (a v1 Graph: the batch unknown until it is fed)."""
    loss_fn = _closed_form("sparse", "tf_keras")
    eager = _model()
    want = (_ggn_oracle(eager, X, "sparse", LABELS),
            _fisher_oracle(loss_fn, eager, X, LABELS))

    def build(x, y):
        model = eager if mode != modes.V1_GRAPH else _model()
        return (cg.ggn_operator(loss_fn, model, x, y).to_dense(),
                cg.fisher_operator(loss_fn, model, x, y).to_dense())

    for got, oracle in zip(_in_mode(mode, build, [X, LABELS], unknown_batch=(0, 1)), want):
        _close(got, oracle)


def test_the_ggn_and_fisher_of_a_dataset_are_the_whole_batches():
    """And the true Fisher draws each batch's labels anew: over a Dataset of one batch
    twice it is not twice that batch's (whose draws are the Dataset's first batch's), the
    same numbers eagerly and in a tf.function."""
    model, loss_fn = _model(), HAND_WRITTEN["mse"]
    data = tf.data.Dataset.from_tensor_slices((X, TARGETS)).batch(4)
    v = tf.constant(RNG.normal(size=N))
    _close(cg.ggn_operator(loss_fn, model, data).matvec(v),
           _ggn_oracle(model, X, "mse", TARGETS) @ v.numpy())
    _close(cg.fisher_operator(loss_fn, model, data).matvec(v),
           _fisher_oracle(loss_fn, model, X, TARGETS) @ v.numpy())
    known, x, y = _closed_form("mse", "tf_keras"), X[:3], TARGETS[:3]
    twice = tf.data.Dataset.from_tensor_slices((np.tile(x, (2, 1)), np.tile(y, (2, 1))))

    def drawn(v):
        return cg.fisher_operator(known, model, twice.batch(3), kind="true").matvec(v)

    once = cg.fisher_operator(known, model, x, y, kind="true").matvec(v).numpy()
    np.testing.assert_array_equal(drawn(v).numpy(), tf.function(drawn)(v).numpy())
    assert np.max(np.abs(drawn(v).numpy() - 2 * once)) > 1e-3 * np.max(np.abs(once))


# -- fisher_operator -------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_empirical_fisher_is_the_per_example_gradients_outer_products(flavour):
    model, loss_fn = _model(flavour), HAND_WRITTEN["categorical"]
    labels = LABELS_OF["categorical"]
    op = cg.fisher_operator(loss_fn, model, X, labels)
    oracle = _fisher_oracle(loss_fn, model, X, labels)
    vectors = RNG.normal(size=(N, 2))
    _close(op.matvec(tf.constant(vectors[:, 0])), oracle @ vectors[:, 0])
    _close(op.matmul(tf.constant(vectors)), oracle @ vectors)


def test_the_expected_true_fisher_of_softmax_cross_entropy_is_the_ggn():
    """Exactly: Σ_c p_c g_c g_cᵀ over every label c of every example is the GGN."""
    model, loss_fn = _model(), HAND_WRITTEN["sparse"]
    logits = model(tf.constant(X)).numpy()
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    expected = np.zeros((N, N))
    for c in range(CLASSES):
        grads = cg.per_example_gradients(loss_fn, model, tf.constant(X),
                                         tf.fill([len(X)], c))
        rows = np.concatenate([g.numpy().reshape(len(X), -1) for g in grads], axis=1)
        expected += (rows * p[:, c:c + 1]).T @ rows
    _close(cg.ggn_operator(loss_fn, model, X, LABELS).to_dense(), expected)


@pytest.mark.parametrize("kind", ("sparse", "mse"))
def test_the_true_fisher_is_reproducible_and_its_draws_average_to_the_ggn(kind):
    """3 inputs repeated 400 times: the true Fisher over their draws, divided by 400,
    against the 3 inputs' GGN (a relative error of a few standard errors of 400 draws)."""
    model, loss_fn = _model(), _closed_form(kind, "tf_keras")
    x, labels = np.repeat(X[:3], 400, axis=0), np.repeat(LABELS_OF[kind][:3], 400, axis=0)
    op = cg.fisher_operator(loss_fn, model, x, labels, kind="true", seed=7)
    v = tf.constant(RNG.normal(size=N))
    again = cg.fisher_operator(loss_fn, model, x, labels, kind="true", seed=7).matvec(v)
    other = cg.fisher_operator(loss_fn, model, x, labels, kind="true", seed=8).matvec(v)
    np.testing.assert_array_equal(op.matvec(v).numpy(), again.numpy())
    assert np.max(np.abs(other.numpy() - again.numpy())) > 1e-3
    ggn = _ggn_oracle(model, X[:3], kind, LABELS_OF[kind][:3])
    error = np.linalg.norm(op.to_dense().numpy() / 400 - ggn) / np.linalg.norm(ggn)
    assert error < 0.15, error  # about 3 / sqrt(400)
    empirical = _fisher_oracle(loss_fn, model, x, labels) / 400
    assert np.linalg.norm(empirical - ggn) / np.linalg.norm(ggn) > 0.3  # not the labels'


# -- the estimators on the operators ---------------------------------------------------------


def test_the_estimators_on_the_operators():
    """Lanczos on the Hessian (n = 21 steps: exact), CG on the damped GGN, Hutchinson's
    trace of the Fisher within 4 standard errors."""
    model = _model()
    x, y = tf.constant(X), tf.constant(LABELS)
    loss_fn = _closed_form("sparse", "tf_keras")

    def total(ws):
        return tf.reduce_sum(loss_fn(y, model(x)))

    hessian = cg.hessian_operator(total, model.trainable_weights)
    dense = cg.hessian(total, model.trainable_weights, flat=True).numpy()
    values, vectors = cg.top_eigenvalues(hessian, 3, which="LM")
    exact = np.linalg.eigvalsh(dense)
    _close(values, exact[np.argsort(-np.abs(exact))[:3]], 1e-8)
    _close(dense @ vectors.numpy(), vectors.numpy() * values.numpy(), 1e-7)
    rhs = RNG.normal(size=N)
    ggn = _ggn_oracle(model, X, "sparse", LABELS)
    solution = cg.solve(cg.ggn_operator(loss_fn, model, x, y), rhs, damping=0.1, tol=1e-12)
    _close(solution, np.linalg.solve(ggn + 0.1 * np.eye(N), rhs), 1e-7)
    trace, error = cg.trace_estimate(cg.fisher_operator(loss_fn, model, x, y),
                                     num_samples=30, return_std=True)
    assert abs(trace - np.trace(_fisher_oracle(loss_fn, model, X, LABELS))) <= 4 * error


# -- bad input -------------------------------------------------------------------------------


def test_bad_input_names_the_argument():
    w, model = tf.constant(WEIGHTS[0]), _model()
    loss_fn, x, y = HAND_WRITTEN["sparse"], tf.constant(X), tf.constant(LABELS)
    with pytest.raises(ValueError, match=r"hessian_operator: f must return a scalar, but it "
                       r"returned \(2, 3\)"):
        cg.hessian_operator(lambda w: w * 2, w).matvec(tf.zeros([6], tf.float64))
    with pytest.raises(TypeError, match=r"hessian_operator: params must share one dtype.*"
                       r"params\[0\] is float64 and params\[1\] is float32"):
        cg.hessian_operator(lambda p: p[0][0, 0] * p[1], [w, tf.constant(1.0)])
    with pytest.raises(TypeError, match=r"hessian_operator: data must be a non-empty tuple"):
        cg.hessian_operator(_loss, [w, tf.constant(WEIGHTS[1])], data=[x, y])
    with pytest.raises(TypeError, match=r"hessian_operator: f must be callable"):
        cg.hessian_operator(w, w)
    with pytest.raises(ValueError, match=r"fisher_operator: kind must be one of 'empirical', "
                       r"'true', but got 'exact'"):
        cg.fisher_operator(loss_fn, model, x, y, kind="exact")
    with pytest.raises(ValueError, match=r"fisher_operator: kind='true' samples labels.*but "
                       r"loss_fn is <lambda>"):
        cg.fisher_operator(loss_fn, model, x, y, kind="true")
    data = tf.data.Dataset.from_tensor_slices((X, LABELS)).batch(4)
    with pytest.raises(ValueError, match=r"ggn_operator: x is a tf.data.Dataset.*y must be "
                       r"None"):
        cg.ggn_operator(loss_fn, model, data, y)
    with pytest.raises(TypeError, match=r"ggn_operator: y must be the batch of labels"):
        cg.ggn_operator(loss_fn, model, x)
    with pytest.raises(ValueError, match=r"ggn_operator: loss_fn must return one loss per "
                       r"example"):
        cg.ggn_operator(lambda y, p: tf.reduce_sum(p), model, x, y).matvec(tf.zeros([N],
                                                                                    tf.float64))
    with tf.Graph().as_default():
        held = tf.compat.v1.placeholder(tf.float64, [None, 3])
        with pytest.raises(ValueError, match=r"hessian_operator: params must have a static "
                           r"shape.*\(None, 3\)"):
            cg.hessian_operator(tf.reduce_sum, held)
    if not KERAS2_BUILT_IN:
        keras3 = _model("keras3")
        with tf.Graph().as_default(), pytest.raises(cg.ModeError, match="ggn_operator.*Keras 3"):
            cg.ggn_operator(loss_fn, keras3, tf.constant(X), tf.constant(LABELS))


def test_the_operators_and_estimators_compile_with_xla():
    """One `tf.function(jit_compile=True)`: the three operators' products, Lanczos, a
    Hutchinson trace and conjugate gradients equal the same calls in eager code."""
    params = [tf.constant(w) for w in WEIGHTS]
    vector = tf.constant(RNG.normal(size=N))
    sparse = tf.nn.sparse_softmax_cross_entropy_with_logits

    def build(x, y, labels, v):
        model = lambda x: mlp(params, x)  # noqa: E731
        H = cg.hessian_operator(lambda p, x, y: tf.reduce_sum((mlp(p, x) - y) ** 2), params,
                                data=(x, y))
        G = cg.ggn_operator(sparse, model, x, labels, weights=params)
        F = cg.fisher_operator(sparse, model, x, labels, weights=params)
        values, _ = cg.top_eigenvalues(H, 3)
        return (H.matvec(v), G.matvec(v), F.matvec(v), values,
                cg.trace_estimate(H, num_samples=5), cg.solve(G, v, damping=1.0))
    arguments = (tf.constant(X), tf.constant(TARGETS), tf.constant(LABELS), vector)
    eager = build(*arguments)
    compiled = tf.function(build, jit_compile=True)(*arguments)
    for got, want in zip(compiled, eager):
        _close(got.numpy(), want.numpy(), 1e-9)
