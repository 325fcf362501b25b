"""compat_grads under tf.distribute on four logical CPUs (tests_tf2/conftest.py): every
public function inside `strategy.run`, and `distribute=` splitting one result over the
replicas (or a list of devices), equal to the undistributed result and to an oracle."""

import functools

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing import tolerances

# The same targets run with many distribute= options here, which compat_grads (rightly)
# warns about outside tests.
pytestmark = pytest.mark.filterwarnings("ignore:.*compiled 8 times:RuntimeWarning")

RNG = np.random.RandomState(0)
X = RNG.randn(6, 3).astype(np.float32)
W = RNG.randn(3, 4).astype(np.float32)


@functools.cache
def mirrored(replicas: int) -> tf.distribute.MirroredStrategy:
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])


def _layer(x):
    return tf.tanh(tf.matmul(x, tf.constant(W)))


def _layer_oracle():
    """d tanh(x W)[s, o] / d x[t, i] = (1 - tanh^2)[s, o] W[i, o] when s == t."""
    slope = 1.0 - np.tanh(X @ W) ** 2
    full = np.zeros((6, 4, 6, 3), np.float32)
    for s in range(6):
        full[s, :, s, :] = slope[s][:, None] * W.T
    return full


def _energy(x):
    return tf.reduce_sum(tf.sin(x) ** 2 * tf.reduce_sum(tf.constant(W)))


def _energy_oracle():
    """d² sum(sin(x)^2) c / dx² = 2 c cos(2x) on the diagonal."""
    diagonal = 2.0 * W.sum() * np.cos(2.0 * X)
    return np.diag(diagonal.reshape(-1)).reshape(6, 3, 6, 3)


def _per_sample(x):
    return tf.reduce_sum(tf.sin(x) ** 3, axis=1)


def _per_sample_hessian_oracle():
    """d² sum_i sin(x_i)^3 / dx_i² = 6 sin cos² - 3 sin³, diagonal per sample."""
    d2 = 6.0 * np.sin(X) * np.cos(X) ** 2 - 3.0 * np.sin(X) ** 3
    return np.stack([np.diag(row) for row in d2])


def _same(got, want):
    """Bit for bit: the same kernels run on the same shapes, one piece at a time."""
    got, want = tf.nest.flatten(got), tf.nest.flatten(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _within_tolerance(got, want):
    """Pieces of other shapes (a share of the samples) run other kernels: agreement within
    the documented float32 tolerance (compat_grads.testing.tolerances), not bit for bit."""
    got, want = tf.nest.flatten(got), tf.nest.flatten(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert tolerances.scaled_error(g, w) <= tolerances.TOLERANCE["float32"]


SPLITS_SAMPLES = ("batch_jacobian", "batch_hessian", "per_example_gradients",
                  "batch_hessian_diagonal", "batch_laplacian", "batch_divergence")


def _close(got, want, tolerance=2e-5):
    np.testing.assert_allclose(np.asarray(got), want, rtol=tolerance, atol=tolerance)


# -- distribute= -----------------------------------------------------------------------------

CALLS = {
    "stacked_jacobian rows (reverse)": (
        lambda **k: cg.stacked_jacobian(_layer, tf.constant(X), strategy="reverse", **k),
        _layer_oracle),
    "stacked_jacobian auto (18 columns < 24 rows: columns)": (
        lambda **k: cg.stacked_jacobian(_layer, tf.constant(X), **k), _layer_oracle),
    "stacked_jacobian columns (forward)": (
        lambda **k: cg.stacked_jacobian(_layer, tf.constant(X), strategy="forward", **k),
        _layer_oracle),
    "batch_jacobian": (
        lambda **k: cg.batch_jacobian(_layer, tf.constant(X), **k),
        lambda: np.stack([_layer_oracle()[s, :, s] for s in range(6)])),
    "hessian": (lambda **k: cg.hessian(_energy, tf.constant(X), **k), _energy_oracle),
    "batch_hessian": (lambda **k: cg.batch_hessian(_per_sample, tf.constant(X), **k),
                      _per_sample_hessian_oracle),
    "batch_hessian_diagonal": (
        lambda **k: cg.batch_hessian_diagonal(_per_sample, tf.constant(X), **k),
        lambda: np.diagonal(_per_sample_hessian_oracle(), axis1=1, axis2=2)),
    "batch_laplacian": (lambda **k: cg.batch_laplacian(_per_sample, tf.constant(X), **k),
                        lambda: np.trace(_per_sample_hessian_oracle(), axis1=1, axis2=2)),
    "batch_divergence": (lambda **k: cg.batch_divergence(tf.sin, tf.constant(X), **k),
                         lambda: np.cos(X).sum(axis=1)),
}


PLACEMENTS = ("1 replica", "2 replicas", "4 replicas", "5 devices")
CALL_MODES = ("eager", "tf.function")


def _placement_turns():
    """(call, mode, placement): each call and mode on two of the placements, by turns, so
    each call meets all four (two per mode) and each mode and placement meets half the
    calls."""
    for c, name in enumerate(CALLS):
        for m, mode in enumerate(CALL_MODES):
            for j in range(2):
                yield name, mode, PLACEMENTS[(c + 2 * m + j) % len(PLACEMENTS)]


def test_every_call_meets_every_placement_and_each_mode_every_placement():
    turns = list(_placement_turns())
    assert {(name, on) for name, _, on in turns} == {(n, on) for n in CALLS for on in PLACEMENTS}
    assert {(mode, on) for _, mode, on in turns} == {
        (mode, on) for mode in CALL_MODES for on in PLACEMENTS}


@pytest.mark.parametrize("name, mode, on", list(_placement_turns()))
def test_distribute_equals_one_device_and_the_oracle(name, mode, on):
    """4 replicas over 6 samples or 18 Hessian rows, and 5 devices over 24 Jacobian rows:
    uneven pieces."""
    count = int(on.split()[0])
    distribute = (mirrored(count) if on.endswith("replicas") or on.endswith("replica")
                  else ["/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3", "/cpu:1"])
    call, oracle = CALLS[name]

    def distributed():
        return call(distribute=distribute)

    got = tf.function(distributed)() if mode == "tf.function" else distributed()
    want = call()
    (_within_tolerance if name in SPLITS_SAMPLES else _same)(got, want)
    _close(got, oracle())


@pytest.mark.parametrize("name", ["batch_laplacian", "batch_divergence"])
def test_an_estimate_is_not_split(name):
    """Each piece would draw its own probes: the estimate would depend on the split."""
    call, _ = CALLS[name]
    with pytest.raises(ValueError, match=rf"compat_grads\.{name}: distribute= splits the "
                       r"samples.*method='hutchinson'.*use method='exact'"):
        call(distribute=mirrored(2), method="hutchinson")


@pytest.mark.parametrize("name", ["stacked_jacobian rows (reverse)", "batch_jacobian",
                                  "hessian"])
def test_gather_false_gives_each_replicas_piece(name):
    call, _ = CALLS[name]
    strategy = mirrored(4)
    pieces = call(distribute=strategy, gather=False)
    local = strategy.experimental_local_results(pieces)
    assert len(local) == 4
    whole = np.asarray(call())
    rows = whole.reshape([-1] + list(whole.shape[-2:]) if name != "batch_jacobian"
                         else whole.shape)
    sizes = [int(np.shape(p)[0]) for p in local]
    assert sorted(sizes) == sorted([len(range(r * len(rows) // 4, (r + 1) * len(rows) // 4))
                                    for r in range(4)])
    joined = np.concatenate([np.asarray(p) for p in local])
    (_within_tolerance if name in SPLITS_SAMPLES else _same)(
        [tf.constant(joined)], [tf.constant(rows.reshape(joined.shape))])


def test_several_sources_split_by_columns():
    def f(sources):
        x, w = sources
        return tf.tanh(tf.matmul(x, w))

    sources = [tf.constant(X), tf.Variable(W)]
    got = cg.stacked_jacobian(f, sources, strategy="forward", distribute=mirrored(4))
    _same(got, cg.stacked_jacobian(f, sources, strategy="forward"))
    assert [g.shape.as_list() for g in got] == [[6, 4, 6, 3], [6, 4, 3, 4]]


def test_per_example_gradients_distributed_equal_one_device():
    tf.keras.utils.set_random_seed(1)
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="tanh",
                                                       input_shape=(3,)),
                                 tf.keras.layers.Dense(2)])
    y = tf.constant(RNG.randn(6, 2).astype(np.float32))
    loss = tf.keras.losses.mean_squared_error
    got = cg.per_example_gradients(loss, model, tf.constant(X), y, distribute=mirrored(4))
    want = cg.per_example_gradients(loss, model, tf.constant(X), y)
    _within_tolerance(got, want)
    pieces = cg.per_example_gradients(loss, model, tf.constant(X), y,
                                      distribute=mirrored(2), gather=False)
    assert [p.shape[0] for p in mirrored(2).experimental_local_results(pieces[0])] == [3, 3]


def test_a_tensor_target_in_a_tf_function_splits_its_rows():
    @tf.function
    def both(x):
        y = _layer(x)
        return cg.stacked_jacobian(y, x, distribute=mirrored(2)), cg.stacked_jacobian(y, x)

    got, want = both(tf.constant(X))
    _same(got, want)


@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_a_list_of_devices_places_the_pieces(mode):
    devices = ["/cpu:1", "/cpu:2"]

    def call():
        return cg.stacked_jacobian(_layer, tf.constant(X), distribute=devices)

    got = tf.function(call)() if mode == "tf.function" else call()
    _same(got, cg.stacked_jacobian(_layer, tf.constant(X)))
    pieces = cg.stacked_jacobian(_layer, tf.constant(X), distribute=devices, gather=False)
    # "auto" is forward here (18 source elements < 24 target elements): 9 columns each
    assert [p.shape.as_list() for p in pieces] == [[6, 4, 9], [6, 4, 9]]
    graph = tf.function(call).get_concrete_function().graph
    placed = {op.device.rpartition("CPU:")[2] for op in graph.get_operations() if op.device}
    assert {"1", "2"} <= placed


# -- every public function inside strategy.run ---------------------------------------------

WEIGHTS = tf.Variable(W)


def _linear(x):
    return tf.matmul(x, WEIGHTS)


def _squared_error(y_true, y_pred):
    return tf.reduce_sum((y_pred - y_true) ** 2, axis=1)


def _replica_calls():
    return {
        "stacked_jacobian": lambda x: cg.stacked_jacobian(_layer, x),
        "per_element_gradients": lambda x: cg.per_element_gradients(_layer, x),
        "batch_jacobian": lambda x: cg.batch_jacobian(_layer, x),
        "hessian": lambda x: cg.hessian(_energy, x),
        "batch_hessian": lambda x: cg.batch_hessian(_per_sample, x),
        "jvp": lambda x: cg.jvp(_layer, x, tf.ones_like(x)),
        "vjp": lambda x: cg.vjp(_layer, x, tf.ones([x.shape[0], 4])),
        "hvp": lambda x: cg.hvp(_energy, x, tf.ones_like(x)),
        "per_example_gradients": lambda x: cg.per_example_gradients(
            _squared_error, _linear, x, tf.zeros([x.shape[0], 4]), weights=[WEIGHTS]),
    }


@pytest.mark.parametrize("replicas", [2, 4], ids=lambda r: f"{r} replicas")
@pytest.mark.parametrize("mode", ["eager", "tf.function"])
@pytest.mark.parametrize("name", sorted(_replica_calls()))
def test_inside_strategy_run_each_replica_gets_its_own_result(name, mode, replicas):
    strategy = mirrored(replicas)
    share = 12 // replicas
    x = np.concatenate([X, X[::-1]])  # 12 samples
    inputs = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant(x[context.replica_id_in_sync_group * share:][:share]))
    call = _replica_calls()[name]
    step = tf.function(lambda v: strategy.run(call, args=(v,))) if mode == "tf.function" \
        else (lambda v: strategy.run(call, args=(v,)))
    results = strategy.experimental_local_results(step(inputs))
    assert len(results) == replicas
    for r, got in enumerate(results):
        want = call(tf.constant(x[r * share:(r + 1) * share]))
        (_within_tolerance if name == "per_example_gradients" else _same)(got, want)


def test_a_keras_model_built_under_the_strategy_scope_is_a_target():
    strategy = mirrored(2)
    with strategy.scope():
        tf.keras.utils.set_random_seed(2)
        model = tf.keras.Sequential([tf.keras.layers.Dense(3, activation="tanh",
                                                           input_shape=(3,))])
    assert isinstance(model.weights[0], tf.distribute.DistributedValues)
    inputs = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant(X[context.replica_id_in_sync_group * 3:][:3]))
    results = strategy.experimental_local_results(tf.function(
        lambda v: strategy.run(lambda x: cg.batch_jacobian(model, x), args=(v,)))(inputs))
    for r, got in enumerate(results):
        _same(got, cg.batch_jacobian(model, tf.constant(X[r * 3:(r + 1) * 3])))


def test_dp_sgd_step_with_a_distributed_dataset():
    """Per-example clipping inside a distributed train step: the update equals the one
    computed on one device from the whole batch."""
    strategy, clip = mirrored(2), 0.5
    with strategy.scope():
        tf.keras.utils.set_random_seed(3)
        model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
    labels = RNG.randn(12, 2).astype(np.float32)
    inputs = np.concatenate([X, -X])
    loss = tf.keras.losses.mean_squared_error

    def clipped_sum(x, y):
        grads = cg.per_example_gradients(loss, model, x, y)
        norms = tf.sqrt(tf.add_n([tf.reduce_sum(tf.reshape(g, [tf.shape(g)[0], -1]) ** 2, 1)
                                  for g in grads]))
        scale = tf.minimum(1.0, clip / norms)
        return [tf.reduce_sum(g * tf.reshape(scale, [-1] + [1] * (g.shape.rank - 1)), 0)
                for g in grads]

    dataset = tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(12)
    batches = strategy.experimental_distribute_dataset(dataset)

    @tf.function
    def step(batch):
        sums = strategy.run(clipped_sum, args=batch)
        return [strategy.reduce("SUM", s, axis=None) for s in sums]

    (got,) = [step(batch) for batch in batches]
    want = clipped_sum(tf.constant(inputs), tf.constant(labels))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)


# -- private training ----------------------------------------------------------------------

PRIVATE_X = np.concatenate([X, -2 * X[:1]])  # 7 examples: shares of 3 and 4, or 2, 2, 3
PRIVATE_Y = RNG.randn(7, 2).astype(np.float32)


def _private_oracle(kernel, clip):
    """A linear model's per-example gradients of sum((x W - y)^2), in numpy: `2 x ⊗ r`,
    their norms and the sum of the clipped ones."""
    grads = 2 * PRIVATE_X[:, :, None] * (PRIVATE_X @ kernel - PRIVATE_Y)[:, None, :]
    norms = np.sqrt((grads ** 2).sum(axis=(1, 2)))
    return norms, (grads * np.minimum(1, clip / norms)[:, None, None]).sum(0)


@pytest.mark.parametrize("mode", CALL_MODES)
@pytest.mark.parametrize("placement", ["2 replicas", "3 devices"])
def test_private_training_split_over_replicas_is_the_one_device_result(placement, mode):
    distribute = mirrored(2) if placement == "2 replicas" else ["/cpu:1", "/cpu:2", "/cpu:3"]
    kernel = tf.Variable(W[:, :2])
    x, y = tf.constant(PRIVATE_X), tf.constant(PRIVATE_Y)

    def call(**k):
        common = dict(weights=[kernel], return_value=True, **k)
        norms = cg.per_example_gradient_norms(_squared_error, lambda x: tf.matmul(x, kernel),
                                              x, y, **common)
        clipped = cg.clipped_gradients(_squared_error, lambda x: tf.matmul(x, kernel), x, y,
                                       l2_norm_clip=1.0, noise_multiplier=0.5, seed=11,
                                       reduction="mean", return_norms=True, **common)
        return norms, clipped

    run = tf.function(call) if mode == "tf.function" else call
    got, want = run(distribute=distribute), run()
    _within_tolerance(got, want)  # the noise of one seed, added once, and the losses
    norms, summed = _private_oracle(W[:, :2], 1.0)
    (_, got_norms), (_, ((got_mean,), clipped_norms)) = got
    _close(got_norms, norms, 1e-5)
    _close(clipped_norms, norms, 1e-5)
    noise = tf.random.stateless_normal([3, 2], tf.constant([11, 0], tf.int64)) * 0.5
    _close(got_mean, (summed + noise.numpy()) / 7, 1e-5)


def test_private_training_pieces_and_what_is_refused():
    kernel = tf.Variable(W[:, :2])
    args = (_squared_error, lambda x: tf.matmul(x, kernel), tf.constant(PRIVATE_X),
            tf.constant(PRIVATE_Y))
    pieces = cg.per_example_gradient_norms(*args, weights=[kernel], distribute=mirrored(2),
                                           gather=False)
    assert [p.shape[0] for p in mirrored(2).experimental_local_results(pieces)] == [3, 4]
    with pytest.raises(ValueError, match="clipped_gradients: .*gather=False.*noise"):
        cg.clipped_gradients(*args, weights=[kernel], l2_norm_clip=1.0,
                             distribute=mirrored(2), gather=False)
    with pytest.raises(ValueError, match="clipped_gradients: .*independent=True"):
        cg.clipped_gradients(*args, weights=[kernel], l2_norm_clip=1.0, independent=False,
                             distribute=mirrored(2))


# -- what distribute= refuses ----------------------------------------------------------------

@pytest.mark.parametrize("case, error, match", [
    ("compile=False", ValueError, "stacked_jacobian: distribute= needs compile=True"),
    ("a tape", ValueError, "stacked_jacobian: distribute= cannot use a tape"),
    ("gather='yes'", TypeError, "gather must be True or False"),
    ("a string", TypeError, "distribute must be a tf.distribute.Strategy or a list"),
    ("CentralStorageStrategy", TypeError, "CentralStorageStrategy is not supported"),
    ("an eager tensor target", cg.ModeError, "stacked_jacobian"),
])
def test_stacked_jacobian_refuses_clearly(case, error, match):
    x = tf.constant(X)
    kwargs = {"distribute": mirrored(2)}
    target = _layer
    if case == "compile=False":
        kwargs["compile"] = False
    elif case == "a tape":
        with tf.GradientTape() as tape:
            tape.watch(x)
            target = _layer(x)
        kwargs["tape"] = tape
    elif case == "gather='yes'":
        kwargs["gather"] = "yes"
    elif case == "a string":
        kwargs["distribute"] = "mirrored"
    elif case == "CentralStorageStrategy":
        kwargs["distribute"] = tf.distribute.experimental.CentralStorageStrategy()
    elif case == "an eager tensor target":
        target = _layer(x)
    with pytest.raises(error, match=match):
        cg.stacked_jacobian(target, x, **kwargs)


def test_distribute_inside_strategy_run_is_refused():
    strategy = mirrored(2)
    with pytest.raises(ValueError, match="inside strategy.run"):
        strategy.run(lambda: cg.stacked_jacobian(_layer, tf.constant(X),
                                                 distribute=strategy))


@pytest.mark.parametrize("function", ["batch_jacobian", "batch_hessian"])
def test_per_sample_functions_need_a_callable_and_independent_samples(function):
    x = tf.constant(X)
    call = getattr(cg, function)
    target = _layer if function == "batch_jacobian" else _per_sample

    @tf.function
    def tensor_target(v):
        return call(target(v), v, distribute=mirrored(2))

    with pytest.raises(TypeError, match=f"{function}: distribute= needs the target as a "
                                        "callable"):
        tensor_target(x)
    with pytest.raises(ValueError, match="needs independent=True"):
        call(target, x, independent=False, distribute=mirrored(2))


def test_an_unknown_target_shape_is_refused_with_a_fix():
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def unknown(x):
        return cg.stacked_jacobian(_layer, x, distribute=mirrored(2))

    with pytest.raises(ValueError, match="distribute= needs the target's shape"):
        unknown.get_concrete_function()


# -- two workers -------------------------------------------------------------------------------

def _free_ports(count):
    import socket

    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def test_multi_worker_mirrored_strategy_with_two_worker_processes(tmp_path):
    """Two workers on 127.0.0.1, started and stopped here within 60 s (killed by process
    id whatever happens): distribute= and a distributed dataset give the one-device
    results."""
    import json
    import os
    import pathlib
    import subprocess
    import sys
    import time

    script = pathlib.Path(__file__).with_name("multi_worker.py")
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(2)]}
    workers = []
    try:
        for index in range(2):
            env = dict(os.environ, TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": index}}))
            workers.append(subprocess.Popen(
                [sys.executable, str(script), str(tmp_path / f"worker{index}.npz")],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60
        for worker in workers:
            output, _ = worker.communicate(timeout=max(1.0, deadline - time.monotonic()))
            assert worker.returncode == 0, output.decode(errors="replace")[-3000:]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    sys.path.insert(0, str(script.parent))
    try:
        import multi_worker as one
    finally:
        sys.path.remove(str(script.parent))
    kernel = tf.Variable(np.full((3, 2), 0.1, np.float32))
    want_jacobian = cg.stacked_jacobian(one.layer, tf.constant(one.X))
    (want_per_example,) = cg.per_example_gradients(
        one.squared_error, lambda x: tf.matmul(x, kernel), tf.constant(one.X),
        tf.zeros([5, 2]), weights=[kernel])
    (grads,) = cg.per_example_gradients(
        one.squared_error, lambda x: tf.matmul(x, kernel), tf.constant(one.INPUTS),
        tf.constant(one.LABELS), weights=[kernel])
    for index in range(2):
        got = np.load(tmp_path / f"worker{index}.npz")
        assert int(got["replicas"]) == 2
        np.testing.assert_array_equal(got["jacobian"], want_jacobian.numpy())
        assert tolerances.scaled_error(got["per_example"], want_per_example) <= (
            tolerances.TOLERANCE["float32"])
        assert tolerances.scaled_error(got["summed"], tf.reduce_sum(grads, 0)) <= (
            tolerances.TOLERANCE["float32"])


def test_a_v1_graph_inside_tf2_takes_a_list_of_devices_not_a_strategy():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, X.shape)
        y = _layer(x)
        pieces = cg.stacked_jacobian(y, x, distribute=["/cpu:0", "/cpu:1"])
        whole = cg.stacked_jacobian(y, x)
        with pytest.raises(cg.ModeError, match="a list of device names"):
            cg.stacked_jacobian(y, x, distribute=mirrored(2))
        with tf.compat.v1.Session() as session:
            got, want = session.run([pieces, whole], {x: X})
    np.testing.assert_array_equal(got, want)
