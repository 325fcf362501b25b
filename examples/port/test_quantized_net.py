"""Regression tests for the port: values and derivatives, TF1 against TF2."""

import numpy as np
from broken_port import BrokenNet
from legacy_model import legacy_net, quantize
from port_model import Net

from compat_grads.testing import compare_port

INPUTS = {"x": np.random.RandomState(0).randn(32, 16).astype(np.float32)}
DERIVATIVES = ("stacked_jacobian", "per_element_gradients")


def compare(net, check):
    """Outputs and derivatives with respect to the input and every weight, eager and in
    tf.function; `check` is cg_compare (fails the test unless all agree) or compare_port."""
    weights = net.legacy_weights()
    return check(legacy_net, net, INPUTS, wrt=["x", *weights], derivatives=DERIVATIVES,
                 weights=weights, modes=("eager", "function"))


def test_port_matches_values_and_derivatives(cg_compare):
    report = compare(Net(), cg_compare)
    assert len(report.rows) == 2 * (1 + 2 * 7)  # modes x (value + derivatives x wrt)


def test_broken_port_is_caught_where_the_gradient_is_lost():
    report = compare(BrokenNet(), compare_port)
    lost = {"x", "net/layer1/kernel", "net/layer1/bias"}  # everything before the quantizer
    assert {(r.mode, r.quantity, r.wrt) for r in report.failing} == {
        (mode, quantity, name) for mode in ("eager", "function") for quantity in DERIVATIVES
        for name in lost}
    assert {r.reason for r in report.failing} == {"ported is None: not connected"}
    assert all(r.ok for r in report.rows if r.quantity == "value")


def test_the_legacy_quantizer_runs_alike_in_every_mode(cg_run, tf_mode):
    out = cg_run(quantize, np.array([0.1, 0.3, -0.6, 1.0], np.float32))
    np.testing.assert_array_equal(out, [0.0, 0.25, -0.5, 1.0])
