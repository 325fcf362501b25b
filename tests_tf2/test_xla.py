"""jit_compile=True: where XLA cannot compile a call, one XlaWarning and the values of the
compiled route without XLA; chunks XLA compiles (every chunk as wide); inside an XLA
graph, strategy="auto" keeps large rows vectorized (XLA's while_loop runs them one after
another)."""

import warnings

import numpy as np
import pytest

import compat_grads as cg
from compat_grads import dispatch
from compat_grads._src.core.tf import tf
from compat_grads._src.stacking import cost as _cost

X = tf.constant(np.linspace(-1.0, 1.0, 12).reshape(3, 4))


def _f(x):
    return tf.sin(x) * tf.reduce_sum(x * x)


def _calls(n, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = [cg.stacked_jacobian(_f, X, jit_compile=True, **options) for _ in range(n)]
    return values, [w for w in caught if issubclass(w.category, cg.XlaWarning)]


def _python_factor(x):
    """A factor XLA cannot compile: Python code (`tf.numpy_function`) of x's values (with
    no input at all, TensorFlow 2.12 folds it into a constant before XLA sees it)."""
    return tf.numpy_function(lambda v: np.float64(2.0) + 0 * v.sum(), [tf.stop_gradient(x)],
                             tf.float64, stateful=False)


def _with_python(x):
    return _f(x) * _python_factor(x)


def test_a_call_xla_cannot_compile_warns_once_and_gives_the_compiled_values():
    cg.clear_cache()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = (cg.stacked_jacobian(_with_python, X, jit_compile=True)
                         for _ in range(2))
    caught = [w for w in caught if issubclass(w.category, cg.XlaWarning)]
    assert len(caught) == 1, [str(w.message) for w in caught]
    text = str(caught[0].message)
    assert text.startswith("compat_grads.stacked_jacobian: XLA could not compile this call (")
    assert "unsupported operations" in text and "without XLA" in text
    assert "_XlaMustCompile" not in text  # XLA's reason, not its function's attributes
    plain = cg.stacked_jacobian(_with_python, X)
    np.testing.assert_array_equal(first, plain)
    np.testing.assert_array_equal(second, plain)


@pytest.mark.parametrize("strategy", ["forward", "reverse", "loop"])
def test_a_chunked_call_compiles_with_xla(strategy):
    """Chunks of 5 of 12 rows: each chunk is 5 rows wide (the last repeats a row, cut off
    at the end), shapes XLA's while_loop can have."""
    cg.clear_cache()
    (value,), caught = _calls(1, chunk_size=5, strategy=strategy)
    assert caught == []
    np.testing.assert_allclose(value, cg.stacked_jacobian(_f, X), rtol=1e-12, atol=1e-12)
    graph = tf.function(lambda x: cg.stacked_jacobian(_f, x, chunk_size=5, strategy=strategy),
                        jit_compile=True).get_concrete_function(X).graph
    kinds = {op.type for op in graph.get_operations()}
    assert kinds & {"While", "StatelessWhile"}  # in chunks, not all rows at once


def test_a_call_xla_compiles_gives_no_warning_and_the_compiled_values():
    cg.clear_cache()
    (value,), caught = _calls(1)
    assert caught == []
    np.testing.assert_allclose(value, cg.stacked_jacobian(_f, X), rtol=1e-12, atol=1e-12)


def test_an_error_of_the_callable_itself_is_raised_not_blamed_on_xla():
    cg.clear_cache()

    def broken(x):  # a check the derivative needs (XLA would drop it: NaN, no error)
        checked = tf.debugging.check_numerics(tf.math.log(x - 5.0), "the caller's check")
        return checked * x * _python_factor(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(tf.errors.InvalidArgumentError, match="the caller's check"):
            # XLA fails on the Python code; without XLA the caller's own error is raised
            cg.stacked_jacobian(broken, X, jit_compile=True)
    assert not [w for w in caught if issubclass(w.category, cg.XlaWarning)]


def _while_ops(jit_compile):
    mlp = [tf.constant(np.random.default_rng(0).standard_normal(s).astype(np.float32))
           for s in ((32, 64), (64, 64), (64, 1))]

    def f(x):
        for w in mlp:
            x = tf.tanh(x @ w)
        return tf.squeeze(x, 1)
    spec = tf.TensorSpec((1024, 32), tf.float32)
    graph = tf.function(lambda x: cg.batch_hessian(f, x),
                        jit_compile=jit_compile).get_concrete_function(spec).graph
    return {op.type for op in graph.get_operations()} & {"While", "StatelessWhile"}


def test_large_rows_run_in_a_while_loop_without_xla_and_vectorized_with_it():
    # 32 rows of about 2 MiB each: one by one outside XLA (_cost.ROW_BYTES), vectorized in it
    assert _while_ops(False)
    assert not _while_ops(True)


def test_the_rule_reads_whether_the_graph_compiles_with_xla():
    facts = _cost.Facts(10 * _cost.ROW_BYTES, frozenset({"MatMul"}))
    assert _cost.plan(32, facts) == _cost.Plan(False)
    assert _cost.plan(32, facts, xla=True) == _cost.Plan(True)
    conv = _cost.Facts(100, frozenset({"Conv2D"}))  # not measured under XLA: as outside it
    assert _cost.plan(32, conv, xla=True) == _cost.plan(32, conv)
    assert not dispatch.compiles_with_xla()  # eager
    seen = {}

    @tf.function(jit_compile=True)
    def inside(x):
        seen["xla"] = dispatch.compiles_with_xla()
        return x

    @tf.function
    def outside(x):
        seen["plain"] = dispatch.compiles_with_xla()
        return x
    inside(X), outside(X)
    assert seen == {"xla": True, "plain": False}
