"""The shim: one place decides the mode and the backend; importing changes no TF state."""

import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads import dispatch
from compat_grads._src.backends.graph import GraphBackend
from compat_grads._src.backends.tape import TapeBackend
from compat_grads._src.core.structure import make_problem


def test_modes():
    assert cg.execution_mode() == "eager"
    assert tf.function(lambda: tf.constant(cg.execution_mode()))().numpy() == b"function"
    with tf.Graph().as_default():
        assert cg.execution_mode() == "graph"
        # A tf.function traced inside a v1 Graph is still graph mode: no eager around it.
        inner = tf.function(lambda: tf.constant(cg.execution_mode()))()
        with tf.compat.v1.Session() as session:
            assert session.run(inner) == b"graph"


def _backend(target, sources, tape=None):
    return type(dispatch.backend_for(make_problem("f", target, sources, tape)))


def test_backend_table():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * 2
    assert _backend(lambda s: s * 2, x) is TapeBackend
    assert _backend(y, x, tape) is TapeBackend

    @tf.function
    def traced(x):
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = x * 2
        return (_backend(y, x) is GraphBackend, _backend(lambda s: s * 2, x) is GraphBackend,
                _backend(y, x, inner) is TapeBackend)

    assert traced(x) == (True, True, True)
    with tf.Graph().as_default():
        xg = tf.compat.v1.placeholder(tf.float32, [2])
        assert _backend(xg * 2, xg) is GraphBackend
        assert _backend(lambda s: s * 2, xg) is GraphBackend


def _python(code):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=300)


def test_import_changes_no_global_state():
    done = _python("""
        import tensorflow as tf
        before = (tf.executing_eagerly(), tf.compat.v1.control_flow_v2_enabled(),
                  tf.config.functions_run_eagerly(), tf.get_logger().level)
        import compat_grads
        after = (tf.executing_eagerly(), tf.compat.v1.control_flow_v2_enabled(),
                 tf.config.functions_run_eagerly(), tf.get_logger().level)
        assert before == after == (True, True, False, before[3]), (before, after)
        print("same")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "same"


def test_import_after_tensorflow_loads_the_functions_not_the_first_call():
    """A program that imported TensorFlow first loads the derivative functions (and the
    helpers scan --fix writes) at `import compat_grads`: its first graph builds in the time
    of the others. Imported alone (the scanner), compat_grads loads no TensorFlow."""
    done = _python("""
        import sys
        import compat_grads
        alone = {"tensorflow", "compat_grads.api"} & set(sys.modules)
        import tensorflow
        import compat_grads.migrate
        print(sorted(alone), "compat_grads.api" in sys.modules)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[] False"
    done = _python("""
        import sys
        import tensorflow
        import compat_grads
        print(all(m in sys.modules for m in ("compat_grads.api",
                                              "compat_grads.migrate.runtime")))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def _import_without_tensorflow(error, packages_distributions, code):
    """Runs `code` in a Python where `import tensorflow` fails with ImportError(`error`) and
    importlib's packages_distributions() returns the expression `packages_distributions`."""
    return _python(textwrap.dedent(f"""
        import sys
        from importlib import metadata
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "tensorflow" or name.startswith("tensorflow."):
                    raise ImportError({error!r})
        sys.meta_path.insert(0, Block())
        metadata.packages_distributions = lambda: {packages_distributions}
        metadata.version = lambda name: "2.21.0"
    """) + textwrap.dedent(code))


def test_import_without_tensorflow_names_the_extra():
    done = _import_without_tensorflow("No module named 'tensorflow'", "{}", """
        import compat_grads  # cheap: the derivative functions load TensorFlow on first use
        print("imported", compat_grads.ModeError.__name__, flush=True)
        compat_grads.stacked_jacobian
    """)
    assert done.stdout.strip() == "imported ModeError"
    assert done.returncode != 0
    assert "ImportError: compat_grads needs TensorFlow >= 2.12" in done.stderr
    assert "pip install 'compat_grads[cpu]'" in done.stderr
    assert "compat_grads[tf]" in done.stderr


def test_import_with_two_tensorflows_installed_says_to_keep_one():
    # tf-keras requires `tensorflow`, so `tensorflow-cpu` beside it makes two distributions
    # of the same files; an install that mixed their libraries fails with an undefined symbol
    done = _import_without_tensorflow("libtensorflow_cc.so.2: undefined symbol: _ZN3xla",
                                      '{"tensorflow": ["tensorflow_cpu", "tensorflow"]}', """
        import compat_grads
        compat_grads.stacked_jacobian
    """)
    assert done.returncode != 0
    assert ("ImportError: compat_grads needs TensorFlow >= 2.12, but it could not be imported "
            "(libtensorflow_cc.so.2: undefined symbol: _ZN3xla). 2 TensorFlow distributions "
            "are installed in this environment (tensorflow 2.21.0, tensorflow_cpu 2.21.0)"
            in done.stderr), done.stderr
    assert "pip uninstall -y tensorflow tensorflow_cpu" in done.stderr
    assert "pip install 'compat_grads[tf]'" in done.stderr


def test_import_failure_survives_unreadable_package_metadata():
    done = _import_without_tensorflow("No module named 'tensorflow'", "1 / 0", """
        import compat_grads
        compat_grads.stacked_jacobian
    """)
    assert "ImportError: compat_grads needs TensorFlow >= 2.12" in done.stderr, done.stderr
    assert "pip install 'compat_grads[cpu]'" in done.stderr
    assert "ZeroDivisionError" not in done.stderr


def test_two_tensorflows_advice_is_empty_for_one():
    from compat_grads._src.core.tf import two_tensorflows_advice

    assert two_tensorflows_advice([]) == two_tensorflows_advice(["tensorflow 2.21.0"]) == ""


def test_the_test_environment_holds_one_tensorflow():
    # tox.ini installs `tensorflow`, not `tensorflow-cpu`, wherever tf-keras (which requires
    # `tensorflow`) is installed: CI once loaded a mix of the two wheels' libraries.
    from compat_grads._src.core.tf import tensorflow_distributions

    assert len(tensorflow_distributions()) == 1, tensorflow_distributions()


@pytest.mark.parametrize("version, old", [("2.11.1", True), ("2.12.0", False),
                                          ("2.21.0rc1", False), ("2.23.0-dev20261026", False),
                                          ("3.0.0", False)])
def test_version_gate(version, old):
    from compat_grads._src.core.tf import MIN_VERSION, _version_tuple

    assert (_version_tuple(version) < MIN_VERSION) == old


def test_the_scan_command_does_not_load_tensorflow(tmp_path):
    legacy = tmp_path / "legacy.py"
    legacy.write_text("import tensorflow as tf\nH = tf.hessians(y, x)\n")
    done = _python(f"""
        import sys
        from compat_grads.cli import main
        code = main(["scan", {str(legacy)!r}])
        print(code, "tensorflow" in sys.modules)
    """)
    assert done.returncode == 0, done.stderr
    assert "CG105" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "1 False"
