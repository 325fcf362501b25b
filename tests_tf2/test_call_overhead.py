"""What keeps the compiled eager call within a bare tf.function's time: checked options
remembered per function and plain values, and the concrete function run from its flat
inputs. (The time itself is measured by a benchmark, not here.)"""

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.call import compile as _compile
from compat_grads._src.call import options as _options
from compat_grads._src.core.tf import tf


def test_plain_options_are_checked_once():
    _options._CHECKED.clear()
    first = _options.check("stacked_jacobian", compile=True, jit_compile=False,
                           strategy="auto", chunk_size=3)
    again = _options.check("stacked_jacobian", compile=True, jit_compile=False,
                           strategy="auto", chunk_size=3)
    assert again is first and first.how.chunk_size == 3
    other = _options.check("hessian", compile=True, jit_compile=False, strategy="auto",
                           chunk_size=3)
    assert other is not first


def test_a_remembered_option_does_not_let_its_lookalike_through():
    _options.check("stacked_jacobian", compile=True, jit_compile=False, chunk_size=1)
    with pytest.raises(TypeError, match="chunk_size must be 'auto', None or a positive int"):
        _options.check("stacked_jacobian", compile=True, jit_compile=False, chunk_size=True)
    _options.check("stacked_jacobian", compile=True, jit_compile=False, memory_budget=1)
    share = _options.check("stacked_jacobian", compile=True, jit_compile=False,
                           memory_budget=1.0)
    assert type(share.how.memory_budget) is float


def test_bad_options_are_not_remembered():
    for _ in range(2):
        with pytest.raises(ValueError, match="chunk_size must be"):
            _options.check("stacked_jacobian", compile=True, jit_compile=False, chunk_size=0)
    assert not any(key[0] == "stacked_jacobian" and ("chunk_size", int, 0) in key
                   for key in _options._CHECKED)


def test_the_flat_call_gives_the_public_calls_result(monkeypatch):
    x = tf.constant(np.linspace(-1.0, 1.0, 4), tf.float32)

    def f(x):
        return tf.sin(x) * x

    kind = type(tf.function(f).get_concrete_function(x))
    assert _compile._runs_flat(kind)  # every supported release has it
    flat = cg.stacked_jacobian(f, x)
    monkeypatch.setattr(_compile, "_runs_flat", lambda kind: False)
    public = cg.stacked_jacobian(f, x)
    np.testing.assert_array_equal(flat, public)
    np.testing.assert_allclose(flat, np.diag(np.sin(x) + x * np.cos(x)), rtol=1e-6)


def test_the_flat_call_records_on_a_tape():
    x = tf.Variable([0.5, -0.25])
    with tf.GradientTape() as tape:
        total = tf.reduce_sum(cg.per_element_gradients(lambda v: v ** 3, x))
    np.testing.assert_allclose(tape.gradient(total, x), 6 * x.numpy(), rtol=1e-6)
