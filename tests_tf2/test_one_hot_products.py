"""One-hot tangents (cotangents) started after the first (before the last) matrix product:
every layout of the product gives the plain basis's values bit for bit and the float64
oracle's, where the shortcut applies it is used, and where it does not (the source used
twice, a factor that depends on the sources, a tape) the plain basis serves."""

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads._src.jacobians import one_hot_products as _one_hot_products
from compat_grads.testing._suite import spies

RNG = np.random.default_rng(7)
# The factors are arrays (constants of whichever graph the target is built in); the
# sources are eager tensors (a v1 Graph route feeds their values to placeholders).
A = RNG.standard_normal((7, 5))
B = RNG.standard_normal((5, 3))
BIAS = RNG.standard_normal(3)
VECTOR = tf.constant(RNG.standard_normal(5))
WIDE = tf.constant(RNG.standard_normal((4, 5)))
TALL = tf.constant(RNG.standard_normal((5, 4)))

# name: (f, x): every transpose flag on either side of the product, vectors (matvec,
# x[None]), reshapes before and after, elementwise ops after (a bias, relu, a scale).
LAYOUTS = {
    "matvec": (lambda x: tf.tanh(tf.linalg.matvec(A, x)), VECTOR),
    "row vector times matrix": (lambda x: tf.tanh(x[None] @ B)[0], VECTOR),
    "matrix times matrix, scaled": (lambda x: x @ B * 2.0, WIDE),
    "dense layer (bias, relu)": (lambda x: tf.nn.relu(tf.nn.bias_add(x @ B, BIAS)), WIDE),
    "transposed x times matrix": (lambda x: tf.tanh(tf.matmul(x, B, transpose_a=True)), TALL),
    "x times transposed matrix": (
        lambda x: tf.tanh(tf.matmul(x, tf.transpose(B), transpose_b=True)), WIDE),
    "matrix times x": (lambda x: tf.tanh(A @ x), TALL),
    "both transposed": (
        lambda x: tf.tanh(tf.matmul(x, A, transpose_a=True, transpose_b=True)), TALL),
    "transposed matrix times x": (
        lambda x: tf.tanh(tf.matmul(tf.transpose(A), x, transpose_a=True)), TALL),
    "matrix times transposed x": (
        lambda x: tf.tanh(tf.matmul(TALL.numpy().T, x, transpose_b=True)), WIDE),
    "reshaped around the product": (
        lambda x: tf.reshape(tf.tanh(tf.matmul(A, x, transpose_b=True)), [-1]), WIDE),
    "reshaped x": (lambda x: tf.tanh(tf.reshape(x, [2, 10]) @ tf.ones([10, 3], tf.float64)),
                   WIDE),
    "two layers": (lambda x: tf.sigmoid(tf.tanh(x @ B @ tf.transpose(B)) @ B), WIDE),
}
# Where the shortcut must not serve: the plain basis gives the values.
REFUSED = {
    "x used twice": lambda x: tf.tanh(x @ B) + tf.reduce_sum(x),
    "factor depends on x": lambda x: tf.tanh(x @ (B * tf.reduce_sum(x))),
    "product used twice": lambda x: tf.tanh(x @ B) * tf.reduce_sum(x @ B),
}
STRATEGIES = ("forward", "reverse")


@pytest.fixture
def used(monkeypatch):
    """The calls to the shortcut, and whether each one served (a row or column function)."""
    return spies.served(monkeypatch, _one_hot_products, ("rows", "columns"))


def _plain(monkeypatch, f, x, strategy, function=cg.stacked_jacobian):
    """The plain one-hot basis's values (the shortcut turned off), in a tf.function."""
    with monkeypatch.context() as patch:
        for name in ("rows", "columns"):
            patch.setattr(_one_hot_products, name, lambda *args: None)
        return tf.function(lambda x: function(f, x, strategy=strategy))(x).numpy()


def _oracle(f, x, batched=False):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x)
    if batched:
        return tape.batch_jacobian(y, x).numpy()
    return tape.jacobian(y, x, experimental_use_pfor=False).numpy()


def _routes(f, x, strategy, function=cg.stacked_jacobian):
    """Eager (compiled), tf.function and a v1 Graph: every route the graph backend serves."""
    eager = function(f, x, strategy=strategy).numpy()
    in_function = tf.function(lambda x: function(f, x, strategy=strategy))(x).numpy()
    with tf.Graph().as_default():
        placeholder = tf.compat.v1.placeholder(x.dtype, x.shape)
        built = function(f, placeholder, strategy=strategy)
        with tf.compat.v1.Session() as session:
            graph = session.run(built, {placeholder: x.numpy()})
    return {"eager": eager, "tf.function": in_function, "v1 Graph": graph}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_layout_gives_the_plain_basis_bit_for_bit_and_the_oracle(
        layout, strategy, used, monkeypatch):
    f, x = LAYOUTS[layout]
    plain, want = _plain(monkeypatch, f, x, strategy), _oracle(f, x)
    used.clear()
    for route, got in _routes(f, x, strategy).items():
        assert got.shape == want.shape, route
        np.testing.assert_array_equal(got, plain, err_msg=route)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=route)
    assert used and all(used), used  # every route took the shortcut


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_target_the_shortcut_cannot_serve_gets_the_plain_basis(case, strategy, used):
    f = REFUSED[case]
    got = tf.function(lambda x: cg.stacked_jacobian(f, x, strategy=strategy))(WIDE)
    np.testing.assert_allclose(got, _oracle(f, WIDE), rtol=1e-12, atol=1e-12)
    assert used == [False]


def test_a_product_of_two_sources_keeps_both_gradients(used):
    """Reverse mode may not start before x1 @ x2 when x2 is a source too: its rows would
    lose x2's part."""
    def f(x1, x2):
        return tf.tanh(x1 @ x2)

    sources = [WIDE, tf.constant(B)]
    got = cg.stacked_jacobian(lambda s: f(*s), sources, strategy="reverse")
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(sources)
        y = f(*sources)
    for block, source in zip(got, sources):
        want = tape.jacobian(y, source, experimental_use_pfor=False)
        np.testing.assert_allclose(block, want, rtol=1e-12, atol=1e-12)
    assert used == [False]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_batch_jacobians_start_at_the_product_per_sample(strategy, used, monkeypatch):
    def f(x):
        return tf.nn.softplus(tf.nn.bias_add(x @ B, BIAS))

    plain = _plain(monkeypatch, f, WIDE, strategy, cg.batch_jacobian)
    used.clear()
    for route, got in _routes(f, WIDE, strategy, cg.batch_jacobian).items():
        np.testing.assert_array_equal(got, plain, err_msg=route)
        np.testing.assert_allclose(got, _oracle(f, WIDE, batched=True), rtol=1e-12,
                                   atol=1e-12, err_msg=route)
    assert used and all(used), used


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_unknown_batch_gives_the_oracle(strategy):
    def f(x):
        return tf.tanh(tf.nn.bias_add(x @ B, BIAS))

    traced = tf.function(lambda x: cg.batch_jacobian(f, x, strategy=strategy),
                         input_signature=[tf.TensorSpec([None, 5], tf.float64)])
    np.testing.assert_allclose(traced(WIDE), _oracle(f, WIDE, batched=True), rtol=1e-12,
                               atol=1e-12)


def test_a_variable_source_starts_at_its_first_product(used):
    variable = tf.Variable(VECTOR)

    def f(v):
        return tf.tanh(tf.linalg.matvec(A, v))

    got = tf.function(lambda: cg.stacked_jacobian(f, variable, strategy="forward"))()
    np.testing.assert_allclose(got, _oracle(f, VECTOR), rtol=1e-12, atol=1e-12)
    assert used == [True]


def test_the_tape_keeps_the_plain_basis(used):
    f, x = LAYOUTS["matvec"]
    for strategy in STRATEGIES:
        got = cg.stacked_jacobian(f, x, strategy=strategy, compile=False)
        np.testing.assert_allclose(got, _oracle(f, x), rtol=1e-12, atol=1e-12)
    assert not any(used)


def test_hessians_start_before_the_gradients_last_product(used):
    def f(x):
        return tf.reduce_sum(tf.tanh(tf.linalg.matvec(A, x)) ** 2)

    got = tf.function(lambda x: cg.hessian(f, x))(VECTOR)
    # f = sum(t²), t = tanh(Ax): H = Aᵀ diag((2 - 6t²)(1 - t²)) A
    t = np.tanh(A @ VECTOR.numpy())
    want = A.T @ (((2 - 6 * t ** 2) * (1 - t ** 2))[:, None] * A)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert any(used), used  # at least one of the products took the shortcut


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_no_product_with_the_identity_is_built(strategy):
    """The graph holds the target's own product, and no product of the factor with the
    stacked one-hot basis (nor the gradient's product, which the shortcut skips)."""
    f, x = LAYOUTS["matvec"]
    graph = tf.function(lambda x: cg.stacked_jacobian(f, x, strategy=strategy)
                        ).get_concrete_function(x).graph
    products = [op for op in graph.get_operations()
                if op.type in ("MatMul", "BatchMatMulV2", "BatchMatMulV3")]
    assert len(products) == 1, [op.name for op in products]


def _strategy_chosen(monkeypatch, run):
    """The direction 'auto' picked while `run()` built its graph."""
    from compat_grads._src.jacobians import jacobians as _jacobians

    picked, choose = [], _jacobians.choose_strategy

    def spy(*args, **kwargs):
        picked.append(choose(*args, **kwargs))
        return picked[-1]
    monkeypatch.setattr(_jacobians, "choose_strategy", spy)
    run()
    return picked


# A tall Jacobian (more target elements than source elements) of elementwise ops of one
# product of the source: its rows are the factor's rows, scaled, already in the Jacobian's
# layout, so "auto" runs reverse mode; any pass through the graph after the product, or a
# row that is not the source's own, keeps forward mode.
TALL_COPIES = {
    "matvec": lambda x: tf.tanh(tf.linalg.matvec(A, x)),
    "matrix times x, reshaped": lambda x: tf.reshape(tf.nn.relu(A @ tf.reshape(x, [5, 1])),
                                                     [-1]),
}
TALL_PASSES = {
    "two products": lambda x: tf.tanh(tf.linalg.matvec(A, tf.tanh(x * 2.0))),
    "product of a function of x": lambda x: tf.tanh(tf.linalg.matvec(A, tf.sin(x))),
}


@pytest.mark.parametrize("case", sorted(TALL_COPIES))
def test_rows_that_are_copies_of_the_factor_run_reverse(case, monkeypatch):
    f = TALL_COPIES[case]
    picked = _strategy_chosen(monkeypatch, lambda: tf.function(
        lambda x: cg.stacked_jacobian(f, x))(VECTOR))
    assert picked == ["reverse"]
    for route, got in _routes(f, VECTOR, "auto").items():
        np.testing.assert_allclose(got, _oracle(f, VECTOR), rtol=1e-12, atol=1e-12,
                                   err_msg=route)


@pytest.mark.parametrize("case", sorted(TALL_PASSES))
def test_rows_that_pass_through_the_graph_keep_forward(case, monkeypatch):
    f = TALL_PASSES[case]
    picked = _strategy_chosen(monkeypatch, lambda: tf.function(
        lambda x: cg.stacked_jacobian(f, x))(VECTOR))
    assert picked == ["forward"]


def test_per_sample_rows_that_are_copies_run_reverse(monkeypatch):
    def f(x):  # 5 features to 7 outputs per sample
        return tf.tanh(x @ tf.constant(A.T))

    x = tf.constant(RNG.standard_normal((4, 5)))
    picked = _strategy_chosen(monkeypatch, lambda: cg.batch_jacobian(f, x, compile=False))
    assert picked == ["forward"]  # a tape: no shortcut, the plain rule
    picked = _strategy_chosen(monkeypatch, lambda: tf.function(
        lambda x: cg.batch_jacobian(f, x))(x))
    assert picked == ["reverse"]
    np.testing.assert_allclose(cg.batch_jacobian(f, x), _oracle(f, x, batched=True),
                               rtol=1e-12, atol=1e-12)
