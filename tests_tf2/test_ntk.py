"""The empirical NTK against the analytic Jacobians of a small tanh network (numpy, never
TensorFlow's derivatives): both methods, summed over the outputs and every output pair, x2
given and x2 = x1, in eager code, a tf.function, XLA and a v1 Graph with an unknown batch;
chunks (explicit, and chosen by a memory budget the Jacobians do not fit) equal the kernel at
once; Keras models; bad input. The TF1 graph's side is tests_tf1/test_ntk_tf1.py."""

import importlib

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import KERAS2_BUILT_IN, keras2, tf
from compat_grads.bench import curvature as curvature_bench
from compat_grads.testing import modes
from compat_grads.testing._suite.operators import WEIGHTS, X, mlp, ntk_oracle

TOLERANCE = 1e-10
X2 = np.random.default_rng(2).normal(size=(4, 2))
MODES = (modes.EAGER, modes.FUNCTION, modes.V1_GRAPH)
FLAVOURS = ("tf_keras",) if KERAS2_BUILT_IN else ("tf_keras", "keras3")


def _close(got, want, tolerance=TOLERANCE):
    got = np.asarray(got)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= tolerance * max(1.0, np.max(np.abs(want)))


def _in_mode(mode, build, arrays):
    """`build(*tensors)` as numpy: eager, in a tf.function, or in a v1 Graph whose
    placeholders have an unknown batch."""
    if mode == modes.V1_GRAPH:
        with tf.Graph().as_default():
            held = [tf.compat.v1.placeholder(a.dtype, (None, *a.shape[1:])) for a in arrays]
            return modes.session_values(build(*held), dict(zip(held, arrays)))
    tensors = [tf.constant(a) for a in arrays]
    return modes.to_numpy(tf.function(build)(*tensors) if mode == modes.FUNCTION
                          else build(*tensors))


def _params():
    return [tf.constant(w) for w in WEIGHTS]


@pytest.mark.parametrize("method", ["jacobian", "products"])
@pytest.mark.parametrize("mode", MODES)
def test_the_kernel_is_the_jacobians_product(mode, method):
    def build(x1, x2):
        params = _params()
        return [cg.empirical_ntk(mlp, params, x1, x2, method=method),
                cg.empirical_ntk(mlp, params, x1, x2, trace_outputs=False, method=method),
                cg.empirical_ntk(mlp, params, x1, method=method)]
    summed, pairs, gram = _in_mode(mode, build, [X, X2])
    _close(summed, ntk_oracle(X, X2))
    _close(pairs, ntk_oracle(X, X2, trace=False))
    _close(gram, ntk_oracle(X, X))
    assert np.array_equal(gram, gram.T) or np.allclose(gram, gram.T, rtol=0, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("chunk_size", [1, 4])
def test_chunks_are_the_kernel_at_once(mode, chunk_size):
    """6 x 4 examples in chunks of 1 (24 blocks) and 4 (a smaller last chunk), by both
    methods: one while_loop of blocks, the same kernel."""
    def build(x1, x2):
        params = _params()
        return [cg.empirical_ntk(mlp, params, x1, x2, chunk_size=chunk_size),
                cg.empirical_ntk(mlp, params, x1, x2, chunk_size=chunk_size,
                                 trace_outputs=False),
                cg.empirical_ntk(mlp, params, x1, chunk_size=chunk_size, method="products")]
    summed, pairs, gram = _in_mode(mode, build, [X, X2])
    _close(summed, ntk_oracle(X, X2))
    _close(pairs, ntk_oracle(X, X2, trace=False))
    _close(gram, ntk_oracle(X, X))


def test_a_budget_the_jacobians_do_not_fit_chunks_the_examples():
    """One example's Jacobian in flight is counted 2 x 3 x 21 x 8 = 1008 bytes, the kernel
    6 x 4 x 8 = 192, and a quarter of the budget is kept for the runtime: 10 KiB leaves
    7488 bytes, which hold x2's Jacobian whole (4 x 1008) and 3 of x1's examples at a time;
    4 KiB leaves 2880, one example of each side at a time. The plans say so and the kernels
    are the same."""
    x1, x2, params = tf.constant(X), tf.constant(X2), _params()
    want = ntk_oracle(X, X2)
    with cg.memory_plans() as plans:
        _close(cg.empirical_ntk(mlp, params, x1, x2), want)
        _close(cg.empirical_ntk(mlp, params, x1, x2, memory_budget=10 * 2**10), want)
        _close(cg.empirical_ntk(mlp, params, x1, x2, memory_budget=4 * 2**10), want)
    at_once, x1_chunked, both = plans
    assert at_once.function == "empirical_ntk" and at_once.chunk_size is None
    assert at_once.result_bytes == 192 and at_once.row_bytes == 1008
    assert (x1_chunked.chunk_size, x1_chunked.pieces) == (3, 2)
    assert x1_chunked.peak_bytes == 192 + (3 + 4) * 1008 <= 10 * 2**10
    assert (both.chunk_size, both.pieces) == (1, 6) and both.peak_bytes == 192 + 2 * 1008
    assert both.all_at_once_bytes == 192 + 10 * 1008 > 4 * 2**10 * 3 // 4


@pytest.mark.parametrize("chunk_size", [None, 4])
def test_under_xla(chunk_size):
    """At once, and in chunks (equal blocks there, scattered into the kernel: XLA needs the
    shapes)."""
    f = tf.function(lambda x1, x2: [
        cg.empirical_ntk(mlp, _params(), x1, x2, chunk_size=chunk_size),
        cg.empirical_ntk(mlp, _params(), x1, x2, chunk_size=chunk_size, trace_outputs=False)],
        jit_compile=True)
    summed, pairs = f(tf.constant(X), tf.constant(X2))
    _close(summed.numpy(), ntk_oracle(X, X2))
    _close(pairs.numpy(), ntk_oracle(X, X2, trace=False))


def test_chunks_under_xla_need_a_static_number_of_examples():
    f = tf.function(lambda x1: cg.empirical_ntk(mlp, _params(), x1, chunk_size=2),
                    jit_compile=True,
                    input_signature=[tf.TensorSpec([None, 2], tf.float64)])
    with pytest.raises(ValueError, match="empirical_ntk: under XLA .* unknown batch size"):
        f(tf.constant(X))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_keras_model(flavour):
    """Keras' Dense layers with the weights WEIGHTS: `lambda params, x: model(x)`, the
    model's variables as params."""
    keras = keras2() if flavour == "tf_keras" else importlib.import_module("keras")
    model = keras.Sequential([keras.Input((2,), dtype="float64"),
                              keras.layers.Dense(3, activation="tanh", dtype="float64"),
                              keras.layers.Dense(3, dtype="float64")])
    model.set_weights(WEIGHTS)
    kernel = cg.empirical_ntk(lambda params, x: model(x), model.trainable_weights,
                              tf.constant(X), tf.constant(X2))
    _close(kernel.numpy(), ntk_oracle(X, X2))


def test_float32_and_a_scalar_output():
    """A network of one output per example, `[n]`: the kernel of float32 parameters is
    float32 and equal to the float64 one's within float32's rounding."""
    w = tf.constant(WEIGHTS[0][:, :1], tf.float32)
    kernel = cg.empirical_ntk(lambda w, x: tf.tanh(x @ w)[:, 0], w, tf.constant(X, tf.float32))
    h = np.tanh(X @ WEIGHTS[0][:, :1])
    rows = X * (1 - h ** 2)
    assert kernel.dtype == tf.float32
    _close(kernel.numpy(), rows @ rows.T, 1e-5)


@pytest.mark.parametrize("call, error, words", [
    (lambda: cg.empirical_ntk(1.0, _params(), X), TypeError, "f must be callable"),
    (lambda: cg.empirical_ntk(mlp, [tf.constant([1.0]), tf.constant([1.0], tf.float64)], X),
     TypeError, "params must share one dtype"),
    (lambda: cg.empirical_ntk(mlp, _params(), tf.constant(1.0, tf.float64)), ValueError,
     "x1 must be one tensor of examples"),
    (lambda: cg.empirical_ntk(mlp, _params(), X, method="dense"), ValueError, "method"),
    (lambda: cg.empirical_ntk(mlp, _params(), X, chunk_size=0), ValueError, "chunk_size"),
    (lambda: cg.empirical_ntk(mlp, _params(), X, trace_outputs="yes"), TypeError,
     "trace_outputs"),
    (lambda: cg.empirical_ntk(lambda p, x: [mlp(p, x)], _params(), X), TypeError,
     "f must return one tensor"),
    (lambda: cg.empirical_ntk(lambda p, x: tf.reduce_sum(mlp(p, x)), _params(), X),
     ValueError, "one row per example"),
    (lambda: cg.empirical_ntk(mlp, _params(), X, memory_budget=100), ValueError,
     "too small even for one example"),
    (lambda: cg.empirical_ntk(mlp, _params(), X, memory_budget="1GB"), TypeError,
     "memory_budget must be"),
])
def test_bad_input_names_the_argument(call, error, words):
    with pytest.raises(error, match="empirical_ntk") as raised:
        call()
    assert words in str(raised.value)


_PEAK_WORKER = """
import json, sys
import numpy as np
import compat_grads as cg
from compat_grads.bench.curvature import scale_mlp, tanh_mlp as f
from compat_grads.bench.timing import reset_peak_rss, rss_mb

n, budget = int(sys.argv[1]), int(sys.argv[2])
params, x = scale_mlp(n)
cg.empirical_ntk(f, params, x[:4], chunk_size=2).numpy()  # the runtime started first
reset_peak_rss()
baseline = rss_mb()
with cg.memory_plans() as plans:
    kernel = cg.empirical_ntk(f, params, x, memory_budget=budget)
peak = (rss_mb("VmHWM:") - baseline) * 2**20
kernel = kernel.numpy()
whole = cg.empirical_ntk(f, params, x, chunk_size=None).numpy()
print(json.dumps({"peak_bytes": peak, "result_bytes": kernel.nbytes,
                  "pieces": [p.pieces for p in plans],
                  "error": float(np.max(np.abs(kernel - whole)) / np.max(np.abs(whole)))}))
"""


def test_a_chunked_kernel_stays_within_its_budget():
    """5,000 examples of a 4,801-weight MLP: a 100 MB kernel, 384 MB of Jacobians at once;
    under a 250 MB budget, in chunks, the process's peak (its resident set's rise, in a
    process of its own) within the budget, the kernel that of the Jacobians at once. (The
    blocks are written into the kernel in place: in a TensorArray concatenated at the end
    the kernel was held twice.)"""
    import json
    import subprocess
    import sys

    budget = 250_000_000
    done = subprocess.run([sys.executable, "-c", _PEAK_WORKER, "5000", str(budget)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["result_bytes"] == 5000 * 5000 * 4
    assert found["pieces"][0] > 1, found
    assert found["peak_bytes"] <= budget, found
    assert found["error"] <= 1e-5, found


def _mlp_of(widths):
    rng = np.random.default_rng(5)
    params = [tf.constant(rng.normal(size=s).astype(np.float32))
              for a, b in zip(widths, widths[1:]) for s in ((a, b), (b,))]
    return curvature_bench.tanh_mlp, params


def _cnn():
    """neural-tangents' docstring CNN: Conv2D(16, 3, relu) -> Flatten -> Dense(10)."""
    rng = np.random.default_rng(6)
    params = [tf.constant(rng.normal(size=s).astype(np.float32))
              for s in ((3, 3, 3, 16), (16,), (14400, 10), (10,))]

    def f(ws, x):
        h = tf.nn.relu(tf.nn.conv2d(x, ws[0], 1, "VALID") + ws[1])
        return tf.reshape(h, [tf.shape(x)[0], -1]) @ ws[2] + ws[3]
    return f, params


def _counted(f, params, x):
    """(o, P, F) as `_kernel` reads them: F from the graph of f on one example."""
    from compat_grads._src.curvature import ntk

    found = []

    @tf.function
    def traced():  # as `_kernel` runs: in a graph, the weights captured
        found.append(ntk._output_shape(f, params, tf.constant(x)))
        return tf.constant(0)
    traced.get_concrete_function()
    (shape, flops), = found
    return shape.num_elements(), sum(int(np.size(p)) for p in params), flops


def test_the_forward_pass_is_counted_in_multiply_adds():
    f, params = _mlp_of((8, 256, 100))
    o, weights, flops = _counted(f, params, np.ones((3, 8), np.float32))
    # the matrix products, then the other ops' outputs: the bias adds and tanh (the weights,
    # the example's slice of x and reshapes count nothing)
    assert flops == 8 * 256 + 256 * 100 + (256 + 256 + 100)
    f, params = _cnn()
    _, _, flops = _counted(f, params, np.ones((2, 32, 32, 3), np.float32))
    assert flops == 30 * 30 * 16 * 27 + 14400 * 10 + 2 * 14400 + 10  # relu, the bias adds


@pytest.mark.parametrize("network, method", [("mlp 8-256-256-100", "products"),
                                             ("mlp 784-512-512-10", "products"),
                                             ("cnn", "jacobian")])
def test_auto_takes_products_where_outputs_times_weights_outweigh_the_forward_pass(network,
                                                                                  method):
    from compat_grads._src.curvature import ntk

    if network == "cnn":
        (f, params), x = _cnn(), np.ones((2, 32, 32, 3), np.float32)
    else:
        widths = tuple(map(int, network.split()[1].split("-")))
        (f, params), x = _mlp_of(widths), np.ones((2, widths[0]), np.float32)
    o, weights, flops = _counted(f, params, x)
    assert ntk._auto_method(False, o, weights, flops) == method
    assert ntk._auto_method(True, o, weights, flops) == "jacobian"  # summed: the contraction


def test_a_forward_pass_it_cannot_read_is_not_counted_and_an_unknown_batch_is():
    """f calling a tf.function (one call op) or an einsum hides its work: no count, so
    "auto" takes the contraction; a placeholder of unknown batch counts as one example."""
    from compat_grads._src.curvature import ntk

    f, params = _mlp_of((8, 256, 100))
    x = np.ones((2, 8), np.float32)
    wrapped = tf.function(f)
    assert _counted(lambda ws, x: wrapped(ws, x), params, x)[2] is None
    assert _counted(lambda ws, x: tf.einsum("bi,io->bo", x, ws[0]), params, x)[2] is None
    assert ntk._auto_method(False, 100, 10**6, None) == "jacobian"
    found = []

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32)])
    def unknown_batch(x):
        found.append(ntk._output_shape(f, params, x)[1])
        return tf.constant(0)
    unknown_batch.get_concrete_function()
    assert found == [8 * 256 + 256 * 100 + (256 + 256 + 100)]
