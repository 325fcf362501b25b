"""The compat_grads pytest plugin (entry point `pytest11: compat_grads`): run a test in TF1
and TF2 modes.

Fixtures:
  tf_mode: the test runs once per mode, "tf1", "v1_graph", "function", "eager" (ids
    `test_foo[tf1]`). `@pytest.mark.tf_modes("tf1", "eager")` narrows one test;
    `--tf-modes=tf1,eager` narrows the run.
  cg_run: `cg_run(fn, *arrays)` runs `fn` on the arrays in the test's mode and returns numpy
    values in fn's output nest (see `compat_grads.testing.modes.run`). "tf1" runs in a TF1
    worker process started once per pytest session.
  cg_compare: `compat_grads.testing.compare_port(...)` that fails the test with the report's
    table unless the port agrees; returns the report.
  cg_check: `cg_check(f, primals, order=1, **options)`:
    `compat_grads.testing.check_derivatives` that fails the test with the report's table
    unless every route agrees with the finite differences; returns the report.

This module imports no TensorFlow: only the fixtures do, when a test uses them. The mode
names are `compat_grads.testing.modes.MODES`, which loads without TensorFlow.
"""

from __future__ import annotations

import sys

import pytest

from compat_grads.testing.modes import MODES


def pytest_addoption(parser):
    parser.getgroup("compat_grads").addoption(
        "--tf-modes", default=None, metavar="MODES",
        help=f"comma-separated modes for tests that use tf_mode / cg_run: any of "
             f"{','.join(MODES)} (default: all)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "tf_modes(*modes): run this test only in these compat_grads modes "
                   f"(of {', '.join(MODES)})")
    _modes(config.getoption("--tf-modes"), "--tf-modes")


def pytest_generate_tests(metafunc):
    if "tf_mode" not in metafunc.fixturenames:
        return
    chosen = _modes(metafunc.config.getoption("--tf-modes"), "--tf-modes") or MODES
    marker = metafunc.definition.get_closest_marker("tf_modes")
    if marker is not None:
        wanted = _modes(",".join(marker.args),
                        f"@pytest.mark.tf_modes on {metafunc.function.__name__}")
        chosen = [m for m in chosen if m in wanted]
    if chosen:
        metafunc.parametrize("tf_mode", list(chosen), indirect=True, ids=list(chosen))
    else:
        metafunc.parametrize("tf_mode", [pytest.param(None, marks=pytest.mark.skip(
            reason="compat_grads: none of its tf_modes is selected by --tf-modes"))],
            indirect=True, ids=["no-mode"])


def _modes(text, where) -> list:
    if not text:
        return []
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise pytest.UsageError(f"compat_grads: {where} names unknown modes {unknown}; "
                                f"choose from {', '.join(MODES)}")
    return modes


@pytest.fixture
def tf_mode(request) -> str:
    """The mode this test runs in: one of `MODES` ("tf1", "v1_graph", "function",
    "eager")."""
    return request.param


@pytest.fixture
def cg_run(tf_mode, request):
    """`cg_run(fn, *arrays)`: fn on the arrays in this test's mode, as numpy values."""
    from compat_grads.testing import modes

    module = request.module

    def run(fn, *arrays):
        __tracebackhide__ = True
        return modes.run(fn, arrays, tf_mode, by_value=(module,))
    return run


@pytest.fixture
def cg_compare():
    """`cg_compare(legacy, ported, inputs, **options)`: `compare_port` that fails the test
    with the report's table unless the port agrees, and returns the report."""
    from compat_grads.testing import compare_port

    def compare(legacy, ported, inputs, **options):
        __tracebackhide__ = True
        report = compare_port(legacy, ported, inputs, **options)
        report.assert_ok()
        return report
    return compare


@pytest.fixture
def cg_check():
    """`cg_check(f, primals, order=1, **options)`: `check_derivatives` that fails the test
    with the report's table unless every row is ok, and returns the report."""
    from compat_grads.testing import check_derivatives

    def check(f, primals, order=1, **options):
        __tracebackhide__ = True
        report = check_derivatives(f, primals, order=order, **options)
        report.assert_ok()
        return report
    return check


def pytest_unconfigure(config):
    remote = sys.modules.get("compat_grads.testing.remote")
    if remote is not None:
        remote.shutdown()
