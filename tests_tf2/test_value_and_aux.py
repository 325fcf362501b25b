"""`has_aux=` and `return_value=`: the value and aux come from the pass that computes the
derivative (the callable is called no extra time, its ops are built no extra time), on every
function, strategy, chunk size and `distribute=`; and `flat=True` matrices keep their static
shapes. The shared matrix runs every case with these options on every route against the
oracle (compat_grads.testing.matrix); here are the properties the matrix cannot see."""

import functools

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite.value_checks import (
    CASES,
    IDS,
    TRANSFORMS,
    Counted,
    X,
    assert_graph_builds_f_no_extra_time,
    assert_same,
    call,
    mlp,
    options,
    parts,
    per_sample,
    rows,
    scalar,
)

RNG = np.random.RandomState(4)


@pytest.mark.parametrize(("name", "f", "extra", "strategy"), CASES, ids=IDS)
def test_eager_uncompiled_calls_f_no_extra_time(name, f, extra, strategy):
    plain, valued = Counted(f), Counted(f, aux=True)
    x = tf.constant(X)
    expected = call(name, plain, extra, strategy, x, compile=False)
    result = call(name, valued, extra, strategy, x, compile=False, **options(name))
    value, aux, derivative = parts(name, result)
    assert valued.calls == plain.calls
    assert_same(derivative, expected[1] if name in TRANSFORMS else expected)
    np.testing.assert_allclose(value.numpy(), f(x).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(aux["twice"].numpy(), 2.0 * value.numpy())
    np.testing.assert_array_equal(aux["rows"].numpy(), rows(value).numpy())


@pytest.mark.parametrize(("name", "f", "extra", "strategy"), CASES, ids=IDS)
def test_graph_builds_f_no_extra_time(name, f, extra, strategy):
    assert_graph_builds_f_no_extra_time(name, f, extra, strategy)


@pytest.mark.parametrize(("name", "f", "extra", "strategy"), CASES[::3], ids=IDS[::3])
def test_compiled_traces_f_once_per_options(name, f, extra, strategy):
    cg.clear_cache()
    x = tf.constant(X)
    target = Counted(f, aux=True)
    first = call(name, target, extra, strategy, x, **options(name))
    again = call(name, target, extra, strategy, x, **options(name))
    assert target.calls == 1  # one trace, cached: the value cost no second trace
    assert_same(first, again)


@pytest.mark.parametrize("name", ["stacked_jacobian", "hessian", "batch_jacobian",
                                  "batch_hessian", "hvp"])
def test_the_compile_cache_keys_on_return_value_and_flat(name):
    cg.clear_cache()
    f = {"hessian": scalar, "batch_hessian": per_sample, "hvp": scalar}.get(name, mlp)
    extra = (X,) if name == "hvp" else ()
    x, target = tf.constant(X), Counted(f)
    plain = call(name, target, extra, None, x)
    value, derivative = call(name, target, extra, None, x, return_value=True)
    assert_same(derivative, plain)
    assert_same(value, f(x))
    assert_same(call(name, target, extra, None, x), plain)  # not the cached pair
    if name != "hvp":
        flat = call(name, target, extra, None, x, flat=True)
        assert flat.shape.rank == (3 if name.startswith("batch_") else 2)
        np.testing.assert_array_equal(flat.numpy().ravel(), plain.numpy().ravel())
    assert target.calls == (2 if name == "hvp" else 3)  # one trace per options


def test_tensor_target_with_return_value_returns_the_target_itself():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        y = tf.sin(x) * x
        value, jacobian = cg.stacked_jacobian(y, x, return_value=True)
        assert value is y
        value, per_element = cg.per_element_gradients(y, x, return_value=True)
        assert value is y
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x ** 2
    value, jacobian = cg.stacked_jacobian(y, x, tape=tape, return_value=True)
    assert value is y
    np.testing.assert_array_equal(jacobian.numpy(), np.diag([2.0, 4.0]))


def test_has_aux_with_a_tensor_target_is_a_clear_type_error():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x ** 2
    with pytest.raises(TypeError, match=r"stacked_jacobian: has_aux=True needs a callable "
                                        r"target .* but target is a tensor of dtype float32"):
        cg.stacked_jacobian(y, x, tape=tape, has_aux=True)


@pytest.mark.parametrize("compile", [True, False])
@pytest.mark.parametrize(("returned", "shown"), [
    (lambda y: y, r"a tensor of dtype float32 and shape \(4, 3\)"),
    (lambda y: (y,), "a tuple of 1"), (lambda y: [y, y, y], "a list of 3")])
def test_has_aux_with_f_that_returns_no_pair_says_what_it_got(returned, shown, compile):
    with pytest.raises(TypeError, match=rf"batch_jacobian: with has_aux=True the callable must "
                                        rf"return a pair \(y, aux\), but it returned {shown}"):
        cg.batch_jacobian(lambda x: returned(x ** 2), tf.constant(X), has_aux=True,
                          compile=compile)


@pytest.mark.parametrize("option", ["has_aux", "return_value", "flat"])
def test_the_options_are_bools(option):
    with pytest.raises(TypeError, match=rf"hessian: {option} must be a bool \(True or False\), "
                                        r"but got str 'yes'"):
        cg.hessian(scalar, tf.constant(X), **{option: "yes"})


def test_chunk_size_keeps_the_value_and_aux():
    x = tf.constant(X)
    for strategy in ("reverse", "forward", "loop"):
        target = Counted(mlp, aux=True)
        (value, aux), jacobian = cg.stacked_jacobian(target, x, strategy=strategy, chunk_size=5,
                                                     has_aux=True, return_value=True,
                                                     compile=False)
        np.testing.assert_allclose(value.numpy(), mlp(x).numpy(), rtol=1e-6)
        assert_same(jacobian, cg.stacked_jacobian(mlp, x, strategy=strategy, compile=False))
        assert_same(aux["twice"], 2.0 * value)


@functools.cache
def _mirrored():
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


@pytest.mark.parametrize("distribute", ["mirrored", "devices"])
@pytest.mark.parametrize("name", ["stacked_jacobian", "hessian", "batch_jacobian",
                                  "batch_hessian"])
def test_distribute_joins_the_value_and_aux(name, distribute):
    f = {"hessian": scalar, "batch_hessian": per_sample}.get(name, mlp)
    x = tf.constant(X)
    split = _mirrored() if distribute == "mirrored" else ["/cpu:0", "/cpu:1"]
    target = Counted(f, aux=True)
    (value, aux), derivative = getattr(cg, name)(target, x, has_aux=True, return_value=True,
                                                 distribute=split)
    np.testing.assert_allclose(derivative.numpy(), getattr(cg, name)(f, x).numpy(),
                               rtol=1e-5, atol=1e-6)  # the replicas' kernels may differ
    np.testing.assert_allclose(value.numpy(), f(x).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(aux["twice"].numpy(), 2.0 * value.numpy())
    if name.startswith("batch_"):  # each replica's share, joined along the batch axis
        np.testing.assert_array_equal(aux["rows"].numpy(), rows(value).numpy())


@pytest.mark.parametrize(("aux", "got"), [
    (lambda x: tf.reduce_sum(x), r"aux has rank 0"),
    (lambda x: {"mean": tf.reduce_mean(x, axis=0)}, r"aux\['mean'\] has shape \(3,\) for 2 "
                                                    r"samples")])
def test_distribute_over_samples_needs_aux_with_a_batch_axis(aux, got):
    with pytest.raises(ValueError, match=r"batch_jacobian: with distribute= each replica "
                                         r"computes the aux of its own samples.*" + got):
        cg.batch_jacobian(lambda x: (mlp(x), aux(x)), tf.constant(X), has_aux=True,
                          distribute=_mirrored())


@pytest.mark.parametrize("compile", [True, False])
def test_aux_must_be_tensors_on_every_route(compile):
    with pytest.raises(TypeError, match=r"stacked_jacobian: with has_aux=True the aux must be "
                                        r"a nest of tensors, but aux\['steps'\] is int"):
        cg.stacked_jacobian(lambda x: (mlp(x), {"steps": 3}), tf.constant(X), has_aux=True,
                            compile=compile)


def test_has_aux_names_f_for_the_transforms():
    with pytest.raises(TypeError, match=r"jvp: has_aux=True needs a callable f .* but f is"):
        cg.jvp(tf.constant(X), tf.constant(X), tf.constant(X), has_aux=True)


@pytest.mark.parametrize("compile", [True, False])
def test_a_variable_value_is_a_snapshot(compile):
    v = tf.Variable([1.0, 2.0])
    value, _ = cg.stacked_jacobian(lambda s: v * 1.0 + s, tf.constant([0.0, 0.0]),
                                   return_value=True, compile=compile)
    w = tf.Variable([1.0, 2.0])
    value, _ = cg.stacked_jacobian(lambda s: w, [tf.constant(0.0)], return_value=True,
                                   compile=compile)
    w.assign([7.0, 8.0])
    assert isinstance(value, tf.Tensor)
    np.testing.assert_array_equal(value.numpy(), [1.0, 2.0])


def test_flat_needs_gather():
    with pytest.raises(ValueError, match=r"stacked_jacobian: flat=True needs gather=True"):
        cg.stacked_jacobian(mlp, tf.constant(X), flat=True, distribute=_mirrored(),
                            gather=False)


def test_per_example_gradients_return_the_losses_of_the_same_pass():
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
    x, y = tf.constant(X), tf.constant(RNG.randn(4, 2).astype(np.float32))
    loss = tf.keras.losses.mean_squared_error
    expected = loss(y, model(x)).numpy()
    for independent in (True, False):
        for compile in (True, False):
            losses, grads = cg.per_example_gradients(loss, model, x, y, return_value=True,
                                                     independent=independent,
                                                     compile=compile)
            np.testing.assert_allclose(losses.numpy(), expected, rtol=1e-6)
            assert_same(grads, cg.per_example_gradients(loss, model, x, y,
                                                         independent=independent,
                                                         compile=compile))
    losses, _ = cg.per_example_gradients(loss, model, x, y, return_value=True,
                                         distribute=_mirrored())
    np.testing.assert_allclose(losses.numpy(), expected, rtol=1e-6)


class _WithActivations(tf.keras.Model):
    """A model that returns its predictions and, as aux, its hidden activations."""

    def __init__(self):
        super().__init__()
        self.hidden = tf.keras.layers.Dense(3, activation="tanh")
        self.out = tf.keras.layers.Dense(2)

    def call(self, x):
        h = self.hidden(x)
        return self.out(h), {"hidden": h}


@pytest.mark.parametrize("independent", [True, False])
@pytest.mark.parametrize("compile", [True, False])
def test_per_example_gradients_has_aux_from_the_model(independent, compile):
    tf.keras.utils.set_random_seed(1)
    model = _WithActivations()
    x, y = tf.constant(X), tf.constant(RNG.randn(4, 2).astype(np.float32))
    predictions, aux_want = model(x)
    loss = tf.keras.losses.mean_squared_error
    (losses, aux), grads = cg.per_example_gradients(loss, model, x, y, has_aux=True,
                                                    return_value=True, compile=compile,
                                                    independent=independent)
    np.testing.assert_allclose(losses.numpy(), loss(y, predictions).numpy(), rtol=1e-5)
    np.testing.assert_allclose(aux["hidden"].numpy(), aux_want["hidden"].numpy(), rtol=1e-5,
                               atol=1e-6)
    plain = cg.per_example_gradients(loss, lambda v: model(v)[0], x, y,
                                     weights=model.trainable_weights, compile=compile,
                                     independent=independent)
    for got, want in zip(grads, plain):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    grads_only, aux_only = cg.per_example_gradients(loss, model, x, y, has_aux=True,
                                                    compile=compile, independent=independent)
    assert_same(aux_only, aux)
    if independent and compile:  # each replica's examples, joined along the batch axis
        (losses_d, aux_d), _ = cg.per_example_gradients(loss, model, x, y, has_aux=True,
                                                        return_value=True,
                                                        distribute=_mirrored())
        np.testing.assert_allclose(losses_d.numpy(), losses.numpy(), rtol=1e-5)
        np.testing.assert_allclose(aux_d["hidden"].numpy(), aux["hidden"].numpy(), rtol=1e-5)


@pytest.mark.parametrize("independent", [True, False])
def test_per_example_aux_keeps_none_and_needs_the_batch_axis(independent):
    w = tf.Variable(np.full((3, 2), 0.3, np.float32))
    x, y = tf.constant(X), tf.zeros([4, 2])

    def loss(y_true, y_pred):
        return tf.reduce_sum((y_true - y_pred) ** 2, axis=1)

    _, aux = cg.per_example_gradients(loss, lambda v: (v @ w, {"h": v @ w, "none": None}),
                                      x, y, weights=[w], has_aux=True, independent=independent)
    assert aux["none"] is None
    np.testing.assert_allclose(aux["h"].numpy(), X @ w.numpy(), rtol=1e-6)
    if independent:  # each example's pass has a batch of 1: a per-feature mean is not per example
        with pytest.raises(ValueError, match=r"per_example_gradients: per_example_gradients "
                                             r"runs each example on its own and stacks its aux"
                                             r".*aux\['mean'\] has shape \(2,\) for 1 sample"):
            cg.per_example_gradients(
                loss, lambda v: (v @ w, {"mean": tf.reduce_mean(v @ w, axis=0)}), x, y,
                weights=[w], has_aux=True)


# -- flat=True ---------------------------------------------------------------------------


def _two_sources(s):
    a, b = s["a"], s["b"]
    return tf.concat([tf.sin(a) * tf.reduce_sum(b), a ** 2], axis=0)


def test_flat_jacobian_is_the_blocks_joined_in_flatten_order():
    sources = {"b": tf.constant([[1.0, 2.0], [3.0, 4.0]]), "a": tf.constant([0.5, -1.0, 2.0])}
    blocks = cg.stacked_jacobian(_two_sources, sources)
    flat = cg.stacked_jacobian(_two_sources, sources, flat=True)
    assert flat.shape == (6, 3 + 4)
    joined = np.concatenate([blocks["a"].numpy().reshape(6, 3),
                             blocks["b"].numpy().reshape(6, 4)], axis=1)  # a, b: sorted keys
    np.testing.assert_array_equal(flat.numpy(), joined)


def test_flat_hessian_of_a_scalar_is_n_by_n_and_symmetric():
    sources = [tf.constant([0.5, -1.0]), tf.constant([[2.0, 1.0]])]

    def energy(s):
        return tf.reduce_sum(s[0] ** 2) * tf.reduce_sum(tf.sin(s[1]))

    flat = cg.hessian(energy, sources, flat=True)
    assert flat.shape == (4, 4)
    np.testing.assert_allclose(flat.numpy(), flat.numpy().T, rtol=1e-6)
    blocks = cg.hessian(energy, sources)
    np.testing.assert_array_equal(flat.numpy()[:2, 2:], blocks[0][1].numpy().reshape(2, 2))


def test_flat_unconnected_source_is_zero_columns():
    sources = [tf.constant([1.0, 2.0]), tf.constant([3.0])]
    flat = cg.stacked_jacobian(lambda s: s[0] ** 2, sources, flat=True)
    np.testing.assert_array_equal(flat.numpy(), [[2.0, 0.0, 0.0], [0.0, 4.0, 0.0]])


def test_flat_keeps_every_static_dimension_with_an_unknown_batch():
    shapes = {}

    @tf.function(input_signature=[tf.TensorSpec([None, 3])])
    def traced(x):
        shapes["batch_jacobian"] = cg.batch_jacobian(mlp, x, flat=True).shape
        shapes["batch_hessian"] = cg.batch_hessian(per_sample, x, flat=True).shape
        shapes["stacked_jacobian"] = cg.stacked_jacobian(mlp, x, flat=True).shape
        shapes["hessian"] = cg.hessian(scalar, x, flat=True).shape
        return cg.batch_jacobian(mlp, x, flat=True)

    out = traced(tf.constant(X))
    assert shapes["batch_jacobian"].as_list() == [None, 3, 3]
    assert shapes["batch_hessian"].as_list() == [None, 3, 3]
    assert shapes["stacked_jacobian"].as_list() == [None, None]  # size(y) = 3 b, unknown
    assert shapes["hessian"].as_list() == [None, None]
    np.testing.assert_array_equal(out.numpy(),
                                  cg.batch_jacobian(mlp, tf.constant(X)).numpy())


def test_flat_keeps_the_static_column_count_of_a_tf1_graph():
    graph = tf.Graph()
    with graph.as_default():
        w = tf.compat.v1.placeholder(tf.float32, [None])  # rows unknown
        b = tf.compat.v1.placeholder(tf.float32, [7])
        y = tf.sin(w) * tf.reduce_sum(b)
        flat = cg.stacked_jacobian(y, [b], flat=True)
        assert flat.shape.as_list() == [None, 7]


def test_flat_with_mixed_dtypes_is_a_clear_type_error():
    sources = [tf.constant([1.0]), tf.constant([2.0], tf.float64)]
    with pytest.raises(TypeError, match=r"stacked_jacobian: flat=True joins every block into "
                                        r"one matrix, so the sources must share one dtype, "
                                        r"but they have float32, float64"):
        cg.stacked_jacobian(lambda s: s[0] * tf.cast(s[1], tf.float32), sources, flat=True)
