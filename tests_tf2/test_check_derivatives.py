"""check_derivatives: the user's own function on every route, against float64 central
differences. The functions it checks are at module level, so the TF1 worker imports them by
name; one worker serves the whole module, and each report is made once (module fixtures)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing import check_derivatives, modes, remote

X = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
EVERY_MODE = {"tf1", "v1_graph", "function", "eager", "xla"}


def smooth(xs):
    """A correct function of two primals (a list), in their dtype."""
    x, w = xs
    return tf.tanh(tf.matmul(x, w)) * x[:, :1] + tf.reduce_sum(w ** 2)


@tf.custom_gradient
def wrong_square(x):
    """x ** 2 with a sign error in its gradient."""
    def grad(upstream):
        return -2.0 * x * upstream
    return x * x, grad


@tf.custom_gradient
def _cube(x):
    def grad(upstream):  # 3 x^2 is right, but stop_gradient cuts its own derivative
        return upstream * 3.0 * tf.stop_gradient(x) ** 2
    return x ** 3, grad


def wrong_second_derivative(x):
    """sum(x^3): the first derivative right, the second zero instead of 6x."""
    return tf.reduce_sum(_cube(x))


def eager_only_scale(x):
    """2x when run eagerly, 3x when traced: tf.function (and graphs) see another f."""
    return x * (2.0 if tf.executing_eagerly() else 3.0)


def numpy_inside(x):
    """Runs eagerly only (`.numpy()` of a symbolic tensor fails in tf.function)."""
    return tf.constant(x.numpy()) * x


def python_inside(x):
    """A tf.py_function: XLA cannot compile it, the other modes run it."""
    return x * tf.py_function(lambda: tf.constant(2.0, tf.float64), [], tf.float64)


def float32_weights(x):
    """Cannot run in float64 (a float32 constant inside): differences in float32."""
    return tf.tanh(tf.matmul(x, tf.constant([[0.5, -1.0], [2.0, 0.25]], tf.float32)))


def per_sample(x):
    """One scalar per sample of the batch x: [b, n] -> [b]."""
    return tf.reduce_sum(tf.sin(x) * x, axis=1)


def _rows(report, **where):
    return [r for r in report.rows if all(getattr(r, k) == v for k, v in where.items())]


@pytest.fixture(scope="module")
def worker():
    """The one TF1 worker of this module's tests (started here, checked at the end)."""
    pid = remote.call(os.getpid)
    yield pid
    assert remote.call(os.getpid) == pid  # no test needed a second worker


@pytest.fixture(scope="module")
def correct(worker):
    xs = [np.array([[0.5, -1.0, 2.0]], np.float64).T @ np.ones((1, 2)), np.eye(2) * 0.7]
    return check_derivatives(smooth, xs)


@pytest.fixture(scope="module")
def sign_error(worker):
    return check_derivatives(wrong_square, X)


# --- correct functions ------------------------------------------------------------------


def test_a_correct_function_passes_on_every_mode_and_strategy(correct):
    assert correct.ok, str(correct)
    assert {r.mode for r in correct.rows} == EVERY_MODE
    assert len(correct.rows) == 5 * (4 + 3)  # stacked_jacobian's 4 strategies, 3 others
    assert {r.strategy for r in _rows(correct, function="stacked_jacobian")} == {
        "auto", "reverse", "forward", "loop"}
    assert not correct.notes
    correct.assert_ok()


def test_rows_carry_shapes_errors_and_the_difference_between_routes(correct):
    row = _rows(correct, function="stacked_jacobian", mode="tf1", strategy="loop")[0]
    assert row.shape == ((3, 2, 3, 2), (3, 2, 2, 2))  # one block per primal
    assert 0 <= row.max_abs_error < 1e-6 and row.route_difference < 1e-9
    assert row.worst.startswith(("[0]: [", "[1]: [")) and row.reason == ""
    vjp = _rows(correct, function="vjp", mode="eager")[0]
    assert vjp.shape == ((3, 2), (2, 2))


def test_the_report_reads_and_serialises(correct):
    text = str(correct)
    assert text.splitlines()[0] == ("check_derivatives(test_check_derivatives.smooth, "
                                    "order=1): all 35 rows agree with the finite differences")
    assert "stacked_jacobian" in text and "xla" in text and "vs routes" in text
    data = json.loads(json.dumps(correct.to_dict()))
    assert data["ok"] is True and len(data["rows"]) == 35
    assert data["rows"][0]["shape"] == [[3, 2, 3, 2], [3, 2, 2, 2]]


def test_second_order_and_the_batch_forms_when_asked():
    report = check_derivatives(per_sample, X.astype(np.float64), order=2,
                               functions=["batch_jacobian", "batch_hessian", "hessian"],
                               modes=["eager", "function"], strategies=["reverse", "loop"])
    assert report.ok, str(report)
    assert _rows(report, function="batch_hessian")[0].shape == (2, 2, 2)
    assert _rows(report, function="hessian")[0].shape == (2, 2, 2, 2, 2)  # y + x + x


def test_a_float32_only_function_is_differenced_in_float32_with_a_note():
    report = check_derivatives(float32_weights, X, modes=["eager", "v1_graph"],
                               strategies="auto")
    assert report.ok, str(report)
    assert any("f does not run in float64" in n and "taken in float32" in n
               for n in report.notes)
    assert report.rows[0].rtol == 2e-3


# --- wrong derivatives --------------------------------------------------------------------


def test_a_sign_error_in_a_custom_gradient_fails_the_rows_that_use_it(sign_error):
    assert not sign_error.ok
    failing = {(r.function, r.mode, r.strategy) for r in sign_error.failing}
    for mode in EVERY_MODE:  # reverse mode runs the custom gradient in every mode
        for strategy in ("auto", "reverse", "loop"):
            assert ("stacked_jacobian", mode, strategy) in failing
        assert ("vjp", mode, "-") in failing
    row = _rows(sign_error, function="stacked_jacobian", mode="xla", strategy="reverse")[0]
    assert row.reason == ("xla (strategy=reverse) disagrees with finite differences at "
                          "[1, 0, 1, 0]: -6.0 vs 6.0 (4 of 16 elements)")
    assert row.worst == "[1, 0, 1, 0]" and row.max_abs_error == pytest.approx(12, abs=1e-4)


def test_routes_that_do_not_use_the_custom_gradient_pass(sign_error):
    # eager forward mode (tf.autodiff.ForwardAccumulator) differentiates the forward ops,
    # not the custom gradient: those rows are right, and only they
    passing = {(r.function, r.mode, r.strategy) for r in sign_error.rows if r.ok}
    assert passing <= {("stacked_jacobian", "eager", "forward"),
                       ("per_element_gradients", "eager", "-"), ("jvp", "eager", "-")}
    assert sign_error.rows[:len(sign_error.failing)] == sign_error.failing  # failing first


def test_assert_ok_raises_with_the_table(sign_error):
    with pytest.raises(AssertionError) as raised:
        sign_error.assert_ok()
    text = str(raised.value)
    assert text.startswith("check_derivatives(test_check_derivatives.wrong_square, order=1): ")
    assert "rows fail" in text and "FAIL  stacked_jacobian" in text


def test_a_wrong_second_derivative_fails_the_hessian_rows_only(worker):
    report = check_derivatives(wrong_second_derivative, np.array([0.5, -1.0, 2.0]), order=2,
                               strategies=["auto", "forward"])
    first = [r for r in report.rows if r.function not in ("hessian", "hvp")]
    second = [r for r in report.rows if r.function in ("hessian", "hvp")]
    assert first and all(r.ok for r in first), str(report)
    assert {r.mode for r in second} == EVERY_MODE and not any(r.ok for r in second)
    hessian = _rows(report, function="hessian", mode="tf1", strategy="auto")[0]
    assert hessian.reason == ("tf1 (strategy=auto) disagrees with finite differences at "
                              "[2, 2]: 0.0 vs 12.0 (3 of 9 elements)")


def test_a_function_that_differs_under_tf_function_fails_there(worker):
    report = check_derivatives(eager_only_scale, np.array([1.0, -2.0]), strategies="reverse")
    by_mode = {mode: {r.ok for r in _rows(report, mode=mode)} for mode in EVERY_MODE}
    assert by_mode == {"eager": {True}, "function": {False}, "xla": {False},
                       "v1_graph": {False}, "tf1": {False}}
    row = _rows(report, function="per_element_gradients", mode="function")[0]
    assert row.reason.startswith("function disagrees with finite differences at [0]: 3.0 vs "
                                 "2.0")


def test_a_function_that_cannot_run_in_a_mode_is_a_failing_row():
    report = check_derivatives(numpy_inside, np.array([1.0, 2.0]), modes=["function", "eager"],
                               functions="vjp")
    row = _rows(report, mode="function")[0]
    assert not row.ok and row.reason.startswith("raised ") and "numpy" in row.reason
    assert row.shape is None and row.max_abs_error is None


def test_a_call_that_fails_at_run_time_fails_its_own_rows_only():
    # XLA fails when the compiled function runs: each call then runs alone to tell which
    report = check_derivatives(python_inside, np.array([1.0, 2.0]), modes=["xla", "eager"],
                               functions=["jvp", "vjp"])
    assert {(r.mode, r.ok) for r in report.rows} == {("xla", False), ("eager", True)}
    assert all("InvalidArgumentError" in r.reason for r in report.failing)


# --- the tf1 mode and f that the worker cannot import ----------------------------------


def test_a_lambda_leaves_tf1_out_with_a_note():
    report = check_derivatives(lambda x: x * x, np.ones(2), functions="jvp")
    assert {r.mode for r in report.rows} == EVERY_MODE - {"tf1"} and report.ok
    assert len(report.notes) == 1 and report.notes[0].startswith("tf1 left out: f (")
    assert "not importable by module and qualname" in str(report)


def test_a_lambda_asked_to_run_in_tf1_fails_those_rows_with_the_reason():
    def local(x):
        return x * x
    report = check_derivatives(local, np.ones(2), functions="jvp", modes=["tf1", "eager"])
    (tf1,) = _rows(report, mode="tf1")
    assert not tf1.ok and "<locals>.local) is not importable" in tf1.reason
    assert _rows(report, mode="eager")[0].ok


# --- bad input --------------------------------------------------------------------------


def _returns_none(x):
    return None


def _returns_int(x):
    return tf.cast(x, tf.int32)


_CALLS = []


def _changes_shape(x):
    _CALLS.append(1)
    return x if len(_CALLS) % 2 else tf.concat([x, x], 0)


ONES = np.ones(2, np.float32)
BAD = [
    ("f", dict(f=3.0), TypeError, "f must be a callable f(primals) -> float tensor, but got "
                                  "float"),
    ("int primals", dict(primals=np.ones(2, np.int32)), TypeError,
     "primals must be float numpy arrays or float eager tensors"),
    ("python floats", dict(primals=[1.0, 2.0]), TypeError, "but primals[0] is float"),
    ("empty", dict(primals=[]), ValueError, "primals is empty"),
    ("order 3", dict(order=3), ValueError, "order must be 1 or 2, but got 3"),
    ("order bool", dict(order=True), ValueError, "order must be 1 or 2, but got True"),
    ("mode", dict(modes=["graph"]), ValueError, "modes must be among ['tf1', 'v1_graph', "
                                                "'function', 'eager', 'xla'], got ['graph']"),
    ("no modes", dict(modes=[]), ValueError, "modes must be a name or a non-empty list"),
    ("function", dict(functions="jacobian"), ValueError, "got ['jacobian']"),
    ("strategy", dict(strategies=("sideways",)), ValueError,
     "strategies must be among ['auto', 'reverse', 'forward', 'loop'], got ['sideways']"),
    ("second order at 1", dict(functions="hessian"), ValueError,
     "functions names ['hessian'], which are second-order derivatives, but order=1"),
    ("hvp of a vector", dict(functions="hvp", order=2), ValueError,
     "hvp needs a scalar output and f returns shape (2,)"),
    ("batch form", dict(functions="batch_hessian", order=2, primals=np.ones((2, 3))),
     ValueError, "batch_hessian needs one scalar per sample (shape (2,)), got (2, 3)"),
    ("batch axis", dict(functions="batch_jacobian", f=lambda x: tf.reduce_sum(x)), ValueError,
     "f's output (shape ()) does not start with the batch axis (2)"),
    ("None", dict(f=_returns_none), TypeError, "its first call returned None"),
    ("int output", dict(f=_returns_int), TypeError, "f must return a float tensor, but its "
                                                    "first call returned a tensor"),
    ("numpy output", dict(f=lambda x: np.ones(2)), TypeError, "f must return one float "
     "tensor (of TensorFlow ops, to be differentiated), but its first call returned ndarray"),
    ("shape", dict(f=_changes_shape), ValueError, "f returned shape (2,) on its first call "
                                                  "and (4,) on its second"),
    ("rtol", dict(rtol=-1.0), ValueError, "rtol must be None or a number >= 0.0, got -1.0"),
    ("eps", dict(eps=0.0), ValueError, "eps must be None or a number > 0.0, got 0.0"),
    ("seed", dict(seed=1.5), TypeError, "seed must be None or an int, got 1.5"),
]


@pytest.mark.parametrize("options, error, text", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_a_clear_error_naming_the_argument(options, error, text):
    arguments = {"f": lambda x: x * 2.0, "primals": ONES, **options}
    with pytest.raises(error) as raised:
        check_derivatives(arguments.pop("f"), arguments.pop("primals"), modes=arguments.pop(
            "modes", ["eager"]), **arguments)
    message = str(raised.value)
    assert message.startswith("compat_grads.testing.check_derivatives: ") and text in message


def test_a_graph_tensor_has_no_value_to_check_at():
    with tf.Graph().as_default():
        placeholder = tf.compat.v1.placeholder(tf.float32, [2])
    with pytest.raises(TypeError, match=r"but primals\[1\] is a tensor"):
        check_derivatives(smooth, [ONES, placeholder], modes="eager")


def test_a_graph_caller_is_a_mode_error():
    with tf.Graph().as_default(), pytest.raises(cg.ModeError, match="from TF2 code"):
        check_derivatives(smooth, ONES)


# --- the names ----------------------------------------------------------------------------


def test_the_names_load_lazily_and_xla_is_not_a_plugin_mode():
    assert cg.check_derivatives is check_derivatives
    assert "xla" not in modes.MODES and modes.DERIVATIVE_MODES[-1] == "xla"
    code = ("import sys, compat_grads; assert 'compat_grads.testing' not in sys.modules; "
            "assert 'check_derivatives' in dir(compat_grads)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
