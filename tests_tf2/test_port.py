"""compare_port: a TF1 graph function against its TF2 port, values and derivatives, with
the legacy side in a real TF1 process."""

import json

import numpy as np
import port_models as pm
import pytest

from compat_grads._src.core.tf import KERAS2_BUILT_IN, keras2, tf
from compat_grads.testing import DERIVATIVES, PortReport, compare_port
from compat_grads.testing.port_report import compare_values

X = np.random.RandomState(0).randn(2, 4).astype(np.float32)


def _failing(report: PortReport) -> set:
    return {(r.output, r.quantity, r.wrt) for r in report.failing}


def test_correct_port_agrees_in_values_and_derivatives_wrt_inputs_and_weights():
    model = pm.MLP()
    report = compare_port(pm.legacy_mlp, model, {"x": X}, wrt=["x", "net/hidden/kernel"],
                          derivatives=("stacked_jacobian", "per_element_gradients", "hessian"),
                          weights=model.weights())
    assert report.ok, str(report)
    assert len(report.rows) == 7
    jacobian = {r.wrt: r for r in report.rows if r.quantity == "stacked_jacobian"}
    assert jacobian["x"].legacy_shape == jacobian["x"].ported_shape == (2, 3, 2, 4)
    assert jacobian["net/hidden/kernel"].ported_shape == (2, 3, 4, 5)
    # the weights were copied: the port now holds the legacy initial values
    assert np.abs(model.hidden.kernel.numpy()).max() > 0


def test_correct_port_agrees_in_per_sample_derivatives():
    model = pm.MLP()
    report = compare_port(pm.legacy_score, lambda x: tf.reduce_sum(model(x) ** 2, axis=1),
                          {"x": X}, wrt=["x"], derivatives=DERIVATIVES,
                          weights=model.weights())
    assert report.ok, str(report)
    shapes = {r.quantity: r.ported_shape for r in report.rows}
    assert shapes == {"value": (2,), "stacked_jacobian": (2, 2, 4),
                      "per_element_gradients": (2,), "batch_jacobian": (2, 4),
                      "hessian": (2, 2, 4, 2, 4), "batch_hessian": (2, 4, 4)}


def _keras_mlp(keras):
    model = keras.Sequential([keras.Input((4,)),
                              keras.layers.Dense(5, activation="tanh", name="hidden"),
                              keras.layers.Dense(3, name="out")])
    return model, pm.keras_weights(model)


def test_keras2_port_of_tf_compat_v1_layers():
    model, weights = _keras_mlp(keras2())
    report = compare_port(pm.legacy_layers, model, {"x": X}, wrt=["x", "hidden/kernel"],
                          weights=weights, modes=("eager", "function"))
    assert report.ok, str(report)
    assert len(report.rows) == 6


@pytest.mark.skipif(KERAS2_BUILT_IN, reason="TensorFlow up to 2.15 has no Keras 3")
def test_keras3_port_with_keras3_variables_as_weights():
    import keras

    model, weights = _keras_mlp(keras)
    report = compare_port(pm.legacy_layers, model, {"x": X}, wrt=["x", "out/bias"],
                          derivatives=("per_element_gradients",), weights=weights)
    assert report.ok, str(report)
    assert report.unmapped == {"legacy": [], "ported": []}
    assert [r.quantity for r in report.rows] == ["value", "per_element_gradients",
                                                "per_element_gradients"]


def test_values_are_checked_against_the_legacy_session():
    model = pm.MLP()
    report = compare_port(pm.legacy_mlp, model, {"x": X}, weights=model.weights())
    (row,) = report.rows
    expected = model(tf.constant(X)).numpy()
    assert row.quantity == "value" and row.ok and row.max_abs_error < 1e-6
    assert row.legacy_shape == expected.shape


def test_lost_stop_gradient_fails_the_derivatives_and_not_the_values():
    report = compare_port(pm.legacy_damped, lambda x: x * 2.0 + x ** 2, {"x": X},
                          wrt=["x"], derivatives=("stacked_jacobian", "per_element_gradients"))
    assert not report.ok
    assert _failing(report) == {("output", "stacked_jacobian", "x"),
                                ("output", "per_element_gradients", "x")}
    row = next(r for r in report.failing if r.quantity == "per_element_gradients")
    assert row.reason.startswith("values differ at [")
    assert "(legacy vs ported;" in row.reason
    assert row.max_abs_error == pytest.approx(float(np.abs(2 * X).max()), rel=1e-5)


def test_shape_mismatch_is_a_failing_row():
    model = pm.MLP()
    report = compare_port(pm.legacy_mlp, lambda x: tf.transpose(model(x)), {"x": X},
                          wrt=["x"], weights=model.weights())
    value = next(r for r in report.rows if r.quantity == "value")
    assert not value.ok and value.reason == "shape differs: legacy (2, 3) vs ported (3, 2)"
    assert (value.legacy_shape, value.ported_shape) == ((2, 3), (3, 2))
    jacobian = next(r for r in report.rows if r.quantity == "stacked_jacobian")
    assert jacobian.reason.startswith("shape differs")


def test_structure_mismatch_is_a_failing_row_per_output():
    model = pm.MLP()

    def as_tuple(x):
        logits = model(x)
        return logits, tf.nn.softmax(logits)

    report = compare_port(pm.legacy_heads, as_tuple, {"x": X}, wrt=["x"],
                          weights=model.weights())
    reasons = {r.output: r.reason for r in report.rows}
    assert reasons == {"logits": "only the legacy side returns this output",
                       "probs": "only the legacy side returns this output",
                       "0": "only the ported side returns this output",
                       "1": "only the ported side returns this output"}


def test_same_structure_is_compared_per_output():
    model = pm.MLP()

    def heads(x):
        logits = model(x)
        return {"probs": tf.nn.softmax(logits), "logits": logits}

    report = compare_port(pm.legacy_heads, heads, {"x": X}, wrt=["x"],
                          derivatives=("per_element_gradients",), weights=model.weights())
    assert report.ok, str(report)
    assert {r.output for r in report.rows} == {"logits", "probs"}


def test_derivative_none_on_one_side_only():
    report = compare_port(pm.legacy_two_inputs, lambda x, z: tf.tanh(x),
                          {"x": X, "z": X + 1.0}, wrt=["x", "z"])
    assert _failing(report) == {("output", "stacked_jacobian", "z")}
    (row,) = report.failing
    assert row.reason == "ported is None: not connected"
    assert row.legacy_shape == (2, 4, 2, 4) and row.ported_shape is None


def test_unmapped_weights_are_listed_and_fail_the_report():
    model = pm.MLP()
    weights = model.weights()
    del weights["net/out/bias"]
    report = compare_port(pm.legacy_mlp, model, {"x": X}, weights=weights)
    assert report.unmapped["legacy"] == ["net/out/bias"]
    (ported,) = report.unmapped["ported"]
    assert ported.startswith("out.bias (")
    assert not report.ok
    assert "Unmapped: legacy trainable variables not mapped in weights: net/out/bias" in \
        str(report)


def test_tolerances_follow_the_dtype_and_can_be_overridden():
    for dtype, ok in ((np.float32, True), (np.float64, False)):
        report = compare_port(pm.legacy_two_inputs, lambda x, z: tf.tanh(x) * (1 + 1e-7),
                              {"x": X.astype(dtype), "z": X.astype(dtype)})
        assert report.ok is ok, (dtype, str(report))
        assert report.rows[0].rtol == (1e-5 if dtype == np.float32 else 1e-10)
    loose = compare_port(pm.legacy_two_inputs, lambda x, z: tf.tanh(x) * (1 + 1e-7),
                         {"x": X.astype(np.float64), "z": X.astype(np.float64)}, rtol=1e-6)
    assert loose.ok and loose.rows[0].rtol == 1e-6


def test_float64_port_with_weights():
    model = pm.MLP(tf.float64)
    report = compare_port(pm.legacy_mlp, model, {"x": X.astype(np.float64)},
                          wrt=["x", "net/out/kernel"],
                          derivatives=("stacked_jacobian", "batch_jacobian"),
                          weights=model.weights())
    rows = {(r.quantity, r.wrt): r for r in report.rows}
    assert rows["value", ""].ok and rows["value", ""].legacy_dtype == "float64"
    assert rows["stacked_jacobian", "net/out/kernel"].ok
    assert rows["stacked_jacobian", "x"].max_abs_error < 1e-12
    assert rows["batch_jacobian", "x"].ok
    assert not rows["batch_jacobian", "net/out/kernel"].ok  # a kernel has no batch axis
    assert rows["batch_jacobian", "net/out/kernel"].reason.startswith("both sides raised")


def test_eager_and_function_modes_each_get_rows():
    model = pm.MLP()
    report = compare_port(pm.legacy_mlp, model, {"x": X}, wrt=["x"],
                          weights=model.weights(), modes=("eager", "function"))
    assert report.ok, str(report)
    assert [(r.mode, r.quantity) for r in report.rows] == [
        ("eager", "value"), ("eager", "stacked_jacobian"),
        ("function", "value"), ("function", "stacked_jacobian")]


def test_a_port_that_only_works_eagerly_fails_in_function_mode():
    report = compare_port(pm.legacy_damped, lambda x: x * 2.0 + (x ** 2).numpy(), {"x": X},
                          wrt=["x"], modes=("eager", "function"))
    assert [(r.mode, r.quantity, r.ok) for r in report.rows] == [
        ("eager", "value", True), ("eager", "stacked_jacobian", True),
        ("function", "value", False), ("function", "stacked_jacobian", False)]
    assert report.failing[0].reason.startswith("ported raised AttributeError: ")


def test_report_table_json_and_assert_ok():
    report = compare_port(pm.legacy_damped, lambda x: x * 2.0 + x ** 2, {"x": X},
                          wrt=["x"], derivatives=("stacked_jacobian",))
    text = str(report)
    lines = text.splitlines()
    assert lines[0] == "compare_port(port_models.legacy_damped): 1 of 2 rows differ"
    assert lines[2].startswith("FAIL") and lines[3].startswith("ok")
    with pytest.raises(AssertionError) as raised:
        report.assert_ok()
    assert str(raised.value) == text
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is False
    assert data["rows"][1]["legacy_shape"] == [2, 4, 2, 4]


@pytest.mark.parametrize("legacy, expected", [
    (lambda x: x, "got test_port.<lambda>"),
    (pm.MLP(), "got port_models.MLP"),
])
def test_legacy_must_be_importable(legacy, expected):
    with pytest.raises(TypeError, match="legacy must be an importable module-level function"):
        compare_port(legacy, lambda x: x, {"x": X})


@pytest.mark.parametrize("options, error, match", [
    ({"wrt": ["y"]}, ValueError, r"wrt names \['y'\], which are neither inputs"),
    ({"derivatives": ["jacobian"]}, ValueError, "derivatives must be among"),
    ({"modes": ["graph"]}, ValueError, "modes must be among"),
    ({"weights": {"net/out/bias": np.zeros(3)}}, TypeError, "the ported tf.Variables"),
])
def test_bad_arguments_are_named(options, error, match):
    with pytest.raises(error, match=match):
        compare_port(pm.legacy_mlp, lambda x: x, {"x": X}, **options)


def test_weight_shape_mismatch_names_both_variables():
    model = pm.MLP()
    weights = {**model.weights(), "net/out/kernel": tf.Variable(tf.zeros([3, 5]))}
    with pytest.raises(ValueError, match=r"'net/out/kernel' has shape \(5, 3\) and dtype "
                                         r"float32, but the ported variable 'Variable:0'"):
        compare_port(pm.legacy_mlp, model, {"x": X}, weights=weights)


def test_weight_missing_in_the_legacy_graph_lists_what_it_has():
    model = pm.MLP()
    with pytest.raises(ValueError, match=r"does not have; it has \['net/hidden/bias'"):
        compare_port(pm.legacy_mlp, model, {"x": X},
                     weights={"net/dense/kernel": model.out.kernel})


def test_compare_values_nan_inf_and_integers():
    nan_row = compare_values(np.array([1.0, np.nan]), np.array([1.0, 2.0]), 1e-5, 1e-6)
    assert nan_row["reason"] == "NaN on the legacy side only at [1]: nan vs 2.0 " \
                                "(legacy vs ported)"
    assert compare_values(np.array([np.inf, np.nan]), np.array([np.inf, np.nan]),
                          0, 0)["ok"] is True
    assert compare_values(np.array([np.inf]), np.array([1.0]), 1, 1)["ok"] is False
    assert compare_values(np.array([1, 2]), np.array([1, 3]), 0, 0)["reason"] == \
        "values differ at [1]: 2 vs 3 (legacy vs ported; 1 of 2 elements)"
