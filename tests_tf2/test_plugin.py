"""The pytest plugin, as users meet it: their test files run by pytest in a subprocess
(the plugin is loaded from the installed package's pytest11 entry point)."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

USER_TESTS = '''
import os

import numpy as np
import pytest
import tensorflow as tf

OFFSET = 3.0
PIDS = []


def scaled(x, y):
    return {"sum": x + y * OFFSET, "parts": [x, y]}


def legacy_double(x):
    return x * 2.0 + tf.stop_gradient(x)


def test_every_mode(cg_run, tf_mode):
    out = cg_run(scaled, np.float32(1.0), np.ones(2, np.float32))
    np.testing.assert_allclose(out["sum"], [4.0, 4.0])
    assert out["parts"][1].shape == (2,)


def test_graph_only_behaviour(cg_run):
    graph = lambda x: x * (1.0 if tf.compat.v1.executing_eagerly_outside_functions() else 2.0)
    assert cg_run(graph, np.float32(1.0)) == 1.0


def test_lambda_and_closure(cg_run):
    k = 5.0

    def closure(a):
        return a * k
    assert cg_run(lambda a, b: closure(a) + b, np.float32(2.0), np.float32(1.0)) == 11.0


@pytest.mark.tf_modes("tf1", "v1_graph", "eager")  # tf.function creates variables once only
def test_variables_are_initialized(cg_run):
    assert cg_run(lambda x: x * tf.Variable([1.0, 2.0]), np.float32(3.0)).tolist() == [3, 6]


def test_error_travels(cg_run):
    def bad(x):
        raise KeyError("no such column")
    cg_run(bad, np.float32(1.0))


@pytest.mark.tf_modes("tf1")
def test_worker_pid(cg_run):
    PIDS.append(cg_run(os.getpid))


@pytest.mark.tf_modes("tf1")
def test_worker_pid_again(cg_run):
    PIDS.append(cg_run(os.getpid))
    assert PIDS[0] == PIDS[1] != os.getpid()


@pytest.mark.tf_modes("tf1")
def test_worker_crash(cg_run):
    cg_run(lambda: os._exit(7))


@pytest.mark.tf_modes("tf1")
def test_after_crash(cg_run):
    assert cg_run(os.getpid) not in PIDS


@pytest.mark.tf_modes("tf1", "eager")
def test_marker(tf_mode):
    assert tf_mode in ("tf1", "eager")


def test_cg_compare_port(cg_compare):
    report = cg_compare(legacy_double, lambda x: x * 2.0 + tf.stop_gradient(x),
                        {"x": np.ones(3, np.float32)}, wrt=["x"])
    assert len(report.rows) == 2


def test_cg_compare_lost_stop_gradient(cg_compare):
    cg_compare(legacy_double, lambda x: x * 3.0, {"x": np.ones(3, np.float32)}, wrt=["x"])


def cubed(x):
    return tf.reduce_sum(x ** 3)


@tf.custom_gradient
def halved(x):
    def grad(upstream):
        return upstream * 0.25  # should be 0.5
    return x * 0.5, grad


def test_cg_check_passes(cg_check):
    report = cg_check(cubed, np.array([1.0, 2.0], np.float32), order=2,
                      modes=["tf1", "eager"], strategies="reverse")
    assert report.ok and {row.mode for row in report.rows} == {"tf1", "eager"}


def test_cg_check_fails_with_the_report(cg_check):
    cg_check(halved, np.ones(3, np.float32), functions="stacked_jacobian", modes="tf1",
             strategies="reverse")
'''


def _run(folder, source, *args):
    """Runs pytest on `source` (as test_user.py in `folder`) in a new process: (exit code,
    {test id: PASSED / FAILED / SKIPPED}, output)."""
    (folder / "test_user.py").write_text(textwrap.dedent(source))
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                           "test_user.py", *args], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, timeout=600)
    found = re.findall(r"^test_user.py::(\S+) (PASSED|FAILED|SKIPPED|ERROR)", done.stdout,
                       re.MULTILINE)
    return done.returncode, dict(found), done.stdout + done.stderr


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("user_project"), USER_TESTS)


def _ids(outcomes, test, outcome) -> set:
    return {name[len(test) + 1:-1] for name, got in outcomes.items()
            if name.startswith(test + "[") and got == outcome}


ALL = {"tf1", "v1_graph", "function", "eager"}


def test_every_mode_runs_with_the_mode_in_the_test_id(user_run):
    _, outcomes, output = user_run
    for test in ("test_every_mode", "test_lambda_and_closure"):
        assert _ids(outcomes, test, "PASSED") == ALL, (test, output)
    assert _ids(outcomes, "test_variables_are_initialized", "PASSED") == ALL - {"function"}


def test_graph_behaviour_fails_in_exactly_the_graph_modes(user_run):
    _, outcomes, output = user_run
    assert _ids(outcomes, "test_graph_only_behaviour", "FAILED") == {"tf1", "v1_graph"}
    assert _ids(outcomes, "test_graph_only_behaviour", "PASSED") == {"function", "eager"}


def test_exceptions_keep_type_message_and_the_worker_traceback(user_run):
    _, outcomes, output = user_run
    assert _ids(outcomes, "test_error_travels", "FAILED") == ALL
    tf1 = output[output.index("test_error_travels[tf1] _"):]
    assert "RemoteTraceback" in tf1 and ", in bad" in tf1
    assert "KeyError: 'no such column'" in tf1


def test_one_worker_per_session_and_a_fresh_one_after_a_crash(user_run):
    _, outcomes, output = user_run
    assert outcomes["test_worker_pid[tf1]"] == "PASSED"
    assert outcomes["test_worker_pid_again[tf1]"] == "PASSED", output
    assert outcomes["test_worker_crash[tf1]"] == "FAILED"
    assert "The TF1 worker process died (exit status 7) while running cg_run(" in output
    assert outcomes["test_after_crash[tf1]"] == "PASSED", output


def test_marker_narrows_the_modes(user_run):
    _, outcomes, _ = user_run
    assert {n for n in outcomes if n.startswith("test_marker[")} == {
        "test_marker[tf1]", "test_marker[eager]"}
    assert _ids(outcomes, "test_marker", "PASSED") == {"tf1", "eager"}


def test_cg_compare_passes_a_port_and_fails_with_the_report(user_run):
    _, outcomes, output = user_run
    assert outcomes["test_cg_compare_port"] == "PASSED", output
    assert outcomes["test_cg_compare_lost_stop_gradient"] == "FAILED"
    assert "compare_port(test_user.legacy_double): 1 of 2 rows differ" in output
    assert "values differ at [0, 0]: 2.0 vs 3.0 (legacy vs ported; 3 of 9 elements)" in output


def test_cg_check_passes_a_right_derivative_and_fails_a_wrong_one_with_the_report(user_run):
    _, outcomes, output = user_run
    assert outcomes["test_cg_check_passes"] == "PASSED", output
    assert outcomes["test_cg_check_fails_with_the_report"] == "FAILED"
    assert "check_derivatives(test_user.halved, order=1): 1 of 1 rows fail" in output
    assert ("tf1 (strategy=reverse) disagrees with finite differences at [0, 0]: 0.25 vs 0.5 "
            "(3 of 9 elements)") in output


NARROWED = '''
import pytest


def test_plain(tf_mode):
    pass


@pytest.mark.tf_modes("tf1", "v1_graph")
def test_marked(tf_mode):
    pass


@pytest.mark.tf_modes("function")
def test_unselected(tf_mode):
    pass
'''


def test_command_line_narrows_and_meets_the_marker(tmp_path):
    code, outcomes, output = _run(tmp_path, NARROWED, "--tf-modes=tf1,eager")
    assert code == 0, output
    assert outcomes == {"test_plain[tf1]": "PASSED", "test_plain[eager]": "PASSED",
                        "test_marked[tf1]": "PASSED", "test_unselected[no-mode]": "SKIPPED"}


def test_unknown_mode_is_a_usage_error(tmp_path):
    code, _, output = _run(tmp_path, NARROWED, "--tf-modes=tf1,graph")
    assert code == 4  # pytest.ExitCode.USAGE_ERROR
    assert "--tf-modes names unknown modes ['graph']" in output


def test_tensorflow_is_not_imported_at_start_up(tmp_path):
    code, outcomes, output = _run(tmp_path, '''
        import sys


        def test_no_tensorflow(request):
            assert request.config.pluginmanager.has_plugin("compat_grads")
            assert "tensorflow" not in sys.modules
        ''')
    assert code == 0 and outcomes == {"test_no_tensorflow": "PASSED"}, output
