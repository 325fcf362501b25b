"""The eager compile cache: a dropped model is freed with its weights at once; threads share
one cached function, keep the cache bounded and survive clear_cache() (kinds of the
bad-input catalogue, counted by tests_tf2/bad_input_totals.py).
"""

import warnings

import numpy as np
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite.bad_input_routes import TOL, X


def test_a_dropped_model_and_its_weights_are_freed_at_once():
    import gc
    import weakref

    from compat_grads._src.call import compile as _compile
    from compat_grads.testing import models

    def use_a_model():
        model = models.build_model(models.CASES[0])
        x, y = models.inputs(models.CASES[0])
        x = tf.constant(x, tf.float32)
        cg.per_example_gradients(models.loss_fn, model, x, y)
        cg.stacked_jacobian(model, x[:2])
        cg.stacked_jacobian(lambda ws: model(x[:2]), model.trainable_weights)
        return [weakref.ref(model), *map(weakref.ref, model.trainable_weights)]

    cg.clear_cache()
    gone = use_a_model()
    gc.collect()
    assert [ref() for ref in gone] == [None] * len(gone)
    assert len(_compile.CACHE) == 0  # the entries went with them, and their captured handles


def _sine_times_sum(x):  # one module-level callable: one cache entry for every thread
    return tf.sin(x) * tf.reduce_sum(x)


def _sine_times_sum_jacobian(x):
    x = np.asarray(x, np.float64)
    return np.diag(np.cos(x) * x.sum()) + np.sin(x)[:, None]


def _in_threads(work, count=8, timeout=240):
    """`work(k)` in `count` threads at once; the exceptions they raised."""
    import threading

    failures = []

    def guarded(k):
        try:
            work(k)
        except Exception as err:  # noqa: BLE001 - reported by the test
            failures.append(f"thread {k}: {type(err).__name__}: {err}")
    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    return failures


def _inputs_of_size(n):
    return np.linspace(-1.0, 1.0, n).astype(np.float32)


def test_threads_share_one_cached_function_with_different_shapes():
    from compat_grads._src.call import compile as _compile

    cg.clear_cache()
    alone = {n: cg.stacked_jacobian(_sine_times_sum, tf.constant(_inputs_of_size(n))).numpy()
             for n in range(1, 9)}

    def work(k):
        for repeat in range(4):
            n = 1 + (k + repeat) % 8
            got = cg.stacked_jacobian(_sine_times_sum, tf.constant(_inputs_of_size(n)))
            np.testing.assert_array_equal(got, alone[n])  # the single-threaded result
            np.testing.assert_allclose(got, _sine_times_sum_jacobian(_inputs_of_size(n)),
                                       rtol=TOL, atol=TOL)
            assert len(_compile.CACHE) <= _compile.CACHE_SIZE
    assert _in_threads(work) == []
    assert len(_compile.CACHE) == 1


def test_threads_with_many_callables_keep_the_cache_bounded(monkeypatch):
    from compat_grads._src.call import compile as _compile

    cg.clear_cache()
    monkeypatch.setattr(_compile.CACHE, "size", 4)
    callables = [lambda x, k=k: x * float(k + 1) for k in range(12)]  # one each, reused

    def work(k):
        for f in callables[k:] + callables[:k]:
            scale = float(callables.index(f) + 1)
            np.testing.assert_array_equal(cg.per_element_gradients(f, tf.constant(X)),
                                          np.full(X.shape, scale))
            assert len(_compile.CACHE) <= 4
    with warnings.catch_warnings():  # evicted and compiled again: the recompile warning
        warnings.simplefilter("ignore", RuntimeWarning)
        assert _in_threads(work) == []
    assert len(_compile.CACHE) <= 4
    cg.clear_cache()


def test_clear_cache_while_other_threads_compute():
    import threading

    stop = threading.Event()

    def clear():
        while not stop.wait(0.0005):
            cg.clear_cache()
    clearer = threading.Thread(target=clear)
    clearer.start()

    def work(k):
        for repeat in range(4):
            n = 1 + (k + repeat) % 8
            got = cg.stacked_jacobian(_sine_times_sum, tf.constant(_inputs_of_size(n)))
            np.testing.assert_allclose(got, _sine_times_sum_jacobian(_inputs_of_size(n)),
                                       rtol=TOL, atol=TOL)
    try:
        failures = _in_threads(work)
    finally:
        stop.set()
        clearer.join(60)
    assert failures == []
    assert not clearer.is_alive()


KINDS = (  # kind, "value" or "error", test
    ("a dropped model (its weights freed)", "value",
     "test_a_dropped_model_and_its_weights_are_freed_at_once"),
    ("8 threads on one cached function, several shapes", "value",
     "test_threads_share_one_cached_function_with_different_shapes"),
    ("threads with more callables than the cache holds", "value",
     "test_threads_with_many_callables_keep_the_cache_bounded"),
    ("clear_cache() while other threads compute", "value",
     "test_clear_cache_while_other_threads_compute"),
)
