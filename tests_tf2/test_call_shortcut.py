"""The compiled call's shortcut (`compat_grads._src.call.fast`): a call like one before it
runs the same concrete function without the checks that chose it, and only then. Each test
asserts which path a call took (by counting the whole path's runs) and that the result is
the whole path's."""

import gc
import weakref

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads._src.call import compile as _compile
from compat_grads._src.call import run as _run_module

X = tf.constant([0.5, -1.0, 2.0])
V = tf.constant([1.0, 2.0, -1.0])


def _f(x):
    return tf.sin(x) * x


def _jacobian(x):
    x = np.asarray(x, np.float64)
    return np.diag(np.cos(x) * x + np.sin(x))


@pytest.fixture
def whole_paths(monkeypatch):
    """The number of calls that took the whole path (a list, for its length)."""
    taken, whole = [], _run_module._run

    def counted(*args, **kwargs):
        taken.append(args[0].name)
        return whole(*args, **kwargs)
    monkeypatch.setattr(_run_module, "_run", counted)
    cg.clear_cache()
    return taken


def test_a_repeated_call_takes_the_shortcut_with_the_same_result(whole_paths):
    first = cg.stacked_jacobian(_f, X)
    again = [cg.stacked_jacobian(_f, X + k) for k in range(3)]
    assert len(whole_paths) == 1
    np.testing.assert_allclose(first, _jacobian(X), rtol=1e-6)
    for k, result in enumerate(again):
        np.testing.assert_allclose(result, _jacobian(X + k), rtol=1e-6)


@pytest.mark.parametrize("function,args", [
    ("per_element_gradients", (X,)), ("jvp", (X, V)), ("vjp", (X, V)),
    ("batch_jacobian", (X[:, None],))])
def test_each_functions_repeated_call_takes_it(whole_paths, function, args):
    results = [getattr(cg, function)(_f, *args) for _ in range(3)]
    assert len(whole_paths) == 1
    for result in results[1:]:
        for got, want in zip(tf.nest.flatten(result), tf.nest.flatten(results[0])):
            np.testing.assert_array_equal(got, want)


def test_new_shapes_dtypes_options_or_callables_take_the_whole_path(whole_paths):
    cg.stacked_jacobian(_f, X)
    cg.stacked_jacobian(_f, tf.constant([1.0, 2.0]))  # a new shape
    cg.stacked_jacobian(_f, tf.constant([1.0, 2.0, 3.0], tf.float64))  # a new dtype
    cg.stacked_jacobian(_f, X, strategy="loop")  # new options
    cg.stacked_jacobian(_f, X, strategy=np.str_("loop"))  # not a plain Python value
    cg.stacked_jacobian(lambda x: tf.sin(x) * x, X)  # another callable
    assert len(whole_paths) == 6
    cg.stacked_jacobian(_f, X, strategy="loop")
    assert len(whole_paths) == 6


def test_variables_nests_and_tapes_always_take_the_whole_path(whole_paths):
    variable = tf.Variable(X)
    for _ in range(2):
        cg.stacked_jacobian(_f, variable)
        cg.stacked_jacobian(lambda xs: xs[0] * xs[1], [X, V])
        cg.stacked_jacobian(_f, X, compile=False)
    assert len(whole_paths) == 6


def test_a_source_the_callable_reads_by_closure_keeps_its_derivative(whole_paths):
    def g(x):
        return x * X  # reads X by closure

    np.testing.assert_allclose(cg.stacked_jacobian(g, V), np.diag(X.numpy()), rtol=1e-6)
    # X itself as the source: captured by the kept trace, so the whole path binds it in
    np.testing.assert_allclose(cg.stacked_jacobian(g, X), np.diag(2 * X.numpy()), rtol=1e-6)
    assert len(whole_paths) == 2


def test_an_error_on_the_shortcut_is_raised_once(whole_paths):
    ran = []

    def checked(x):
        ran.append(1)  # traced once: each run of the whole path that traces adds one
        return tf.debugging.check_numerics(tf.sqrt(x), "sqrt of a negative number")
    cg.per_element_gradients(checked, tf.constant([1.0, 4.0]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="sqrt of a negative"):
        cg.per_element_gradients(checked, tf.constant([-1.0, 4.0]))
    assert len(whole_paths) == 1  # not run again down the whole path


def test_a_model_dropped_after_per_example_gradients_is_freed(whole_paths):
    from compat_grads.testing import models

    def use():
        model = models.build_model(models.CASES[0])
        x, y = models.inputs(models.CASES[0])
        cg.per_example_gradients(models.loss_fn, model, tf.constant(x, tf.float32), y)
        return weakref.ref(model)
    gone = use()
    gc.collect()
    assert gone() is None and len(_compile.CACHE) == 0


def test_the_shortcut_keeps_neither_the_callable_nor_its_function_alive(whole_paths):
    def make():
        def h(x):
            return tf.exp(x)
        cg.stacked_jacobian(h, X)
        cg.stacked_jacobian(h, X)
        entry, = _compile.CACHE._entries.values()
        return weakref.ref(h), weakref.ref(entry.compiled)
    callable_ref, compiled_ref = make()
    gc.collect()
    assert callable_ref() is None and compiled_ref() is None
    assert len(_compile.CACHE) == 0


def test_clear_cache_sends_the_next_call_the_whole_way(whole_paths):
    cg.stacked_jacobian(_f, X)
    cg.clear_cache()
    cg.stacked_jacobian(_f, X)
    assert len(whole_paths) == 2 and len(_compile.CACHE) == 1


def test_memory_plans_are_recorded_on_the_shortcut_too(whole_paths):
    with cg.memory_plans() as first:
        cg.stacked_jacobian(_f, X)
    with cg.memory_plans() as again:
        cg.stacked_jacobian(_f, X)
    assert len(whole_paths) == 1 and first and again == first


@pytest.fixture
def cache_of_two(monkeypatch):
    """A compile cache of two entries, and four targets (each its own entry)."""
    monkeypatch.setattr(_compile.CACHE, "size", 2)

    def a(x):
        return tf.sin(x)

    def b(x):
        return tf.cos(x)

    def c(x):
        return tf.exp(x)

    def d(x):
        return tf.tanh(x)
    return a, b, c, d


def _kept():
    return {key[0] for key in _compile.CACHE._entries}


def test_the_shortcut_marks_its_cache_entry_as_used(whole_paths, cache_of_two):
    """The compile cache drops its least recently used entry: one a shortcut used is kept."""
    a, b, c, _ = cache_of_two
    cg.stacked_jacobian(a, X)
    cg.stacked_jacobian(b, X)
    cg.stacked_jacobian(a, X)  # the shortcut: a is now the most recently used
    cg.stacked_jacobian(c, X)  # evicts b, not a
    assert len(whole_paths) == 3
    assert _kept() == {id(a), id(c)}
    cg.stacked_jacobian(a, X)
    assert len(whole_paths) == 3


def test_the_last_marked_entry_is_marked_again_after_another_is_used(whole_paths,
                                                                     cache_of_two):
    """An entry marked last is not marked again (`touch`), until another entry was got,
    marked or the cache cleared: its mark must then be made."""
    a, b, c, d = cache_of_two
    cg.stacked_jacobian(a, X)
    cg.stacked_jacobian(a, X)  # the shortcut marks a (the last marked)
    cg.stacked_jacobian(b, X)  # got: b is the most recent
    cg.stacked_jacobian(a, X)  # the shortcut must mark a again
    cg.stacked_jacobian(c, X)  # evicts b
    assert _kept() == {id(a), id(c)}
    cg.stacked_jacobian(c, X)  # the shortcut: c is the last marked
    cg.stacked_jacobian(a, X)  # a marked: c is now the least recent
    assert len(whole_paths) == 3
    cg.stacked_jacobian(d, X)  # evicts c
    assert _kept() == {id(a), id(d)}
    cg.clear_cache()
    assert _compile.CACHE._last is None


def test_a_method_takes_it_and_another_objects_method_does_not(whole_paths):
    class Model:
        def __init__(self, scale):
            self.scale = scale

        def f(self, x):
            return self.scale * tf.sin(x)
    first, second = Model(2.0), Model(3.0)
    for _ in range(2):
        np.testing.assert_allclose(cg.stacked_jacobian(first.f, X),
                                   np.diag(2 * np.cos(X.numpy())), rtol=1e-6)
    np.testing.assert_allclose(cg.stacked_jacobian(second.f, X),
                               np.diag(3 * np.cos(X.numpy())), rtol=1e-6)
    assert len(whole_paths) == 2


def test_a_bad_call_raises_every_time(whole_paths):
    for _ in range(2):
        with pytest.raises(ValueError, match="strategy"):
            cg.stacked_jacobian(_f, X, strategy="sideways")
    assert len(whole_paths) == 2


def test_autograph_is_off_on_the_whole_path_inside_a_converted_function(whole_paths):
    """A user's tf.function converts its Python with AutoGraph; compat_grads' bodies (and the
    target it calls) must see AutoGraph disabled, as they did behind its wrapper."""
    from tensorflow.python.autograph.core import ag_ctx

    seen = []

    def target(x):
        seen.append(ag_ctx.control_status_ctx().status)
        return tf.sin(x) * x

    @tf.function  # autograph=True, the default
    def step(x):
        if tf.reduce_sum(x) > 0:  # converted: AutoGraph is on in the user's code
            return cg.stacked_jacobian(target, x, strategy="loop")
        return cg.stacked_jacobian(target, -x, strategy="loop")
    np.testing.assert_allclose(step(X), _jacobian(X), rtol=1e-6)
    assert seen and set(seen) == {ag_ctx.Status.DISABLED}


def test_a_variable_the_callable_reads_is_read_at_each_call(whole_paths):
    """The captured inputs are listed once: the variable's handle, whose value is read when
    the function runs."""
    w = tf.Variable(2.0)

    def f(x):
        return w * tf.sin(x)
    for scale in (2.0, 2.0, 3.0, -1.0):
        w.assign(scale)
        np.testing.assert_allclose(cg.per_element_gradients(f, X), scale * np.cos(X),
                                   rtol=1e-6)
    assert len(whole_paths) == 1


def test_the_listed_inputs_go_with_the_callable(whole_paths):
    """A kept answer holds the listed captured inputs (the variables' handles) weakly: a
    dropped model frees them."""
    from compat_grads._src.call import fast as _fast

    class Model:
        def __init__(self):
            self.w = tf.Variable([1.0, 2.0, 3.0])

        def __call__(self, x):
            return self.w * tf.sin(x)

    def use():
        model = Model()
        for _ in range(2):
            cg.per_element_gradients(model, X)
        served, = _fast._KEPT.values()
        assert served.inputs is not None and len(served.inputs()) == 1
        return served.inputs, weakref.ref(model)
    inputs, model = use()
    gc.collect()
    assert model() is None and inputs() is None and len(_compile.CACHE) == 0
    assert len(whole_paths) == 1


def test_a_capture_read_by_reference_is_not_listed():
    """A value captured by reference is read at each call (`captured_inputs` calls it): such
    a function's inputs are not listed once."""
    from compat_grads._src.call import fast as _fast

    class Concrete:
        def __init__(self, captures):
            self._captured_inputs = captures

        @property
        def captured_inputs(self):
            return [c() if callable(c) else c for c in self._captured_inputs]
    assert _fast.fixed_inputs(Concrete([X, V])) == [X, V]
    assert _fast.fixed_inputs(Concrete([X, lambda: V])) is None
    assert _fast.fixed_inputs(object()) is None
