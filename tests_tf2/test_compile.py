"""Compiled caching for callable targets in eager mode: traced once per callable, function,
options and input signature; bounded; compile=False and jit_compile=True."""

import gc
import warnings

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads._src.call import compile as _compile

X = tf.constant([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])


class Counted:
    """A target that counts how often it runs: once per trace when compiled."""

    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return tf.tanh(x) * tf.reduce_sum(x)

    def total(self, x):  # a bound method: a new object at each access, one cache entry
        return tf.reduce_sum(self(x))


CALLS = {
    "stacked_jacobian": lambda f, x, **kw: cg.stacked_jacobian(f, x, **kw),
    "per_element_gradients": lambda f, x, **kw: cg.per_element_gradients(f, x, **kw),
    "batch_jacobian": lambda f, x, **kw: cg.batch_jacobian(f, x, **kw),
    "hessian": lambda f, x, **kw: cg.hessian(f.total, x, **kw),
    "jvp": lambda f, x, **kw: cg.jvp(f, x, tf.ones_like(x), **kw)[1],
    "vjp": lambda f, x, **kw: cg.vjp(f, x, tf.ones_like(x), **kw)[1],
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_traced_once_for_repeated_calls_with_the_same_shapes(name):
    f, call = Counted(), CALLS[name]
    first = call(f, X)
    for _ in range(3):
        again = call(f, X + 0.0)
    assert f.calls == 1, f"{name}: traced {f.calls} times for one input signature"
    np.testing.assert_array_equal(first, again)
    call(f, tf.ones([4, 3]))
    assert f.calls == 2, "a new input shape traces once more"


def test_compile_false_runs_the_callable_every_time():
    f = Counted()
    for _ in range(3):
        cg.stacked_jacobian(f, X, compile=False)
    assert f.calls >= 3


def test_options_are_part_of_the_key():
    f = Counted()
    cg.stacked_jacobian(f, X, strategy="reverse")
    cg.stacked_jacobian(f, X, strategy="forward")
    cg.stacked_jacobian(f, X, strategy="reverse")
    assert f.calls == 2


def test_compiled_equals_uncompiled_within_tolerance_and_jit_compiles():
    f = Counted()
    compiled = cg.stacked_jacobian(f, X)
    uncompiled = cg.stacked_jacobian(f, X, compile=False)
    jitted = cg.stacked_jacobian(f, X, jit_compile=True)
    np.testing.assert_allclose(compiled, uncompiled, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(jitted, uncompiled, rtol=1e-5, atol=1e-6)


def test_the_cache_is_bounded_and_clearable():
    cg.clear_cache()
    functions = [lambda x, k=k: x * float(k) for k in range(_compile.CACHE_SIZE + 5)]
    for f in functions:
        cg.per_element_gradients(f, X)
    assert len(_compile.CACHE) == _compile.CACHE_SIZE
    cg.clear_cache()
    assert len(_compile.CACHE) == 0


def test_a_dead_callable_is_never_served_for_a_new_one():
    f = lambda x: x * 2.0  # noqa: E731
    np.testing.assert_allclose(cg.per_element_gradients(f, X), 2.0 * np.ones((2, 3)))
    del f
    gc.collect()
    for k in range(20):  # new callables may reuse the dead one's id
        g = lambda x, k=k: x * float(k + 3)  # noqa: E731
        np.testing.assert_allclose(cg.per_element_gradients(g, X), (k + 3) * np.ones((2, 3)))


def test_methods_and_variables():
    class Model:
        def __init__(self):
            self.w = tf.Variable([[1.0], [2.0], [3.0]])
            self.calls = 0

        def __call__(self, x):
            self.calls += 1
            return x @ self.w

        def double(self, x):
            self.calls += 1
            return 2.0 * (x @ self.w)

    model = Model()
    for _ in range(3):
        out = cg.batch_jacobian(model.double, X)  # a new bound method object each time
    assert model.calls == 1
    np.testing.assert_allclose(out, np.broadcast_to([[2.0, 4.0, 6.0]], (2, 1, 3)))
    model.w.assign([[0.0], [0.0], [1.0]])  # variables are read at run time, not baked in
    np.testing.assert_allclose(cg.batch_jacobian(model.double, X),
                               np.broadcast_to([[0.0, 0.0, 2.0]], (2, 1, 3)))
    assert model.calls == 1


def test_errors_are_the_same_through_the_compiled_path():
    with pytest.raises(TypeError, match=r"compat_grads\.stacked_jacobian: sources must be "
                                        r"floating-point"):
        cg.stacked_jacobian(lambda x: tf.cast(x, tf.float32), tf.constant([1, 2]))
    with pytest.raises(ValueError, match=r"chunk_size must be 'auto', None or a positive int"):
        cg.stacked_jacobian(lambda x: x, X, chunk_size=0)


def test_a_new_lambda_on_every_call_warns_once_naming_the_callers_code():
    cg.clear_cache()
    x = tf.ones([3])
    with pytest.warns(RuntimeWarning) as caught:
        for _ in range(_compile.RETRACE_WARNING_AFTER + 3):
            cg.stacked_jacobian(lambda v: v * 2.0, x)
    ours = [w for w in caught if "is a new object on each call" in str(w.message)]
    assert len(ours) == 1
    assert ours[0].filename == __file__  # attributed to this loop, not to TensorFlow
    assert "Define it once outside the loop" in str(ours[0].message)


def test_variable_sources_are_bound_in_and_keyed_by_identity():
    cg.clear_cache()
    v, w = tf.Variable([1.0, 2.0]), tf.Variable([3.0])

    def f(ws):
        return tf.concat([ws[0] ** 2, ws[1] * ws[0][:1]], 0)

    first = cg.stacked_jacobian(f, [v, w])
    v.assign([3.0, 4.0])
    second = cg.stacked_jacobian(f, [v, w])  # same compiled function, current values
    assert len(_compile.CACHE) == 1
    np.testing.assert_array_equal(first[0].numpy()[:2], [[2.0, 0.0], [0.0, 4.0]])
    np.testing.assert_array_equal(second[0].numpy()[:2], [[6.0, 0.0], [0.0, 8.0]])
    u = tf.Variable([5.0, 6.0])
    other = cg.stacked_jacobian(f, [u, w])  # other variables: a new entry, their values
    assert len(_compile.CACHE) == 2
    np.testing.assert_array_equal(other[0].numpy()[:2], [[10.0, 0.0], [0.0, 12.0]])


def test_one_callable_with_several_options_is_not_called_new():
    cg.clear_cache()
    f = Counted()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for chunk in range(1, _compile.RETRACE_WARNING_AFTER):
            cg.stacked_jacobian(f, X, chunk_size=chunk)


@pytest.mark.parametrize("form", ("list", "dict", "nested"))
def test_a_nest_of_tensors_runs_the_cached_trace_without_tf_functions_dispatch(form,
                                                                               monkeypatch):
    """Variables bound in, the vector a nest of eager tensors: after the first call, the
    concrete function runs from the nest's flattened tensors (no `get_concrete_function`,
    tf.function's dispatch), with the values of a call through the tf.function."""
    cg.clear_cache()
    v, w = tf.Variable([1.0, 2.0]), tf.Variable([[3.0]])
    vector = {"list": [tf.constant([1.0, -1.0]), tf.constant([[2.0]])],
              "dict": {"b": tf.constant([[2.0]]), "a": tf.constant([1.0, -1.0])},
              "nested": ([tf.constant([1.0, -1.0])], {"w": tf.constant([[2.0]])})}[form]
    params = {"list": [v, w], "dict": {"b": w, "a": v}, "nested": ([v], {"w": w})}[form]

    def f(ps):
        a, b = tf.nest.flatten(ps)  # dicts by sorted keys: v, then w in every form
        return tf.reduce_sum(a ** 3) * tf.reduce_sum(b ** 2)
    first = cg.hvp(f, params, vector)
    (entry,) = _compile.CACHE._entries.values()
    traced = entry.compiled
    dispatched = []
    monkeypatch.setattr(traced, "_traced", lambda args: dispatched.append(args))
    again = cg.hvp(f, params, vector)
    assert not dispatched
    reference = cg.hvp(f, params, vector, compile=False)
    for a, b, c in zip(tf.nest.flatten(first), tf.nest.flatten(again),
                       tf.nest.flatten(reference)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-6)
    # a variable in the vector: through the tf.function, the same values
    monkeypatch.undo()
    leaves = tf.nest.flatten(vector)
    leaves[0] = tf.Variable(leaves[0])
    through = cg.hvp(f, params, tf.nest.pack_sequence_as(vector, leaves))
    for a, b in zip(tf.nest.flatten(through), tf.nest.flatten(first)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
