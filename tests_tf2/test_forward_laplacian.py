"""The forward Laplacian (compat_grads._src.traces.forward_laplacian) in a tf.function and in a v1
graph
of TF2, against the diagonal and trace of a nested-tape Hessian, in float64."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from compat_grads._src.traces import chunks
from compat_grads._src.traces import forward_laplacian as fl

RTOL = 1e-10
RNG = np.random.default_rng(0)
W = [RNG.normal(size=shape) for shape in ([3, 8], [8, 8], [8, 8], [8, 1])]
B = [RNG.normal(size=[8]) for _ in range(3)]
C43 = RNG.normal(size=[4, 3])
W34, B4 = RNG.normal(size=[3, 4]), RNG.normal(size=[4])
W12 = RNG.normal(size=[12, 8])


def mlp(x, weights=W, biases=B):
    for w, b in zip(weights[:-1], biases):
        x = tf.tanh(tf.matmul(x, w) + b)
    return tf.matmul(x, weights[-1])[:, 0]


def pinn(x, t):
    return mlp(tf.concat([x, t], 1), [W[0][:2], *W[1:]]) * tf.sin(x[:, 0])


def reductions(x):
    outer = tf.tanh(x)[:, :, None] * tf.sin(x)[:, None, :]
    scale = tf.cast(tf.shape(x)[1], x.dtype)  # an integer path from x: a constant
    cubes = tf.reduce_sum(x ** 3, -1, keepdims=True)[:, 0]
    return tf.reduce_mean(outer, axis=[1, 2]) + cubes / scale


def slices(x):
    return tf.sin(x[:, 0:1]) * x[..., 1:2] ** 2 + tf.exp(x[..., 1])[:, None] * x[:, 2:]


def stopped(x):
    return tf.reduce_sum(x ** 2 * tf.stop_gradient(x) + tf.sqrt(1 + x * x), 1)


def stacked(x):
    a, b = tf.unstack(tf.transpose(tf.stack([x, tf.sin(x)], 2), [0, 2, 1]), axis=1)
    return a * b


def batch_coupled(x):  # sums over the batch axis: the lazily broadcast start is made full
    return tf.reduce_sum(tf.tanh(tf.reshape(x, [-1]) * tf.reduce_mean(x, 0)[0]))


def rows_through_a_layer(x, transposed=False):  # each row of a [b, 2, 3] matrix: one layer
    rows = tf.sin(tf.reshape(x, [-1, 2, 3]))
    product = tf.matmul(rows, W34.T, transpose_b=True) if transposed else tf.matmul(rows, W34)
    return tf.reduce_sum(tf.tanh(product + B4) ** 2, [-2, -1])


# name: (f, input shapes, sources checked, batched modes)
CASES = {
    "mlp": (mlp, [[5, 3]], [0], (False, True)),
    "3x2y_plus_y2": (lambda x: 3 * x[:, 0] ** 2 * x[:, 1] + x[:, 1] ** 2, [[5, 2]], [0],
                     (False, True)),
    "pinn": (pinn, [[5, 1], [5, 1]], [0, 1], (False, True)),
    "cross_terms": (lambda x: x[:, 0] * x[:, 1] + tf.sin(x[:, 0]) * x[:, 1] ** 2, [[5, 2]], [0],
                    (False, True)),
    "rational": (lambda x: x / (1 + x * x), [[5, 3]], [0], (False, True)),
    "bias": (lambda x: tf.nn.bias_add(tf.tanh(x) @ W34, B4) ** 2, [[5, 3]], [0], (False, True)),
    "broadcast_3_against_4x3": (lambda x: tf.sin(x * C43 + x ** 2) * tf.exp(x), [[3]], [0],
                                (False,)),
    "slices": (slices, [[5, 3]], [0], (False, True)),
    "reductions": (reductions, [[5, 3]], [0], (False, True)),
    "stop_gradient": (stopped, [[5, 3]], [0], (False, True)),
    "batch_coupled": (batch_coupled, [[5, 2]], [0], (False, True)),
    "pack_unpack_transpose": (stacked, [[5, 3]], [0], (False, True)),
    "rows_through_a_layer": (rows_through_a_layer, [[5, 6]], [0], (False, True)),
    "rows_through_a_transposed_layer": (lambda x: rows_through_a_layer(x, True), [[5, 6]], [0],
                                        (False, True)),
}
PARAMS = [(name, k, batched, summed) for name, (_, _, sources, modes) in CASES.items()
          for k in sources for batched in modes for summed in (True, False)]


def _values(shapes):
    return [np.random.default_rng(1).normal(size=shape) for shape in shapes]


_HESSIANS = {}


def nested_tape_hessian(f, values, k):
    """(f's value, its full Hessian in source k) from nested tapes, each computed once per
    function, values and source: the tape Jacobians trace a function per call, and most of
    this file's time was the same Hessian computed again for each mode."""
    key = (f, k, *((v.shape, v.tobytes()) for v in values))
    if key not in _HESSIANS:
        xs = [tf.constant(v) for v in values]
        with tf.GradientTape() as outer:
            outer.watch(xs[k])
            with tf.GradientTape() as inner:
                inner.watch(xs[k])
                y = f(*xs)
            jacobian = inner.jacobian(y, xs[k])
        _HESSIANS[key] = y.numpy(), outer.jacobian(jacobian, xs[k]).numpy()
    return _HESSIANS[key]


def oracle(f, values, k, batched, summed):
    """The diagonal (or trace) from a nested-tape full Hessian, `[n] + y.shape`."""
    y, hessian = nested_tape_hessian(f, values, k)
    x = values[k]
    if batched:
        h = hessian.reshape([y.size, x.shape[0], -1, x.shape[0], x[0].size])
        diagonal = np.einsum("yajbj->jy", h)
    else:
        diagonal = np.einsum("yjj->jy", hessian.reshape([y.size, x.size, x.size]))
    diagonal = diagonal.reshape((-1,) + y.shape)
    return diagonal.sum(0) if summed else diagonal


def propagated(y, x, batched, summed):
    """`propagate`, with its None for a target linear in x (no second derivative, as
    tf.gradients gives) as the zeros it stands for."""
    out = fl.propagate(y, x, batched=batched, summed=summed)
    if out is not None:
        return out
    n = tf.reduce_prod(tf.shape(x)[1:]) if batched else tf.size(x)
    shape = tf.shape(y) if summed else tf.concat([[n], tf.shape(y)], 0)
    return tf.zeros(shape, y.dtype)


def in_function(f, values, k, batched, summed, signature=None):
    @tf.function(input_signature=signature)
    def run(*xs):
        return propagated(f(*xs), xs[k], batched, summed)
    return run(*[tf.constant(v) for v in values]).numpy()


def in_v1_graph(f, values, k, batched, summed):
    with tf.Graph().as_default():
        xs = [tf.compat.v1.placeholder(tf.float64, v.shape) for v in values]
        out = propagated(f(*xs), xs[k], batched, summed)
        with tf.compat.v1.Session() as session:
            return session.run(out, dict(zip(xs, values)))


def assert_close(got, want):
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * np.abs(want).max())


GRAPH_MODES = (in_function, in_v1_graph)
"""Each parameter set runs in one of them, by turns: every case meets both (its sums, True
and False, take different turns)."""


@pytest.mark.parametrize("name,k,batched,summed,run", [
    pytest.param(*params, GRAPH_MODES[i % len(GRAPH_MODES)],
                 id="-".join(map(str, (*params, GRAPH_MODES[i % len(GRAPH_MODES)].__name__))))
    for i, params in enumerate(PARAMS)])
def test_matches_the_nested_tape_hessian(name, k, batched, summed, run):
    f, shapes, _, _ = CASES[name]
    values = _values(shapes)
    assert_close(run(f, values, k, batched, summed), oracle(f, values, k, batched, summed))


def test_every_case_meets_both_graph_modes():
    met = {(params[0], GRAPH_MODES[i % len(GRAPH_MODES)]) for i, params in enumerate(PARAMS)}
    assert met == {(name, run) for name in CASES for run in GRAPH_MODES}


def test_the_diagonal_is_not_the_row_sums_with_cross_terms():
    f, shapes, _, _ = CASES["cross_terms"]
    values = _values(shapes)
    got = in_function(f, values, 0, True, False)
    xs = tf.constant(values[0])
    with tf.GradientTape() as outer:
        outer.watch(xs)
        with tf.GradientTape() as inner:
            inner.watch(xs)
            y = f(xs)
        gradient = inner.gradient(y, xs)
    row_sums = tf.reduce_sum(outer.batch_jacobian(gradient, xs), 2).numpy().T
    assert np.abs(got - row_sums).max() > 0.1


@pytest.mark.parametrize("summed", [True, False])
def test_unknown_batch_dimension(summed):
    values = _values([[5, 3]])
    signature = [tf.TensorSpec([None, 3], tf.float64)]
    assert_close(in_function(mlp, values, 0, True, summed, signature),
                 oracle(mlp, values, 0, True, summed))


@pytest.mark.parametrize("graph", [False, True])
def test_variable_source_through_its_handle(graph):
    values = _values([[5, 3]])
    want = oracle(mlp, values, 0, True, True)
    if graph:
        with tf.Graph().as_default():
            v = tf.Variable(values[0])
            out = fl.propagate(mlp(v), v.handle, batched=True, summed=True)
            with tf.compat.v1.Session() as session:
                session.run(v.initializer)
                got = session.run(out)
    else:
        v = tf.Variable(values[0])
        got = tf.function(lambda: fl.propagate(mlp(v), tf.convert_to_tensor(v.handle),
                                               batched=True, summed=True))().numpy()
    assert_close(got, want)


def test_softmax_is_unsupported_and_named():
    with pytest.raises(fl.Unsupported) as caught:
        in_function(lambda x: tf.reduce_sum(tf.nn.softmax(x, name="probs") * C43[0], 1),
                    _values([[5, 3]]), 0, True, True)
    assert "(Softmax)" in caught.value.reason and "probs" in caught.value.reason


def test_cond_on_the_path_is_unsupported():
    def f(x):
        return tf.cond(tf.reduce_sum(x) > 0, lambda: tf.sin(x), lambda: x * x)
    with pytest.raises(fl.Unsupported, match="If"):
        in_function(f, _values([[5, 3]]), 0, True, True)


def _in_unit(x):  # inside (-1, 1) and (0, 1): the domains of Atanh, Asin, Acos, Log
    return 0.1 + 0.8 * tf.sigmoid(x)


ELEMENTWISE = {
    **{name: getattr(tf.math, name.lower()) for name in (
        "Tanh", "Sigmoid", "Sin", "Cos", "Exp", "Log1p", "Expm1", "Square", "Erf", "Atan",
        "Sinh", "Cosh", "Abs", "Softsign", "Asinh", "Erfc", "Lgamma", "Digamma")},
    "Log": lambda x: tf.math.log(_in_unit(x)), "Sqrt": lambda x: tf.sqrt(_in_unit(x)),
    "Rsqrt": lambda x: tf.math.rsqrt(_in_unit(x)), "Tan": lambda x: tf.tan(_in_unit(x)),
    "Reciprocal": lambda x: tf.math.reciprocal(_in_unit(x)),
    "Acosh": lambda x: tf.acosh(1 + _in_unit(x)), "Atanh": lambda x: tf.atanh(_in_unit(x)),
    "Asin": lambda x: tf.asin(_in_unit(x)), "Acos": lambda x: tf.acos(_in_unit(x)),
    "Softplus": tf.nn.softplus, "Relu": tf.nn.relu, "Elu": tf.nn.elu, "Selu": tf.nn.selu,
    "Relu6": lambda x: tf.nn.relu6(3 * x), "LeakyRelu": tf.nn.leaky_relu,
    "Pow": lambda x: _in_unit(x) ** 2.5 + 1.7 ** x,
    "SquaredDifference": lambda x: tf.math.squared_difference(x, tf.sin(x)) + (x - 0.3) ** 2,
}
LINEAR = {
    "Tile_Gather_Squeeze": lambda x: tf.squeeze(tf.gather(tf.tile(tf.sin(x)[:, :, None], [1, 2, 1]),
                                                          [2, 0, 2], axis=1), -1) * x[:, :1],
    "ExpandDims_Slice_AddN": lambda x: tf.add_n([tf.slice(tf.expand_dims(x * x, -1), [0, 1, 0],
                                                          [-1, 2, -1])[..., 0], x[:, :2]]),
    "Select_Sub_Neg": lambda x: tf.where(x > 0, x ** 3, -tf.sin(x)) - tf.cos(x),
    "Cast_BroadcastTo": lambda x: tf.cast(tf.broadcast_to(tf.cast(x, tf.float32)[:, None, :],
                                                          [5, 2, 3]) ** 2, tf.float64),
    "Reshape_Concat": lambda x: tf.reshape(tf.concat([tf.exp(x), C43[:1] + 0 * x], 1), [5, 2, 3]),
    "BatchMatMul": lambda x: tf.linalg.matmul(x[:, None, :] * x[:, :, None], x[:, :, None],
                                              transpose_a=True)[..., 0],
}

C33 = RNG.normal(size=[3, 3])


def _matrices(x):
    """[b, 3] -> [b, 3, 3], each sample's matrix from its own row, well conditioned."""
    return 3 * np.eye(3) + tf.tanh(x[:, :, None] * C33 + x[:, None, :])


# The matrix functions of a Slater determinant or a Gaussian likelihood (each with its
# adjoint form where the op has one), and a gather_nd across samples.
MATRIX = {
    "LogMatrixDeterminant": lambda x: tf.linalg.slogdet(_matrices(x))[1],
    "MatrixDeterminant": lambda x: tf.linalg.det(_matrices(x)),
    "MatrixInverse": lambda x: tf.reduce_sum(tf.linalg.inv(_matrices(x)) * C33, [1, 2])
    + tf.linalg.inv(_matrices(x) ** 2, adjoint=True)[:, 0, 1],
    "MatrixSolve": lambda x: tf.linalg.solve(_matrices(x), tf.sin(x)[:, :, None])[..., 0]
    + tf.linalg.solve(_matrices(x), x[:, :, None] * C33, adjoint=True)[:, 1],
    "MatrixSolve_constant_matrix": lambda x: tf.linalg.solve(
        C33 + 3 * np.eye(3), tf.transpose(tf.sin(x) * x)),
    "GatherNd": lambda x: tf.gather_nd(tf.sin(x)[:, :, None] * x[:, None, :],
                                       [[0, 1], [3, 2], [4, 0]]),
}
LINEAR.update(MATRIX)
LINEAR.update({  # the ops of a TF1 FermiNet's log-amplitude (and of their gradients)
    "Split_SplitV_Max_Min": lambda x: tf.split(tf.sin(x), [1, 2], axis=1)[1] * tf.reduce_max(
        x ** 2, 1, keepdims=True) + tf.reduce_min(tf.exp(x), 1)[:, None] + tf.split(
        x * x, 3, axis=-1)[0],
    "Einsum": lambda x: tf.einsum("bi,bj->bij", tf.sin(x), x) + tf.einsum(
        "...i,ij->...j", x * x, C33)[:, :, None],
    "Sign_Floor": lambda x: tf.sign(x) * x ** 3 + tf.floor(x) * tf.sin(x),
})

# The same function for the oracle where TensorFlow has no second derivative of the op.
OVERTWICE = {"Softsign": lambda x: x / (1 + tf.abs(x))}


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("name", sorted({**ELEMENTWISE, **LINEAR}))
def test_each_rule(name, batched):
    f, values = {**ELEMENTWISE, **LINEAR}[name], _values([[5, 3]])
    same = OVERTWICE.get(name, f)
    assert_close(in_function(f, values, 0, batched, False), oracle(same, values, 0, batched, False))


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("name", sorted(LINEAR))
def test_a_chunked_laplacian_goes_through_each_rule(name, batched):
    """In chunks of two directions (a while_loop), the same Laplacian through every kind of
    rule: each chunk's second derivatives summed with the others'."""
    f, values = LINEAR[name], _values([[5, 3]])
    run = tf.function(lambda x: fl.propagate(f(x), x, batched=batched, summed=True, chunk=2))
    assert_close(run(tf.constant(values[0])).numpy(), oracle(f, values, 0, batched, True))


def jacobian_oracle(f, values, k, batched):
    """`tangents`' J, `[n] + y.shape`, from a tape Jacobian: along each one-hot direction
    (in every sample at once, when batched)."""
    xs = [tf.constant(v) for v in values]
    with tf.GradientTape() as tape:
        tape.watch(xs[k])
        y = f(*xs)
    jacobian = tape.jacobian(y, xs[k]).numpy().reshape([y.numpy().size, values[k].shape[0], -1])
    columns = jacobian.sum(1) if batched else jacobian.reshape([y.numpy().size, -1])
    return columns.T.reshape((-1,) + tuple(y.shape))


TANGENT_PARAMS = sorted({(name, k, batched) for name, k, batched, _ in PARAMS}
                        | {(name, 0, batched) for name in LINEAR for batched in (False, True)})


@pytest.mark.parametrize("name,k,batched", TANGENT_PARAMS)
def test_tangents_are_the_jacobian_along_each_direction(name, k, batched):
    if name in LINEAR:
        f, values = LINEAR[name], _values([[5, 3]])
    else:
        f, values = CASES[name][0], _values(CASES[name][1])

    @tf.function
    def run(*xs):
        return fl.tangents(f(*xs), xs[k], batched=batched)
    assert_close(run(*[tf.constant(v) for v in values]).numpy(),
                 jacobian_oracle(f, values, k, batched))


def test_tangents_of_an_unconnected_target_are_none():
    got = tf.function(lambda x: fl.tangents(tf.constant(C43), x, batched=True))
    assert got(tf.constant(_values([[5, 3]])[0])) is None


CHUNKED = [(name, batched, summed) for name in ("mlp", "slices", "pack_unpack_transpose")
           for batched in (False, True) for summed in (True, False)]


@pytest.mark.parametrize("name,batched,summed", CHUNKED)
def test_chunks_of_directions_give_the_same_values(name, batched, summed):
    f, shapes, _, _ = CASES[name]
    values = _values(shapes)

    @tf.function
    def run(x):
        return fl.propagate(f(x), x, batched=batched, summed=summed, chunk=2)
    assert_close(run(tf.constant(values[0])).numpy(), oracle(f, values, 0, batched, summed))


def _graph_of(fn, shape=(5, 3)):
    return tf.function(fn).get_concrete_function(tf.constant(_values([shape])[0])).graph


def _ops(graph):
    return [op for op in graph.get_operations()] + [
        op for f in graph._functions.values() for op in f.graph.get_operations()]


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("summed", [True, False])
def test_tangents_of_rows_times_a_matrix_are_one_2d_product(summed, transposed):
    """J, [n, b, 2, 3], and S ([b, 2, 3] summed) times a [3, 4] weight (or its transpose
    with transpose_b) as one MatMul of their rows: a broadcast BatchMatMul of that many
    small products ran 6x slower with Eigen's kernels. An unknown batch too."""
    graph = _graph_of(lambda x: fl.propagate(rows_through_a_layer(x, transposed), x,
                                             batched=True, summed=summed), shape=(5, 6))
    types = [op.type for op in _ops(graph)]
    assert types.count("BatchMatMulV2") == 1  # the target's own product
    assert types.count("MatMul") == 2  # J's and S's (the weight has no jet: no cross term)
    f = lambda x: rows_through_a_layer(x, transposed)  # noqa: E731
    values = _values([[5, 6]])
    assert_close(in_function(f, values, 0, True, summed,
                             [tf.TensorSpec([None, 6], tf.float64)]),
                 oracle(f, values, 0, True, summed))


@pytest.mark.parametrize("summed", [True, False])
def test_chunks_run_one_walk_in_a_loop(summed):
    """The chunks of a Laplacian are one walk in a while_loop, one chunk at a time: the graph
    is as large for 12 chunks as for 2 (a walk per chunk grew it with each)."""
    def built(chunk):
        graph = _graph_of(lambda x: fl.propagate(tf.reduce_sum(tf.tanh(x @ W12), 1), x,
                                                 batched=True, summed=summed, chunk=chunk),
                          (5, 12))
        loops = [op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")]
        return len(_ops(graph)), loops
    (few, loops_few), (many, loops_many) = built(6), built(1)
    assert few == many and len(loops_few) == 1
    assert len(loops_many) == 1 and loops_many[0].get_attr("parallel_iterations") == 1


@pytest.mark.parametrize("summed", [True, False])
@pytest.mark.parametrize("chunk", [None, 2])
def test_in_the_loop_a_tangent_waits_for_its_square(chunk, summed):
    """A step of the Laplacian's loop over chunks makes tanh's J after ΣJ²'s reduction, so
    the two tangents are not held at once (the allocator's peak at b=512, d=200: 17.0 MB,
    9.5 with the wait); one walk of every direction keeps the overlap, as does a per-direction
    S (its J² is a full tangent: waiting would free nothing)."""
    graph = _graph_of(lambda x: fl.propagate(tf.reduce_sum(tf.tanh(x @ W12), 1), x,
                                             batched=True, summed=summed, chunk=chunk), (5, 12))
    waits = [(op.type, [c.type for c in op.control_inputs]) for op in _ops(graph)
             if op.control_inputs]
    assert waits == ([("Mul", ["Sum"])] if chunk and summed else [])


def test_each_trace_chunk_starts_after_the_one_before():
    graph = _graph_of(lambda x: fl.reduced_tangents(
        tf.tanh(x), x, batched=True, chunk=1, reduce=lambda J, lo, hi: tf.reduce_sum(J, 0)))
    waits_for = {c.name for op in graph.get_operations() for c in op.control_inputs}
    # 3 directions, one per walk: the 2nd waits for the 1st's result, the 3rd for the 2nd's
    assert len(waits_for) == 2


def test_the_default_chunk_keeps_the_largest_tangent_small():
    def chunk(b, width, n, looped=False):
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(tf.float32, [b, n])
            hidden = tf.tanh(tf.matmul(x, tf.ones([n, width])))
            return chunks.at_once(fl._graph_walk.between([hidden], [x]), n, looped)
    assert chunk(1024, 64, 100) == 16  # 4 MiB / (1024 · 64 · 4 bytes)
    assert chunk(8, 8, 10) >= 10  # all at once
    assert chunk(1024, 4096, 64) == 4  # at most WALKS = 16 walks
    assert chunk(None, 64, 100) is None  # an unknown batch: one walk
    # In a loop (built once): 4 MiB of J too, however many directions (so the walk's
    # memory grows with b, not with b times the directions), one direction at least.
    assert chunk(1024, 64, 100, looped=True) == chunk(1024, 64, 10000, looped=True) == 16
    assert chunk(1024, 4096, 64, looped=True) == 1  # not n / WALKS = 4
    assert chunk(None, 64, 100, looped=True) is None


@pytest.fixture
def walked(monkeypatch):
    """The directions (first, count) of each walk built while the test runs."""
    built = []

    class Recorded(fl._Walk):
        def __init__(self, *args, directions=None, **kwargs):
            built.append(directions)
            super().__init__(*args, directions=directions, **kwargs)
    monkeypatch.setattr(fl, "_Walk", Recorded)
    return built


def test_the_laplacians_default_chunk_bounds_its_directions_in_the_loop(walked):
    """batch_laplacian by default walks 4 MiB of J a step: 2048 directions through a tanh
    layer of 64 at b = 512 in float64 (256 KiB a direction) run 16 at a time in one loop,
    not 128 at a time (at most 16 walks, as chunks walked one after another are bounded)."""
    graph = _graph_of(lambda x: fl.propagate(tf.reduce_sum(tf.tanh(
        tf.matmul(x, tf.ones([2048, 64], x.dtype))), 1), x, batched=True, summed=True),
        shape=[512, 2048])
    loops = [op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")]
    assert len(loops) == 1 and len(walked) == 1 and walked[0][1] == 16


@pytest.mark.parametrize("given", ["auto", "a budget's chunk of 500", 500])
def test_the_budgets_chunk_only_bounds_the_walks_default(monkeypatch, walked, given):
    """chunk_size="auto": the memory budget's chunk (from the products' model: it asked for
    500 of 1000 directions at b=512, d=1000) bounds the loop's default (32 directions of
    128 KiB), and the plans say what the walk runs (a retry halves that); an explicit chunk
    is kept (500 of 2048 directions: 5 evened steps of 410)."""
    import compat_grads as cg
    from compat_grads._src import memory
    from compat_grads._src.traces import traces

    if given != 500:
        fit = memory.fit
        monkeypatch.setattr(traces._memory, "fit", lambda *args, **kwargs: dataclasses.replace(
            fit(*args, **kwargs), chunk_size=500 if given != "auto" else None))
    w = tf.ones([2048, 64])
    u = lambda x: tf.reduce_sum(tf.tanh(x @ w), 1)  # noqa: E731
    with cg.memory_plans() as plans:
        tf.function(lambda x: cg.batch_laplacian(
            u, x, chunk_size=given if given == 500 else "auto")).get_concrete_function(
                tf.TensorSpec([512, 2048], tf.float32))
    assert len(walked) == 1 and walked[0][1] == (410 if given == 500 else 32)
    assert [(p.chunk_size, p.pieces) for p in plans] == (
        [(500, 5)] if given == 500 else [(32, 64)])


def test_chunks_are_evened_out_with_no_padded_directions():
    """30 directions in chunks of at most 12 run as 3 chunks of 10: a padded last chunk (6
    of 12 real) carried 6 zero directions through every op."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 30])
        u = tf.reduce_sum(tf.tanh(x), 1)
        assert [chunks.chunk_and_n(u, x, True, at_most) for at_most in (12, 7, 29, 30, 31)] == [
            (10, 30), (6, 30), (15, 30), (None, 30), (None, 30)]


ACTIVATIONS = {"TanhGrad": tf.tanh, "SigmoidGrad": tf.sigmoid, "ReluGrad": tf.nn.relu,
               "Relu6Grad": lambda a: tf.nn.relu6(3 * a), "EluGrad": tf.nn.elu,
               "SqrtGrad": lambda a: tf.sqrt(1 + a * a),
               "RsqrtGrad": lambda a: tf.math.rsqrt(1 + a * a),
               "ReciprocalGrad": lambda a: tf.math.reciprocal(2 + tf.sin(a)),
               "StridedSliceGrad": lambda a: tf.concat([tf.tanh(a)[:, 1:], a[:, :1] ** 2], 1),
               # its gradient sums over the broadcast axes: BroadcastGradientArgs folded
               "Einsum": lambda a: tf.einsum("...i,...i->...i", tf.tanh(a)[:, None, :],
                                             tf.sin(a[0]))[:, 0, :]}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("batched", [False, True])
def test_a_gradient_walks_through_the_activations_gradient_ops(name, batched):
    """The first-order walk of `tf.gradients(u, x)` (a divergence of a gradient): each
    activation's gradient op, against the tape's Hessian."""
    act = ACTIVATIONS[name]

    def gradient(x):
        return tf.gradients(tf.reduce_sum(act(x @ W[0]) @ W[1][:, :1]), x)[0]
    values = _values([[5, 3]])

    @tf.function
    def run(x):
        g = gradient(x)
        assert name in {op.type for op in fl._graph_walk.between([g], [x])}
        return fl.tangents(g, x, batched=batched)

    @tf.function
    def want(x):
        return jacobian_oracle_graph(gradient, x, batched)
    assert_close(run(tf.constant(values[0])).numpy(), want(tf.constant(values[0])).numpy())


def test_a_transposes_gradient_inverts_its_permutation_in_the_graph():
    """In a v1 graph, a transpose's gradient permutes by InvertPermutation of the
    permutation, an op the walk reads through."""
    values = _values([[5, 3]])

    def gradient(x):
        y = tf.transpose(tf.tanh(tf.transpose(x[:, :, None] * C33, [2, 0, 1])), [1, 2, 0])
        return tf.gradients(tf.reduce_sum(y ** 2), x)[0]
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float64, [5, 3])
        g = gradient(x)
        assert "InvertPermutation" in {op.type for op in g.graph.get_operations()}
        got, want = fl.tangents(g, x, batched=True), jacobian_oracle_graph(gradient, x, True)
        with tf.compat.v1.Session() as session:
            got, want = session.run([got, want], {x: values[0]})
    assert_close(got, want)


def jacobian_oracle_graph(f, x, batched):
    """`jacobian_oracle` inside a graph (a gradient op needs one): [n] + y.shape."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    jacobian = tf.reshape(tape.jacobian(y, x), [tf.size(y), x.shape[0], -1])
    columns = tf.reduce_sum(jacobian, 1) if batched else tf.reshape(jacobian, [tf.size(y), -1])
    return tf.reshape(tf.transpose(columns), tf.concat([[-1], tf.shape(y)], 0))


def test_the_gradient_ops_have_no_second_order_rule():
    @tf.function
    def run(x):
        return fl.propagate(tf.reduce_sum(tf.gradients(tf.reduce_sum(tf.tanh(x)), x)[0] ** 2),
                            x, batched=False, summed=True)
    with pytest.raises(fl.Unsupported, match="TanhGrad"):
        run(tf.constant(_values([[5, 3]])[0]))
    assert "TanhGrad" not in fl.ops_with_rules()


@pytest.mark.parametrize("first,second", [([1, 3, 1], [1, 1, 1]), ([4, 3, 5], [5]),
                                          ([3, 1], [1, 4]), ([2, 1], [2, 1]), ([1], [1]),
                                          ([5, 1, 3], [5, 3]), ([], [2, 2])])
def test_shapes_a_gradient_computes_are_read_as_tensorflow_computes_them(first, second):
    """The axes a broadcast's gradient sums over (BroadcastGradientArgs of known shapes, and
    slices of them), which the rules read where tf.get_static_value does not fold them."""
    from compat_grads._src.traces import linear_jets as _linear_jets

    with tf.Graph().as_default():
        shapes = [tf.constant(s, tf.int32, shape=[len(s)]) for s in (first, second)]
        parts = tf.raw_ops.BroadcastGradientArgs(s0=shapes[0], s1=shapes[1])
        sliced = tf.strided_slice(tf.concat(shapes, 0), [1], [0], [1], end_mask=1)
        with tf.compat.v1.Session() as session:
            want = session.run([*parts, sliced])
        got = [_linear_jets._constant_value(t) for t in (*parts, sliced)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
